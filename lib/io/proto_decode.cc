// Decoder for the protobuf mirror: wire bytes -> pb structs.
//
// Semantics follow protobuf's proto2 parser: the last value of a singular
// field wins, repeated occurrences of a singular message merge, repeated
// scalars are accepted packed or unpacked, a field with an unexpected wire
// type or an unknown closed-enum value is kept as an unknown field.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/io/proto_codec.h"
#include "lib/io/wire.h"

namespace onnxkit::io {
namespace {

using wire::Field;
using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;

class Decoder {
 public:
  Decoder(std::string_view whole, const DecodeOptions& options) : whole_(whole), options_(options) {}

  template <typename T>
  absl::Status Run(T* m) {
    Message(whole_, m, 0);
    return status_;
  }

  // Counts memory the decoded structures take; fails once over budget, so a
  // file of millions of empty messages cannot amplify into gigabytes.
  bool Charge(uint64_t bytes) {
    used_ += bytes;
    if (used_ <= budget_) return true;
    if (status_.ok()) {
      status_ = absl::ResourceExhaustedError(absl::StrCat(
          "decoding needs more than ", budget_ >> 20, " MiB of memory for a ", whole_.size(),
          "-byte message (limit: 128 MiB + 4 x the message size); the file is built to exhaust memory"));
    }
    return false;
  }

  // Message fields, one overload per message type (defined below).
  bool Decode(const Field& f, pb::StringStringEntryProto* m, int depth);
  bool Decode(const Field& f, pb::OperatorSetIdProto* m, int depth);
  bool Decode(const Field& f, pb::TensorShapeProto::Dimension* m, int depth);
  bool Decode(const Field& f, pb::TensorShapeProto* m, int depth);
  bool Decode(const Field& f, pb::TypeProto::Tensor* m, int depth);
  bool Decode(const Field& f, pb::TypeProto::SparseTensor* m, int depth);
  bool Decode(const Field& f, pb::TypeProto::Sequence* m, int depth);
  bool Decode(const Field& f, pb::TypeProto::Optional* m, int depth);
  bool Decode(const Field& f, pb::TypeProto::Map* m, int depth);
  bool Decode(const Field& f, pb::TypeProto::Opaque* m, int depth);
  bool Decode(const Field& f, pb::TypeProto* m, int depth);
  bool Decode(const Field& f, pb::TensorProto::Segment* m, int depth);
  bool Decode(const Field& f, pb::TensorProto* m, int depth);
  bool Decode(const Field& f, pb::SparseTensorProto* m, int depth);
  bool Decode(const Field& f, pb::AttributeProto* m, int depth);
  bool Decode(const Field& f, pb::NodeProto* m, int depth);
  bool Decode(const Field& f, pb::ValueInfoProto* m, int depth);
  bool Decode(const Field& f, pb::TensorAnnotation* m, int depth);
  bool Decode(const Field& f, pb::GraphProto* m, int depth);
  bool Decode(const Field& f, pb::FunctionProto* m, int depth);
  bool Decode(const Field& f, pb::TrainingInfoProto* m, int depth);
  bool Decode(const Field& f, pb::ModelProto* m, int depth);
  bool Decode(const Field& f, pb::SequenceProto* m, int depth);
  bool Decode(const Field& f, pb::MapProto* m, int depth);
  bool Decode(const Field& f, pb::OptionalProto* m, int depth);

 private:
  // Decodes all fields of `bytes` into `m` (merging). Errors land in status_.
  template <typename T>
  void Message(std::string_view bytes, T* m, int depth, bool charge_self = true) {
    if (depth > limits::kMaxMessageDepth) {
      Fail(bytes.data(), absl::StrCat("messages nested deeper than ", limits::kMaxMessageDepth));
      return;
    }
    if (charge_self && !Charge(sizeof(T))) return;
    FieldCounts counts;
    const FieldCounts* outer = counts_;
    counts_ = bytes.size() >= kCountFieldsFrom && CountFields(bytes, &counts) ? &counts : nullptr;
    wire::Reader reader(bytes);
    Field f;
    while (!reader.done()) {
      const char* start = reader.position();
      const char* error = nullptr;
      if (!reader.Next(&f, &error)) {
        Fail(start, error);
        break;
      }
      bool known = Decode(f, m, depth);
      if (!status_.ok()) break;
      if (!known) m->unknown_fields.append(f.raw);
    }
    counts_ = outer;
  }

  // How often each field number below kCountedFields occurs in one message.
  // A repeated field is then charged and reserved whole before its first
  // element: millions of two-byte empty elements are refused before any is
  // built, and a large valid graph is decoded without regrowing its vectors.
  static constexpr int kCountedFields = 32;
  static constexpr size_t kCountFieldsFrom = 1024;  // smaller messages regrow little
  struct FieldCounts {
    uint32_t n[kCountedFields] = {};
  };
  static bool CountFields(std::string_view bytes, FieldCounts* counts) {
    wire::Reader reader(bytes);
    Field f;
    const char* error = nullptr;
    while (!reader.done()) {
      if (!reader.Next(&f, &error)) return false;  // the decoding pass reports it
      if (f.number < kCountedFields) ++counts->n[f.number];
    }
    return true;
  }
  // Makes room in `v` for one more element of `f`'s field, charging what the
  // vector allocates: the first element reserves every occurrence counted
  // for the field, later growth doubles. False once over budget.
  template <typename T>
  bool Room(const Field& f, std::vector<T>* v) {
    if (v->size() < v->capacity()) return true;
    uint64_t want = v->empty() ? 1 : 2 * uint64_t{v->size()};
    if (v->empty() && counts_ != nullptr && f.number < kCountedFields && counts_->n[f.number] > 1) {
      want = counts_->n[f.number];
    }
    if (!Charge(want * sizeof(T))) return false;
    v->reserve(want);
    return true;
  }

  // A singular or repeated sub-message: `name` names it in error paths.
  template <typename T>
  bool Sub(const Field& f, T* target, int depth, const char* name, int64_t index = -1, bool charge = true) {
    if (f.wire_type != kLengthDelimited) return false;
    path_.push_back({name, index});
    Message(f.data, target, depth + 1, charge);
    if (status_.ok()) path_.pop_back();
    return true;
  }
  template <typename T>
  bool SubBox(const Field& f, Box<T>* target, int depth, const char* name) {
    if (f.wire_type != kLengthDelimited) return false;
    return Sub(f, &target->mutable_value(), depth, name);
  }
  template <typename T>
  bool SubRepeated(const Field& f, std::vector<T>* target, int depth, const char* name) {
    if (f.wire_type != kLengthDelimited) return false;
    if (!Room(f, target)) return true;
    target->emplace_back();  // charged with its room
    return Sub(f, &target->back(), depth, name, static_cast<int64_t>(target->size()) - 1, false);
  }

  bool Str(const Field& f, std::string* s, pb::MessageBase* m) {
    if (f.wire_type != kLengthDelimited) return false;
    if (!Charge(f.data.size())) return true;
    s->assign(f.data.data(), f.data.size());
    m->MarkPresent(static_cast<int>(f.number));
    return true;
  }
  bool RepStr(const Field& f, std::vector<std::string>* v) {
    if (f.wire_type != kLengthDelimited) return false;
    if (!Room(f, v) || !Charge(f.data.size())) return true;
    v->emplace_back(f.data);
    return true;
  }
  bool Int64(const Field& f, int64_t* v, pb::MessageBase* m) {
    if (f.wire_type != kVarint) return false;
    *v = static_cast<int64_t>(f.varint);
    m->MarkPresent(static_cast<int>(f.number));
    return true;
  }
  bool Int32(const Field& f, int32_t* v, pb::MessageBase* m) {
    if (f.wire_type != kVarint) return false;
    *v = static_cast<int32_t>(static_cast<uint32_t>(f.varint));
    m->MarkPresent(static_cast<int>(f.number));
    return true;
  }
  // A closed enum: values outside [lo, hi] stay unknown fields, as in proto2.
  bool Enum(const Field& f, int32_t* v, int32_t lo, int32_t hi, pb::MessageBase* m) {
    if (f.wire_type != kVarint) return false;
    int32_t value = static_cast<int32_t>(static_cast<uint32_t>(f.varint));
    if (value < lo || value > hi) return false;
    *v = value;
    m->MarkPresent(static_cast<int>(f.number));
    return true;
  }
  bool Float(const Field& f, float* v, pb::MessageBase* m) {
    if (f.wire_type != kFixed32) return false;
    uint32_t bits = static_cast<uint32_t>(f.varint);
    std::memcpy(v, &bits, 4);
    m->MarkPresent(static_cast<int>(f.number));
    return true;
  }

  // Repeated varint-encoded integers, packed or not.
  template <typename T>
  bool RepVarint(const Field& f, std::vector<T>* v) {
    if (f.wire_type == kVarint) {
      if (!Room(f, v)) return true;
      v->push_back(static_cast<T>(f.varint));
      return true;
    }
    if (f.wire_type != kLengthDelimited) return false;
    // At most one element per byte.
    if (!Charge(f.data.size() * sizeof(T))) return true;
    const char* p = f.data.data();
    const char* end = p + f.data.size();
    while (p < end) {
      uint64_t x;
      if (!wire::Reader::ReadVarint(&p, end, &x)) {
        Fail(p, "malformed packed varint");
        return true;
      }
      v->push_back(static_cast<T>(x));
    }
    return true;
  }
  // Repeated fixed-width values (float: 4 bytes, double: 8), packed or not.
  template <typename T, int kWire>
  bool RepFixed(const Field& f, std::vector<T>* v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    if (f.wire_type == kWire) {
      if (!Charge(sizeof(T))) return true;
      T x;
      std::memcpy(&x, &f.varint, sizeof(T));  // little-endian: low bytes first
      v->push_back(x);
      return true;
    }
    if (f.wire_type != kLengthDelimited) return false;
    if (f.data.size() % sizeof(T) != 0) {
      Fail(f.data.data(), "packed fixed-width field length is not a multiple of the element size");
      return true;
    }
    size_t n = f.data.size() / sizeof(T);
    if (n == 0 || !Charge(f.data.size())) return true;
    size_t old = v->size();
    v->resize(old + n);  // bounded by the bytes present
    std::memcpy(v->data() + old, f.data.data(), f.data.size());
    return true;
  }

  void Fail(const char* where, std::string_view why) {
    if (!status_.ok()) return;
    std::string path;
    for (const auto& [name, index] : path_) {
      if (!path.empty()) path += '.';
      path += name;
      if (index >= 0) absl::StrAppend(&path, "[", index, "]");
    }
    status_ = absl::DataLossError(absl::StrCat(
        "malformed protobuf at byte offset ", where - whole_.data(), ": ", Sv(why),
        path.empty() ? "" : absl::StrCat(" (in ", path, ")")));
  }

  std::string_view whole_;
  const DecodeOptions& options_;
  absl::Status status_;
  uint64_t used_ = 0;
  uint64_t budget_ = options_.max_decoded_bytes > 0 ? static_cast<uint64_t>(options_.max_decoded_bytes)
                                                    : (uint64_t{128} << 20) + 4 * uint64_t{whole_.size()};
  std::vector<std::pair<const char*, int64_t>> path_;
  const FieldCounts* counts_ = nullptr;  // of the message being decoded
};

bool Decoder::Decode(const Field& f, pb::StringStringEntryProto* m, int) {
  switch (f.number) {
    case 1: return Str(f, &m->key, m);
    case 2: return Str(f, &m->value, m);
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::OperatorSetIdProto* m, int) {
  switch (f.number) {
    case 1: return Str(f, &m->domain, m);
    case 2: return Int64(f, &m->version, m);
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TensorShapeProto::Dimension* m, int) {
  switch (f.number) {
    case 1:
      if (!Int64(f, &m->dim_value, m)) return false;
      m->kind = pb::TensorShapeProto::Dimension::kValue;
      m->dim_param.clear();
      return true;
    case 2:
      if (!Str(f, &m->dim_param, m)) return false;
      m->kind = pb::TensorShapeProto::Dimension::kParam;
      m->dim_value = 0;
      return true;
    case 3: return Str(f, &m->denotation, m);
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TensorShapeProto* m, int depth) {
  if (f.number == 1) return SubRepeated(f, &m->dim, depth, "dim");
  return false;
}

bool Decoder::Decode(const Field& f, pb::TypeProto::Tensor* m, int depth) {
  switch (f.number) {
    case 1: return Int32(f, &m->elem_type, m);
    case 2: return SubBox(f, &m->shape, depth, "shape");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TypeProto::SparseTensor* m, int depth) {
  switch (f.number) {
    case 1: return Int32(f, &m->elem_type, m);
    case 2: return SubBox(f, &m->shape, depth, "shape");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TypeProto::Sequence* m, int depth) {
  if (f.number == 1) return SubBox(f, &m->elem_type, depth, "elem_type");
  return false;
}

bool Decoder::Decode(const Field& f, pb::TypeProto::Optional* m, int depth) {
  if (f.number == 1) return SubBox(f, &m->elem_type, depth, "elem_type");
  return false;
}

bool Decoder::Decode(const Field& f, pb::TypeProto::Map* m, int depth) {
  switch (f.number) {
    case 1: return Int32(f, &m->key_type, m);
    case 2: return SubBox(f, &m->value_type, depth, "value_type");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TypeProto::Opaque* m, int) {
  switch (f.number) {
    case 1: return Str(f, &m->domain, m);
    case 2: return Str(f, &m->name, m);
  }
  return false;
}

// Clears every member of TypeProto's `value` oneof except `keep` (a field number).
void ClearTypeOneofExcept(pb::TypeProto* m, uint32_t keep) {
  if (keep != 1) m->tensor_type.reset();
  if (keep != 4) m->sequence_type.reset();
  if (keep != 5) m->map_type.reset();
  if (keep != 7) m->opaque_type.reset();
  if (keep != 8) m->sparse_tensor_type.reset();
  if (keep != 9) m->optional_type.reset();
}

bool Decoder::Decode(const Field& f, pb::TypeProto* m, int depth) {
  switch (f.number) {
    case 1: case 4: case 5: case 7: case 8: case 9:
      if (f.wire_type == kLengthDelimited) ClearTypeOneofExcept(m, f.number);
      break;
  }
  switch (f.number) {
    case 1: return SubBox(f, &m->tensor_type, depth, "tensor_type");
    case 4: return SubBox(f, &m->sequence_type, depth, "sequence_type");
    case 5: return SubBox(f, &m->map_type, depth, "map_type");
    case 6: return Str(f, &m->denotation, m);
    case 7: return SubBox(f, &m->opaque_type, depth, "opaque_type");
    case 8: return SubBox(f, &m->sparse_tensor_type, depth, "sparse_tensor_type");
    case 9: return SubBox(f, &m->optional_type, depth, "optional_type");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TensorProto::Segment* m, int) {
  switch (f.number) {
    case 1: return Int64(f, &m->begin, m);
    case 2: return Int64(f, &m->end, m);
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TensorProto* m, int depth) {
  switch (f.number) {
    case 1: return RepVarint(f, &m->dims);
    case 2: return Int32(f, &m->data_type, m);
    case 3: return SubBox(f, &m->segment, depth, "segment");
    case 4: return RepFixed<float, kFixed32>(f, &m->float_data);
    case 5: return RepVarint(f, &m->int32_data);
    case 6: return RepStr(f, &m->string_data);
    case 7: return RepVarint(f, &m->int64_data);
    case 8: return Str(f, &m->name, m);
    case 9:
      if (f.wire_type != kLengthDelimited) return false;
      if (!options_.keepalive && !Charge(f.data.size())) return true;
      m->raw_data = options_.keepalive
                        ? Bytes::View(options_.keepalive, f.data.data(), f.data.size())
                        : Bytes::Copy(f.data);
      m->MarkPresent(9);
      return true;
    case 10: return RepFixed<double, kFixed64>(f, &m->double_data);
    case 11: return RepVarint(f, &m->uint64_data);
    case 12: return Str(f, &m->doc_string, m);
    case 13: return SubRepeated(f, &m->external_data, depth, "external_data");
    case 14: return Enum(f, &m->data_location, 0, 1, m);
    case 16: return SubRepeated(f, &m->metadata_props, depth, "metadata_props");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::SparseTensorProto* m, int depth) {
  switch (f.number) {
    case 1: return SubBox(f, &m->values, depth, "values");
    case 2: return SubBox(f, &m->indices, depth, "indices");
    case 3: return RepVarint(f, &m->dims);
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::AttributeProto* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->name, m);
    case 2: return Float(f, &m->f, m);
    case 3: return Int64(f, &m->i, m);
    case 4: return Str(f, &m->s, m);
    case 5: return SubBox(f, &m->t, depth, "t");
    case 6: return SubBox(f, &m->g, depth, "g");
    case 7: return RepFixed<float, kFixed32>(f, &m->floats);
    case 8: return RepVarint(f, &m->ints);
    case 9: return RepStr(f, &m->strings);
    case 10: return SubRepeated(f, &m->tensors, depth, "tensors");
    case 11: return SubRepeated(f, &m->graphs, depth, "graphs");
    case 13: return Str(f, &m->doc_string, m);
    case 14: return SubBox(f, &m->tp, depth, "tp");
    case 15: return SubRepeated(f, &m->type_protos, depth, "type_protos");
    case 20: return Enum(f, &m->type, 0, 14, m);
    case 21: return Str(f, &m->ref_attr_name, m);
    case 22: return SubBox(f, &m->sparse_tensor, depth, "sparse_tensor");
    case 23: return SubRepeated(f, &m->sparse_tensors, depth, "sparse_tensors");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::NodeProto* m, int depth) {
  switch (f.number) {
    case 1: return RepStr(f, &m->input);
    case 2: return RepStr(f, &m->output);
    case 3: return Str(f, &m->name, m);
    case 4: return Str(f, &m->op_type, m);
    case 5: return SubRepeated(f, &m->attribute, depth, "attribute");
    case 6: return Str(f, &m->doc_string, m);
    case 7: return Str(f, &m->domain, m);
    case 8: return Str(f, &m->overload, m);
    case 9: return SubRepeated(f, &m->metadata_props, depth, "metadata_props");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::ValueInfoProto* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->name, m);
    case 2: return SubBox(f, &m->type, depth, "type");
    case 3: return Str(f, &m->doc_string, m);
    case 4: return SubRepeated(f, &m->metadata_props, depth, "metadata_props");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TensorAnnotation* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->tensor_name, m);
    case 2: return SubRepeated(f, &m->quant_parameter_tensor_names, depth, "quant_parameter_tensor_names");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::GraphProto* m, int depth) {
  switch (f.number) {
    case 1: return SubRepeated(f, &m->node, depth, "node");
    case 2: return Str(f, &m->name, m);
    case 5: return SubRepeated(f, &m->initializer, depth, "initializer");
    case 10: return Str(f, &m->doc_string, m);
    case 11: return SubRepeated(f, &m->input, depth, "input");
    case 12: return SubRepeated(f, &m->output, depth, "output");
    case 13: return SubRepeated(f, &m->value_info, depth, "value_info");
    case 14: return SubRepeated(f, &m->quantization_annotation, depth, "quantization_annotation");
    case 15: return SubRepeated(f, &m->sparse_initializer, depth, "sparse_initializer");
    case 16: return SubRepeated(f, &m->metadata_props, depth, "metadata_props");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::FunctionProto* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->name, m);
    case 4: return RepStr(f, &m->input);
    case 5: return RepStr(f, &m->output);
    case 6: return RepStr(f, &m->attribute);
    case 7: return SubRepeated(f, &m->node, depth, "node");
    case 8: return Str(f, &m->doc_string, m);
    case 9: return SubRepeated(f, &m->opset_import, depth, "opset_import");
    case 10: return Str(f, &m->domain, m);
    case 11: return SubRepeated(f, &m->attribute_proto, depth, "attribute_proto");
    case 12: return SubRepeated(f, &m->value_info, depth, "value_info");
    case 13: return Str(f, &m->overload, m);
    case 14: return SubRepeated(f, &m->metadata_props, depth, "metadata_props");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::TrainingInfoProto* m, int depth) {
  switch (f.number) {
    case 1: return SubBox(f, &m->initialization, depth, "initialization");
    case 2: return SubBox(f, &m->algorithm, depth, "algorithm");
    case 3: return SubRepeated(f, &m->initialization_binding, depth, "initialization_binding");
    case 4: return SubRepeated(f, &m->update_binding, depth, "update_binding");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::ModelProto* m, int depth) {
  switch (f.number) {
    case 1: return Int64(f, &m->ir_version, m);
    case 2: return Str(f, &m->producer_name, m);
    case 3: return Str(f, &m->producer_version, m);
    case 4: return Str(f, &m->domain, m);
    case 5: return Int64(f, &m->model_version, m);
    case 6: return Str(f, &m->doc_string, m);
    case 7: return SubBox(f, &m->graph, depth, "graph");
    case 8: return SubRepeated(f, &m->opset_import, depth, "opset_import");
    case 14: return SubRepeated(f, &m->metadata_props, depth, "metadata_props");
    case 20: return SubRepeated(f, &m->training_info, depth, "training_info");
    case 25: return SubRepeated(f, &m->functions, depth, "functions");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::SequenceProto* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->name, m);
    case 2: return Int32(f, &m->elem_type, m);
    case 3: return SubRepeated(f, &m->tensor_values, depth, "tensor_values");
    case 4: return SubRepeated(f, &m->sparse_tensor_values, depth, "sparse_tensor_values");
    case 5: return SubRepeated(f, &m->sequence_values, depth, "sequence_values");
    case 6: return SubRepeated(f, &m->map_values, depth, "map_values");
    case 7: return SubRepeated(f, &m->optional_values, depth, "optional_values");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::MapProto* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->name, m);
    case 2: return Int32(f, &m->key_type, m);
    case 3: return RepVarint(f, &m->keys);
    case 4: return RepStr(f, &m->string_keys);
    case 5: return SubBox(f, &m->values, depth, "values");
  }
  return false;
}

bool Decoder::Decode(const Field& f, pb::OptionalProto* m, int depth) {
  switch (f.number) {
    case 1: return Str(f, &m->name, m);
    case 2: return Int32(f, &m->elem_type, m);
    case 3: return SubBox(f, &m->tensor_value, depth, "tensor_value");
    case 4: return SubBox(f, &m->sparse_tensor_value, depth, "sparse_tensor_value");
    case 5: return SubBox(f, &m->sequence_value, depth, "sequence_value");
    case 6: return SubBox(f, &m->map_value, depth, "map_value");
    case 7: return SubBox(f, &m->optional_value, depth, "optional_value");
  }
  return false;
}

template <typename T>
absl::StatusOr<T> DecodeAny(std::string_view bytes, const DecodeOptions& options) {
  if (bytes.size() > static_cast<uint64_t>(limits::kMaxProtoBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "protobuf message of ", bytes.size(), " bytes exceeds the 2 GiB protobuf limit"));
  }
  T m;
  Decoder decoder(bytes, options);
  absl::Status status = decoder.Run(&m);
  if (!status.ok()) return status;
  return m;
}

}  // namespace

absl::StatusOr<pb::ModelProto> DecodeModel(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::ModelProto>(b, o); }
absl::StatusOr<pb::TensorProto> DecodeTensor(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::TensorProto>(b, o); }
absl::StatusOr<pb::SequenceProto> DecodeSequence(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::SequenceProto>(b, o); }
absl::StatusOr<pb::MapProto> DecodeMap(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::MapProto>(b, o); }
absl::StatusOr<pb::OptionalProto> DecodeOptional(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::OptionalProto>(b, o); }
absl::StatusOr<pb::GraphProto> DecodeGraph(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::GraphProto>(b, o); }
absl::StatusOr<pb::NodeProto> DecodeNode(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::NodeProto>(b, o); }
absl::StatusOr<pb::TypeProto> DecodeType(std::string_view b, const DecodeOptions& o) { return DecodeAny<pb::TypeProto>(b, o); }

}  // namespace onnxkit::io
