// Helpers of the eliminate and merge passes (eliminate-identity,
// merge-transpose, merge-reshape, merge-cast, cse): small constant integer
// lists, whole-tensor constant tests, broadcast checks and the Transpose
// perm rules. Everything here is read-only.
#ifndef ONNXKIT_PASSES_ELIMINATE_UTIL_H_
#define ONNXKIT_PASSES_ELIMINATE_UTIL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/ir/ir.h"
#include "passes/pass.h"
#include "runner/tensor.h"

namespace onnxkit::passes {

// Constants with more elements than this are not read as integer lists
// (shapes, axes, pads and perms are short).
inline constexpr int64_t kMaxConstListElements = 4096;

// True for a node of the ai.onnx domain ("" or "ai.onnx").
bool IsStandardOp(const ir::Node& node);
// True for a standard node of type `op`.
bool IsOp(const ir::Node& node, const char* op);

// The elements of a constant int64 or int32 tensor of rank <= 1 (null
// `value`, non-constant, other types, or too long: nullopt).
std::optional<std::vector<int64_t>> ConstInts(const ir::Value* value, PassContext& ctx);

// True when `value` is a constant scalar (or one-element tensor) that is
// false / zero: bool, integer or float.
bool IsConstantFalse(const ir::Value* value, PassContext& ctx);

// True when `t` is a numeric tensor whose every element equals `v` (0 or
// 1; -0.0 counts as 0). Float, double, float16, bfloat16 and the integer
// types; false for any other type and for an empty tensor.
bool AllElementsEqual(const runner::Tensor& t, int v);

// True when broadcasting a tensor of `dims` against one of `x_dims` leaves
// `x_dims` unchanged (rank not above, every dim 1 or equal to a known dim).
// `x_dims` nullopt (unknown rank) only accepts a scalar.
bool BroadcastKeeps(const std::optional<std::vector<int64_t>>& x_dims, const std::vector<int64_t>& dims);

// True when both shapes are known, fully known (no -1) and equal.
bool SameKnownShape(const std::optional<std::vector<int64_t>>& a, const std::optional<std::vector<int64_t>>& b);

// The perm of a Transpose for an input of rank `rank` (-1: unknown): its
// `perm` attribute, checked to be a permutation, or the reversal when the
// attribute is absent and the rank known. nullopt otherwise.
std::optional<std::vector<int64_t>> TransposePerm(const ir::Node& node, int64_t rank);
// True when perm[i] == i for every i.
bool IsIdentityPerm(const std::vector<int64_t>& perm);

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_ELIMINATE_UTIL_H_
