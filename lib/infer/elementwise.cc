// Shape functions of elementwise ops: unary ops (output shaped like the
// first input), multidirectional broadcasting (binary and variadic ops,
// Where), and ops that are elementwise but type their output from an
// attribute (Cast, random *Like ops, quantization, BitCast).
//
//   Add([2, 3, 4], [4])   -> [2, 3, 4]
//   Add([2, 3], [4])      -> E0601 incompatible dims 3 and 4
//   Cast(x: [2] int64, to=FLOAT) -> tensor(float)[2]
//
// Shape data (Shape -> Add -> Reshape) flows through Add/Sub/Mul/Div/Max/Min
// and Cast/Identity when the contents are known.
#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <utility>

#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/infer/tensor_state.h"
#include "lib/base/data_type.h"

namespace onnxkit::infer {
namespace {

// Elementwise `fn` on the data of inputs 0 and 1 (same size, or one of one
// element), into output 0.
void PropagateBinaryData(NodeContext& ctx,
                         const std::function<std::optional<int64_t>(int64_t, int64_t)>& fn) {
  const Dims* a = ctx.input_data(0);
  const Dims* b = ctx.input_data(1);
  if (a == nullptr || b == nullptr) return;
  size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return;
  Dims out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim& x = (*a)[a->size() == 1 ? 0 : i];
    const Dim& y = (*b)[b->size() == 1 ? 0 : i];
    std::optional<int64_t> r;
    if (x.value && y.value) r = fn(*x.value, *y.value);
    if (r) {
      out.push_back(Dim::Of(*r));
    } else if (ctx.op() == "Mul" && x.symbolic() && y.Is(1)) {
      out.push_back(x);
    } else if (ctx.op() == "Mul" && y.symbolic() && x.Is(1)) {
      out.push_back(y);
    } else if ((ctx.op() == "Add" || ctx.op() == "Sub") && x.symbolic() && y.Is(0)) {
      out.push_back(x);
    } else {
      out.push_back(Dim::Unknown());
    }
  }
  ctx.set_data(0, std::move(out));
}

bool IsIntegerType(int32_t t) {
  switch (t) {
    case pb::kInt8:
    case pb::kUint8:
    case pb::kInt16:
    case pb::kUint16:
    case pb::kInt32:
    case pb::kUint32:
    case pb::kInt64:
    case pb::kUint64:
    case pb::kBool:
      return true;
    default:
      return false;
  }
}

// True when integer `v` is representable in integer type `t`.
bool FitsIn(int64_t v, int32_t t) {
  switch (t) {
    case pb::kInt8:
      return v >= -128 && v <= 127;
    case pb::kUint8:
      return v >= 0 && v <= 255;
    case pb::kInt16:
      return v >= -32768 && v <= 32767;
    case pb::kUint16:
      return v >= 0 && v <= 65535;
    case pb::kInt32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case pb::kUint32:
      return v >= 0 && v <= std::numeric_limits<uint32_t>::max();
    case pb::kInt64:
    case pb::kUint64:
      return t == pb::kInt64 || v >= 0;
    default:
      return false;
  }
}

}  // namespace

void ShapeUnary(NodeContext& ctx) { ctx.PropagateShape(0, 0); }

void ShapeNeg(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  const Dims* data = ctx.input_data(0);
  if (data == nullptr) return;
  Dims out;
  for (const Dim& d : *data) {
    std::optional<int64_t> v = d.value ? SignedSub(0, *d.value) : std::nullopt;
    out.push_back(v ? Dim::Of(*v) : Dim::Unknown());
  }
  ctx.set_data(0, std::move(out));
}

void ShapeNot(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  const Dims* data = ctx.input_data(0);
  if (data == nullptr) return;
  Dims out;
  for (const Dim& d : *data) out.push_back(d.value ? Dim::Of(*d.value == 0 ? 1 : 0) : Dim::Unknown());
  ctx.set_data(0, std::move(out));
}

void ShapeIdentity(NodeContext& ctx) {
  if (const Type* t = ctx.input_type(0)) ctx.set_type(0, *t);
  if (const Dims* d = ctx.input_data(0)) ctx.set_data(0, *d);
  if (const std::vector<double>* f = ctx.input_floats(0)) ctx.output(0)->float_data = *f;
}

void ShapeBroadcast(NodeContext& ctx) {
  // Before opset 7 the arithmetic and logical ops broadcast B onto A
  // (`broadcast` attribute): the output is shaped like A.
  if (ctx.opset() < 7 && ctx.num_inputs() == 2 && ctx.op() != "Max" && ctx.op() != "Min" &&
      ctx.op() != "Sum" && ctx.op() != "Mean") {
    ctx.PropagateShape(0, 0);
  } else {
    std::vector<const Dims*> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.has_input(i)) shapes.push_back(ctx.input_shape(i));
    }
    if (std::optional<Dims> out = ctx.Broadcast(shapes)) ctx.set_shape(0, std::move(*out));
  }
  const std::string& op = ctx.op();
  if (op == "Add") {
    PropagateBinaryData(ctx, SignedAdd);
  } else if (op == "Sub") {
    PropagateBinaryData(ctx, SignedSub);
  } else if (op == "Mul") {
    PropagateBinaryData(ctx, SignedMul);
  } else if (op == "Div") {
    PropagateBinaryData(ctx, SignedDiv);
  } else if (op == "Max" && ctx.num_inputs() == 2) {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(std::max(a, b)); });
  } else if (op == "Min" && ctx.num_inputs() == 2) {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(std::min(a, b)); });
  } else if (op == "Equal") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a == b); });
  } else if (op == "Less") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a < b); });
  } else if (op == "LessOrEqual") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a <= b); });
  } else if (op == "Greater") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a > b); });
  } else if (op == "GreaterOrEqual") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a >= b); });
  } else if (op == "And") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a != 0 && b != 0); });
  } else if (op == "Or") {
    PropagateBinaryData(ctx, [](int64_t a, int64_t b) { return std::optional<int64_t>(a != 0 || b != 0); });
  }
}

void ShapeCast(NodeContext& ctx) {
  int32_t to = 0;
  if (ctx.op() == "CastLike") {
    to = ctx.input_elem(1);
  } else if (const ir::Attribute* a = ctx.attr("to")) {
    // Cast-1 names the type as a string ("FLOAT"); later versions an int.
    if (a->type() == pb::kAttrInt) {
      to = static_cast<int32_t>(a->proto.i);
    } else if (a->type() == pb::kAttrString) {
      std::string name = a->proto.s;
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      to = DataTypeFromName(name).value_or(0);
    }
  }
  if (to != 0) ctx.set_elem(0, to);
  ctx.PropagateShape(0, 0);
  const Dims* data = ctx.input_data(0);
  if (data == nullptr || !IsIntegerType(ctx.input_elem(0)) || !IsIntegerType(to) || to == pb::kBool) return;
  Dims out = *data;
  for (Dim& d : out) {
    if (d.value && !FitsIn(*d.value, to)) d = Dim::Unknown();
  }
  ctx.set_data(0, std::move(out));
}

// Dropout: output like the input; the optional mask the same shape.
void ShapeDropout(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  ctx.PropagateShape(0, 1);
}

// Bernoulli, RandomNormalLike, RandomUniformLike, EyeLike: output shaped like
// the input, element type from `dtype` or else the input's.
void ShapeLikeWithDtype(NodeContext& ctx) {
  int64_t dtype = ctx.attr_int("dtype", 0);
  if (dtype != 0) {
    ctx.set_elem(0, static_cast<int32_t>(dtype));
  } else {
    ctx.PropagateElem(0, 0);
  }
  if (ctx.op() == "EyeLike") {
    if (std::optional<int64_t> rank = ctx.input_rank(0); rank && *rank != 2) {
      ctx.Fail("input must have rank 2, got rank " + std::to_string(*rank));
      return;
    }
  }
  ctx.PropagateShape(0, 0);
}

void ShapeQuantizeLinear(NodeContext& ctx) {
  if (ctx.has_input(2)) {
    ctx.PropagateElem(2, 0);
  } else if (int64_t dtype = ctx.attr_int("output_dtype", 0); dtype != 0) {
    ctx.set_elem(0, static_cast<int32_t>(dtype));
  } else {
    ctx.set_elem(0, pb::kUint8);
  }
  ctx.PropagateShape(0, 0);
}

void ShapeDequantizeLinear(NodeContext& ctx) {
  if (ctx.opset() >= 23) {
    int64_t dtype = ctx.attr_int("output_dtype", 0);
    if (dtype != 0) {
      ctx.set_elem(0, static_cast<int32_t>(dtype));
    } else {
      ctx.PropagateElem(1, 0);
    }
  }
  ctx.PropagateShape(0, 0);
}

void ShapeDynamicQuantizeLinear(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  ctx.set_shape(1, {});
  ctx.set_shape(2, {});
}

// BitCast: the element type of `to`; the shape stays when the widths match.
void ShapeBitCast(NodeContext& ctx) {
  const int32_t to = static_cast<int32_t>(ctx.attr_int("to", 0));
  if (to != 0) ctx.set_elem(0, to);
  if (DataTypeBits(to) > 0 && DataTypeBits(to) == DataTypeBits(ctx.input_elem(0))) ctx.PropagateShape(0, 0);
}

}  // namespace onnxkit::infer
