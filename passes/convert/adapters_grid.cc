// GridSample going down: 4-D below 16, and 5-D (volumetric) below 20,
// expanded into older ops that read the pixels with GatherElements (opset
// 11), with the same taps and weights as the reference kernel
// (runner/reference/grid_sample.h):
//
//   x, y(, z) = the grid's channels, unnormalized to pixel positions:
//            (v + 1) / 2 * (len - 1) with align_corners, else
//            ((v + 1) * len - 1) / 2; a position that is not finite reads
//            as 0; nearest rounds it half to even
//   border:     positions outside [lo, hi] (below) clamped to [0, len - 1]
//   reflection: positions reflected into [lo, hi] (0 and len - 1 with
//               align_corners, else -0.5 and len - 0.5):
//               D = |p - lo|, m = Floor(D / span), r = D - m * span,
//               p' = lo + r + (m mod 2) * (span - 2 r)
//   taps   = floor(p) and floor(p) + 1 (bilinear, weights 1 - t and t),
//            floor(p) - 1 .. floor(p) + 2 (bicubic, A = -0.75), or p
//            (nearest); a tap outside the image weighs 0 (zeros), is
//            clamped (border, and reflection for two taps, where the
//            reflected and the clamped tap differ only at weight 0) or
//            reflected (bicubic reflection)
//   Y      = sum over tap combinations of wy * wx * X[n, c, iy, ix] (and
//            wz, iz), each one GatherElements on X viewed as [N, C, H * W]
//
// Written for opset 15 (4-D) or 19 (5-D); N, C, the spatial dims and the
// grid's dims may be known only at run time (read through Shape).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"
#include "runner/reference/grid_sample.h"

namespace onnxkit::passes::convert {
namespace {

using runner::reference::grid::Mode;
using runner::reference::grid::Padding;

struct Grid {
  int32_t t = 0;  // X's and the grid's element type
  Mode mode = Mode::kLinear;
  Padding padding = Padding::kZeros;
  bool align = false;
};

// The taps of one axis: positions (int64, [N, Ho, Wo]) and weights (of the
// element type; null where every weight is 1).
struct AxisTaps {
  std::vector<ir::Value*> index;
  std::vector<ir::Value*> weight;
};

class Expander {
 public:
  Expander(Step& step, Grid g) : step_(step), g_(g) {}

  absl::StatusOr<ir::Value*> Scalar(double v) { return AddScalar(step_, "grid_const", g_.t, v); }

  absl::StatusOr<ir::Value*> Bin(const char* op, ir::Value* a, ir::Value* b) { return Op(step_, op, {a, b}); }

  absl::StatusOr<ir::Value*> BinC(const char* op, ir::Value* a, double c) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k, Scalar(c));
    return Bin(op, a, k);
  }

  // ((c3 u + c2) u + c1) u + c0.
  absl::StatusOr<ir::Value*> Cubic(ir::Value* u, double c3, double c2, double c1, double c0) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * p, BinC("Mul", u, c3));
    ONNXKIT_ASSIGN_OR_RETURN(p, BinC("Add", p, c2));
    ONNXKIT_ASSIGN_OR_RETURN(p, Bin("Mul", p, u));
    if (c1 != 0) {
      ONNXKIT_ASSIGN_OR_RETURN(p, BinC("Add", p, c1));
    }
    ONNXKIT_ASSIGN_OR_RETURN(p, Bin("Mul", p, u));
    return BinC("Add", p, c0);
  }

  // p reflected into [lo, hi]; span = hi - lo, raised to 1 where it is 0
  // (one pixel with align_corners: every tap is clamped to it afterwards).
  absl::StatusOr<ir::Value*> Reflect(ir::Value* p, ir::Value* lo, ir::Value* span) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Scalar(1));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, Bin("Max", span, one));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, Bin("Sub", p, lo));
    ONNXKIT_ASSIGN_OR_RETURN(d, Op(step_, "Abs", {d}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * m, Bin("Div", d, s));
    ONNXKIT_ASSIGN_OR_RETURN(m, Op(step_, "Floor", {m}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ms, Bin("Mul", m, s));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, Bin("Sub", d, ms));
    // parity = m - 2 Floor(m / 2)
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * h, BinC("Mul", m, 0.5));
    ONNXKIT_ASSIGN_OR_RETURN(h, Op(step_, "Floor", {h}));
    ONNXKIT_ASSIGN_OR_RETURN(h, BinC("Mul", h, 2));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * parity, Bin("Sub", m, h));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r2, BinC("Mul", r, 2));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * flip, Bin("Sub", s, r2));
    ONNXKIT_ASSIGN_OR_RETURN(flip, Bin("Mul", parity, flip));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Bin("Add", lo, r));
    return Bin("Add", y, flip);
  }

  // The taps of normalized coordinates `v` along an axis of `len` pixels
  // (`len_f`: len in the element type).
  absl::StatusOr<AxisTaps> Taps(ir::Value* v, ir::Value* len_f) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v1, BinC("Add", v, 1));
    ir::Value* p = nullptr;
    if (g_.align) {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lm1, BinC("Sub", len_f, 1));
      ONNXKIT_ASSIGN_OR_RETURN(p, BinC("Mul", v1, 0.5));
      ONNXKIT_ASSIGN_OR_RETURN(p, Bin("Mul", p, lm1));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(p, Bin("Mul", v1, len_f));
      ONNXKIT_ASSIGN_OR_RETURN(p, BinC("Sub", p, 1));
      ONNXKIT_ASSIGN_OR_RETURN(p, BinC("Mul", p, 0.5));
    }
    // Not finite (|p| < inf fails for NaN too) -> 0.
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * abs, Op(step_, "Abs", {p}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * finite, BinC("Less", abs, std::numeric_limits<double>::infinity()));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, Scalar(0));
    ONNXKIT_ASSIGN_OR_RETURN(p, Op(step_, "Where", {finite, p, zero}));
    if (g_.mode == Mode::kNearest) {
      ONNXKIT_ASSIGN_OR_RETURN(p, Op(step_, "Round", {p}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * last, BinC("Sub", len_f, 1));  // len - 1
    ir::Value* lo = nullptr;
    ir::Value* span = nullptr;
    if (g_.padding == Padding::kBorder && g_.mode == Mode::kCubic && !g_.align) {
      // Only positions outside [-0.5, len - 0.5] are clamped: one in
      // [-0.5, 0) keeps its four taps' weights.
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * clamped, Op(step_, "Clip", {p, zero, last}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * below, BinC("Less", p, -0.5));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * hi, BinC("Sub", len_f, 0.5));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * above, Bin("Greater", p, hi));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * outside, Bin("Or", below, above));
      ONNXKIT_ASSIGN_OR_RETURN(p, Op(step_, "Where", {outside, clamped, p}));
    } else if (g_.padding == Padding::kBorder) {
      // Elsewhere clamping every position reads the same pixels with the
      // same weights as clamping only those outside [lo, hi].
      ONNXKIT_ASSIGN_OR_RETURN(p, Op(step_, "Clip", {p, zero, last}));
    } else if (g_.padding == Padding::kReflection) {
      ONNXKIT_ASSIGN_OR_RETURN(lo, Scalar(g_.align ? 0.0 : -0.5));
      span = g_.align ? last : len_f;
      ONNXKIT_ASSIGN_OR_RETURN(p, Reflect(p, lo, span));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * big, Scalar(1e9));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * minus_big, Scalar(-1e9));
      ONNXKIT_ASSIGN_OR_RETURN(p, Op(step_, "Clip", {p, minus_big, big}));
    }
    // Tap positions (in the element type) and weights.
    std::vector<ir::Value*> pos, weight;
    if (g_.mode == Mode::kNearest) {
      pos.push_back(p);
      weight.push_back(nullptr);
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * fl, Op(step_, "Floor", {p}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t, Bin("Sub", p, fl));
      if (g_.mode == Mode::kLinear) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Scalar(1));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w0, Bin("Sub", one, t));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * p1, BinC("Add", fl, 1));
        pos = {fl, p1};
        weight = {w0, t};
      } else {
        const double a = -0.75;
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, Scalar(1));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * two, Scalar(2));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * u0, BinC("Add", t, 1));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * u2, Bin("Sub", one, t));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * u3, Bin("Sub", two, t));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k0, Cubic(u0, a, -5 * a, 8 * a, -4 * a));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k1, Cubic(t, a + 2, -(a + 3), 0, 1));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k2, Cubic(u2, a + 2, -(a + 3), 0, 1));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k3, Cubic(u3, a, -5 * a, 8 * a, -4 * a));
        weight = {k0, k1, k2, k3};
        for (int i = -1; i <= 2; ++i) {
          if (i == 0) {
            pos.push_back(fl);
          } else {
            ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pi, BinC("Add", fl, i));
            pos.push_back(pi);
          }
        }
      }
    }
    AxisTaps taps;
    for (size_t i = 0; i < pos.size(); ++i) {
      ir::Value* q = pos[i];
      ir::Value* w = weight[i];
      if (g_.padding == Padding::kZeros) {
        // Outside [0, len - 1]: weight 0, position clamped for the read.
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * before, Bin("Less", q, zero));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * after, Bin("Greater", q, last));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out, Bin("Or", before, after));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * in, Op(step_, "Not", {out}));
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * inside, Op(step_, "Cast", {in}, {IntAttr("to", g_.t)}));
        if (w == nullptr) {
          w = inside;
        } else {
          ONNXKIT_ASSIGN_OR_RETURN(w, Bin("Mul", w, inside));
        }
      } else if (g_.padding == Padding::kReflection && g_.mode == Mode::kCubic) {
        ONNXKIT_ASSIGN_OR_RETURN(q, Reflect(q, lo, span));
      }
      ONNXKIT_ASSIGN_OR_RETURN(q, Op(step_, "Clip", {q, zero, last}));
      ONNXKIT_ASSIGN_OR_RETURN(q, Op(step_, "Cast", {q}, {IntAttr("to", pb::kInt64)}));
      taps.index.push_back(q);
      taps.weight.push_back(w);
    }
    return taps;
  }

 private:
  Step& step_;
  Grid g_;
};

absl::StatusOr<Grid> ParseGrid(Step& step, int64_t rank) {
  Grid g;
  ir::Value* x = step.node->input(0);
  ir::Value* grid = step.node->input(1);
  std::optional<int32_t> tx = ElemType(*x, *step.ctx);
  std::optional<int32_t> tg = ElemType(*grid, *step.ctx);
  if (!tx || !tg || *tx != *tg || (*tx != pb::kFloat && *tx != pb::kDouble))
    return Block("the expansion needs X and grid of one known type, float or double");
  g.t = *tx;
  std::optional<int64_t> rg = RankOf(step, grid);
  if (!rg || *rg != rank) return Block(absl::StrCat("the expansion needs a grid of known rank ", rank));
  // The reference kernel's reading of the attributes (both the names of
  // 16 and those of 20).
  absl::StatusOr<runner::reference::grid::Config> c =
      runner::reference::grid::ParseGridSample(*step.node, 20);
  if (!c.ok()) return Block(std::string(c.status().message()));
  g.mode = c->mode;
  g.padding = c->padding;
  g.align = c->align_corners;
  if (step.target < 11) return Block("the expansion reads pixels with GatherElements (opset 11)");
  return g;
}

// Sums wy * wx * ... * X[n, c, flat] over every combination of the taps of
// axes a, a-1, ..., 0 (axis 0 the innermost, W), where `flat` and `weight`
// carry the outer axes' part.
struct Combiner {
  Step& step;
  const std::vector<AxisTaps>& taps;
  const std::vector<ir::Value*>& len;  // int64 scalars, per axis
  ir::Value* xf;                       // X as [N, C, spatial]
  ir::Value* row_shape;                // [0, 1, -1]
  ir::Value* expand_shape;             // [1, C, 1]
  ir::Value* acc = nullptr;

  absl::Status Run(size_t a, ir::Value* flat, ir::Value* weight) {
    for (size_t i = 0; i < taps[a].index.size(); ++i) {
      ir::Value* at = taps[a].index[i];
      if (flat != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scaled, Op(step, "Mul", {flat, len[a]}));
        ONNXKIT_ASSIGN_OR_RETURN(at, Op(step, "Add", {scaled, at}));
      }
      ir::Value* w = taps[a].weight[i];
      if (weight != nullptr && w != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(w, Op(step, "Mul", {weight, w}));
      } else if (w == nullptr) {
        w = weight;
      }
      if (a > 0) {
        ONNXKIT_RETURN_IF_ERROR(Run(a - 1, at, w));
        continue;
      }
      ONNXKIT_ASSIGN_OR_RETURN(at, Op(step, "Reshape", {at, row_shape}));
      ONNXKIT_ASSIGN_OR_RETURN(at, Op(step, "Expand", {at, expand_shape}));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * term, Op(step, "GatherElements", {xf, at}, {IntAttr("axis", 2)}));
      if (w != nullptr) {
        ONNXKIT_ASSIGN_OR_RETURN(w, Op(step, "Reshape", {w, row_shape}));
        ONNXKIT_ASSIGN_OR_RETURN(term, Op(step, "Mul", {term, w}));
      }
      if (acc == nullptr) {
        acc = term;
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(acc, Op(step, "Add", {acc, term}));
      }
    }
    return absl::OkStatus();
  }
};

// X [N, C, D1.., Dk] sampled at grid [N, O1.., Ok, k] (k = rank - 2).
absl::Status ExpandGrid(Step& step, int64_t rank) {
  if (step.node->num_inputs() < 2 || step.node->input(0) == nullptr || step.node->input(1) == nullptr)
    return Block("X and grid are required");
  ONNXKIT_ASSIGN_OR_RETURN(Grid g, ParseGrid(step, rank));
  ir::Value* x = step.node->input(0);
  ir::Value* grid = step.node->input(1);
  Expander e(step, g);
  // Grid channel a addresses X's axis rank - 1 - a (x along W first).
  const int64_t k = rank - 2;
  std::vector<AxisTaps> taps;
  std::vector<ir::Value*> len;
  for (int64_t a = 0; a < k; ++a) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * channel, AddIntScalar(step, "grid_axis", pb::kInt64, a));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v, Op(step, "Gather", {grid, channel}, {IntAttr("axis", rank - 1)}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * n, DimScalar(step, x, rank - 1 - a));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * nf, Op(step, "Cast", {n}, {IntAttr("to", g.t)}));
    ONNXKIT_ASSIGN_OR_RETURN(AxisTaps t, e.Taps(v, nf));
    taps.push_back(std::move(t));
    len.push_back(n);
  }
  // X as [N, C, D1 * .. * Dk]; each tap combination's flat positions as
  // [N, C, O1 * .. * Ok].
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * flat_shape, AddInts(step, "grid_flat", {0, 0, -1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * xf, Op(step, "Reshape", {x, flat_shape}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * row_shape, AddInts(step, "grid_rows", {0, 1, -1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ones, AddInts(step, "grid_one", {1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * channels, Dims(step, x, 1, 2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * expand_shape,
                           Op(step, "Concat", {ones, channels, ones}, {IntAttr("axis", 0)}));
  Combiner c{step, taps, len, xf, row_shape, expand_shape};
  ONNXKIT_RETURN_IF_ERROR(c.Run(static_cast<size_t>(k - 1), nullptr, nullptr));
  // Back to [N, C, O1.., Ok].
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * nc, Dims(step, x, 0, 2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out, Dims(step, grid, 1, rank - 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out_shape, Op(step, "Concat", {nc, out}, {IntAttr("axis", 0)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "Reshape", {c.acc, out_shape}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

}  // namespace

absl::Status ExpandGridSample(Step& step) {
  std::optional<int64_t> rank = RankOf(step, step.node->input(0));
  if (!rank || *rank != 4) return Block("the expansion needs X of known rank 4");
  return ExpandGrid(step, 4);
}

absl::Status ExpandGridSampleNd(Step& step) { return ExpandGrid(step, 5); }

}  // namespace onnxkit::passes::convert
