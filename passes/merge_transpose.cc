// merge-transpose: composes a Transpose that only feeds another Transpose
// into it.
// Before: %t = Transpose[perm=p1](%x); %y = Transpose[perm=p2](%t)
// After:  %y = Transpose[perm=c](%x), c[j] = p1[p2[j]]
//         (c the identity: %y is %x, the second Transpose goes too)
//
// Decisions:
//   - Only when the first Transpose's output has no other use (and is no
//     graph output): otherwise both would still run.
//   - A missing perm reverses the dims; it needs the rank, taken from the
//     other perm or the input's known shape. Two missing perms compose to
//     the identity at any rank.
//   - An identity composition whose result is a graph output that cannot
//     take %x's place keeps the second Transpose with the identity perm.
// Anchored at the second Transpose, so a chain folds in one run.
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/base/status_macros.h"
#include "passes/eliminate_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

struct Match {
  ir::Node* first = nullptr;
  std::vector<int64_t> perm;  // composed
  bool reversals = false;     // both perms absent: the identity at any rank
                              // (perm empty when the rank is unknown)
};

int64_t RankOf(const ir::Value& v, const PassContext& ctx) {
  std::optional<std::vector<int64_t>> dims = KnownShape(v, ctx);
  return dims ? static_cast<int64_t>(dims->size()) : -1;
}

std::optional<Match> MatchPair(const ir::Node& second, const PassContext& ctx) {
  if (!IsOp(second, "Transpose") || second.num_inputs() != 1 || second.input(0) == nullptr) return std::nullopt;
  const ir::Value& mid = *second.input(0);
  ir::Node* first = mid.producer();
  if (first == nullptr || first->graph() != second.graph() || !IsOp(*first, "Transpose") ||
      first->num_inputs() != 1 || first->input(0) == nullptr || SoleConsumer(mid) != &second) {
    return std::nullopt;
  }
  Match m{first, {}, false};
  int64_t rank = RankOf(*first->input(0), ctx);
  if (first->FindAttribute("perm") == nullptr && second.FindAttribute("perm") == nullptr) {
    m.reversals = true;
    for (int64_t i = 0; i < rank; ++i) m.perm.push_back(i);
    // Without the rank, the identity can only go by removing both.
    if (rank < 0 && !CanReplace(*second.output(0), *first->input(0))) return std::nullopt;
    return m;
  }
  if (rank < 0) {
    std::optional<std::vector<int64_t>> p = first->GetInts("perm");
    if (!p) p = second.GetInts("perm");
    if (!p) return std::nullopt;
    rank = static_cast<int64_t>(p->size());
  }
  std::optional<std::vector<int64_t>> p1 = TransposePerm(*first, rank);
  std::optional<std::vector<int64_t>> p2 = TransposePerm(second, rank);
  if (!p1 || !p2) return std::nullopt;
  for (int64_t j : *p2) m.perm.push_back((*p1)[static_cast<size_t>(j)]);
  return m;
}

absl::Status Rewrite(ir::Graph& graph, ir::Node* second, const Match& m) {
  ir::Value* x = m.first->input(0);
  bool identity = m.reversals || IsIdentityPerm(m.perm);
  if (identity && CanReplace(*second->output(0), *x)) {
    ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, second->output(0), x));  // removes `second`
    return RemoveIfDead(graph, m.first).status();
  }
  ONNXKIT_RETURN_IF_ERROR(graph.SetInput(second, 0, x));
  second->SetAttribute(IntsAttr("perm", m.perm));
  return RemoveIfDead(graph, m.first).status();
}

class MergeTranspose : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    // Each rewrite removes the node it is at and an earlier one.
    for (ir::Node* node : SnapshotNodes(graph)) {
      std::optional<Match> m = MatchPair(*node, ctx);
      if (!m) continue;
      if (!ctx.Allow(*node, "Transpose + Transpose")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, node, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateMergeTranspose() { return std::make_unique<MergeTranspose>(); }

}  // namespace onnxkit::passes
