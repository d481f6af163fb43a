// Helpers of the normalization fusions (fuse-layer-norm, fuse-rms-norm):
// ReduceMean axes, the square, the Add(eps) / Sqrt / Div tail, the optional
// Mul(gamma) / Add(beta), and scale parameters.
#ifndef ONNXKIT_PASSES_FUSE_NORM_UTIL_H_
#define ONNXKIT_PASSES_FUSE_NORM_UTIL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "passes/pass.h"

namespace onnxkit::passes {

// The axes of a ReduceMean that keeps dims (keepdims = 1), from the
// attribute (opset < 18) or the constant input; nullopt when absent, empty
// or not constant.
std::optional<std::vector<int64_t>> KeptReduceAxes(const ir::Node& reduce, PassContext& ctx);
// When `axes` are exactly the last k axes of a tensor of rank `rank`: -k (the
// `axis` attribute of LayerNormalization / RMSNormalization); nullopt
// otherwise. Non-negative axes need a known rank.
std::optional<int64_t> TrailingAxis(std::vector<int64_t> axes, std::optional<size_t> rank);

// The end of the normalization patterns, from the mean of squares `var`:
//   %e = Add(%var, eps); %s = Sqrt(%e); %n = Div(%num, %s)
//   (or %r = Reciprocal(%s); %n = Mul(%num, %r))
// each intermediate used only by the next node.
struct NormTail {
  double epsilon = 0;
  int32_t dtype = 0;             // the element type of the eps constant
  ir::Value* out = nullptr;      // %n
  std::vector<ir::Node*> nodes;  // Add, Sqrt, [Reciprocal,] Div/Mul
};
std::optional<NormTail> MatchNormTail(ir::Value& var, const ir::Value& num, const ir::Graph& graph,
                                      PassContext& ctx);

// The base of a square: %v for Pow(%v, 2) or Mul(%v, %v) producing `sq`
// in `graph`, with `*node` set to that node; null otherwise.
ir::Value* SquareBase(const ir::Value& sq, const ir::Graph& graph, PassContext& ctx, ir::Node** node);

// The optional affine step after a normalization's output `n`:
//   %g = Mul(%n, gamma) [; %o = Add(%g, beta)]  (constants, either operand order)
// Nodes is empty and out == n when there is no Mul by a fitting constant.
struct NormAffine {
  ir::Value* scale = nullptr;
  ir::Value* bias = nullptr;
  ir::Value* out = nullptr;
  std::vector<ir::Node*> nodes;
};
NormAffine MatchAffine(ir::Value& n, const ir::Value& x, int64_t axis, int32_t dtype, bool with_bias,
                       const ir::Graph& graph, PassContext& ctx);

// Checks `param` (gamma / beta of a normalization over the last -axis axes
// of `x`): a constant of element type `dtype` whose shape broadcasts onto
// those axes without growing them (dims of x that are unknown are taken to
// match: the pattern's Mul / Add broadcast them the same way).
bool IsNormParam(const ir::Value* param, const ir::Value& x, int64_t axis, int32_t dtype, PassContext& ctx);
// A constant of ones of element type `dtype` for the scale of a
// normalization over the last -axis axes of `x`, of those dims.
absl::StatusOr<ir::Value*> OnesForNorm(ir::Graph& graph, const ir::Value& x, int64_t axis, int32_t dtype,
                                       PassContext& ctx);
// Whether OnesForNorm can build the ones: the trailing dims are known and
// hold at most 2^24 elements.
bool CanMakeOnes(const ir::Value& x, int64_t axis, const PassContext& ctx);

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_FUSE_NORM_UTIL_H_
