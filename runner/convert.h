// Conversions between runtime values and their protobuf forms: TensorProto
// (initializers, Constant values, .pb files), SequenceProto, OptionalProto
// and MapProto (test data files).
#ifndef ONNXKIT_RUNNER_CONVERT_H_
#define ONNXKIT_RUNNER_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "lib/io/external_data.h"
#include "lib/io/proto.h"
#include "runner/value.h"

namespace onnxkit::runner {

// A tensor from a TensorProto, validated (dims, data size, field). Raw data
// aligned to the element size is used in place (no copy); external data is
// read through `resolver` (required when the tensor is external).
absl::StatusOr<Tensor> TensorFromProto(const pb::TensorProto& proto, io::ExternalDataResolver* resolver = nullptr);
// A TensorProto holding `t` (raw_data, or string_data for strings).
pb::TensorProto TensorToProto(const Tensor& t, std::string name);

absl::StatusOr<RtValue> ValueFromSequence(const pb::SequenceProto& proto);
absl::StatusOr<RtValue> ValueFromOptional(const pb::OptionalProto& proto);
absl::StatusOr<RtValue> ValueFromMap(const pb::MapProto& proto);
pb::SequenceProto SequenceToProto(const RtValue& v, std::string name);
pb::OptionalProto OptionalToProto(const RtValue& v, std::string name);
pb::MapProto MapToProto(const RtValue& v, std::string name);

// Decodes a test-data .pb file as the kind `type` describes (tensor when
// `type` is null or a tensor type).
absl::StatusOr<RtValue> ValueFromPbBytes(std::string_view bytes, const pb::TypeProto* type);
// Encodes a value as a test-data .pb file (TensorProto, SequenceProto,
// OptionalProto or MapProto by kind).
std::string ValueToPbBytes(const RtValue& v, const std::string& name);

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_CONVERT_H_
