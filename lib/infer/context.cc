// NodeContext accessors and the checked dim arithmetic of shape functions.
#include "lib/infer/context.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"

namespace onnxkit::infer {

NodeContext::NodeContext(const ir::Node& node, int64_t opset, std::vector<const ValueState*> inputs,
                         SubgraphInferrer* subgraphs)
    : node_(node), opset_(opset), inputs_(std::move(inputs)), subgraphs_(subgraphs) {
  outputs_.resize(static_cast<size_t>(node.num_outputs()));
}

bool NodeContext::has_input(int i) const {
  return i >= 0 && i < num_inputs() && inputs_[static_cast<size_t>(i)] != nullptr;
}

const Type* NodeContext::input_type(int i) const {
  if (!has_input(i)) return nullptr;
  return &inputs_[static_cast<size_t>(i)]->type;
}

int32_t NodeContext::input_elem(int i) const {
  const Type* t = input_type(i);
  return t != nullptr && t->is_tensor() ? t->elem_type : 0;
}

const Dims* NodeContext::input_shape(int i) const {
  const Type* t = input_type(i);
  if (t == nullptr || !t->is_tensor() || !t->shape) return nullptr;
  return &*t->shape;
}

std::optional<int64_t> NodeContext::input_rank(int i) const {
  const Dims* s = input_shape(i);
  if (s == nullptr) return std::nullopt;
  return static_cast<int64_t>(s->size());
}

const Dims* NodeContext::input_data(int i) const {
  if (!has_input(i) || !inputs_[static_cast<size_t>(i)]->data) return nullptr;
  return &*inputs_[static_cast<size_t>(i)]->data;
}

std::optional<std::vector<int64_t>> NodeContext::input_ints(int i) const {
  const Dims* d = input_data(i);
  if (d == nullptr) return std::nullopt;
  return KnownValues(*d);
}

std::optional<int64_t> NodeContext::input_scalar(int i) const {
  std::optional<std::vector<int64_t>> v = input_ints(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

const std::vector<double>* NodeContext::input_floats(int i) const {
  if (!has_input(i) || !inputs_[static_cast<size_t>(i)]->float_data) return nullptr;
  return &*inputs_[static_cast<size_t>(i)]->float_data;
}

ValueState* NodeContext::output(int i) {
  if (i < 0 || i >= num_outputs()) return nullptr;
  return &outputs_[static_cast<size_t>(i)];
}

void NodeContext::set_type(int i, Type type) {
  if (ValueState* o = output(i)) o->type = std::move(type);
}

void NodeContext::set_elem(int i, int32_t elem) {
  ValueState* o = output(i);
  if (o == nullptr) return;
  if (!o->type.is_tensor()) o->type = TensorOf(0);
  o->type.elem_type = elem;
}

void NodeContext::set_shape(int i, Dims dims) {
  ValueState* o = output(i);
  if (o == nullptr) return;
  if (!CheckRank(static_cast<int64_t>(dims.size()), absl::StrCat("output ", i))) return;
  if (!o->type.is_tensor()) o->type = TensorOf(0);
  o->type.shape = std::move(dims);
}

void NodeContext::PropagateShape(int in, int out) {
  if (const Dims* s = input_shape(in)) set_shape(out, *s);
}

void NodeContext::PropagateElem(int in, int out) {
  if (int32_t e = input_elem(in); e != 0) set_elem(out, e);
}

void NodeContext::set_data(int i, Dims data) {
  if (ValueState* o = output(i); o != nullptr && static_cast<int64_t>(data.size()) <= kMaxDataElements) {
    o->data = std::move(data);
  }
}

int64_t NodeContext::attr_int(std::string_view name, int64_t fallback) const {
  return node_.GetInt(name).value_or(fallback);
}

float NodeContext::attr_float(std::string_view name, float fallback) const {
  return node_.GetFloat(name).value_or(fallback);
}

std::string NodeContext::attr_string(std::string_view name, std::string fallback) const {
  return node_.GetString(name).value_or(std::move(fallback));
}

std::optional<std::vector<int64_t>> NodeContext::attr_ints(std::string_view name) const {
  return node_.GetInts(name);
}

std::optional<std::vector<float>> NodeContext::attr_floats(std::string_view name) const {
  const ir::Attribute* a = attr(name);
  if (a == nullptr || a->type() != pb::kAttrFloats) return std::nullopt;
  return a->proto.floats;
}

void NodeContext::Fail(std::string message) {
  failures_.push_back(absl::StrCat(Sv(op()), ": ", message));
}

std::optional<int64_t> NodeContext::NormalizeAxis(int64_t axis, int64_t rank, std::string_view what) {
  if (rank <= 0 || axis < -rank || axis >= rank) {
    if (rank <= 0) {
      Fail(absl::StrCat(Sv(what), " ", axis, " is out of range for rank ", rank));
    } else {
      Fail(absl::StrCat(Sv(what), " ", axis, " is out of range for rank ", rank, " (expected ", -rank, " to ",
                        rank - 1, ")"));
    }
    return std::nullopt;
  }
  return axis < 0 ? axis + rank : axis;
}

bool NodeContext::CheckRank(int64_t rank, std::string_view what) {
  if (rank < 0) {
    Fail(absl::StrCat(Sv(what), " would have negative rank ", rank));
    return false;
  }
  if (rank > limits::kMaxRank) {
    Fail(absl::StrCat(Sv(what), " would have rank ", rank, ", above the limit of ", limits::kMaxRank,
                      " (limits::kMaxRank)"));
    return false;
  }
  return true;
}

Dim NodeContext::Mul(const Dim& a, const Dim& b) {
  if (a.Is(1)) return b;
  if (b.Is(1)) return a;
  if (a.Is(0) || b.Is(0)) return Dim::Of(0);
  if (!a.value || !b.value) return Dim::Unknown();
  std::optional<int64_t> r = CheckedMul(*a.value, *b.value);
  if (!r) {
    Fail(absl::StrCat("dim ", *a.value, " * ", *b.value, " overflows int64"));
    return Dim::Unknown();
  }
  return Dim::Of(*r);
}

Dim NodeContext::Add(const Dim& a, const Dim& b) {
  if (a.Is(0)) return b;
  if (b.Is(0)) return a;
  if (!a.value || !b.value) return Dim::Unknown();
  std::optional<int64_t> r = CheckedAdd(*a.value, *b.value);
  if (!r) {
    Fail(absl::StrCat("dim ", *a.value, " + ", *b.value, " overflows int64"));
    return Dim::Unknown();
  }
  return Dim::Of(*r);
}

Dim NodeContext::Product(std::span<const Dim> dims) {
  Dim p = Dim::Of(1);
  for (const Dim& d : dims) {
    p = Mul(p, d);
    if (!p.known() && !p.symbolic()) {
      // Unknown; a later 0 still makes the product 0.
      bool zero = std::any_of(dims.begin(), dims.end(), [](const Dim& x) { return x.Is(0); });
      return zero ? Dim::Of(0) : Dim::Unknown();
    }
  }
  return p;
}

std::optional<Dims> NodeContext::Broadcast(std::span<const Dims* const> shapes) {
  size_t rank = 0;
  for (const Dims* s : shapes) {
    if (s == nullptr) return std::nullopt;
    rank = std::max(rank, s->size());
  }
  Dims out(rank);
  for (size_t k = 0; k < rank; ++k) {  // k-th dim from the right
    std::optional<int64_t> known;      // a known dim other than 1
    std::string symbol;
    bool unknown = false;
    bool many_symbols = false;
    for (const Dims* s : shapes) {
      if (k >= s->size()) continue;
      const Dim& d = (*s)[s->size() - 1 - k];
      if (d.value) {
        if (*d.value == 1) continue;
        if (known && *known != *d.value) {
          Fail(absl::StrCat("incompatible dims ", *known, " and ", *d.value, " at axis ", rank - 1 - k,
                            " of the broadcast shapes ", [&] {
                              std::string all;
                              for (const Dims* x : shapes) {
                                if (!all.empty()) all += " and ";
                                all += DimsToString(*x);
                              }
                              return all;
                            }()));
          return std::nullopt;
        }
        known = *d.value;
      } else if (d.param.empty()) {
        unknown = true;
      } else if (symbol.empty()) {
        symbol = d.param;
      } else if (symbol != d.param) {
        many_symbols = true;
      }
    }
    Dim& r = out[rank - 1 - k];
    if (known) {
      r = Dim::Of(*known);
    } else if (!unknown && !many_symbols && !symbol.empty()) {
      r = Dim::Sym(symbol);
    } else if (!unknown && !many_symbols) {
      r = Dim::Of(1);
    }
  }
  return out;
}

std::optional<int64_t> SignedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> SignedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> SignedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> SignedDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
  return a / b;
}

std::optional<std::vector<int64_t>> KnownValues(const Dims& dims) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) {
    if (!d.value) return std::nullopt;
    out.push_back(*d.value);
  }
  return out;
}

Dims DimsOf(std::span<const int64_t> values) {
  Dims out;
  out.reserve(values.size());
  for (int64_t v : values) out.push_back(Dim::Of(v));
  return out;
}

std::string IntsToString(std::span<const int64_t> values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) absl::StrAppend(&out, i > 0 ? ", " : "", values[i]);
  return out + "]";
}

}  // namespace onnxkit::infer
