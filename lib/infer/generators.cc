// Shape functions of ops that create tensors from attributes or constant
// inputs: Constant, ConstantOfShape, Range, RandomNormal/RandomUniform,
// Multinomial, the window functions, MelWeightMatrix.
//
//   Constant(value_ints=[2, 3])        -> tensor(int64)[2] holding [2, 3]
//   ConstantOfShape([2, 3], value=int) -> tensor(int32)[2, 3]
//   ConstantOfShape([-2])              -> E0601 negative dim
//   Range(0, 10, 3)                    -> [4]
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/infer/tensor_state.h"

namespace onnxkit::infer {

void ShapeConstant(NodeContext& ctx) {
  for (const ir::Attribute& a : ctx.node().attributes()) {
    const pb::AttributeProto& p = a.proto;
    ValueState s;
    if (a.name() == "value" && p.t) {
      s = StateFromTensor(*p.t);
    } else if (a.name() == "sparse_value" && p.sparse_tensor) {
      s = StateFromSparseTensor(*p.sparse_tensor);
    } else if (a.name() == "value_int") {
      s.type = TensorOf(pb::kInt64, Dims{});
      s.data = Dims{Dim::Of(p.i)};
    } else if (a.name() == "value_ints") {
      s.type = TensorOf(pb::kInt64, Dims{Dim::Of(static_cast<int64_t>(p.ints.size()))});
      if (static_cast<int64_t>(p.ints.size()) <= kMaxDataElements) s.data = DimsOf(p.ints);
    } else if (a.name() == "value_float") {
      s.type = TensorOf(pb::kFloat, Dims{});
      s.float_data = std::vector<double>{p.f};
    } else if (a.name() == "value_floats") {
      s.type = TensorOf(pb::kFloat, Dims{Dim::Of(static_cast<int64_t>(p.floats.size()))});
    } else if (a.name() == "value_string") {
      s.type = TensorOf(pb::kString, Dims{});
    } else if (a.name() == "value_strings") {
      s.type = TensorOf(pb::kString, Dims{Dim::Of(static_cast<int64_t>(p.strings.size()))});
    } else {
      continue;
    }
    if (ValueState* out = ctx.output(0)) *out = std::move(s);
    return;
  }
}

void ShapeConstantOfShape(NodeContext& ctx) {
  const ir::Attribute* value = ctx.attr("value");
  const pb::TensorProto* v = value != nullptr && value->proto.t ? &*value->proto.t : nullptr;
  ctx.set_elem(0, v != nullptr ? v->data_type : pb::kFloat);
  const Dims* shape = ctx.input_data(0);
  if (shape == nullptr) {
    const Dims* s = ctx.input_shape(0);
    if (s != nullptr && s->size() == 1 && (*s)[0].value && ctx.CheckRank(*(*s)[0].value, "output")) {
      ctx.set_shape(0, Dims(static_cast<size_t>(*(*s)[0].value)));
    }
    return;
  }
  for (const Dim& d : *shape) {
    if (d.value && *d.value < 0) {
      ctx.Fail(absl::StrCat("input shape ", DimsToString(*shape), " has the negative dim ", *d.value));
      return;
    }
  }
  ctx.set_shape(0, *shape);
  // A small integer fill carries data (e.g. ConstantOfShape -> Concat -> Reshape).
  if (v == nullptr) return;
  ValueState fill = StateFromTensor(*v);
  std::optional<std::vector<int64_t>> dims = KnownValues(*shape);
  if (!fill.data || fill.data->size() != 1 || !dims) return;
  int64_t count = 1;
  for (int64_t d : *dims) {
    if (d > kMaxDataElements || (count *= d) > kMaxDataElements) return;
  }
  ctx.set_data(0, Dims(static_cast<size_t>(count), (*fill.data)[0]));
}

namespace {

// Elements of Range(start, limit, delta): max(ceil((limit - start) / delta), 0).
std::optional<int64_t> RangeCount(NodeContext& ctx) {
  std::optional<int64_t> start = ctx.input_scalar(0);
  std::optional<int64_t> limit = ctx.input_scalar(1);
  std::optional<int64_t> delta = ctx.input_scalar(2);
  if (start && limit && delta) {
    if (*delta == 0) {
      ctx.Fail("delta is 0");
      return std::nullopt;
    }
    __int128 span = static_cast<__int128>(*limit) - *start;
    __int128 d = *delta;
    __int128 n = span / d + ((span % d != 0 && ((span > 0) == (d > 0))) ? 1 : 0);
    if (n > std::numeric_limits<int64_t>::max()) {
      ctx.Fail("the number of elements overflows int64");
      return std::nullopt;
    }
    return static_cast<int64_t>(n > 0 ? n : 0);
  }
  const std::vector<double>* fs = ctx.input_floats(0);
  const std::vector<double>* fl = ctx.input_floats(1);
  const std::vector<double>* fd = ctx.input_floats(2);
  if (fs == nullptr || fl == nullptr || fd == nullptr || fs->size() != 1 || fl->size() != 1 || fd->size() != 1) {
    return std::nullopt;
  }
  double n;
  if (ctx.input_elem(0) == pb::kFloat) {  // onnx computes in the input type
    n = std::ceil(static_cast<double>((static_cast<float>((*fl)[0]) - static_cast<float>((*fs)[0])) /
                                      static_cast<float>((*fd)[0])));
  } else {
    n = std::ceil(((*fl)[0] - (*fs)[0]) / (*fd)[0]);
  }
  if (std::isnan(n) || n >= 9.2e18) {
    ctx.Fail("the number of elements is not finite or overflows int64");
    return std::nullopt;
  }
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

}  // namespace

void ShapeRange(NodeContext& ctx) {
  std::optional<int64_t> n = RangeCount(ctx);
  if (ctx.failed()) return;
  ctx.set_shape(0, {n ? Dim::Of(*n) : Dim::Unknown()});
  if (!n || *n > kMaxDataElements || !ctx.input_scalar(0)) return;
  Dims data;
  int64_t v = *ctx.input_scalar(0);
  const int64_t delta = *ctx.input_scalar(2);
  for (int64_t i = 0; i < *n; ++i) {
    data.push_back(Dim::Of(v));
    std::optional<int64_t> next = SignedAdd(v, delta);
    if (!next) return;
    v = *next;
  }
  ctx.set_data(0, std::move(data));
}

// RandomNormal, RandomUniform: `shape` and `dtype` attributes.
void ShapeRandom(NodeContext& ctx) {
  ctx.set_elem(0, static_cast<int32_t>(ctx.attr_int("dtype", pb::kFloat)));
  std::optional<std::vector<int64_t>> shape = ctx.attr_ints("shape");
  if (!shape) return;
  Dims out;
  for (int64_t d : *shape) {
    if (d < 0) {
      ctx.Fail(absl::StrCat("attribute 'shape' ", IntsToString(*shape), " has the negative dim ", d));
      return;
    }
    out.push_back(Dim::Of(d));
  }
  ctx.set_shape(0, std::move(out));
}

void ShapeMultinomial(NodeContext& ctx) {
  ctx.set_elem(0, static_cast<int32_t>(ctx.attr_int("dtype", pb::kInt32)));
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  if (in->size() != 2) {
    ctx.Fail(absl::StrCat("input must have rank 2, got rank ", in->size()));
    return;
  }
  ctx.set_shape(0, {(*in)[0], Dim::Of(ctx.attr_int("sample_size", 1))});
}

// HannWindow, HammingWindow, BlackmanWindow: [size].
void ShapeWindow(NodeContext& ctx) {
  ctx.set_elem(0, static_cast<int32_t>(ctx.attr_int("output_datatype", pb::kFloat)));
  std::optional<int64_t> size = ctx.input_scalar(0);
  if (size && *size < 0) {
    ctx.Fail(absl::StrCat("size ", *size, " is negative"));
    return;
  }
  ctx.set_shape(0, {size ? Dim::Of(*size) : Dim::Unknown()});
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins].
void ShapeMelWeightMatrix(NodeContext& ctx) {
  ctx.set_elem(0, static_cast<int32_t>(ctx.attr_int("output_datatype", pb::kFloat)));
  std::optional<int64_t> bins = ctx.input_scalar(0);
  std::optional<int64_t> dft = ctx.input_scalar(1);
  if ((bins && *bins < 0) || (dft && *dft < 0)) {
    ctx.Fail("num_mel_bins and dft_length must not be negative");
    return;
  }
  ctx.set_shape(0, {dft ? Dim::Of(*dft / 2 + 1) : Dim::Unknown(), bins ? Dim::Of(*bins) : Dim::Unknown()});
}

}  // namespace onnxkit::infer
