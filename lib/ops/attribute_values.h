// The enumerated string attributes of ai.onnx ops (Pad mode, auto_pad,
// Resize's modes, reductions, RNN direction...): which values each schema
// version accepts, as the operator documentation lists them, plus the old
// spellings runtimes still accept (Resize "tf_half_pixel_for_nn", Upsample
// "bilinear"). A value outside the list is rejected by conforming runtimes.
//
//   ops::AcceptsValue("Pad", "mode", 18, "wrap")           // false
//   ops::FirstVersionAccepting("Pad", "mode", "wrap", 18)  // 19
#ifndef ONNXKIT_LIB_OPS_ATTRIBUTE_VALUES_H_
#define ONNXKIT_LIB_OPS_ATTRIBUTE_VALUES_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace onnxkit::ops {

// The values `attribute` of ai.onnx `op` accepts at schema version
// `version` (a since_version); nullptr when it is not enumerated there.
const std::vector<std::string_view>* EnumValues(std::string_view op, std::string_view attribute, int64_t version);

// Whether `value` is accepted (true for attributes that are not enumerated).
bool AcceptsValue(std::string_view op, std::string_view attribute, int64_t version, std::string_view value);

// The first schema version after `version` that accepts `value`; 0 if none.
int64_t FirstVersionAccepting(std::string_view op, std::string_view attribute, std::string_view value,
                              int64_t version);

}  // namespace onnxkit::ops

#endif  // ONNXKIT_LIB_OPS_ATTRIBUTE_VALUES_H_
