// The generic step of `onnxkit convert`, for a version step of an op that
// has no row in adapters.def: a checked no-op. It
//   - drops attributes the target does not know when they hold their
//     default (or are legacy hints: consumed_inputs, is_test, going up),
//   - writes the source's default explicitly where the target's default
//     differs (Softmax's axis 1 -> -1 style changes),
//   - normalizes negative axis/axes below opset 11,
//   - checks the node's inputs and outputs fit the target's signature and
//     their known element types are allowed there, and that the target
//     accepts the values of its enumerated string attributes.
// Anything else blocks, naming what does not fit.
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/types.h"
#include "lib/ops/attribute_values.h"
#include "lib/ops/type_string.h"
#include "passes/convert/adapter.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

using Kind = ops::AttributeDefault::Kind;

// False for a reference to a function's attribute (its value is the caller's).
bool HoldsDefault(const pb::AttributeProto& a, const ops::AttributeSpec& spec) {
  if (!a.ref_attr_name.empty()) return false;
  const ops::AttributeDefault& d = spec.default_value;
  switch (d.kind) {
    case Kind::kInt: return a.i == d.i;
    case Kind::kFloat: return a.f == d.f;
    case Kind::kString: return a.s == d.s;
    case Kind::kInts: return std::vector<int64_t>(d.ints.begin(), d.ints.end()) == a.ints;
    case Kind::kFloats: return std::vector<float>(d.floats.begin(), d.floats.end()) == a.floats;
    case Kind::kStrings: return std::vector<std::string>(d.strings.begin(), d.strings.end()) == a.strings;
    default: return false;
  }
}

bool SameDefault(const ops::AttributeSpec& a, const ops::AttributeSpec& b) {
  if (a.default_value.kind != b.default_value.kind) return false;
  pb::AttributeProto p;
  const ops::AttributeDefault& d = a.default_value;
  p.i = d.i;
  p.f = d.f;
  p.s = std::string(d.s);
  p.ints.assign(d.ints.begin(), d.ints.end());
  p.floats.assign(d.floats.begin(), d.floats.end());
  p.strings.assign(d.strings.begin(), d.strings.end());
  return HoldsDefault(p, b);
}

std::optional<pb::AttributeProto> DefaultAttr(const ops::AttributeSpec& spec) {
  const ops::AttributeDefault& d = spec.default_value;
  std::string name(spec.name);
  switch (d.kind) {
    case Kind::kInt: return IntAttr(name, d.i);
    case Kind::kFloat: return FloatAttr(name, d.f);
    case Kind::kString: return StringAttr(name, std::string(d.s));
    case Kind::kInts: return IntsAttr(name, std::vector<int64_t>(d.ints.begin(), d.ints.end()));
    case Kind::kFloats: {
      pb::AttributeProto a;
      a.name = name;
      a.type = pb::kAttrFloats;
      a.floats.assign(d.floats.begin(), d.floats.end());
      return a;
    }
    case Kind::kStrings: {
      pb::AttributeProto a;
      a.name = name;
      a.type = pb::kAttrStrings;
      a.strings.assign(d.strings.begin(), d.strings.end());
      return a;
    }
    default: return std::nullopt;
  }
}

absl::Status CheckAttributes(Step& step) {
  ir::Node& node = *step.node;
  std::vector<std::string> names;
  for (const ir::Attribute& a : node.attributes()) names.push_back(a.name());
  for (const std::string& name : names) {
    if (step.to->FindAttribute(name) != nullptr) continue;
    const ops::AttributeSpec* src = step.from->FindAttribute(name);
    bool legacy = step.direction == Direction::kUp && (name == "consumed_inputs" || name == "is_test");
    if (legacy || (src != nullptr && src->has_default() && HoldsDefault(node.FindAttribute(name)->proto, *src))) {
      node.RemoveAttribute(name);
      continue;
    }
    return Block(absl::StrCat("attribute '", name, "' has no equivalent in ", Sv(step.to->name()), "-",
                              step.to->since_version()));
  }
  for (const ops::AttributeSpec& src : step.from->attributes()) {
    if (node.FindAttribute(src.name) != nullptr || !src.has_default()) continue;
    const ops::AttributeSpec* dst = step.to->FindAttribute(src.name);
    if (dst == nullptr || (dst->has_default() && SameDefault(src, *dst))) continue;
    std::optional<pb::AttributeProto> a = DefaultAttr(src);
    if (!a) return Block(absl::StrCat("the default of attribute '", Sv(src.name), "' changed"));
    node.SetAttribute(std::move(*a));
  }
  // An enumerated value the target does not list (Resize's
  // half_pixel_symmetric below 18): the same name means something else, or
  // nothing, there.
  for (const ir::Attribute& a : node.attributes()) {
    if (a.proto.type != pb::kAttrString || !a.proto.ref_attr_name.empty() || step.to->domain() != "ai.onnx")
      continue;
    if (!ops::AcceptsValue(step.to->name(), a.name(), step.to->since_version(), a.proto.s)) {
      return Block(absl::StrCat("attribute '", a.name(), "' = '", a.proto.s, "' is not accepted by ",
                                Sv(step.to->name()), "-", step.to->since_version()));
    }
  }
  for (const ops::AttributeSpec& dst : step.to->attributes()) {
    if (dst.required && node.FindAttribute(dst.name) == nullptr) {
      return Block(absl::StrCat("attribute '", Sv(dst.name), "' is required at ", Sv(step.to->name()), "-",
                                step.to->since_version()));
    }
  }
  return absl::OkStatus();
}

// Below opset 11 axes must be non-negative.
absl::Status NormalizeAxes(Step& step) {
  if (step.direction != Direction::kDown || step.to->since_version() >= 11 || step.from->since_version() < 11) {
    return absl::OkStatus();
  }
  for (std::string_view name : {"axis", "axes"}) {
    ir::Attribute* a = step.node->FindAttribute(name);
    if (a == nullptr) continue;
    bool negative = a->proto.i < 0;
    for (int64_t v : a->proto.ints) negative |= v < 0;
    if (!negative) continue;
    std::optional<int64_t> rank = RankOf(step, step.node->num_inputs() > 0 ? step.node->input(0) : nullptr);
    if (step.node->op_type() == "Unsqueeze") rank = RankOf(step, step.node->output(0));
    if (!rank) return Block(absl::StrCat("negative ", Sv(name), " needs a known input rank below opset 11"));
    if (a->proto.i < 0) a->proto.i += *rank;
    for (int64_t& v : a->proto.ints) v += v < 0 ? *rank : 0;
  }
  return absl::OkStatus();
}

std::optional<pb::TypeProto> TypeOf(Step& step, const ir::Value& v) {
  // Sequences, optionals and maps as they are: older versions of an op may
  // take tensors only (Identity before 14, If and Loop before 13).
  // (Only when known down to the innermost element type.)
  infer::Type full;
  const infer::ValueState* state = step.ctx->State(v);
  if (state != nullptr && !state->type.unknown()) {
    full = state->type;
  } else if (v.type() != nullptr) {
    full = infer::TypeFromProto(*v.type());
  }
  if (!full.unknown() && !full.is_tensor()) {
    const infer::Type* t = &full;
    while (t != nullptr && !t->is_tensor() && t->kind != infer::Type::Kind::kSparseTensor) t = t->inner.get();
    if (t == nullptr || t->elem_type == 0) return std::nullopt;
    return infer::TypeToProto(infer::WithoutShapes(full));
  }
  std::optional<int32_t> elem = ElemType(v, *step.ctx);
  if (!elem || *elem == 0) return std::nullopt;
  return infer::TypeToProto(infer::TensorOf(*elem));
}

absl::Status CheckValues(Step& step, const std::vector<ir::Value*>& values,
                         std::span<const ops::FormalParameter> to_formals,
                         std::span<const ops::FormalParameter> from_formals, std::string_view what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (to_formals.empty()) return Block(absl::StrCat(Sv(what), " ", i, " has no formal at the target"));
    const ops::FormalParameter& f = to_formals[std::min(i, to_formals.size() - 1)];
    if (step.check_names && i < from_formals.size() && i < to_formals.size() &&
        from_formals[i].name != to_formals[i].name) {
      return Block(absl::StrCat(Sv(what), " ", i, " changed meaning ('", Sv(from_formals[i].name), "' -> '",
                                Sv(f.name), "')"));
    }
    ir::Value* v = values[i];
    if (v == nullptr || v->name().empty()) {
      if (f.option == ops::ParamOption::kSingle) return Block(absl::StrCat(Sv(what), " ", i, " is required"));
      continue;
    }
    std::optional<pb::TypeProto> type = TypeOf(step, *v);
    if (!type) continue;
    bool allowed = false;
    for (std::string_view t : step.to->AllowedTypes(f)) allowed |= ops::TypeStringMatches(t, *type);
    if (!allowed) {
      return Block(absl::StrCat(Sv(what), " '", v->name(), "' of type ", ops::TypeToString(*type),
                                " is not allowed by ", Sv(step.to->name()), "-", step.to->since_version()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GenericStep(Step& step) {
  if (step.to == nullptr) {
    return Block(absl::StrCat("op ", step.node->op_type(), " does not exist below opset ", step.boundary,
                              " and has no expansion"));
  }
  if (step.to->deprecated()) {
    return Block(absl::StrCat("op ", step.node->op_type(), " is deprecated at opset ", step.to->since_version(),
                              " and has no replacement adapter"));
  }
  int n_in = step.node->num_inputs();
  while (n_in > 0 && step.node->input(n_in - 1) == nullptr) --n_in;
  int n_out = step.node->num_outputs();
  if (n_in < step.to->min_input() || n_in > step.to->max_input()) {
    return Block(absl::StrCat(n_in, " inputs do not fit ", Sv(step.to->name()), "-", step.to->since_version(),
                              " (", step.to->min_input(), "..", step.to->max_input(), ")"));
  }
  if (n_out < step.to->min_output() || n_out > step.to->max_output()) {
    return Block(absl::StrCat(n_out, " outputs do not fit ", Sv(step.to->name()), "-", step.to->since_version()));
  }
  std::vector<ir::Value*> ins(step.node->inputs().begin(), step.node->inputs().begin() + n_in);
  ONNXKIT_RETURN_IF_ERROR(CheckValues(step, ins, step.to->inputs(), step.from->inputs(), "input"));
  ONNXKIT_RETURN_IF_ERROR(CheckValues(step, step.node->outputs(), step.to->outputs(), step.from->outputs(), "output"));
  ONNXKIT_RETURN_IF_ERROR(CheckAttributes(step));
  ONNXKIT_RETURN_IF_ERROR(NormalizeAxes(step));
  return TrimInputs(step);
}

}  // namespace onnxkit::passes::convert
