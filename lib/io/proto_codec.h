// Decoding and encoding of the protobuf mirror in lib/io/proto.h.
//
// The decoder is a hand-written protobuf wire-format reader, hardened for
// hostile bytes: every length is checked against the bytes that remain,
// varints longer than 10 bytes and nesting deeper than
// limits::kMaxMessageDepth are errors (never a crash), fields this mirror
// does not model are kept verbatim. The encoder writes fields in field-number
// order, then unknown fields, as protobuf's own serializer does, so output is
// deterministic and byte-identical to protobuf's for the same message.
#ifndef ONNXKIT_LIB_IO_PROTO_CODEC_H_
#define ONNXKIT_LIB_IO_PROTO_CODEC_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::io {

struct DecodeOptions {
  // When set, TensorProto::raw_data becomes a view into the decoded buffer,
  // which `keepalive` must own (a file mapping); otherwise it is copied.
  std::shared_ptr<const void> keepalive;
  // Budget (bytes) for the memory the decoded structures may take; 0: the
  // default, 128 MiB + 4 x the input size. What vectors allocate is charged
  // (a large message's repeated fields are counted first and reserved once).
  // Raw data views cost nothing.
  // Exceeding it is ResourceExhausted (a file of millions of empty nodes).
  int64_t max_decoded_bytes = 0;
};

// Decodes `bytes` into a message. On malformed input returns DataLoss with the
// byte offset and the field path ("graph.node[3].attribute[0]: ...").
absl::StatusOr<pb::ModelProto> DecodeModel(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::TensorProto> DecodeTensor(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::SequenceProto> DecodeSequence(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::MapProto> DecodeMap(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::OptionalProto> DecodeOptional(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::GraphProto> DecodeGraph(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::NodeProto> DecodeNode(std::string_view bytes, const DecodeOptions& options = {});
absl::StatusOr<pb::TypeProto> DecodeType(std::string_view bytes, const DecodeOptions& options = {});

// Exact encoded sizes (bytes).
uint64_t EncodedSize(const pb::ModelProto& m);
uint64_t EncodedSize(const pb::TensorProto& m);

// Appends the encoding of a message to `out`.
void EncodeTo(const pb::ModelProto& m, std::string* out);
// Encodes `m` as a sequence of pieces handed to `sink` in order (the same
// bytes as EncodeTo); long byte fields such as tensor data are passed on
// without a copy, so memory stays bounded. Stops at the sink's first error
// and returns it.
absl::Status EncodeToSink(const pb::ModelProto& m, const std::function<absl::Status(std::string_view)>& sink);
void EncodeTo(const pb::TensorProto& m, std::string* out);
void EncodeTo(const pb::SequenceProto& m, std::string* out);
void EncodeTo(const pb::MapProto& m, std::string* out);
void EncodeTo(const pb::OptionalProto& m, std::string* out);
void EncodeTo(const pb::GraphProto& m, std::string* out);
void EncodeTo(const pb::NodeProto& m, std::string* out);
void EncodeTo(const pb::TypeProto& m, std::string* out);

// Convenience: the encoding as a new string.
template <typename T>
std::string Encode(const T& m) {
  std::string out;
  EncodeTo(m, &out);
  return out;
}

}  // namespace onnxkit::io

#endif  // ONNXKIT_LIB_IO_PROTO_CODEC_H_
