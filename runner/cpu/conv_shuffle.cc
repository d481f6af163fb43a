// Channel shuffles inside Conv sequences (conv_sequence.cc): checking a
// shuffle's Reshape shapes against its source and the strided 5-D views
// between which one reorder shuffles the channels.
#include <optional>
#include <vector>

#include "lib/io/proto.h"
#include "runner/cpu/conv_common.h"

namespace onnxkit::runner::cpu {

using dnnl::memory;

namespace {

// The shape a Reshape (allowzero 0) of a tensor of shape `in` to `spec`
// gives: 0 copies the input dim, -1 takes what is left; nullopt when the
// spec does not fit.
std::optional<std::vector<int64_t>> ReshapeTo(const std::vector<int64_t>& in, const Tensor& spec) {
  int64_t total = 1;
  for (int64_t d : in) total *= d;
  std::vector<int64_t> out(spec.data<int64_t>(), spec.data<int64_t>() + spec.size());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= in.size()) return std::nullopt;
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else if (out[i] <= 0 || out[i] > total) {
      return std::nullopt;
    } else {
      known *= out[i];
      if (known > total) return std::nullopt;
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    out[static_cast<size_t>(infer)] = total / known;
  }
  int64_t product = 1;
  for (int64_t d : out) product *= d;
  if (product != total) return std::nullopt;
  return out;
}

}  // namespace

// The 4-D strided `desc` ([N, C, H, W], no blocking) as [N, C/G, G, H, W]
// (G = `groups`): with `source`, element (n, i, j) is channel j * C/G + i
// (the value a channel shuffle reads); else channel i * G + j (the value
// it writes). nullopt when `desc` is blocked or not 4-D.
std::optional<memory::desc> ChannelView(const memory::desc& desc, int64_t groups, bool source) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.ndims != 4 || d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 ||
      d.offset0 != 0 || groups <= 0 || d.dims[1] % groups != 0)
    return std::nullopt;
  const dnnl_dims_t& st = d.format_desc.blocking.strides;
  const int64_t per_group = d.dims[1] / groups;
  memory::dims dims = {d.dims[0], per_group, groups, d.dims[2], d.dims[3]};
  memory::dims strides = {st[0], source ? st[1] : st[1] * groups, source ? st[1] * per_group : st[1], st[2], st[3]};
  return memory::desc(dims, static_cast<memory::data_type>(d.data_type), strides);
}

// Checks the shapes of stage `stage`'s channel shuffle against its source
// (`x_shape`, held as `current`) and sets `from`, the view it reads.
bool ShuffleViews(KernelContext& ctx, const SequenceStage& stage, const std::vector<int64_t>& x_shape,
                  const memory::desc& current, memory::desc* from) {
  absl::StatusOr<const Tensor*> shape = ctx.Input(stage.shuffle_shape);
  absl::StatusOr<const Tensor*> back = ctx.Input(stage.shuffle_back);
  if (!shape.ok() || !back.ok() || x_shape.size() != 4) return false;
  for (const Tensor* t : {*shape, *back}) {
    if (t->dtype() != pb::kInt64 || t->rank() != 1) return false;
  }
  std::optional<std::vector<int64_t>> split = ReshapeTo(x_shape, **shape);
  if (!split || split->size() != 5) return false;
  const std::vector<int64_t>& s = *split;
  const int64_t groups = s[1];
  std::optional<std::vector<int64_t>> to = ReshapeTo({s[0], s[2], s[1], s[3], s[4]}, **back);
  if (!to || *to != x_shape) return false;
  if (groups <= 0 || x_shape[1] % groups != 0 || s[0] != x_shape[0] || s[2] != x_shape[1] / groups ||
      s[3] != x_shape[2] || s[4] != x_shape[3])
    return false;
  bool ok = false;
  absl::Status status = Guard("shuffle view", [&] {
    std::optional<memory::desc> view = ChannelView(current, groups, /*source=*/true);
    if (view) *from = *view;
    ok = view.has_value();
  });
  return status.ok() && ok;
}

}  // namespace onnxkit::runner::cpu
