// Reference kernels: the optimizers of ai.onnx.preview.training (version 1).
// Inputs are R (learning rate), T (update count), then n tensors of each
// group (X, G, and the optimizer's state); outputs are the updated X then
// the updated state, group by group. Computed in double, stored in X's type.
//
// Adagrad:  g = norm_coefficient * X + G; H' = H + g^2;
//           X' = X - R / (1 + T * decay_factor) * g / (sqrt(H') + epsilon)
// Momentum: g = norm_coefficient * X + G; V' = alpha * V + (T > 0 ? beta : 1) * g;
//           X' = X - R * V' (standard) or X - R * (g + alpha * V') (nesterov)
// Adam:     g = norm_coefficient * X + G; V' = alpha * V + (1 - alpha) * g;
//           H' = beta * H + (1 - beta) * g^2;
//           r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R;
//           X' = (1 - norm_coefficient_post) * (X - r * V' / (sqrt(H') + epsilon))
#include <cmath>
#include <functional>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"

namespace onnxkit::runner::reference {
namespace {

// One element's update: reads x, g and the state values, writes the new x
// and the new state values (same count).
using Update = std::function<void(double x, double g, const double* state, double* x_out, double* state_out)>;

absl::Status RunOptimizer(KernelContext& ctx, int state_groups, double* r, int64_t* t, const std::function<Update()>& make) {
  const int groups = 2 + state_groups;  // X, G, state...
  if (ctx.num_inputs() < 2 + groups || (ctx.num_inputs() - 2) % groups != 0 ||
      ctx.num_outputs() != (ctx.num_inputs() - 2) / groups * (1 + state_groups)) {
    return absl::InvalidArgumentError(absl::StrCat("expected R, T and ", groups, " groups of n tensors (", 1 + state_groups,
                                                   " groups of outputs), got ", ctx.num_inputs(), " inputs and ",
                                                   ctx.num_outputs(), " outputs"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* r_t, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t_t, ctx.Input(1));
  if ((r_t->dtype() != 1 && r_t->dtype() != 11) || r_t->size() != 1 || t_t->dtype() != 7 || t_t->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("R must be a float/double scalar and T an int64 scalar, got ",
                                                   DescribeTensor(*r_t), " and ", DescribeTensor(*t_t)));
  }
  *r = r_t->dtype() == 1 ? r_t->data<float>()[0] : r_t->data<double>()[0];
  *t = t_t->data<int64_t>()[0];
  const Update update = make();
  const int n = (ctx.num_inputs() - 2) / groups;
  for (int i = 0; i < n; ++i) {
    std::vector<const Tensor*> in;
    for (int k = 0; k < groups; ++k) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* v, ctx.Input(2 + k * n + i));
      if ((v->dtype() != 1 && v->dtype() != 11) || (!in.empty() && v->shape() != in[0]->shape())) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", i, " of input group ", k, " is ", DescribeTensor(*v),
                                                       ", expected float/double shaped like X"));
      }
      in.push_back(v);
    }
    std::vector<Tensor*> out;
    for (int k = 0; k <= state_groups; ++k) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * o, ctx.AllocateOutput(k * n + i, in[0]->dtype(), in[0]->shape()));
      out.push_back(o);
    }
    auto load = [](const Tensor& t, int64_t e) { return t.dtype() == 1 ? t.data<float>()[e] : t.data<double>()[e]; };
    auto store = [](Tensor& t, int64_t e, double v) {
      if (t.dtype() == 1) {
        t.mutable_data<float>()[e] = DoubleToFloat(v);
      } else {
        t.mutable_data<double>()[e] = v;
      }
    };
    std::vector<double> state(static_cast<size_t>(state_groups)), state_out(static_cast<size_t>(state_groups));
    for (int64_t e = 0; e < in[0]->size(); ++e) {
      for (int k = 0; k < state_groups; ++k) state[static_cast<size_t>(k)] = load(*in[static_cast<size_t>(2 + k)], e);
      double x_out = 0;
      update(load(*in[0], e), load(*in[1], e), state.data(), &x_out, state_out.data());
      store(*out[0], e, x_out);
      for (int k = 0; k < state_groups; ++k) store(*out[static_cast<size_t>(1 + k)], e, state_out[static_cast<size_t>(k)]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Adagrad(KernelContext& ctx) {
  const double decay = AttrFloat(ctx.node(), "decay_factor", 0), eps = AttrFloat(ctx.node(), "epsilon", 1e-6f);
  const double norm = AttrFloat(ctx.node(), "norm_coefficient", 0);
  double r = 0;
  int64_t t = 0;
  return RunOptimizer(ctx, 1, &r, &t, [&]() -> Update {
    const double rate = r / (1 + static_cast<double>(t) * decay);
    return [=](double x, double g, const double* h, double* x_out, double* h_out) {
      double gr = norm * x + g;
      h_out[0] = h[0] + gr * gr;
      *x_out = x - rate * gr / (std::sqrt(h_out[0]) + eps);
    };
  });
}

absl::Status Momentum(KernelContext& ctx) {
  const double alpha = AttrFloat(ctx.node(), "alpha", 0), beta = AttrFloat(ctx.node(), "beta", 0);
  const double norm = AttrFloat(ctx.node(), "norm_coefficient", 0);
  const std::string mode = AttrString(ctx.node(), "mode", "standard");
  if (mode != "standard" && mode != "nesterov") {
    return absl::InvalidArgumentError(absl::StrCat("mode must be standard or nesterov, got '", mode, "'"));
  }
  const bool nesterov = mode == "nesterov";
  double r = 0;
  int64_t t = 0;
  return RunOptimizer(ctx, 1, &r, &t, [&]() -> Update {
    const double beta_adj = t > 0 ? beta : 1;
    return [=](double x, double g, const double* v, double* x_out, double* v_out) {
      double gr = norm * x + g;
      v_out[0] = alpha * v[0] + beta_adj * gr;
      *x_out = nesterov ? x - r * (gr + alpha * v_out[0]) : x - r * v_out[0];
    };
  });
}

absl::Status Adam(KernelContext& ctx) {
  const double alpha = AttrFloat(ctx.node(), "alpha", 0.9f), beta = AttrFloat(ctx.node(), "beta", 0.999f);
  const double eps = AttrFloat(ctx.node(), "epsilon", 1e-6f), norm = AttrFloat(ctx.node(), "norm_coefficient", 0);
  const double post = AttrFloat(ctx.node(), "norm_coefficient_post", 0);
  double r = 0;
  int64_t t = 0;
  return RunOptimizer(ctx, 2, &r, &t, [&]() -> Update {
    const double td = static_cast<double>(t);
    const double rate = t > 0 ? r * std::sqrt(1 - std::pow(beta, td)) / (1 - std::pow(alpha, td)) : r;
    return [=](double x, double g, const double* s, double* x_out, double* s_out) {
      double gr = norm * x + g;
      s_out[0] = alpha * s[0] + (1 - alpha) * gr;
      s_out[1] = beta * s[1] + (1 - beta) * gr * gr;
      *x_out = (1 - post) * (x - rate * (s_out[0] / (std::sqrt(s_out[1]) + eps)));
    };
  });
}

}  // namespace onnxkit::runner::reference
