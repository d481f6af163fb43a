// Float32 tensor data rewritten in float16 or bfloat16 (precision.h).
#ifndef ONNXKIT_PASSES_CONVERT_PRECISION_TENSOR_H_
#define ONNXKIT_PASSES_CONVERT_PRECISION_TENSOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/io/external_data.h"
#include "lib/io/proto.h"

namespace onnxkit::passes::convert {

// The largest finite value of `target` (pb::kFloat16 or pb::kBfloat16).
float TargetMax(int32_t target);

// `x` in `target`, rounded to nearest even; a finite value beyond TargetMax
// becomes ±TargetMax and counts in `*clamped`.
uint16_t ToTargetBits(float x, int32_t target, int64_t* clamped);

// `src` (a float32 tensor, data inline, typed or external through
// `resolver`) as a `target` tensor with raw_data; name, dims, doc_string and
// metadata kept. Errors: not float32, unreadable or malformed data.
absl::StatusOr<pb::TensorProto> ConvertFloatTensor(const pb::TensorProto& src, int32_t target,
                                                   io::ExternalDataResolver* resolver, int64_t* clamped);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_PRECISION_TENSOR_H_
