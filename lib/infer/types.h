// What inference knows about a value: its type (kind, element type, shape
// with known, symbolic or unknown dims) and, for small integer or float
// tensors that compute shapes, their contents.
//
//   Type t = TensorOf(pb::kFloat, Dims{Dim::Of(2), Dim::Sym("N")});
//   TypeToString(t)  // "tensor(float)[2, N]"
//
// Types convert from and to pb::TypeProto; declared types with hostile
// shapes (negative dims, ranks above limits::kMaxRank) come in with those
// parts unknown, never as allocations sized from the file.
#ifndef ONNXKIT_LIB_INFER_TYPES_H_
#define ONNXKIT_LIB_INFER_TYPES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/io/proto.h"

namespace onnxkit::infer {

// Tensors larger than this many elements never have their contents tracked:
// shape-computing tensors are tiny, and this bounds the work on any model.
inline constexpr int64_t kMaxDataElements = 1024;

// One dimension, or one element of a shape-computing integer tensor: a known
// value, a symbol (a dim_param name), or unknown (no value, empty symbol).
// As a dimension a known value is never negative; as data it may be.
struct Dim {
  std::optional<int64_t> value;
  std::string param;

  static Dim Of(int64_t v) { return Dim{v, {}}; }
  static Dim Sym(std::string p) { return Dim{std::nullopt, std::move(p)}; }
  static Dim Unknown() { return Dim{}; }
  bool known() const { return value.has_value(); }
  bool symbolic() const { return !value && !param.empty(); }
  bool Is(int64_t v) const { return value && *value == v; }
  friend bool operator==(const Dim& a, const Dim& b) { return a.value == b.value && a.param == b.param; }
};
using Dims = std::vector<Dim>;

// An inferred or declared type, the parts of a pb::TypeProto inference uses.
struct Type {
  enum class Kind : uint8_t { kUnknown, kTensor, kSparseTensor, kSequence, kOptional, kMap, kOpaque };
  Kind kind = Kind::kUnknown;
  int32_t elem_type = 0;              // tensor and sparse tensor element; map key; 0: unknown
  std::optional<Dims> shape;          // tensor and sparse tensor; nullopt: unknown rank
  std::shared_ptr<const Type> inner;  // sequence / optional element, map value; may be null

  bool is_tensor() const { return kind == Kind::kTensor; }
  bool unknown() const { return kind == Kind::kUnknown; }
};

// A tensor type; `shape` nullopt: unknown rank.
Type TensorOf(int32_t elem_type, std::optional<Dims> shape = std::nullopt);
// seq(inner), optional(inner).
Type SequenceOf(Type inner);
Type OptionalOf(Type inner);
// The same type with every shape (also nested ones) removed.
Type WithoutShapes(const Type& type);

// What inference knows about one value.
struct ValueState {
  Type type;
  // Contents of a small integer tensor (row-major), e.g. a shape computed by
  // Shape -> Gather -> Concat; elements may be symbolic or unknown.
  std::optional<Dims> data;
  // Contents of a small floating-point tensor (Resize scales, Range bounds).
  std::optional<std::vector<double>> float_data;
};

// Converts a declared type. Hostile parts become unknown: a negative dim is
// an unknown dim; a rank above limits::kMaxRank an unknown rank (and
// `*rank_too_large` is set to that rank when given). Nesting is bounded.
Type TypeFromProto(const pb::TypeProto& proto, int64_t* rank_too_large = nullptr);
pb::TypeProto TypeToProto(const Type& type);

// "[2, N, ?]"; "?" for an unknown rank.
std::string DimsToString(const std::optional<Dims>& dims);
// "tensor(float)", "seq(tensor(int64))"; "?" for unknown parts. No shapes.
std::string TypeName(const Type& type);

// `inferred` completed by `declared`: unknown parts of `inferred` (kind,
// element type, rank, dims, symbols) are taken from `declared`.
Type MergeTypes(const Type& inferred, const Type& declared);

// The most specific type both `a` and `b` are instances of: dims that differ
// become unknown, a rank that differs unknown (If branches, loop-carried
// values).
Type UnionTypes(const Type& a, const Type& b);

// How `inferred` conflicts with `declared`, if it does.
struct Conflict {
  bool element_type = false;  // kinds or element types differ (E0600), else shapes (E0602)
  std::string message;        // "inferred tensor(float), declared tensor(int64)"
};
std::optional<Conflict> FindConflict(const Type& inferred, const Type& declared);

}  // namespace onnxkit::infer

#endif  // ONNXKIT_LIB_INFER_TYPES_H_
