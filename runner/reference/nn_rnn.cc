// Reference kernels: RNN, GRU and LSTM (forward, reverse, bidirectional;
// activations with alpha/beta; clip; layout 0 and 1; sequence_lens;
// initial states; GRU linear_before_reset; LSTM peepholes and
// input_forget). One batch item and one direction at a time, in double.
#include "runner/reference/nn.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/rnn_options.h"

namespace onnxkit::runner::reference {
namespace {

using Cell = RnnCell;
using Activation = RnnActivation;
int Gates(Cell c) { return RnnGates(c); }
int ActivationsPerDirection(Cell c) { return RnnActivationsPerDirection(c); }

// Parses `activations` with their alphas and betas, consumed in order by the
// activations that take them (defaults as the standalone ops).
absl::StatusOr<std::vector<Activation>> ParseActivations(const ir::Node& node, Cell cell, int directions) {
  std::vector<std::string> names;
  if (const ir::Attribute* a = node.FindAttribute("activations"); a != nullptr) names = a->proto.strings;
  std::vector<float> alphas = AttrFloats(node, "activation_alpha"), betas = AttrFloats(node, "activation_beta");
  int per_dir = ActivationsPerDirection(cell);
  if (names.empty()) {
    static const char* kDefaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < directions; ++d) {
      for (int i = 0; i < per_dir; ++i) names.push_back(cell == Cell::kRnn ? "Tanh" : kDefaults[i]);
    }
  }
  // RNN's schema default lists two; a forward RNN uses the first.
  if (static_cast<int>(names.size()) > per_dir * directions && cell == Cell::kRnn) names.resize(static_cast<size_t>(per_dir * directions));
  if (static_cast<int>(names.size()) == per_dir && directions == 2) {
    std::vector<std::string> forward = names;  // inserting a vector's own range into it is undefined
    names.insert(names.end(), forward.begin(), forward.end());
  }
  if (static_cast<int>(names.size()) != per_dir * directions) {
    return absl::InvalidArgumentError(absl::StrCat("activations has ", names.size(), " entries, expected ",
                                                   per_dir * directions));
  }
  struct Spec {
    const char* name;
    Activation::Kind kind;
    int params;  // 0: none, 1: alpha, 2: alpha and beta
    double alpha, beta;
  };
  static const Spec kSpecs[] = {
      {"relu", Activation::kRelu, 0, 0, 0},           {"tanh", Activation::kTanh, 0, 0, 0},
      {"sigmoid", Activation::kSigmoid, 0, 0, 0},     {"affine", Activation::kAffine, 2, 1, 0},
      {"leakyrelu", Activation::kLeakyRelu, 1, 0.01, 0}, {"thresholdedrelu", Activation::kThresholdedRelu, 1, 1, 0},
      {"scaledtanh", Activation::kScaledTanh, 2, 1, 1}, {"hardsigmoid", Activation::kHardSigmoid, 2, 0.2, 0.5},
      {"elu", Activation::kElu, 1, 1, 0},             {"softsign", Activation::kSoftsign, 0, 0, 0},
      {"softplus", Activation::kSoftplus, 0, 0, 0},
  };
  std::vector<Activation> out;
  size_t ai = 0, bi = 0;
  for (const std::string& name : names) {
    std::string lower = absl::AsciiStrToLower(name);
    const Spec* spec = nullptr;
    for (const Spec& s : kSpecs) {
      if (lower == s.name) spec = &s;
    }
    if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown activation '", name, "'"));
    Activation act{spec->kind, spec->alpha, spec->beta};
    if (spec->params >= 1 && ai < alphas.size()) act.alpha = alphas[ai++];
    if (spec->params >= 2 && bi < betas.size()) act.beta = betas[bi++];
    out.push_back(act);
  }
  return out;
}

// Weights of one direction, as doubles.
struct DirWeights {
  const double* w;   // [G*H, I]
  const double* r;   // [G*H, H]
  const double* wb;  // [G*H] or null
  const double* rb;  // [G*H] or null
  const double* p;   // LSTM peepholes [3*H] (i, o, f) or null
};

class RnnKernel : public Kernel {
 public:
  explicit RnnKernel(RnnOptions o) : o_(std::move(o)) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[8] = {};
    int num_in = o_.cell == Cell::kLstm ? 8 : 6;
    for (int i = 0; i < num_in; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
    }
    const Tensor& x = *in[0];
    if (x.dtype() != 1 && x.dtype() != 10 && x.dtype() != 11 && x.dtype() != 16) {
      return absl::UnimplementedError(absl::StrCat("X ", DescribeTensor(x), " is not a float tensor"));
    }
    for (int i = 1; i < num_in; ++i) {
      if (i != 4 && in[i] != nullptr && in[i]->dtype() != x.dtype()) {
        return absl::InvalidArgumentError(absl::StrCat("input ", i, " ", DescribeTensor(*in[i]), " must match X's type"));
      }
    }
    if (x.rank() != 3) return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(x), " must be 3-D"));
    int64_t seq = o_.batch_first ? x.dim(1) : x.dim(0), batch = o_.batch_first ? x.dim(0) : x.dim(1);
    int64_t isz = x.dim(2), g = Gates(o_.cell), nd = o_.directions;
    // hidden_size may be omitted: R [num_directions, gates * H, H] gives it.
    int64_t h = o_.hidden > 0 ? o_.hidden : (in[2]->rank() == 3 ? in[2]->dim(2) : 0);
    auto expect = [&](int i, std::vector<int64_t> shape, const char* name) -> absl::Status {
      if (in[i] != nullptr && in[i]->shape() != shape) {
        return absl::InvalidArgumentError(absl::StrCat(name, " ", DescribeTensor(*in[i]), " must be ", ShapeString(shape)));
      }
      return absl::OkStatus();
    };
    std::vector<int64_t> state_shape = o_.batch_first ? std::vector<int64_t>{batch, nd, h} : std::vector<int64_t>{nd, batch, h};
    ONNXKIT_RETURN_IF_ERROR(expect(1, {nd, g * h, isz}, "W"));
    ONNXKIT_RETURN_IF_ERROR(expect(2, {nd, g * h, h}, "R"));
    ONNXKIT_RETURN_IF_ERROR(expect(3, {nd, 2 * g * h}, "B"));
    ONNXKIT_RETURN_IF_ERROR(expect(5, state_shape, "initial_h"));
    if (o_.cell == Cell::kLstm) {
      ONNXKIT_RETURN_IF_ERROR(expect(6, state_shape, "initial_c"));
      ONNXKIT_RETURN_IF_ERROR(expect(7, {nd, 3 * h}, "P"));
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
    if (in[4] != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(lens, ReadInt64s(*in[4]));
      if (static_cast<int64_t>(lens.size()) != batch) {
        return absl::InvalidArgumentError(absl::StrCat("sequence_lens ", DescribeTensor(*in[4]), " must have ", batch, " values"));
      }
      for (int64_t l : lens) {
        if (l < 0 || l > seq) return absl::InvalidArgumentError(absl::StrCat("sequence length ", l, " is outside [0, ", seq, "]"));
      }
    }
    std::vector<double> v[8];
    for (int i = 0; i < num_in; ++i) {
      if (i != 4 && in[i] != nullptr) v[i] = ToDoubles(*in[i]);
    }
    std::vector<double> y(static_cast<size_t>(seq * nd * batch * h), 0), yh(static_cast<size_t>(nd * batch * h), 0);
    std::vector<double> yc(yh.size(), 0);
    for (int64_t d = 0; d < nd; ++d) {
      DirWeights wts{v[1].data() + d * g * h * isz, v[2].data() + d * g * h * h,
                     v[3].empty() ? nullptr : v[3].data() + d * 2 * g * h,
                     v[3].empty() ? nullptr : v[3].data() + d * 2 * g * h + g * h,
                     v[7].empty() ? nullptr : v[7].data() + d * 3 * h};
      bool reverse = o_.reverse_only || d == 1;
      for (int64_t b = 0; b < batch; ++b) {
        // State index of (direction d, batch b) in the layout's state shape.
        int64_t si = o_.batch_first ? (b * nd + d) * h : (d * batch + b) * h;
        std::vector<double> hs(static_cast<size_t>(h), 0), cs(static_cast<size_t>(h), 0);
        if (!v[5].empty()) std::copy(v[5].begin() + si, v[5].begin() + si + h, hs.begin());
        if (!v[6].empty()) std::copy(v[6].begin() + si, v[6].begin() + si + h, cs.begin());
        int64_t len = lens[static_cast<size_t>(b)];
        for (int64_t s = 0; s < len; ++s) {
          int64_t t = reverse ? len - 1 - s : s;
          const double* xt = v[0].data() + (o_.batch_first ? (b * seq + t) : (t * batch + b)) * isz;
          Step(wts, d, xt, isz, h, hs, cs);
          int64_t yi = o_.batch_first ? ((b * seq + t) * nd + d) * h : ((t * nd + d) * batch + b) * h;
          std::copy(hs.begin(), hs.end(), y.begin() + yi);
        }
        std::copy(hs.begin(), hs.end(), yh.begin() + si);
        std::copy(cs.begin(), cs.end(), yc.begin() + si);
      }
    }
    std::vector<int64_t> y_shape = o_.batch_first ? std::vector<int64_t>{batch, seq, nd, h} : std::vector<int64_t>{seq, nd, batch, h};
    const std::vector<double>* outs[] = {&y, &yh, &yc};
    const std::vector<int64_t>* shapes[] = {&y_shape, &state_shape, &state_shape};
    for (int i = 0; i < (o_.cell == Cell::kLstm ? 3 : 2) && i < ctx.num_outputs(); ++i) {
      if (!ctx.OutputRequested(i)) continue;
      ONNXKIT_RETURN_IF_ERROR(Store(ctx, i, x.dtype(), *shapes[i], *outs[i]));
    }
    return absl::OkStatus();
  }

 private:
  static std::vector<double> ToDoubles(const Tensor& t) {
    std::vector<double> out;
    (void)VisitFloat(t.dtype(), [&](auto tag) -> absl::Status {
      std::vector<double> s;
      const double* p = ElementsAs<decltype(tag), double>(t, s);
      out.assign(p, p + t.size());
      return absl::OkStatus();
    });
    return out;
  }

  static absl::Status Store(KernelContext& ctx, int i, int32_t dtype, const std::vector<int64_t>& shape,
                            const std::vector<double>& values) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(i, dtype, shape));
    return VisitFloat(dtype, [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      for (size_t j = 0; j < values.size(); ++j) t->mutable_data<T>()[j] = static_cast<T>(values[j]);
      return absl::OkStatus();
    });
  }

  double Clip(double v) const { return o_.clip ? std::clamp(v, -*o_.clip, *o_.clip) : v; }

  // One time step of direction d: updates hidden state hs (and cell state cs).
  void Step(const DirWeights& w, int64_t d, const double* xt, int64_t isz, int64_t h, std::vector<double>& hs,
            std::vector<double>& cs) const {
    int64_t g = Gates(o_.cell);
    const Activation* act = o_.acts.data() + d * ActivationsPerDirection(o_.cell);
    // xw[j] = x . W[j] + Wb[j]; hr[j] = h . R[j] + Rb[j] for each gate row j.
    std::vector<double> xw(static_cast<size_t>(g * h)), hr(static_cast<size_t>(g * h));
    for (int64_t j = 0; j < g * h; ++j) {
      double a = w.wb ? w.wb[j] : 0, c = w.rb ? w.rb[j] : 0;
      for (int64_t i = 0; i < isz; ++i) a += xt[i] * w.w[j * isz + i];
      for (int64_t i = 0; i < h; ++i) c += hs[static_cast<size_t>(i)] * w.r[j * h + i];
      xw[static_cast<size_t>(j)] = a;
      hr[static_cast<size_t>(j)] = c;
    }
    auto at = [](std::vector<double>& v, int64_t i) -> double& { return v[static_cast<size_t>(i)]; };
    std::vector<double> next(static_cast<size_t>(h));
    switch (o_.cell) {
      case Cell::kRnn:
        for (int64_t i = 0; i < h; ++i) next[static_cast<size_t>(i)] = act[0](Clip(at(xw, i) + at(hr, i)));
        break;
      case Cell::kGru: {
        // Gates z, r, h.
        std::vector<double> r(static_cast<size_t>(h));
        for (int64_t i = 0; i < h; ++i) r[static_cast<size_t>(i)] = act[0](Clip(at(xw, h + i) + at(hr, h + i)));
        for (int64_t i = 0; i < h; ++i) {
          double z = act[0](Clip(at(xw, i) + at(hr, i)));
          double cand;
          if (o_.linear_before_reset) {
            cand = at(xw, 2 * h + i) + r[static_cast<size_t>(i)] * at(hr, 2 * h + i);
          } else {
            double rh = w.rb ? w.rb[2 * h + i] : 0;
            for (int64_t k = 0; k < h; ++k) rh += r[static_cast<size_t>(k)] * hs[static_cast<size_t>(k)] * w.r[(2 * h + i) * h + k];
            cand = at(xw, 2 * h + i) + rh;
          }
          double ht = act[1](Clip(cand));
          next[static_cast<size_t>(i)] = (1 - z) * ht + z * hs[static_cast<size_t>(i)];
        }
        break;
      }
      case Cell::kLstm:
        // Gates i, o, f, c; peepholes i, o, f.
        for (int64_t k = 0; k < h; ++k) {
          double c_prev = cs[static_cast<size_t>(k)];
          // Without P there is no peephole term at all (not 0 * c, which
          // would turn an infinite cell state into NaN).
          auto peep = [&](int64_t gate, double c) { return w.p ? w.p[gate * h + k] * c : 0.0; };
          double ig = act[0](Clip(at(xw, k) + at(hr, k) + peep(0, c_prev)));
          double fg = o_.input_forget ? 1 - ig
                                      : act[0](Clip(at(xw, 2 * h + k) + at(hr, 2 * h + k) + peep(2, c_prev)));
          double cg = act[1](Clip(at(xw, 3 * h + k) + at(hr, 3 * h + k)));
          double c = fg * c_prev + ig * cg;
          double og = act[0](Clip(at(xw, h + k) + at(hr, h + k) + peep(1, c)));
          cs[static_cast<size_t>(k)] = c;
          next[static_cast<size_t>(k)] = og * act[2](c);
        }
        break;
    }
    hs = std::move(next);
  }

  RnnOptions o_;
};

absl::StatusOr<std::unique_ptr<Kernel>> MakeRnnLike(const ir::Node& node, const KernelInfo& info, Cell cell) {
  ONNXKIT_ASSIGN_OR_RETURN(RnnOptions o, ParseRnnOptions(node, info, cell));
  return std::unique_ptr<Kernel>(new RnnKernel(std::move(o)));
}

}  // namespace

absl::StatusOr<RnnOptions> ParseRnnOptions(const ir::Node& node, const KernelInfo& info, RnnCell cell) {
  RnnOptions o;
  o.cell = cell;
  o.hidden = AttrInt(node, "hidden_size", 0);
  if (o.hidden < 0) return absl::InvalidArgumentError(absl::StrCat("hidden_size must be positive, got ", o.hidden));
  std::string dir = AttrString(node, "direction", "forward");
  if (dir == "bidirectional") {
    o.directions = 2;
  } else if (dir == "reverse") {
    o.reverse_only = true;
  } else if (dir != "forward" && dir != "foward") {  // GRU-1's schema default is misspelled
    return absl::InvalidArgumentError(absl::StrCat("direction '", dir, "' is not forward, reverse or bidirectional"));
  }
  int64_t layout = info.opset >= 14 ? AttrInt(node, "layout", 0) : 0;
  if (layout != 0 && layout != 1) return absl::InvalidArgumentError(absl::StrCat("layout must be 0 or 1, got ", layout));
  o.batch_first = layout == 1;
  if (node.GetFloat("clip")) {
    o.clip = *node.GetFloat("clip");
    if (!(*o.clip > 0)) return absl::InvalidArgumentError("clip must be positive");
  }
  o.linear_before_reset = AttrInt(node, "linear_before_reset", 0) != 0;
  o.input_forget = AttrInt(node, "input_forget", 0) != 0;
  ONNXKIT_ASSIGN_OR_RETURN(o.acts, ParseActivations(node, cell, o.directions));
  return o;
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRNN(const ir::Node& node, const KernelInfo& info) {
  return MakeRnnLike(node, info, Cell::kRnn);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeGRU(const ir::Node& node, const KernelInfo& info) {
  return MakeRnnLike(node, info, Cell::kGru);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeLSTM(const ir::Node& node, const KernelInfo& info) {
  return MakeRnnLike(node, info, Cell::kLstm);
}

}  // namespace onnxkit::runner::reference
