// divergence (--mismatch with two backends): run the current model on
// backend B, compare every main-graph tensor as it is computed with the
// golden (reference) value, and cut at the first one beyond tolerance: try
// its producer alone (inputs fed golden values), then its cone. The same
// idea as `compare --per-layer`, run in a child so a crash is harmless.
#include <map>

#include "bisect/strategies.h"
#include "runner/compare/compare.h"
#include "runner/session.h"

namespace onnxkit::bisect {
namespace {

std::string FirstDiverging(Reducer& r) {
  const OracleOptions& o = r.oracle_options();
  const GoldenStore& golden = *r.golden();
  auto feeds = GoldenFeeds(r.current(), golden);
  if (!feeds.ok()) return "";
  ChildResult child = RunInChild(
      [&]() -> std::string {
        io::LoadedModel loaded;
        loaded.proto = r.current();
        loaded.base_dir = o.base_dir;
        std::string found;
        runner::SessionOptions so;
        so.backend = o.b_backend == runner::Backend::kReference ? o.a_backend : o.b_backend;
        so.observer = [&](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
          if (!found.empty() || !golden.Has(value.name())) return absl::OkStatus();
          auto expected = golden.Load(value.name());
          if (!expected.ok()) return absl::OkStatus();
          std::optional<runner::Tolerance> tol;
          if ((o.atol || o.rtol) && v.is_tensor()) {
            runner::Tolerance t = runner::DefaultTolerance(v.tensor().dtype());
            if (o.atol) t.atol = *o.atol;
            if (o.rtol) t.rtol = *o.rtol;
            tol = t;
          }
          if (!runner::CompareValues(v, *expected, tol).within_tolerance) found = value.name();
          return absl::OkStatus();
        };
        auto session = runner::Session::Create(std::move(loaded), so);
        if (session.ok()) (void)(*session)->Run(*feeds);
        return found;
      },
      o.timeout_seconds);
  return child.finished ? child.output : "";
}

}  // namespace

absl::Status CutAtDivergence(Reducer& r) {
  const OracleOptions& o = r.oracle_options();
  if (o.kind != OracleKind::kMismatch || !o.reference_dir.empty() || r.golden() == nullptr || r.nodes() < 2) {
    return absl::OkStatus();
  }
  std::string name = FirstDiverging(r);
  if (name.empty()) return absl::OkStatus();
  const pb::GraphProto& g = *r.current().graph;
  std::vector<std::vector<int>> tries;
  for (size_t i = 0; i < g.node.size(); ++i) {
    for (const auto& out : g.node[i].output) {
      if (out == name) tries.push_back({static_cast<int>(i)});
    }
  }
  std::vector<int> cone = ConeOf(g, {name});
  if (static_cast<int>(cone.size()) < r.nodes()) tries.push_back(cone);
  return r.TryFirst(static_cast<int>(tries.size()), [&](int i) { return r.WithNodes(tries[static_cast<size_t>(i)]); })
      .status();
}

}  // namespace onnxkit::bisect
