// ONNX type strings ("tensor(float)", "seq(tensor(int64))",
// "map(string,tensor(float))") and pb::TypeProto, in both directions, plus
// the match of a schema's allowed-type string against an actual type.
//
// Grammar (whitespace is allowed around every token):
//   type    ::= "tensor(" elem ")" | "sparse_tensor(" elem ")"
//             | "seq(" type ")" | "optional(" type ")"
//             | "map(" elem "," type ")"
//             | "opaque(" [domain ","] [name] ")"
//             | elem                              a scalar: tensor of rank 0
//   elem    ::= an element type name of lib/base/data_type.h other than
//               "undefined": float, int64, bfloat16, float8e4m3fn, int4, ...
//
// Schemas write map values as bare element types ("map(int64, float)");
// ONNX reads that as map(int64,tensor(float)), and so does this file.
#ifndef ONNXKIT_LIB_OPS_TYPE_STRING_H_
#define ONNXKIT_LIB_OPS_TYPE_STRING_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::ops {

// The type as ONNX spells it (onnx's DataTypeUtils::ToString): no spaces,
// shapes and denotations left out, e.g. "seq(map(int64,tensor(float)))",
// "sparse_tensor(float)", "optional(tensor(uint8))", "opaque(com.x,Blob)".
// Never fails; parts that are not set come out as "undefined" (a TypeProto
// with no type, elem_type 0) and unknown element codes as "data_type_<N>",
// neither of which ParseTypeString accepts.
std::string TypeToString(const pb::TypeProto& type);

// Parses a type string (grammar above) into a TypeProto without shapes,
// except that a bare element type gets a rank-0 shape, as in ONNX.
// InvalidArgument, naming the offending text and its offset, for anything
// else, including nesting deeper than limits::kMaxMessageDepth.
absl::StatusOr<pb::TypeProto> ParseTypeString(std::string_view text);

// True when `type` is an instance of the type string `allowed` (taken from a
// TypeConstraint): same kinds and element types all the way down, shapes and
// denotations ignored. False when `allowed` does not parse or `type` has
// unset parts. Allocates nothing.
bool TypeStringMatches(std::string_view allowed, const pb::TypeProto& type);

}  // namespace onnxkit::ops

#endif  // ONNXKIT_LIB_OPS_TYPE_STRING_H_
