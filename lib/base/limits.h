// Every limit onnxkit applies to untrusted input, in one place.
//
// A limit hit is reported as absl::ResourceExhaustedError naming the limit, so
// users can tell a hostile file from a broken one.
#ifndef ONNXKIT_LIB_BASE_LIMITS_H_
#define ONNXKIT_LIB_BASE_LIMITS_H_

#include <cstdint>

namespace onnxkit::limits {

// Protobuf cannot represent a message of 2 GiB or more; a model file whose
// protobuf part is larger is refused before parsing.
inline constexpr int64_t kMaxProtoBytes = (int64_t{1} << 31) - 1;

// Nesting depth of protobuf messages. Matches protobuf's default recursion
// limit, which keeps a hostile file from exhausting the stack.
inline constexpr int kMaxMessageDepth = 100;

// Nesting depth of subgraphs (If/Loop/Scan bodies inside bodies). Real models
// stay in single digits; the limit bounds the recursion of every graph walk.
inline constexpr int kMaxGraphDepth = 32;

// Maximum tensor rank. ONNX places no limit; real models stay below 10 and
// oneDNN supports 12. A higher rank is a sign of a hostile file.
inline constexpr int kMaxRank = 64;

// Largest single external-data file region read at once (bytes): the largest
// tensor that fits a 64-bit address space in practice.
inline constexpr int64_t kMaxExternalTensorBytes = int64_t{1} << 40;

// Call depth of model-local functions calling functions.
inline constexpr int kMaxFunctionCallDepth = 64;

}  // namespace onnxkit::limits

#endif  // ONNXKIT_LIB_BASE_LIMITS_H_
