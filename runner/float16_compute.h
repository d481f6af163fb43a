// float16 nodes the cpu backend computes in float32.
//
// The cpu backend's oneDNN and vectorized kernels take float32; a float16
// Conv, MatMul, Resize, normalization or arithmetic node would otherwise run
// on the reference kernels, many times slower. ComputeFloat16InFloat32
// rewrites each such node (of the listed ops, its float16 inputs and output
// known by type inference) as Casts of its float16 inputs to float32, the
// same op in float32 and a Cast of the result to float16, which keeps the
// output's name:
//
//   %y = Conv(%x16, %w16)   ->   %x = Cast(%x16, to=float); %w = Cast(%w16, to=float)
//                                %y32 = Conv(%x, %w); %y = Cast(%y32, to=float16)
//
// Every result is still rounded to float16 where the model has one, so the
// values are those of the reference kernels (which compute in wider types
// and round once) up to the accumulation order. A float16 value read by
// several rewritten nodes is cast once per graph. Nodes with an input or
// output whose type inference does not know are left as they are, and so
// is the whole model when inference finds element types that conflict with
// the declared ones.
#ifndef ONNXKIT_RUNNER_FLOAT16_COMPUTE_H_
#define ONNXKIT_RUNNER_FLOAT16_COMPUTE_H_

#include "absl/status/statusor.h"
#include "lib/ir/model.h"

namespace onnxkit::runner {

// True when `model` holds a float16 tensor anywhere (an input, initializer,
// Constant or Cast to float16), in any graph: only then is the rewrite worth
// inferring types for.
bool MayHoldFloat16(const ir::Model& model);

// Rewrites the float16 nodes of every graph of `model` as above; returns how
// many were rewritten.
absl::StatusOr<int> ComputeFloat16InFloat32(ir::Model& model);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_FLOAT16_COMPUTE_H_
