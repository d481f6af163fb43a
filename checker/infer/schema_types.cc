// Output element types from an operator schema: type parameters bound by the
// node's actual inputs, concrete formal types ("tensor(int64)" for Shape),
// and parameters constrained to one type.
//
//   Add(x: tensor(float), y: tensor(float)) -> T bound to tensor(float) -> z: tensor(float)
//   Shape(x: tensor(float))                 -> formal "tensor(int64)"   -> s: tensor(int64)
//
// Heterogeneous variadic formals (If/Loop/Scan's V) bind nothing: their
// shape functions type the outputs from the bodies.
#include "checker/infer/schema_types.h"

#include <string_view>
#include <utility>
#include <vector>

#include "lib/ops/type_string.h"

namespace onnxkit::checker::infer {
namespace {

// The formal parameter actual `index` binds to; null past the end.
const ops::FormalParameter* FormalAt(std::span<const ops::FormalParameter> formals, int index) {
  if (formals.empty() || index < 0) return nullptr;
  if (static_cast<size_t>(index) < formals.size()) return &formals[static_cast<size_t>(index)];
  const ops::FormalParameter& last = formals.back();
  return last.option == ops::ParamOption::kVariadic ? &last : nullptr;
}

bool Complete(const Type& t) {
  switch (t.kind) {
    case Type::Kind::kTensor:
    case Type::Kind::kSparseTensor:
      return t.elem_type != 0;
    case Type::Kind::kSequence:
    case Type::Kind::kOptional:
    case Type::Kind::kMap:
      return t.inner != nullptr && Complete(*t.inner);
    case Type::Kind::kOpaque:
      return true;
    case Type::Kind::kUnknown:
      break;
  }
  return false;
}

std::optional<Type> ParseType(std::string_view type_string) {
  absl::StatusOr<pb::TypeProto> parsed = ops::ParseTypeString(type_string);
  if (!parsed.ok()) return std::nullopt;
  return WithoutShapes(TypeFromProto(*parsed));
}

}  // namespace

void InferSchemaTypes(const ops::OpSchema& schema, NodeContext& ctx) {
  std::vector<std::pair<std::string_view, Type>> bound;
  auto find = [&](std::string_view param) -> const Type* {
    for (const auto& [p, t] : bound) {
      if (p == param) return &t;
    }
    return nullptr;
  };
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const ops::FormalParameter* f = FormalAt(schema.inputs(), i);
    if (f == nullptr || !f->is_type_parameter() || !f->homogeneous) continue;
    const Type* t = ctx.input_type(i);
    if (t == nullptr || !Complete(*t) || find(f->type_str) != nullptr) continue;
    bound.emplace_back(f->type_str, WithoutShapes(*t));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ops::FormalParameter* f = FormalAt(schema.outputs(), i);
    if (f == nullptr) continue;
    std::optional<Type> t;
    if (!f->is_type_parameter()) {
      t = ParseType(f->type_str);
    } else if (!f->homogeneous) {
      continue;
    } else if (const Type* b = find(f->type_str)) {
      t = *b;
    } else if (std::span<const std::string_view> allowed = schema.AllowedTypes(*f); allowed.size() == 1) {
      t = ParseType(allowed[0]);
    }
    if (t) ctx.set_type(i, std::move(*t));
  }
}

}  // namespace onnxkit::checker::infer
