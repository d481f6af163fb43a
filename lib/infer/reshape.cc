// Shape functions of ops that rearrange dims: Reshape (0 copies a dim
// unless allowzero, -1 is inferred from the element count), Flatten,
// Squeeze/Unsqueeze (axes attribute before opset 13, input from 13),
// Transpose, Expand, Tile, DepthToSpace/SpaceToDepth.
//
//   Reshape([2, 3, 4], shape=[0, -1])  -> [2, 12]
//   Reshape([2, 3, 4], shape=[5, 5])   -> E0601 cannot reshape 24 elements into shape [5, 5]
//   Unsqueeze([3, 4], axes=[0, 3])     -> [1, 3, 4, 1]
//   Tile([2, 3], repeats=[2, 2])       -> [4, 6]
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/base/checked_math.h"

namespace onnxkit::infer {
namespace {

// A product of dims as a known factor times symbols; nullopt when a dim is
// unknown or the known factor overflows.
struct SymbolicProduct {
  int64_t known = 1;
  std::vector<std::string> symbols;  // sorted
};

std::optional<SymbolicProduct> ProductOf(const Dims& dims, size_t skip = static_cast<size_t>(-1)) {
  SymbolicProduct p;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i == skip) continue;
    const Dim& d = dims[i];
    if (d.value) {
      std::optional<int64_t> r = CheckedMul(p.known, *d.value);
      if (!r) return std::nullopt;
      p.known = *r;
    } else if (!d.param.empty()) {
      p.symbols.push_back(d.param);
    } else {
      return std::nullopt;
    }
  }
  std::sort(p.symbols.begin(), p.symbols.end());
  return p;
}

// The dim a -1 stands for: input elements / other output elements.
Dim InferredDim(NodeContext& ctx, const Dims& in, const Dims& out, size_t minus_one, const Dims& target) {
  std::optional<SymbolicProduct> a = ProductOf(in);
  std::optional<SymbolicProduct> b = ProductOf(out, minus_one);
  if (!a || !b) return Dim::Unknown();
  std::vector<std::string> left;  // symbols of `a` not cancelled by `b`
  std::set_difference(a->symbols.begin(), a->symbols.end(), b->symbols.begin(), b->symbols.end(),
                      std::back_inserter(left));
  if (left.size() + b->symbols.size() != a->symbols.size()) return Dim::Unknown();  // b has extra symbols
  if (b->known == 0) {
    if (a->known != 0 && a->symbols.empty()) {
      ctx.Fail(absl::StrCat("cannot reshape ", a->known, " elements into shape ", DimsToString(target),
                            " (the -1 dim divides by 0)"));
    }
    return Dim::Unknown();
  }
  if (a->known % b->known != 0) {
    if (left.empty()) {
      ctx.Fail(absl::StrCat("cannot reshape ", a->known, " elements into shape ", DimsToString(target)));
    }
    return Dim::Unknown();
  }
  int64_t q = a->known / b->known;
  if (left.empty()) return Dim::Of(q);
  if (left.size() == 1 && q == 1) return Dim::Sym(left[0]);
  return Dim::Unknown();
}

// Output dims of Reshape for the shape values `target`.
std::optional<Dims> ReshapeDims(NodeContext& ctx, const Dims* in, const Dims& target) {
  const bool allow_zero = ctx.attr_int("allowzero", 0) != 0;
  Dims out;
  std::optional<size_t> minus_one;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    const Dim& t = target[i];
    if (!t.value) {
      out.push_back(t);
    } else if (*t.value == -1) {
      if (minus_one) {
        ctx.Fail(absl::StrCat("shape ", DimsToString(target), " has more than one -1"));
        return std::nullopt;
      }
      minus_one = i;
      out.push_back(Dim::Unknown());
    } else if (*t.value == 0 && !allow_zero) {
      if (in != nullptr && i >= in->size()) {
        ctx.Fail(absl::StrCat("shape ", DimsToString(target), " copies dim ", i, " (0) of an input of rank ",
                              in->size()));
        return std::nullopt;
      }
      out.push_back(in != nullptr ? (*in)[i] : Dim::Unknown());
    } else if (*t.value < 0) {
      ctx.Fail(absl::StrCat("shape ", DimsToString(target), " has the invalid value ", *t.value));
      return std::nullopt;
    } else {
      has_zero = has_zero || *t.value == 0;
      out.push_back(t);
    }
  }
  if (allow_zero && has_zero && minus_one) {
    ctx.Fail(absl::StrCat("shape ", DimsToString(target), " has both 0 and -1 with allowzero=1"));
    return std::nullopt;
  }
  if (in == nullptr) return out;
  if (minus_one) {
    out[*minus_one] = InferredDim(ctx, *in, out, *minus_one, target);
    if (ctx.failed()) return std::nullopt;
  } else {
    int64_t na = -1;  // -1: not known
    int64_t nb = -1;
    if (std::optional<std::vector<int64_t>> a = KnownValues(*in)) na = CheckedElementCount(*a).value_or(-1);
    if (std::optional<std::vector<int64_t>> b = KnownValues(out)) nb = CheckedElementCount(*b).value_or(-1);
    if (na >= 0 && nb >= 0 && na != nb) {
      ctx.Fail(absl::StrCat("cannot reshape ", na, " elements into shape ", DimsToString(target)));
      return std::nullopt;
    }
  }
  return out;
}

// Axes of Squeeze/Unsqueeze: the attribute before opset 13, else input 1.
// nullopt when not known; `*given` tells whether axes were given at all.
std::optional<std::vector<int64_t>> SqueezeAxes(NodeContext& ctx, bool* given) {
  if (ctx.opset() < 13) {
    *given = ctx.has_attr("axes");
    return ctx.attr_ints("axes");
  }
  *given = ctx.has_input(1);
  return ctx.input_ints(1);
}

}  // namespace

void ShapeReshape(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  std::optional<Dims> target;
  if (ctx.opset() < 5) {
    if (std::optional<std::vector<int64_t>> s = ctx.attr_ints("shape")) target = DimsOf(*s);
  } else if (const Dims* d = ctx.input_data(1)) {
    target = *d;
  }
  if (!target) {
    const Dims* s = ctx.input_shape(1);
    if (s != nullptr && s->size() == 1 && (*s)[0].value && ctx.CheckRank(*(*s)[0].value, "output")) {
      ctx.set_shape(0, Dims(static_cast<size_t>(*(*s)[0].value)));
    }
    return;
  }
  if (!ctx.CheckRank(static_cast<int64_t>(target->size()), "output")) return;
  std::optional<Dims> out = ReshapeDims(ctx, in, *target);
  if (!out) return;
  ctx.set_shape(0, std::move(*out));
  if (const Dims* data = ctx.input_data(0)) ctx.set_data(0, *data);
}

void ShapeFlatten(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) {  // whatever the input's rank, the output is 2-D
    ctx.set_shape(0, {Dim::Unknown(), Dim::Unknown()});
    return;
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -rank || axis > rank || (axis < 0 && ctx.opset() < 11)) {
    ctx.Fail(absl::StrCat("axis ", axis, " is out of range for rank ", rank, " (expected ",
                          ctx.opset() < 11 ? 0 : -rank, " to ", rank, ")"));
    return;
  }
  if (axis < 0) axis += rank;
  std::span<const Dim> dims(*in);
  Dim outer = ctx.Product(dims.first(static_cast<size_t>(axis)));
  Dim inner = ctx.Product(dims.subspan(static_cast<size_t>(axis)));
  ctx.set_shape(0, {outer, inner});
}

void ShapeSqueeze(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  bool given = false;
  std::optional<std::vector<int64_t>> axes = SqueezeAxes(ctx, &given);
  if (in == nullptr || (given && !axes)) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  std::vector<bool> drop(in->size(), false);
  if (!given || axes->empty()) {
    for (size_t i = 0; i < in->size(); ++i) {
      if (!(*in)[i].value) return;  // cannot tell whether it is 1
      drop[i] = *(*in)[i].value == 1;
    }
  } else {
    for (int64_t a : *axes) {
      std::optional<int64_t> axis = ctx.NormalizeAxis(a, rank);
      if (!axis) return;
      const Dim& d = (*in)[static_cast<size_t>(*axis)];
      if (d.value && *d.value != 1) {
        ctx.Fail(absl::StrCat("cannot squeeze axis ", a, " of size ", *d.value, " (input shape ", DimsToString(*in),
                              ")"));
        return;
      }
      drop[static_cast<size_t>(*axis)] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < in->size(); ++i) {
    if (!drop[i]) out.push_back((*in)[i]);
  }
  ctx.set_shape(0, std::move(out));
  if (const Dims* data = ctx.input_data(0)) ctx.set_data(0, *data);
}

void ShapeUnsqueeze(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  bool given = false;
  std::optional<std::vector<int64_t>> axes = SqueezeAxes(ctx, &given);
  if (in == nullptr || !axes) return;
  std::optional<int64_t> rank = CheckedAdd(static_cast<int64_t>(in->size()), static_cast<int64_t>(axes->size()));
  if (!rank || !ctx.CheckRank(*rank, "output")) return;
  std::vector<bool> inserted(static_cast<size_t>(*rank), false);
  for (int64_t a : *axes) {
    std::optional<int64_t> axis = ctx.NormalizeAxis(a, *rank);
    if (!axis) return;
    if (inserted[static_cast<size_t>(*axis)]) {
      ctx.Fail(absl::StrCat("axes ", IntsToString(*axes), " repeat axis ", *axis));
      return;
    }
    inserted[static_cast<size_t>(*axis)] = true;
  }
  Dims out;
  size_t next = 0;
  for (bool one : inserted) out.push_back(one ? Dim::Of(1) : (*in)[next++]);
  ctx.set_shape(0, std::move(out));
  if (const Dims* data = ctx.input_data(0)) ctx.set_data(0, *data);
}

void ShapeTranspose(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  const int64_t rank = static_cast<int64_t>(in->size());
  std::vector<int64_t> perm;
  // A perm that is present but empty is not the default: runtimes reject it
  // for any input of rank above 0.
  if (std::optional<std::vector<int64_t>> p = ctx.attr_ints("perm")) {
    perm = *p;
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    ctx.Fail(absl::StrCat("perm ", IntsToString(perm), " has ", perm.size(), " values for an input of rank ", rank));
    return;
  }
  std::vector<bool> used(perm.size(), false);
  Dims out;
  for (int64_t p : perm) {
    std::optional<int64_t> axis = ctx.NormalizeAxis(p, rank, "perm value");
    if (!axis) return;
    if (used[static_cast<size_t>(*axis)]) {
      ctx.Fail(absl::StrCat("perm ", IntsToString(perm), " repeats axis ", *axis));
      return;
    }
    used[static_cast<size_t>(*axis)] = true;
    out.push_back((*in)[static_cast<size_t>(*axis)]);
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeExpand(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  const Dims* target = ctx.input_data(1);
  if (target == nullptr) {
    const Dims* s = ctx.input_shape(1);
    if (in != nullptr && s != nullptr && s->size() == 1 && (*s)[0].value) {
      int64_t rank = std::max<int64_t>(*(*s)[0].value, static_cast<int64_t>(in->size()));
      if (ctx.CheckRank(rank, "output")) ctx.set_shape(0, Dims(static_cast<size_t>(rank)));
    }
    return;
  }
  if (!ctx.CheckRank(static_cast<int64_t>(target->size()), "output")) return;
  for (const Dim& d : *target) {
    if (d.value && *d.value < 0) {
      ctx.Fail(absl::StrCat("shape ", DimsToString(*target), " has the negative value ", *d.value));
      return;
    }
  }
  if (in == nullptr) return;
  const Dims* shapes[] = {in, target};
  if (std::optional<Dims> out = ctx.Broadcast(shapes)) ctx.set_shape(0, std::move(*out));
}

void ShapeTile(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr || ctx.opset() < 6) return;
  std::optional<std::vector<int64_t>> repeats = ctx.input_ints(1);
  if (!repeats) {
    ctx.set_shape(0, Dims(in->size()));
    return;
  }
  if (repeats->size() != in->size()) {
    ctx.Fail(absl::StrCat("repeats ", IntsToString(*repeats), " has ", repeats->size(),
                          " values for an input of rank ", in->size()));
    return;
  }
  Dims out;
  for (size_t i = 0; i < in->size(); ++i) {
    if ((*repeats)[i] < 0) {
      ctx.Fail(absl::StrCat("repeats ", IntsToString(*repeats), " has the negative value ", (*repeats)[i]));
      return;
    }
    out.push_back(ctx.Mul((*in)[i], Dim::Of((*repeats)[i])));
    if (ctx.failed()) return;
  }
  ctx.set_shape(0, std::move(out));
}

// DepthToSpace: [N, C, H, W] -> [N, C/(b*b), H*b, W*b]; SpaceToDepth the reverse.
void ShapeDepthToSpace(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  if (in->size() != 4) {
    ctx.Fail(absl::StrCat("input must have rank 4, got rank ", in->size()));
    return;
  }
  const int64_t b = ctx.attr_int("blocksize", 0);
  std::optional<int64_t> bb = CheckedMul(b, b);
  if (b < 1 || !bb) {
    ctx.Fail(absl::StrCat("attribute 'blocksize' is ", b, ", expected a positive value"));
    return;
  }
  const bool to_space = ctx.op() == "DepthToSpace";
  // Divides the dim at `i` by `by`; fails when it does not divide evenly.
  auto divide = [&](size_t i, int64_t by) -> std::optional<Dim> {
    const Dim& d = (*in)[i];
    if (!d.value) return Dim::Unknown();
    if (*d.value % by != 0) {
      ctx.Fail(absl::StrCat("dim ", i, " of input ", DimsToString(*in), " is not divisible by ", by));
      return std::nullopt;
    }
    return Dim::Of(*d.value / by);
  };
  Dims out = {(*in)[0]};
  if (to_space) {
    std::optional<Dim> c = divide(1, *bb);
    if (!c) return;
    out.push_back(*c);
    out.push_back(ctx.Mul((*in)[2], Dim::Of(b)));
    out.push_back(ctx.Mul((*in)[3], Dim::Of(b)));
  } else {
    std::optional<Dim> h = divide(2, b);
    std::optional<Dim> w = h ? divide(3, b) : std::nullopt;
    if (!w) return;
    out.push_back(ctx.Mul((*in)[1], Dim::Of(*bb)));
    out.push_back(*h);
    out.push_back(*w);
  }
  if (!ctx.failed()) ctx.set_shape(0, std::move(out));
}

}  // namespace onnxkit::infer
