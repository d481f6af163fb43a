// ShrinkAroundRewrite: the culprit rewrite's node and its neighbours, cut
// out of the model just before that rewrite, with golden values on the cut
// tensors, kept only when the same pipeline still moves its outputs; then
// each neighbour the failure does not need is dropped.
//   Before: x -> Abs -> ... -> Conv -> BatchNormalization -> Relu -> ... -> y
//   After:  c_in -> Conv -> BatchNormalization -> bn   (c_in fed golden)
#include <set>

#include "absl/strings/str_cat.h"
#include "bisect/candidate.h"
#include "bisect/optimize_bisect.h"
#include "lib/base/status_macros.h"
#include "lib/infer/engine.h"
#include "runner/convert.h"

namespace onnxkit::bisect {
namespace {

namespace fs = std::filesystem;

// The index of the node a rewrite record names ("'name' (Op)" or
// "#index (Op)") in `g`, or -1.
int FindAnchor(const pb::GraphProto& g, const std::string& label) {
  size_t open = label.rfind(" (");
  if (open == std::string::npos || label.empty() || label.back() != ')') return -1;
  std::string op = label.substr(open + 2, label.size() - open - 3);
  std::string head = label.substr(0, open);
  if (head.size() >= 2 && head.front() == '\'' && head.back() == '\'') {
    std::string name = head.substr(1, head.size() - 2);
    for (size_t i = 0; i < g.node.size(); ++i) {
      if (g.node[i].name == name && g.node[i].op_type == op) return static_cast<int>(i);
    }
    return -1;
  }
  if (head.size() >= 2 && head.front() == '#') {
    int64_t index = -1;
    if (!absl::SimpleAtoi(head.substr(1), &index)) return -1;
    if (index >= 0 && index < static_cast<int64_t>(g.node.size()) &&
        g.node[static_cast<size_t>(index)].op_type == op) {
      return static_cast<int>(index);
    }
  }
  return -1;
}

// `nodes` grown by one hop: producers of what they read, consumers of what
// they write (main graph; subgraph reads count through NodeReads).
std::set<int> Grow(const pb::GraphProto& g, const std::set<int>& nodes) {
  std::set<std::string> reads, writes;
  for (int i : nodes) {
    for (const std::string& n : NodeReads(g.node[static_cast<size_t>(i)])) reads.insert(n);
    for (const std::string& n : g.node[static_cast<size_t>(i)].output) {
      if (!n.empty()) writes.insert(n);
    }
  }
  std::set<int> out = nodes;
  for (size_t i = 0; i < g.node.size(); ++i) {
    bool touch = false;
    for (const std::string& n : g.node[i].output) touch = touch || reads.count(n) > 0;
    for (const std::string& n : NodeReads(g.node[i])) touch = touch || writes.count(n) > 0;
    if (touch) out.insert(static_cast<int>(i));
  }
  return out;
}

absl::Status WriteFeeds(const pb::ModelProto& model, const GoldenStore& golden, const fs::path& dir) {
  ONNXKIT_ASSIGN_OR_RETURN(auto feeds, GoldenFeeds(model, golden));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  for (size_t i = 0; i < feeds.size(); ++i) {
    ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(dir / absl::StrCat("input_", i, ".pb"),
                                                    runner::ValueToPbBytes(feeds[i].second, feeds[i].first)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<ShrunkModel>> ShrinkAroundRewrite(const io::LoadedModel& before,
                                                               const passes::Culprit& culprit,
                                                               const passes::OptimizeOptions& options,
                                                               const fs::path& scratch) {
  if (!before.proto.graph || culprit.record.graph != "main") return std::optional<ShrunkModel>();
  const pb::GraphProto& g = *before.proto.graph;
  int anchor = FindAnchor(g, culprit.record.node);
  if (anchor < 0) return std::optional<ShrunkModel>();
  GoldenStore golden(scratch / "golden");
  runner::InputSpec spec = options.verify_options.inputs;
  if (spec.dir.empty() && spec.files.empty()) spec.random = true;
  std::string run_error;
  if (!golden.Record(before, spec, &run_error, options.verify_options.timeout_seconds).ok() ||
      !run_error.empty())
    return std::optional<ShrunkModel>();
  TypeSource types(&golden, infer::InferredTypes(before.proto));
  passes::OptimizeOptions o = options;
  o.verify = true;
  o.verify_each = false;
  o.manager.bisect_limit = -1;
  int tries = 0;
  // The model of nodes `keep`, when the pipeline still moves it by the same pass.
  auto moved = [&](const std::set<int>& keep) -> std::optional<ShrunkModel> {
    auto small = KeepNodes(before.proto, std::vector<int>(keep.begin(), keep.end()), types);
    if (!small.ok()) return std::nullopt;
    fs::path dir = scratch / absl::StrCat("try_", tries++);
    if (!WriteFeeds(*small, golden, dir / "test_data_set_0").ok()) return std::nullopt;
    o.verify_options.inputs = runner::InputSpec{};
    o.verify_options.inputs.dir = (dir / "test_data_set_0").string();
    io::LoadedModel loaded;
    loaded.proto = *small;
    loaded.base_dir = before.base_dir;
    auto r = passes::Optimize(loaded, o);
    if (!r.ok() || !r->culprit || r->culprit->pass != culprit.pass) return std::nullopt;
    return ShrunkModel{*std::move(small), dir / "test_data_set_0", *r->culprit};
  };
  std::set<int> keep = {anchor};
  std::optional<ShrunkModel> found;
  for (int hops = 1; hops <= 3 && !found; ++hops) {
    std::set<int> grown = Grow(g, keep);
    if (grown == keep || grown.size() >= g.node.size()) break;  // no smaller than the whole model
    keep = std::move(grown);
    found = moved(keep);
  }
  if (!found) return found;
  // Trim: drop each neighbour the failure does not need (one pass, in order).
  for (int i : std::vector<int>(keep.begin(), keep.end())) {
    if (i == anchor) continue;
    std::set<int> fewer = keep;
    fewer.erase(i);
    if (auto smaller = moved(fewer)) {
      keep = std::move(fewer);
      found = std::move(smaller);
    }
  }
  return found;
}

}  // namespace onnxkit::bisect
