// Dynamic quantization (--mode dynamic): MatMul weights become int8 ahead
// of time; activations are quantized at run time.
//
// Before: %y = MatMul(%a, %w)                         (w a float [K, N] constant)
// After:  %aq, %as, %az = DynamicQuantizeLinear(%a)
//         %yi = MatMulInteger(%aq, %w_quantized, %az)  (int8, symmetric, zero point 0)
//         %s  = Mul(%as, %w_scale)                     (per column, or one scale)
//         %y  = Mul(Cast<float>(%yi), %s)
#ifndef ONNXKIT_QUANTIZATION_DYNAMIC_H_
#define ONNXKIT_QUANTIZATION_DYNAMIC_H_

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "quantization/qdq.h"

namespace onnxkit::quant {

// Uses options' op filters (only MatMul is rewritten), per_channel; other
// fields are ignored. FailedPrecondition below opset 11.
absl::StatusOr<QdqResult> QuantizeDynamic(const io::LoadedModel& model, const QdqOptions& options);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_DYNAMIC_H_
