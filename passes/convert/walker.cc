// The node walker of `onnxkit convert` (see walker.h): per node, the chain
// of version steps between the source and the target opset, each through
// its adapters.def row or the generic step; nodes an adapter creates are
// converted onward from the step's target side.
#include "passes/convert/walker.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ops/registry.h"
#include "passes/convert/adapter.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

// "" and "ai.onnx" are one domain.
std::string_view Canonical(std::string_view domain) { return domain == "ai.onnx" ? std::string_view() : domain; }
bool InDomain(const ir::Node& n, std::string_view domain) { return Canonical(n.domain()) == domain; }

// The next step of `op` at opset `cur` towards `to`; false when done.
bool NextStep(std::string_view domain, const std::string& op, int64_t cur, int64_t to, const ops::OpSchema* schema,
              Step* step) {
  if (to > cur) {
    for (const ops::OpSchema* s : ops::SchemaVersions(domain, op)) {
      if (s->since_version() > schema->since_version() && s->since_version() <= to) {
        step->direction = Direction::kUp;
        step->boundary = s->since_version();
        step->from = schema;
        step->to = s;
        return true;
      }
    }
    return false;
  }
  if (schema->since_version() <= to) return false;
  step->direction = Direction::kDown;
  step->boundary = schema->since_version();
  step->from = schema;
  step->to = ops::FindSchema(domain, op, schema->since_version() - 1);
  return true;
}

std::string StepKey(const Step& s, const std::string& op, std::string_view adapter) {
  int64_t a = s.from->since_version();
  int64_t b = s.to != nullptr ? s.to->since_version() : s.boundary - 1;
  return absl::StrCat(op, " ", a, "->", b, " ", Sv(adapter));
}

// Converts one node (and what its adapters create) from `from` to `to`.
void ConvertNode(ir::Graph& graph, const std::string& path, std::string_view domain, ir::Node* first, int64_t from,
                 int64_t to, ConvertContext& ctx, WalkStats& stats) {
  std::deque<std::pair<ir::Node*, int64_t>> work{{first, from}};
  while (!work.empty()) {
    auto [node, cur] = work.front();
    work.pop_front();
    if (!IsLive(graph, node) || !InDomain(*node, domain)) continue;
    stats.nodes += 1;
    while (true) {
      std::string op = node->op_type();
      const ops::OpSchema* schema = ops::FindSchema(domain, op, cur);
      if (schema == nullptr) {
        stats.blockers->push_back({path, ir::NodeLabel(*node),
                                   absl::StrCat("op ", op, " is unknown at ", domain.empty() ? "" : "ai.onnx.ml ",
                                                "opset ", cur)});
        break;
      }
      std::vector<ir::Node*> created;
      Step step;
      step.graph = &graph;
      step.node = node;
      step.ctx = &ctx;
      step.created = &created;
      if (!NextStep(domain, op, cur, to, schema, &step)) break;
      const AdapterRow* row = FindAdapter(op, step.boundary, step.direction);
      std::string label = ir::NodeLabel(*node);
      absl::Status st = row != nullptr ? row->fn(step) : GenericStep(step);
      if (!st.ok()) {
        std::string reason(StdSv(st.message()));
        if (IsBlock(st)) reason = reason.substr(reason.find(": ") + 2);
        stats.blockers->push_back({path, label, absl::StrCat(op, " ", step.from->since_version(), "->",
                                                             step.direction == Direction::kUp ? step.boundary
                                                                                              : step.boundary - 1,
                                                             ": ", reason)});
        break;
      }
      (*stats.steps)[StepKey(step, op, row != nullptr ? row->name : "generic")] += 1;
      cur = step.direction == Direction::kUp ? step.boundary : step.boundary - 1;
      for (ir::Node* c : created) work.emplace_back(c, cur);
      if (step.replaced) break;
    }
  }
}

}  // namespace

absl::Status ConvertGraph(ir::Graph& graph, const std::string& path, std::string_view domain, int64_t from,
                          int64_t to, ConvertContext& ctx, WalkStats& stats) {
  domain = Canonical(domain);
  for (ir::Node* node : SnapshotNodes(graph)) {
    if (!IsLive(graph, node)) continue;
    for (ir::Attribute& a : node->mutable_attributes()) {
      std::string base = absl::StrCat(path, "/", ir::NodeLabel(*node), "/", a.name());
      if (a.g) ONNXKIT_RETURN_IF_ERROR(ConvertGraph(*a.g, base, domain, from, to, ctx, stats));
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        ONNXKIT_RETURN_IF_ERROR(
            ConvertGraph(*a.graphs[i], absl::StrCat(base, "[", i, "]"), domain, from, to, ctx, stats));
      }
    }
    if (!InDomain(*node, domain)) {
      std::string key = absl::StrCat(node->domain(), "::", node->op_type());
      bool elsewhere = stats.converted_domains.count(std::string(Canonical(node->domain()))) > 0;
      if (!elsewhere && !stats.local_functions.count(key)) stats.foreign_ops->insert(key);
      continue;
    }
    ConvertNode(graph, path, domain, node, from, to, ctx, stats);
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::passes::convert
