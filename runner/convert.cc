// Runtime values <-> protobuf.
#include "runner/convert.h"

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/tensor_data.h"

namespace onnxkit::runner {

absl::StatusOr<Tensor> TensorFromProto(const pb::TensorProto& proto, io::ExternalDataResolver* resolver) {
  if (!tensor::IsExternal(proto)) ONNXKIT_RETURN_IF_ERROR(tensor::ValidateTensorData(proto));
  std::vector<int64_t> dims = proto.dims;
  if (proto.data_type == pb::kString) {
    if (tensor::IsExternal(proto)) return absl::UnimplementedError("external string tensors are not supported");
    return Tensor::Strings(std::move(dims), proto.string_data);
  }
  Bytes external;
  const Bytes* source = nullptr;
  if (tensor::IsExternal(proto)) {
    if (resolver == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("tensor '", proto.name, "' has external data but no model folder"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(external, resolver->Read(proto));
    source = &external;
  } else if (!proto.raw_data.empty() || proto.Has(9)) {
    source = &proto.raw_data;
  }
  int bits = DataTypeBits(proto.data_type);
  size_t align = bits >= 8 ? static_cast<size_t>(bits / 8) : 1;
  if (source != nullptr && source->keepalive() && reinterpret_cast<uintptr_t>(source->data()) % align == 0) {
    auto wrapped = Tensor::Wrap(proto.data_type, dims, Buffer::View(source->keepalive(), source->data(), source->size()));
    if (wrapped.ok()) return wrapped;
  }
  if (source != nullptr && bits >= 8) {
    // Raw little-endian bytes (raw_data or an external file): copied
    // straight into the tensor, with no intermediate string, once their
    // size matches the dims (before anything is allocated from them).
    ONNXKIT_ASSIGN_OR_RETURN(const int64_t count, tensor::ElementCount(proto));
    const std::optional<int64_t> expected = RawByteSize(proto.data_type, count);
    if (!expected || static_cast<uint64_t>(*expected) != source->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", proto.name, "' holds ", source->size(), " bytes, expected ",
                       expected ? absl::StrCat(*expected) : "an overflowing size"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::AllocateUninitialized(proto.data_type, std::move(dims)));
    if (!source->empty()) std::memcpy(t.mutable_raw(), source->data(), source->size());
    return t;
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::string raw, tensor::ToRawBytes(proto, source == &external ? &external : nullptr));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(proto.data_type, std::move(dims)));
  if (raw.size() != t.nbytes()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", proto.name, "' holds ", raw.size(), " bytes, expected ",
                                                   t.nbytes()));
  }
  if (!raw.empty()) std::memcpy(t.mutable_raw(), raw.data(), raw.size());
  return t;
}

pb::TensorProto TensorToProto(const Tensor& t, std::string name) {
  if (t.is_string()) return tensor::FromStrings(std::move(name), t.shape(), t.strings());
  std::string bytes(static_cast<const char*>(t.raw()), t.nbytes());
  return tensor::FromRawBytes(std::move(name), t.dtype(), t.shape(), std::move(bytes));
}

absl::StatusOr<RtValue> ValueFromSequence(const pb::SequenceProto& proto) {
  std::vector<RtValue> elements;
  for (const auto& t : proto.tensor_values) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(t));
    elements.push_back(RtValue::FromTensor(std::move(tensor)));
  }
  for (const auto& s : proto.sequence_values) {
    ONNXKIT_ASSIGN_OR_RETURN(RtValue v, ValueFromSequence(s));
    elements.push_back(std::move(v));
  }
  for (const auto& m : proto.map_values) {
    ONNXKIT_ASSIGN_OR_RETURN(RtValue v, ValueFromMap(m));
    elements.push_back(std::move(v));
  }
  for (const auto& o : proto.optional_values) {
    ONNXKIT_ASSIGN_OR_RETURN(RtValue v, ValueFromOptional(o));
    elements.push_back(std::move(v));
  }
  if (!proto.sparse_tensor_values.empty()) return absl::UnimplementedError("sequences of sparse tensors");
  return RtValue::FromSequence(std::move(elements));
}

absl::StatusOr<RtValue> ValueFromOptional(const pb::OptionalProto& proto) {
  if (proto.tensor_value) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(*proto.tensor_value));
    return RtValue::Some(RtValue::FromTensor(std::move(t)));
  }
  if (proto.sequence_value) {
    ONNXKIT_ASSIGN_OR_RETURN(RtValue s, ValueFromSequence(*proto.sequence_value));
    return RtValue::Some(std::move(s));
  }
  if (proto.map_value) {
    ONNXKIT_ASSIGN_OR_RETURN(RtValue m, ValueFromMap(*proto.map_value));
    return RtValue::Some(std::move(m));
  }
  if (proto.optional_value) {
    ONNXKIT_ASSIGN_OR_RETURN(RtValue o, ValueFromOptional(*proto.optional_value));
    return RtValue::Some(std::move(o));
  }
  return RtValue::None();
}

absl::StatusOr<RtValue> ValueFromMap(const pb::MapProto& proto) {
  Tensor keys;
  if (proto.key_type == pb::kString) {
    ONNXKIT_ASSIGN_OR_RETURN(keys, Tensor::Strings({static_cast<int64_t>(proto.string_keys.size())}, proto.string_keys));
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(keys, Tensor::Allocate(pb::kInt64, {static_cast<int64_t>(proto.keys.size())}));
    if (!proto.keys.empty()) std::memcpy(keys.mutable_raw(), proto.keys.data(), proto.keys.size() * 8);
  }
  RtValue values = RtValue::FromSequence({});
  if (proto.values) {
    ONNXKIT_ASSIGN_OR_RETURN(values, ValueFromSequence(*proto.values));
  }
  return RtValue::FromMap(std::move(keys), std::move(values));
}

pb::SequenceProto SequenceToProto(const RtValue& v, std::string name) {
  pb::SequenceProto s;
  s.name = std::move(name);
  s.MarkPresent(1);
  s.elem_type = pb::SequenceProto::kTensor;
  for (const RtValue& e : v.elements()) {
    switch (e.kind()) {
      case RtValue::Kind::kTensor:
        s.tensor_values.push_back(TensorToProto(e.tensor(), ""));
        break;
      case RtValue::Kind::kSequence:
        s.elem_type = pb::SequenceProto::kSequence;
        s.sequence_values.push_back(SequenceToProto(e, ""));
        break;
      case RtValue::Kind::kMap:
        s.elem_type = pb::SequenceProto::kMap;
        s.map_values.push_back(MapToProto(e, ""));
        break;
      case RtValue::Kind::kOptional:
        s.elem_type = pb::SequenceProto::kOptional;
        s.optional_values.push_back(OptionalToProto(e, ""));
        break;
      case RtValue::Kind::kEmpty:
        break;
    }
  }
  s.MarkPresent(2);
  return s;
}

pb::OptionalProto OptionalToProto(const RtValue& v, std::string name) {
  pb::OptionalProto o;
  o.name = std::move(name);
  o.MarkPresent(1);
  if (!v.has_value()) {
    o.elem_type = pb::OptionalProto::kUndefined;
    return o;
  }
  const RtValue& inner = v.value();
  switch (inner.kind()) {
    case RtValue::Kind::kTensor:
      o.elem_type = pb::OptionalProto::kTensor;
      o.tensor_value = TensorToProto(inner.tensor(), "");
      break;
    case RtValue::Kind::kSequence:
      o.elem_type = pb::OptionalProto::kSequence;
      o.sequence_value = SequenceToProto(inner, "");
      break;
    case RtValue::Kind::kMap:
      o.elem_type = pb::OptionalProto::kMap;
      o.map_value = MapToProto(inner, "");
      break;
    case RtValue::Kind::kOptional:
      o.elem_type = pb::OptionalProto::kOptional;
      o.optional_value = OptionalToProto(inner, "");
      break;
    case RtValue::Kind::kEmpty:
      break;
  }
  o.MarkPresent(2);
  return o;
}

pb::MapProto MapToProto(const RtValue& v, std::string name) {
  pb::MapProto m;
  m.name = std::move(name);
  const Tensor& keys = v.map_keys();
  m.key_type = keys.dtype();
  if (keys.is_string()) {
    m.string_keys = keys.strings();
  } else if (keys.dtype() == pb::kInt64) {
    m.keys.assign(keys.data<int64_t>(), keys.data<int64_t>() + keys.size());
  }
  m.values = SequenceToProto(v.map_values(), "");
  return m;
}

absl::StatusOr<RtValue> ValueFromPbBytes(std::string_view bytes, const pb::TypeProto* type) {
  if (type != nullptr && type->sequence_type) {
    ONNXKIT_ASSIGN_OR_RETURN(pb::SequenceProto s, io::DecodeSequence(bytes));
    return ValueFromSequence(s);
  }
  if (type != nullptr && type->optional_type) {
    ONNXKIT_ASSIGN_OR_RETURN(pb::OptionalProto o, io::DecodeOptional(bytes));
    return ValueFromOptional(o);
  }
  if (type != nullptr && type->map_type) {
    ONNXKIT_ASSIGN_OR_RETURN(pb::MapProto m, io::DecodeMap(bytes));
    return ValueFromMap(m);
  }
  ONNXKIT_ASSIGN_OR_RETURN(pb::TensorProto t, io::DecodeTensor(bytes));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(t));
  return RtValue::FromTensor(std::move(tensor));
}

std::string ValueToPbBytes(const RtValue& v, const std::string& name) {
  switch (v.kind()) {
    case RtValue::Kind::kSequence:
      return io::Encode(SequenceToProto(v, name));
    case RtValue::Kind::kOptional:
      return io::Encode(OptionalToProto(v, name));
    case RtValue::Kind::kMap:
      return io::Encode(MapToProto(v, name));
    default:
      return io::Encode(TensorToProto(v.tensor(), name));
  }
}

}  // namespace onnxkit::runner
