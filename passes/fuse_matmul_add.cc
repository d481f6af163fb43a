// fuse-matmul-add: MatMul of a 2-D input by a constant matrix, then Add of a
// constant bias that broadcasts onto the product without growing it, into
// one Gemm (opset 7+, where Gemm broadcasts C).
// Before: %y = MatMul(%a, %b); %z = Add(%y, %c)   (%a: [M, K]; %b: [K, N];
//                                                  %c: [N], [1, N], [M, N], scalar)
// After:  %z = Gemm(%a, %b, %c)
// The rank of %a comes from inference (needs_shapes); float, float16 and
// double only (Gemm before opset 11 takes no integers).
#include <memory>
#include <optional>
#include <vector>

#include "lib/base/status_macros.h"
#include "passes/fuse_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

struct Match {
  ir::Node* matmul = nullptr;
  ir::Node* add = nullptr;
  ir::Value* bias = nullptr;
};

// True when the constant `c` broadcasts onto [m, n] (m < 0: unknown) and
// leaves that shape as it is.
bool BiasFits(const ir::Value& c, int64_t m, int64_t n, const PassContext& ctx) {
  std::optional<std::vector<int64_t>> shape = KnownShape(c, ctx);
  if (!shape || shape->size() > 2) return false;
  if (!shape->empty() && shape->back() != 1 && shape->back() != n) return false;
  if (shape->size() == 2 && (*shape)[0] != 1 && (m < 0 || (*shape)[0] != m)) return false;
  return true;
}

std::optional<Match> MatchAt(ir::Graph& graph, ir::Node* matmul, PassContext& ctx) {
  if (matmul->num_inputs() != 2 || matmul->num_outputs() != 1) return std::nullopt;
  ir::Value* a = matmul->input(0);
  ir::Value* b = matmul->input(1);
  ir::Value* y = matmul->output(0);
  if (a == nullptr || b == nullptr || ConstantProto(*b) == nullptr) return std::nullopt;
  ir::Node* add = ConsumerOp(*y, "Add", graph);
  if (add == nullptr || add->num_outputs() != 1) return std::nullopt;
  ir::Value* c = OtherInput(*add, y);
  if (c == nullptr || c == y || !IsConstantValue(*c)) return std::nullopt;
  std::optional<std::vector<int64_t>> a_shape = KnownShape(*a, ctx);
  std::optional<std::vector<int64_t>> b_shape = KnownShape(*b, ctx);
  if (!a_shape || a_shape->size() != 2 || !b_shape || b_shape->size() != 2) return std::nullopt;
  if ((*a_shape)[1] >= 0 && (*a_shape)[1] != (*b_shape)[0]) return std::nullopt;
  std::optional<int32_t> type = ElemType(*b, ctx);
  std::optional<int32_t> a_type = ElemType(*a, ctx);
  std::optional<int32_t> c_type = ElemType(*c, ctx);
  if (!type || !IsFoldableFloat(*type) || a_type != type || c_type != type) return std::nullopt;
  if (!BiasFits(*c, (*a_shape)[0], (*b_shape)[1], ctx)) return std::nullopt;
  return Match{matmul, add, c};
}

absl::Status Rewrite(ir::Graph& graph, const Match& m) {
  ir::NodeSpec spec;
  spec.op_type = "Gemm";
  spec.name = m.matmul->name();
  spec.inputs = {m.matmul->input(0), m.matmul->input(1), m.bias};
  return ReplaceWithNode(graph, std::move(spec), m.add->output(0), {m.matmul, m.add}).status();
}

class FuseMatMulAdd : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    if (ctx.Opset("") < 7) return false;
    bool changed = false;
    for (ir::Node* node : SnapshotNodes(graph)) {
      if (!IsLive(graph, node) || !IsOp(node, "MatMul")) continue;
      std::optional<Match> m = MatchAt(graph, node, ctx);
      if (!m || !ctx.Allow(*node, "MatMul + Add")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseMatMulAdd() { return std::make_unique<FuseMatMulAdd>(); }

}  // namespace onnxkit::passes
