// Operator schemas: what one version of an ONNX operator takes, returns and
// accepts.
//
// An OpSchema is one (domain, name, since_version) entry of the operator
// table that onnx 1.23 defines: arity, formal inputs and outputs, attributes
// with their defaults, and type constraints. Schemas live in static storage
// for the whole program and are immutable; get them from lib/ops/registry.h.
// Every string_view and span below points into that static table.
//
//   const OpSchema* conv = FindSchema("", "Conv", 13);  // Conv-11
//   for (const AttributeSpec& attr : conv->attributes()) ...
//   std::span<const std::string_view> allowed = conv->AllowedTypes(conv->inputs()[0]);
//       // {"tensor(float16)", "tensor(float)", "tensor(double)"}
#ifndef ONNXKIT_LIB_OPS_SCHEMA_H_
#define ONNXKIT_LIB_OPS_SCHEMA_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "lib/io/proto.h"

namespace onnxkit::ops {

// How many actual values one formal input or output binds.
enum class ParamOption : uint8_t {
  kSingle,    // exactly one value
  kOptional,  // zero or one value (an empty name in a node means absent)
  kVariadic,  // min_arity or more values; only ever the last formal
};

// A formal input or output of an operator.
struct FormalParameter {
  std::string_view name;      // "X"
  std::string_view type_str;  // a type parameter ("T") or a type ("tensor(int64)")
  ParamOption option = ParamOption::kSingle;
  bool homogeneous = true;  // variadic: every value has the same type
  int min_arity = 1;        // variadic: the fewest values allowed

  // True when type_str names a type parameter constrained by the schema's
  // type_constraints(), false when it is a concrete type string.
  constexpr bool is_type_parameter() const { return type_str.find('(') == std::string_view::npos; }
};

// The default value of an attribute, when ONNX gives a plain one. Which
// member holds it follows the attribute's type: INT → i, FLOAT → f,
// STRING → s, INTS → ints, FLOATS → floats, STRINGS → strings.
struct AttributeDefault {
  enum class Kind : uint8_t { kNone, kInt, kFloat, kString, kInts, kFloats, kStrings };
  Kind kind = Kind::kNone;  // kNone: no default (or one that is not a plain value)
  int64_t i = 0;
  float f = 0;
  std::string_view s;
  std::span<const int64_t> ints;
  std::span<const float> floats;
  std::span<const std::string_view> strings;
};

// An attribute an operator accepts.
struct AttributeSpec {
  std::string_view name;                        // "kernel_shape"
  pb::AttributeType type = pb::kAttrUndefined;  // pb::kAttrInts
  bool required = false;
  AttributeDefault default_value;  // meaningful when !required

  constexpr bool has_default() const { return default_value.kind != AttributeDefault::Kind::kNone; }
};

// The types a type parameter may be bound to, as ONNX writes them
// ("tensor(float)", "seq(tensor(int64))", "map(int64, float)"); compare with
// TypeStringMatches() in lib/ops/type_string.h, which also understands the
// spelling variants ONNX uses here.
struct TypeConstraint {
  std::string_view param;  // "T"
  std::span<const std::string_view> allowed_types;
};

enum class SupportLevel : uint8_t { kCommon, kExperimental };

namespace internal {
// The stored fields of an OpSchema, filled in by the generated table only.
struct OpSchemaData {
  std::string_view domain;
  std::string_view name;
  int32_t since_version;
  bool deprecated;
  SupportLevel support_level;
  int32_t min_input;
  int32_t max_input;
  int32_t min_output;
  int32_t max_output;
  std::span<const FormalParameter> inputs;
  std::span<const FormalParameter> outputs;
  std::span<const AttributeSpec> attributes;
  std::span<const TypeConstraint> type_constraints;
  bool has_function_body;
};
}  // namespace internal

// One version of one operator.
class OpSchema {
 public:
  constexpr explicit OpSchema(const internal::OpSchemaData& data) : data_(data) {}

  // "ai.onnx" for the default domain (which models may also write as "").
  std::string_view domain() const { return data_.domain; }
  std::string_view name() const { return data_.name; }
  // The opset of `domain` that introduced this version.
  int64_t since_version() const { return data_.since_version; }
  // Deprecated schemas are still returned by lookups; callers decide.
  bool deprecated() const { return data_.deprecated; }
  SupportLevel support_level() const { return data_.support_level; }

  // Bounds on the number of actual inputs/outputs a node may have, counting
  // every value a variadic formal binds; max is 2147483647 for "unbounded".
  int min_input() const { return data_.min_input; }
  int max_input() const { return data_.max_input; }
  int min_output() const { return data_.min_output; }
  int max_output() const { return data_.max_output; }

  std::span<const FormalParameter> inputs() const { return data_.inputs; }
  std::span<const FormalParameter> outputs() const { return data_.outputs; }
  // Sorted by name.
  std::span<const AttributeSpec> attributes() const { return data_.attributes; }
  std::span<const TypeConstraint> type_constraints() const { return data_.type_constraints; }

  // True when ONNX defines the operator by a function body (it can be
  // expanded into more primitive operators).
  bool has_function_body() const { return data_.has_function_body; }

  // The attribute or type constraint with this name; nullptr when none.
  const AttributeSpec* FindAttribute(std::string_view name) const {
    for (const AttributeSpec& attr : data_.attributes) {
      if (attr.name == name) return &attr;
    }
    return nullptr;
  }
  const TypeConstraint* FindTypeConstraint(std::string_view param) const {
    for (const TypeConstraint& constraint : data_.type_constraints) {
      if (constraint.param == param) return &constraint;
    }
    return nullptr;
  }

  // The type strings `param` (one of inputs() or outputs()) accepts: its
  // constraint's list for a type parameter, the one concrete type otherwise.
  std::span<const std::string_view> AllowedTypes(const FormalParameter& param) const {
    if (!param.is_type_parameter()) return {&param.type_str, 1};
    const TypeConstraint* constraint = FindTypeConstraint(param.type_str);
    if (constraint == nullptr) return {};
    return constraint->allowed_types;
  }

 private:
  internal::OpSchemaData data_;
};

}  // namespace onnxkit::ops

#endif  // ONNXKIT_LIB_OPS_SCHEMA_H_
