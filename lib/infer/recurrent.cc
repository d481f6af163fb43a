// Shape functions of sequence models: RNN, GRU, LSTM (layout 0 and 1,
// forward/reverse/bidirectional), Attention (3-D and 4-D inputs, past/present
// key and value caches), FlexAttention, LinearAttention, CausalConvWithState.
//
//   LSTM(X [7, 2, 10], hidden_size=16, direction=bidirectional)
//     -> Y [7, 2, 2, 16], Y_h [2, 2, 16], Y_c [2, 2, 16]
//   LSTM(X [7, 10]) -> E0601 input X must have rank 3
//   Attention(Q [B, 4, 8, 16], K [B, 2, 6, 16], V [B, 2, 6, 32]) -> Y [B, 4, 8, 32]
//   Attention(Q [B, S, 48], q_num_heads=3, kv_num_heads=3, K [B, L, 48], V [B, L, 30])
//     -> Y [B, S, 30]
//   LinearAttention(query [B, T, 64], key [B, T, 32], value [B, T, 32], q=8, kv=4 heads)
//     -> output [B, T, 64], present_state [B, 4, 8, 8]
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/base/strings.h"

namespace onnxkit::infer {
namespace {

// `hidden` / `heads` when both are known and divide evenly.
Dim PerHead(NodeContext& ctx, const Dim& hidden, int64_t heads, std::string_view what) {
  if (!hidden.value || heads <= 0) return Dim::Unknown();
  if (*hidden.value % heads != 0) {
    ctx.Fail(absl::StrCat(Sv(what), " hidden size ", *hidden.value, " is not divisible by ", heads, " heads"));
    return Dim::Unknown();
  }
  return Dim::Of(*hidden.value / heads);
}

}  // namespace

void ShapeAttention(NodeContext& ctx) {
  const Dims* q = ctx.input_shape(0);
  const Dims* k = ctx.input_shape(1);
  const Dims* v = ctx.input_shape(2);
  if (q == nullptr || k == nullptr || v == nullptr) return;
  if ((q->size() != 3 && q->size() != 4) || k->size() != q->size() || v->size() != q->size()) {
    ctx.Fail(absl::StrCat("Q ", DimsToString(*q), ", K ", DimsToString(*k), " and V ", DimsToString(*v),
                          " must all have rank 3 or all rank 4"));
    return;
  }
  const bool three_d = q->size() == 3;
  const int64_t q_heads = ctx.attr_int("q_num_heads", 0);
  const int64_t kv_heads = ctx.attr_int("kv_num_heads", 0);
  Dim batch = (*q)[0];
  Dim q_seq = three_d ? (*q)[1] : (*q)[2];
  Dim kv_seq = three_d ? (*k)[1] : (*k)[2];
  Dim qh = three_d ? (q_heads > 0 ? Dim::Of(q_heads) : Dim::Unknown()) : (*q)[1];
  Dim kvh = three_d ? (kv_heads > 0 ? Dim::Of(kv_heads) : Dim::Unknown()) : (*k)[1];
  Dim head = three_d ? PerHead(ctx, (*k)[2], kv_heads, "K") : (*k)[3];
  Dim v_head = three_d ? PerHead(ctx, (*v)[2], kv_heads, "V") : (*v)[3];
  if (ctx.failed()) return;
  if (three_d) {
    ctx.set_shape(0, {batch, q_seq, ctx.Mul(qh, v_head)});
  } else {
    ctx.set_shape(0, {batch, qh, q_seq, v_head});
  }
  Dim total = kv_seq;
  if (ctx.has_input(4)) {
    const Dims* past = ctx.input_shape(4);
    total = past != nullptr && past->size() == 4 ? ctx.Add((*past)[2], kv_seq) : Dim::Unknown();
  }
  ctx.set_shape(1, {batch, kvh, total, head});
  ctx.set_shape(2, {batch, kvh, total, v_head});
  ctx.set_shape(3, {batch, qh, q_seq, total});
}

void ShapeFlexAttention(NodeContext& ctx) {
  const Dims* q = ctx.input_shape(0);
  const Dims* v = ctx.input_shape(2);
  if (q == nullptr || v == nullptr) return;
  if (q->size() != 4 || v->size() != 4) {
    ctx.Fail(absl::StrCat("Q ", DimsToString(*q), " and V ", DimsToString(*v), " must have rank 4"));
    return;
  }
  ctx.set_shape(0, {(*q)[0], (*q)[1], (*q)[2], (*v)[3]});
}

void ShapeLinearAttention(NodeContext& ctx) {
  const Dims* q = ctx.input_shape(0);
  const Dims* k = ctx.input_shape(1);
  const Dims* v = ctx.input_shape(2);
  if (q == nullptr || k == nullptr || v == nullptr) return;
  if (q->size() != 3 || k->size() != 3 || v->size() != 3) {
    ctx.Fail(absl::StrCat("query ", DimsToString(*q), ", key ", DimsToString(*k), " and value ", DimsToString(*v),
                          " must have rank 3"));
    return;
  }
  const int64_t q_heads = ctx.attr_int("q_num_heads", 0);
  const int64_t kv_heads = ctx.attr_int("kv_num_heads", 0);
  Dim dk = PerHead(ctx, (*k)[2], kv_heads, "key");
  Dim dv = PerHead(ctx, (*v)[2], kv_heads, "value");
  if (ctx.failed()) return;
  ctx.set_shape(0, {(*q)[0], (*q)[1], q_heads > 0 ? ctx.Mul(Dim::Of(q_heads), dv) : Dim::Unknown()});
  ctx.set_shape(1, {(*q)[0], kv_heads > 0 ? Dim::Of(kv_heads) : Dim::Unknown(), dk, dv});
  // Without past_state the state type S is bound by nothing: it is the
  // query's type.
  if (ctx.output(1) != nullptr && ctx.output(1)->type.elem_type == 0) ctx.PropagateElem(0, 1);
}

// CausalConvWithState: output shaped like the input [B, C, T]; the state
// keeps the last kernel - 1 steps: [B, C, K - 1].
void ShapeCausalConvWithState(NodeContext& ctx) {
  ctx.PropagateShape(0, 0);
  const Dims* x = ctx.input_shape(0);
  const Dims* w = ctx.input_shape(1);
  if (x == nullptr || w == nullptr || x->size() != 3 || w->empty()) return;
  const Dim& kernel = w->back();
  ctx.set_shape(1, {(*x)[0], (*x)[1], kernel.value && *kernel.value > 0 ? Dim::Of(*kernel.value - 1) : Dim::Unknown()});
}

void ShapeRecurrent(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr) return;
  if (x->size() != 3) {
    ctx.Fail(absl::StrCat("input X must have rank 3 ([seq_length, batch_size, input_size]), got rank ",
                          x->size()));
    return;
  }
  const bool batch_first = ctx.attr_int("layout", 0) != 0;
  const Dim& seq = (*x)[batch_first ? 1 : 0];
  const Dim& batch = (*x)[batch_first ? 0 : 1];
  const Dim dirs = Dim::Of(ctx.attr_string("direction", "forward") == "bidirectional" ? 2 : 1);
  Dim hidden = Dim::Unknown();
  if (std::optional<int64_t> h = ctx.node().GetInt("hidden_size")) {
    if (*h < 0) {
      ctx.Fail(absl::StrCat("attribute 'hidden_size' is negative (", *h, ")"));
      return;
    }
    hidden = Dim::Of(*h);
  } else if (const Dims* r = ctx.input_shape(2); r != nullptr && r->size() == 3) {
    hidden = (*r)[2];
  }
  if (batch_first) {
    ctx.set_shape(0, {batch, seq, dirs, hidden});
    ctx.set_shape(1, {batch, dirs, hidden});
    ctx.set_shape(2, {batch, dirs, hidden});
  } else {
    ctx.set_shape(0, {seq, dirs, batch, hidden});
    ctx.set_shape(1, {dirs, batch, hidden});
    ctx.set_shape(2, {dirs, batch, hidden});
  }
}

}  // namespace onnxkit::infer
