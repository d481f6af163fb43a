// Float32 tensors rewritten as float16 or bfloat16 (see precision.h):
// round to nearest even, finite values beyond the target's range clamped to
// its largest finite value (and counted), infinities and NaN kept.
#include "passes/convert/precision_tensor.h"

#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/reference/float_types.h"

namespace onnxkit::passes::convert {

float TargetMax(int32_t target) { return target == pb::kBfloat16 ? 3.38953139e38f : 65504.0f; }

uint16_t ToTargetBits(float x, int32_t target, int64_t* clamped) {
  if (std::isfinite(x)) {
    float max = TargetMax(target);
    if (x > max || x < -max) {
      ++*clamped;
      x = x > 0 ? max : -max;
    }
  }
  if (target == pb::kBfloat16) return runner::BFloat16(x).bits;
  return runner::Float16(x).bits;
}

absl::StatusOr<pb::TensorProto> ConvertFloatTensor(const pb::TensorProto& src, int32_t target,
                                                   io::ExternalDataResolver* resolver, int64_t* clamped) {
  if (src.data_type != pb::kFloat) return absl::InvalidArgumentError("not a float32 tensor");
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, runner::TensorFromProto(src, resolver));
  std::string bytes(static_cast<size_t>(t.size()) * 2, '\0');
  const float* in = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) {
    uint16_t b = ToTargetBits(in[i], target, clamped);
    bytes[static_cast<size_t>(2 * i)] = static_cast<char>(b & 0xff);
    bytes[static_cast<size_t>(2 * i + 1)] = static_cast<char>(b >> 8);
  }
  pb::TensorProto out;
  out.name = src.name;
  out.doc_string = src.doc_string;
  out.dims = src.dims;
  out.metadata_props = src.metadata_props;
  out.data_type = target;
  out.raw_data = Bytes::Own(std::move(bytes));
  return out;
}

}  // namespace onnxkit::passes::convert
