// Shape functions of recurrent ops: RNN, GRU, LSTM (layout 0 and 1,
// forward/reverse/bidirectional).
//
//   LSTM(X [7, 2, 10], hidden_size=16, direction=bidirectional)
//     -> Y [7, 2, 2, 16], Y_h [2, 2, 16], Y_c [2, 2, 16]
//   LSTM(X [7, 10]) -> E0601 input X must have rank 3
#include <utility>

#include "absl/strings/str_cat.h"
#include "checker/infer/context.h"
#include "checker/infer/shape_fns.h"

namespace onnxkit::checker::infer {

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

}  // namespace onnxkit::checker::infer
