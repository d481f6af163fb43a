// Encoder for the protobuf mirror: pb structs -> wire bytes.
//
// One Walk() per message lists its fields in field-number order; it runs with
// a SizeCounter (to size sub-messages) or a ByteWriter (to emit bytes), the
// way protobuf's generated serializers order fields. Unknown fields follow the
// known ones verbatim.
#include <cstring>
#include <functional>
#include <type_traits>

#include "lib/io/proto_codec.h"
#include "lib/io/wire.h"

namespace onnxkit::io {
namespace {

using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;
using wire::Tag;

template <typename W>
class Emitter {
 public:
  explicit Emitter(W& w) : w_(w) {}

  void Int(uint32_t field, int64_t v, const pb::MessageBase& m) {
    if (v == 0 && !m.Has(field)) return;
    w_.Varint(Tag(field, kVarint));
    w_.Varint(static_cast<uint64_t>(v));  // int32 negatives sign-extend, as protobuf does
  }
  void Float(uint32_t field, float v, const pb::MessageBase& m) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (bits == 0 && !m.Has(field)) return;
    w_.Varint(Tag(field, kFixed32));
    w_.Fixed32(bits);
  }
  void Str(uint32_t field, std::string_view v, const pb::MessageBase& m) {
    if (v.empty() && !m.Has(field)) return;
    Bytes(field, v);
  }
  void RepStr(uint32_t field, const std::vector<std::string>& v) {
    for (const auto& s : v) Bytes(field, s);
  }
  template <typename T>
  void RepVarint(uint32_t field, const std::vector<T>& v, bool packed) {
    if (v.empty()) return;
    if (!packed) {
      for (T x : v) {
        w_.Varint(Tag(field, kVarint));
        w_.Varint(static_cast<uint64_t>(static_cast<int64_t>(x)));
      }
      return;
    }
    uint64_t len = 0;
    for (T x : v) len += wire::VarintSize(static_cast<uint64_t>(static_cast<int64_t>(x)));
    w_.Varint(Tag(field, kLengthDelimited));
    w_.Varint(len);
    for (T x : v) w_.Varint(static_cast<uint64_t>(static_cast<int64_t>(x)));
  }
  template <typename T>
  void RepFixed(uint32_t field, const std::vector<T>& v, bool packed) {
    if (v.empty()) return;
    constexpr int kWire = sizeof(T) == 4 ? kFixed32 : kFixed64;
    if (!packed) {
      for (T x : v) {
        w_.Varint(Tag(field, kWire));
        if constexpr (sizeof(T) == 4) {
          uint32_t bits;
          std::memcpy(&bits, &x, 4);
          w_.Fixed32(bits);
        } else {
          uint64_t bits;
          std::memcpy(&bits, &x, 8);
          w_.Fixed64(bits);
        }
      }
      return;
    }
    w_.Varint(Tag(field, kLengthDelimited));
    w_.Varint(v.size() * sizeof(T));
    w_.Bytes(std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
  }
  void Bytes(uint32_t field, std::string_view v) {
    w_.Varint(Tag(field, kLengthDelimited));
    w_.Varint(v.size());
    w_.Bytes(v);
  }
  template <typename T>
  void Msg(uint32_t field, const T& sub);
  template <typename T>
  void Opt(uint32_t field, const Box<T>& sub) {
    if (sub) Msg(field, *sub);
  }
  template <typename T>
  void Rep(uint32_t field, const std::vector<T>& subs) {
    for (const auto& s : subs) Msg(field, s);
  }
  void Unknown(const pb::MessageBase& m) { w_.Bytes(m.unknown_fields); }

  W& writer() { return w_; }

 private:
  W& w_;
};

template <typename W> void Walk(const pb::StringStringEntryProto& m, Emitter<W>& e) {
  e.Str(1, m.key, m);
  e.Str(2, m.value, m);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::OperatorSetIdProto& m, Emitter<W>& e) {
  e.Str(1, m.domain, m);
  e.Int(2, m.version, m);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TensorShapeProto::Dimension& m, Emitter<W>& e) {
  using D = pb::TensorShapeProto::Dimension;
  if (m.kind == D::kValue) {
    e.writer().Varint(Tag(1, kVarint));
    e.writer().Varint(static_cast<uint64_t>(m.dim_value));
  } else if (m.kind == D::kParam) {
    e.Bytes(2, m.dim_param);
  }
  e.Str(3, m.denotation, m);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TensorShapeProto& m, Emitter<W>& e) {
  e.Rep(1, m.dim);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto::Tensor& m, Emitter<W>& e) {
  e.Int(1, m.elem_type, m);
  e.Opt(2, m.shape);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto::SparseTensor& m, Emitter<W>& e) {
  e.Int(1, m.elem_type, m);
  e.Opt(2, m.shape);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto::Sequence& m, Emitter<W>& e) {
  e.Opt(1, m.elem_type);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto::Optional& m, Emitter<W>& e) {
  e.Opt(1, m.elem_type);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto::Map& m, Emitter<W>& e) {
  e.Int(1, m.key_type, m);
  e.Opt(2, m.value_type);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto::Opaque& m, Emitter<W>& e) {
  e.Str(1, m.domain, m);
  e.Str(2, m.name, m);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TypeProto& m, Emitter<W>& e) {
  e.Opt(1, m.tensor_type);
  e.Opt(4, m.sequence_type);
  e.Opt(5, m.map_type);
  e.Str(6, m.denotation, m);
  e.Opt(7, m.opaque_type);
  e.Opt(8, m.sparse_tensor_type);
  e.Opt(9, m.optional_type);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TensorProto::Segment& m, Emitter<W>& e) {
  e.Int(1, m.begin, m);
  e.Int(2, m.end, m);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TensorProto& m, Emitter<W>& e) {
  e.RepVarint(1, m.dims, false);
  e.Int(2, m.data_type, m);
  e.Opt(3, m.segment);
  e.RepFixed(4, m.float_data, true);
  e.RepVarint(5, m.int32_data, true);
  e.RepStr(6, m.string_data);
  e.RepVarint(7, m.int64_data, true);
  e.Str(8, m.name, m);
  e.Str(9, m.raw_data.view(), m);
  e.RepFixed(10, m.double_data, true);
  e.RepVarint(11, m.uint64_data, true);
  e.Str(12, m.doc_string, m);
  e.Rep(13, m.external_data);
  e.Int(14, m.data_location, m);
  e.Rep(16, m.metadata_props);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::SparseTensorProto& m, Emitter<W>& e) {
  e.Opt(1, m.values);
  e.Opt(2, m.indices);
  e.RepVarint(3, m.dims, false);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::AttributeProto& m, Emitter<W>& e) {
  e.Str(1, m.name, m);
  e.Float(2, m.f, m);
  e.Int(3, m.i, m);
  e.Str(4, m.s, m);
  e.Opt(5, m.t);
  e.Opt(6, m.g);
  e.RepFixed(7, m.floats, false);
  e.RepVarint(8, m.ints, false);
  e.RepStr(9, m.strings);
  e.Rep(10, m.tensors);
  e.Rep(11, m.graphs);
  e.Str(13, m.doc_string, m);
  e.Opt(14, m.tp);
  e.Rep(15, m.type_protos);
  e.Int(20, m.type, m);
  e.Str(21, m.ref_attr_name, m);
  e.Opt(22, m.sparse_tensor);
  e.Rep(23, m.sparse_tensors);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::NodeProto& m, Emitter<W>& e) {
  e.RepStr(1, m.input);
  e.RepStr(2, m.output);
  e.Str(3, m.name, m);
  e.Str(4, m.op_type, m);
  e.Rep(5, m.attribute);
  e.Str(6, m.doc_string, m);
  e.Str(7, m.domain, m);
  e.Str(8, m.overload, m);
  e.Rep(9, m.metadata_props);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::ValueInfoProto& m, Emitter<W>& e) {
  e.Str(1, m.name, m);
  e.Opt(2, m.type);
  e.Str(3, m.doc_string, m);
  e.Rep(4, m.metadata_props);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TensorAnnotation& m, Emitter<W>& e) {
  e.Str(1, m.tensor_name, m);
  e.Rep(2, m.quant_parameter_tensor_names);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::GraphProto& m, Emitter<W>& e) {
  e.Rep(1, m.node);
  e.Str(2, m.name, m);
  e.Rep(5, m.initializer);
  e.Str(10, m.doc_string, m);
  e.Rep(11, m.input);
  e.Rep(12, m.output);
  e.Rep(13, m.value_info);
  e.Rep(14, m.quantization_annotation);
  e.Rep(15, m.sparse_initializer);
  e.Rep(16, m.metadata_props);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::FunctionProto& m, Emitter<W>& e) {
  e.Str(1, m.name, m);
  e.RepStr(4, m.input);
  e.RepStr(5, m.output);
  e.RepStr(6, m.attribute);
  e.Rep(7, m.node);
  e.Str(8, m.doc_string, m);
  e.Rep(9, m.opset_import);
  e.Str(10, m.domain, m);
  e.Rep(11, m.attribute_proto);
  e.Rep(12, m.value_info);
  e.Str(13, m.overload, m);
  e.Rep(14, m.metadata_props);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::TrainingInfoProto& m, Emitter<W>& e) {
  e.Opt(1, m.initialization);
  e.Opt(2, m.algorithm);
  e.Rep(3, m.initialization_binding);
  e.Rep(4, m.update_binding);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::ModelProto& m, Emitter<W>& e) {
  e.Int(1, m.ir_version, m);
  e.Str(2, m.producer_name, m);
  e.Str(3, m.producer_version, m);
  e.Str(4, m.domain, m);
  e.Int(5, m.model_version, m);
  e.Str(6, m.doc_string, m);
  e.Opt(7, m.graph);
  e.Rep(8, m.opset_import);
  e.Rep(14, m.metadata_props);
  e.Rep(20, m.training_info);
  e.Rep(25, m.functions);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::SequenceProto& m, Emitter<W>& e) {
  e.Str(1, m.name, m);
  e.Int(2, m.elem_type, m);
  e.Rep(3, m.tensor_values);
  e.Rep(4, m.sparse_tensor_values);
  e.Rep(5, m.sequence_values);
  e.Rep(6, m.map_values);
  e.Rep(7, m.optional_values);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::MapProto& m, Emitter<W>& e) {
  e.Str(1, m.name, m);
  e.Int(2, m.key_type, m);
  e.RepVarint(3, m.keys, false);
  e.RepStr(4, m.string_keys);
  e.Opt(5, m.values);
  e.Unknown(m);
}
template <typename W> void Walk(const pb::OptionalProto& m, Emitter<W>& e) {
  e.Str(1, m.name, m);
  e.Int(2, m.elem_type, m);
  e.Opt(3, m.tensor_value);
  e.Opt(4, m.sparse_tensor_value);
  e.Opt(5, m.sequence_value);
  e.Opt(6, m.map_value);
  e.Opt(7, m.optional_value);
  e.Unknown(m);
}

template <typename T>
uint64_t SizeOf(const T& m) {
  wire::SizeCounter counter;
  Emitter<wire::SizeCounter> e(counter);
  Walk(m, e);
  return counter.size();
}

template <typename W>
template <typename T>
void Emitter<W>::Msg(uint32_t field, const T& sub) {
  uint64_t size = SizeOf(sub);
  w_.Varint(Tag(field, kLengthDelimited));
  w_.Varint(size);
  // Sizing walks each subtree once: walking it again here would double the
  // work at every nesting level (exponential in depth).
  if constexpr (std::is_same_v<W, wire::SizeCounter>) {
    w_.Skip(size);
  } else {
    Walk(sub, *this);
  }
}

template <typename T>
void EncodeAny(const T& m, std::string* out) {
  wire::ByteWriter writer(out);
  writer.Reserve(SizeOf(m));
  Emitter<wire::ByteWriter> e(writer);
  Walk(m, e);
}

// A writer that hands bytes to a sink in pieces of about kChunk bytes;
// long byte fields (tensor data) go to the sink as they are, uncopied.
class ChunkWriter {
 public:
  explicit ChunkWriter(const std::function<absl::Status(std::string_view)>& sink) : sink_(sink) {
    buf_.reserve(kChunk);
  }
  void Varint(uint64_t v) {
    wire::ByteWriter(&buf_).Varint(v);
    MaybeFlush();
  }
  void Fixed32(uint32_t v) {
    wire::ByteWriter(&buf_).Fixed32(v);
    MaybeFlush();
  }
  void Fixed64(uint64_t v) {
    wire::ByteWriter(&buf_).Fixed64(v);
    MaybeFlush();
  }
  void Bytes(std::string_view b) {
    if (b.size() < kDirect) {
      buf_.append(b.data(), b.size());
      MaybeFlush();
      return;
    }
    Flush();
    if (status_.ok()) status_ = sink_(b);
  }
  void Reserve(uint64_t) {}
  absl::Status Finish() {
    Flush();
    return status_;
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  static constexpr size_t kDirect = size_t{64} << 10;
  void MaybeFlush() {
    if (buf_.size() >= kChunk) Flush();
  }
  void Flush() {
    if (status_.ok() && !buf_.empty()) status_ = sink_(buf_);
    buf_.clear();
  }
  const std::function<absl::Status(std::string_view)>& sink_;
  std::string buf_;
  absl::Status status_;
};

}  // namespace

absl::Status EncodeToSink(const pb::ModelProto& m, const std::function<absl::Status(std::string_view)>& sink) {
  ChunkWriter writer(sink);
  Emitter<ChunkWriter> e(writer);
  Walk(m, e);
  return writer.Finish();
}

uint64_t EncodedSize(const pb::ModelProto& m) { return SizeOf(m); }
uint64_t EncodedSize(const pb::TensorProto& m) { return SizeOf(m); }

void EncodeTo(const pb::ModelProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::TensorProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::SequenceProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::MapProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::OptionalProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::GraphProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::NodeProto& m, std::string* out) { EncodeAny(m, out); }
void EncodeTo(const pb::TypeProto& m, std::string* out) { EncodeAny(m, out); }

}  // namespace onnxkit::io
