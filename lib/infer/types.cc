// Types of inference: conversion from and to pb::TypeProto, printing,
// merging a declared type into an inferred one, and conflict detection.
#include "lib/infer/types.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"

namespace onnxkit::infer {
namespace {

using Kind = Type::Kind;

std::shared_ptr<const Type> Share(Type t) { return std::make_shared<const Type>(std::move(t)); }

std::optional<Dims> ShapeFromProto(const pb::TensorShapeProto* shape, int64_t* rank_too_large) {
  if (shape == nullptr) return std::nullopt;
  if (shape->dim.size() > static_cast<size_t>(limits::kMaxRank)) {
    if (rank_too_large != nullptr) *rank_too_large = static_cast<int64_t>(shape->dim.size());
    return std::nullopt;
  }
  Dims dims;
  dims.reserve(shape->dim.size());
  for (const auto& d : shape->dim) {
    if (d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value >= 0) {
      dims.push_back(Dim::Of(d.dim_value));
    } else if (d.kind == pb::TensorShapeProto::Dimension::kParam) {
      dims.push_back(Dim::Sym(d.dim_param));
    } else {
      dims.push_back(Dim::Unknown());
    }
  }
  return dims;
}

Type FromProto(const pb::TypeProto& p, int depth, int64_t* rank_too_large) {
  Type t;
  if (depth > limits::kMaxMessageDepth) return t;
  if (p.tensor_type) {
    t.kind = Kind::kTensor;
    t.elem_type = p.tensor_type->elem_type;
    t.shape = ShapeFromProto(p.tensor_type->shape.get(), rank_too_large);
  } else if (p.sparse_tensor_type) {
    t.kind = Kind::kSparseTensor;
    t.elem_type = p.sparse_tensor_type->elem_type;
    t.shape = ShapeFromProto(p.sparse_tensor_type->shape.get(), rank_too_large);
  } else if (p.sequence_type) {
    t.kind = Kind::kSequence;
    if (p.sequence_type->elem_type) {
      t.inner = Share(FromProto(*p.sequence_type->elem_type, depth + 1, rank_too_large));
    }
  } else if (p.optional_type) {
    t.kind = Kind::kOptional;
    if (p.optional_type->elem_type) {
      t.inner = Share(FromProto(*p.optional_type->elem_type, depth + 1, rank_too_large));
    }
  } else if (p.map_type) {
    t.kind = Kind::kMap;
    t.elem_type = p.map_type->key_type;
    if (p.map_type->value_type) t.inner = Share(FromProto(*p.map_type->value_type, depth + 1, rank_too_large));
  } else if (p.opaque_type) {
    t.kind = Kind::kOpaque;
  }
  return t;
}

pb::TensorShapeProto ShapeToProto(const Dims& dims) {
  pb::TensorShapeProto s;
  for (const Dim& d : dims) {
    pb::TensorShapeProto::Dimension pd;
    if (d.value) {
      pd.kind = pb::TensorShapeProto::Dimension::kValue;
      pd.dim_value = *d.value;
    } else if (!d.param.empty()) {
      pd.kind = pb::TensorShapeProto::Dimension::kParam;
      pd.dim_param = d.param;
    }
    s.dim.push_back(std::move(pd));
  }
  return s;
}

std::string ElemName(int32_t elem) {
  if (elem == 0) return "?";
  std::string_view name = DataTypeName(elem);
  if (name.empty()) return absl::StrCat("data_type_", elem);
  return std::string(name);
}

Dim MergeDim(const Dim& inferred, const Dim& declared) {
  if (inferred.value) return inferred;
  if (declared.value) return declared;
  return inferred.param.empty() ? declared : inferred;
}

Dim UnionDim(const Dim& a, const Dim& b) { return a == b ? a : Dim::Unknown(); }

std::optional<Conflict> ShapeConflict(const std::optional<Dims>& inferred, const std::optional<Dims>& declared) {
  if (!inferred || !declared) return std::nullopt;
  if (inferred->size() != declared->size()) {
    return Conflict{false, absl::StrCat("inferred shape ", DimsToString(inferred), " (rank ", inferred->size(),
                                        "), declared ", DimsToString(declared), " (rank ", declared->size(),
                                        ")")};
  }
  for (size_t i = 0; i < inferred->size(); ++i) {
    const Dim& a = (*inferred)[i];
    const Dim& b = (*declared)[i];
    if (a.value && b.value && *a.value != *b.value) {
      return Conflict{false, absl::StrCat("inferred shape ", DimsToString(inferred), ", declared ",
                                          DimsToString(declared), " (dim ", i, ": ", *a.value, " vs ",
                                          *b.value, ")")};
    }
  }
  return std::nullopt;
}

std::optional<Conflict> FindConflictAt(const Type& inferred, const Type& declared, int depth) {
  if (inferred.unknown() || declared.unknown() || depth > limits::kMaxMessageDepth) return std::nullopt;
  auto type_conflict = [&]() {
    return Conflict{true, absl::StrCat("inferred ", TypeName(inferred), ", declared ", TypeName(declared))};
  };
  if (inferred.kind != declared.kind) return type_conflict();
  switch (inferred.kind) {
    case Kind::kTensor:
    case Kind::kSparseTensor:
      if (inferred.elem_type != 0 && declared.elem_type != 0 && inferred.elem_type != declared.elem_type) {
        return type_conflict();
      }
      return ShapeConflict(inferred.shape, declared.shape);
    case Kind::kMap:
      if (inferred.elem_type != 0 && declared.elem_type != 0 && inferred.elem_type != declared.elem_type) {
        return type_conflict();
      }
      [[fallthrough]];
    case Kind::kSequence:
    case Kind::kOptional:
      if (inferred.inner && declared.inner) {
        std::optional<Conflict> c = FindConflictAt(*inferred.inner, *declared.inner, depth + 1);
        if (c && c->element_type) return type_conflict();
        return c;
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace

Type TensorOf(int32_t elem_type, std::optional<Dims> shape) {
  Type t;
  t.kind = Kind::kTensor;
  t.elem_type = elem_type;
  t.shape = std::move(shape);
  return t;
}

Type SequenceOf(Type inner) {
  Type t;
  t.kind = Kind::kSequence;
  t.inner = Share(std::move(inner));
  return t;
}

Type OptionalOf(Type inner) {
  Type t;
  t.kind = Kind::kOptional;
  t.inner = Share(std::move(inner));
  return t;
}

Type WithoutShapes(const Type& type) {
  Type t = type;
  t.shape.reset();
  if (t.inner) t.inner = Share(WithoutShapes(*t.inner));
  return t;
}

Type TypeFromProto(const pb::TypeProto& proto, int64_t* rank_too_large) {
  return FromProto(proto, 0, rank_too_large);
}

pb::TypeProto TypeToProto(const Type& type) {
  pb::TypeProto p;
  switch (type.kind) {
    case Kind::kTensor: {
      auto& t = p.tensor_type.mutable_value();
      t.elem_type = type.elem_type;
      if (type.shape) t.shape = ShapeToProto(*type.shape);
      break;
    }
    case Kind::kSparseTensor: {
      auto& t = p.sparse_tensor_type.mutable_value();
      t.elem_type = type.elem_type;
      if (type.shape) t.shape = ShapeToProto(*type.shape);
      break;
    }
    case Kind::kSequence: {
      auto& s = p.sequence_type.mutable_value();
      if (type.inner && !type.inner->unknown()) s.elem_type = TypeToProto(*type.inner);
      break;
    }
    case Kind::kOptional: {
      auto& o = p.optional_type.mutable_value();
      if (type.inner && !type.inner->unknown()) o.elem_type = TypeToProto(*type.inner);
      break;
    }
    case Kind::kMap: {
      auto& m = p.map_type.mutable_value();
      m.key_type = type.elem_type;
      if (type.inner && !type.inner->unknown()) m.value_type = TypeToProto(*type.inner);
      break;
    }
    case Kind::kOpaque:
      p.opaque_type.mutable_value();
      break;
    case Kind::kUnknown:
      break;
  }
  return p;
}

std::string DimsToString(const std::optional<Dims>& dims) {
  if (!dims) return "?";
  std::string out = "[";
  for (size_t i = 0; i < dims->size(); ++i) {
    const Dim& d = (*dims)[i];
    if (i > 0) out += ", ";
    if (d.value) {
      absl::StrAppend(&out, *d.value);
    } else {
      out += d.param.empty() ? "?" : d.param;
    }
  }
  return out + "]";
}

std::string TypeName(const Type& type) {
  std::string inner = type.inner ? TypeName(*type.inner) : "?";
  switch (type.kind) {
    case Kind::kTensor:
      return absl::StrCat("tensor(", ElemName(type.elem_type), ")");
    case Kind::kSparseTensor:
      return absl::StrCat("sparse_tensor(", ElemName(type.elem_type), ")");
    case Kind::kSequence:
      return absl::StrCat("seq(", inner, ")");
    case Kind::kOptional:
      return absl::StrCat("optional(", inner, ")");
    case Kind::kMap:
      return absl::StrCat("map(", ElemName(type.elem_type), ",", inner, ")");
    case Kind::kOpaque:
      return "opaque";
    case Kind::kUnknown:
      break;
  }
  return "?";
}

Type MergeTypes(const Type& inferred, const Type& declared) {
  if (inferred.unknown()) return declared;
  if (declared.unknown() || inferred.kind != declared.kind) return inferred;
  Type t = inferred;
  if (t.elem_type == 0) t.elem_type = declared.elem_type;
  if (!t.shape) {
    t.shape = declared.shape;
  } else if (declared.shape && declared.shape->size() == t.shape->size()) {
    for (size_t i = 0; i < t.shape->size(); ++i) (*t.shape)[i] = MergeDim((*t.shape)[i], (*declared.shape)[i]);
  }
  if (!t.inner || t.inner->unknown()) {
    t.inner = declared.inner;
  } else if (declared.inner) {
    t.inner = Share(MergeTypes(*t.inner, *declared.inner));
  }
  return t;
}

Type UnionTypes(const Type& a, const Type& b) {
  if (a.kind != b.kind) return Type{};
  Type t = a;
  if (a.elem_type != b.elem_type) t.elem_type = 0;
  if (!a.shape || !b.shape || a.shape->size() != b.shape->size()) {
    t.shape.reset();
  } else {
    for (size_t i = 0; i < t.shape->size(); ++i) (*t.shape)[i] = UnionDim((*a.shape)[i], (*b.shape)[i]);
  }
  if (a.inner && b.inner) {
    t.inner = Share(UnionTypes(*a.inner, *b.inner));
  } else {
    t.inner.reset();
  }
  return t;
}

std::optional<Conflict> FindConflict(const Type& inferred, const Type& declared) {
  return FindConflictAt(inferred, declared, 0);
}

}  // namespace onnxkit::infer
