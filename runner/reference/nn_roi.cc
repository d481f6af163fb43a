// Reference kernels that sample a feature map at computed positions:
// RoiAlign (avg/max, half_pixel/output_half_pixel), MaxRoiPool,
// DeformConv (bilinear sampling at learned offsets, optional mask) and
// NonMaxSuppression.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"
#include "runner/reference/roi_align.h"

namespace onnxkit::runner::reference {
namespace {

bool IsFloat(int32_t dtype) { return dtype == 1 || dtype == 10 || dtype == 11 || dtype == 16; }

std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> out;
  (void)VisitFloat(t.dtype(), [&](auto tag) -> absl::Status {
    std::vector<double> s;
    const double* p = ElementsAs<decltype(tag), double>(t, s);
    out.assign(p, p + t.size());
    return absl::OkStatus();
  });
  return out;
}

// Output 0 of `shape` and type `dtype` holding `v` (as many values as the
// shape has elements).
absl::Status Store(KernelContext& ctx, int32_t dtype, std::vector<int64_t> shape, const double* v) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(0, dtype, std::move(shape)));
  return VisitFloat(dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    T* out = t->mutable_data<T>();
    for (int64_t j = 0; j < t->size(); ++j) out[j] = static_cast<T>(v[j]);
    return absl::OkStatus();
  });
}

absl::Status Store(KernelContext& ctx, int32_t dtype, std::vector<int64_t> shape,
                   const std::vector<double>& v) {
  return Store(ctx, dtype, std::move(shape), v.data());
}

// --- RoiAlign ---

// The bilinear sample as RoiAlign defines it: zero beyond one pixel
// outside, clamped to the border.
RoiTap SampleTap(int64_t h, int64_t w, double y, double x) {
  RoiTap t;
  // An empty map has nothing to sample.
  if (h <= 0 || w <= 0 || y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w))
    return t;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x), y_hi, x_hi;
  if (y_lo >= h - 1) {
    y_hi = y_lo = h - 1;
    y = static_cast<double>(y_lo);
  } else {
    y_hi = y_lo + 1;
  }
  if (x_lo >= w - 1) {
    x_hi = x_lo = w - 1;
    x = static_cast<double>(x_lo);
  } else {
    x_hi = x_lo + 1;
  }
  double ly = y - static_cast<double>(y_lo), lx = x - static_cast<double>(x_lo), hy = 1 - ly, hx = 1 - lx;
  t.zero = false;
  t.o1 = y_lo * w + x_lo, t.o2 = y_lo * w + x_hi, t.o3 = y_hi * w + x_lo, t.o4 = y_hi * w + x_hi;
  t.w1 = hy * hx, t.w2 = hy * lx, t.w3 = ly * hx, t.w4 = ly * lx;
  return t;
}

class RoiAlignKernel : public Kernel {
 public:
  explicit RoiAlignKernel(RoiAlignOptions o) : o_(o) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* rois, ctx.Input(1));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* bi, ctx.Input(2));
    if (!IsFloat(x->dtype()) || rois->dtype() != x->dtype()) {
      return absl::InvalidArgumentError("RoiAlign X and rois must be one float type");
    }
    if (x->rank() != 4 || rois->rank() != 2 || rois->dim(1) != 4 || bi->rank() != 1 || bi->dim(0) != rois->dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat("RoiAlign needs X [N, C, H, W], rois [R, 4] and batch_indices [R], got ",
                                                     DescribeTensor(*x), ", ", DescribeTensor(*rois), ", ",
                                                     DescribeTensor(*bi)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> batch, ReadInt64s(*bi));
    int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3), r = rois->dim(0);
    std::vector<double> xv = Doubles(*x), rv = Doubles(*rois);
    // Every roi's sampling grid first (and every error, in roi order), then
    // the rois' samples, split over the threads by roi.
    std::vector<RoiGrid> grids(static_cast<size_t>(r));
    int64_t total_points = 0;
    for (int64_t ri = 0; ri < r; ++ri) {
      ONNXKIT_ASSIGN_OR_RETURN(grids[static_cast<size_t>(ri)],
                               MakeRoiGrid(o_, ri, batch[static_cast<size_t>(ri)], n, rv.data() + ri * 4));
      total_points += grids[static_cast<size_t>(ri)].points;  // each at most 2^22
    }
    std::optional<int64_t> count = CheckedElementCount(std::vector<int64_t>{r, c, o_.out_h, o_.out_w});
    if (!count) return absl::InvalidArgumentError("RoiAlign output size overflows");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y_t, Scratch<double>(*count));
    double* y = y_t.mutable_data<double>();
    const int64_t bins = o_.out_h * o_.out_w;
#pragma omp parallel if (r > 1 && static_cast <double>(c) * static_cast <double>(total_points) >= 65536)
    {
      std::vector<RoiTap> taps;
#pragma omp for schedule(dynamic, 1)
      for (int64_t ri = 0; ri < r; ++ri) {
        const RoiGrid& g = grids[static_cast<size_t>(ri)];
        RoiTaps(o_, g, h, w, taps);
        const int64_t per_bin = g.grid_h * g.grid_w;
        const double samples = static_cast<double>(std::max<int64_t>(per_bin, 1));
        for (int64_t ch = 0; ch < c; ++ch) {
          const double* plane = xv.data() + (g.batch * c + ch) * h * w;
          const RoiTap* t = taps.data();
          double* out = y + (ri * c + ch) * bins;
          for (int64_t bin = 0; bin < bins; ++bin) {
            double acc = 0;
            bool first = true;
            for (int64_t k = 0; k < per_bin; ++k, ++t) {
              double v = Apply(*t, plane);
              if (o_.max_mode) {
                acc = first ? v : std::max(acc, v);
                first = false;
              } else {
                acc += v;
              }
            }
            out[bin] = o_.max_mode ? acc : acc / samples;
          }
        }
      }
    }
    return Store(ctx, x->dtype(), {r, c, o_.out_h, o_.out_w}, y);
  }

 private:
  // The value of sample `t` on `p`: the weighted corners summed, or in max
  // mode the largest weighted corner (each product as a sample alone makes
  // it: weight times value).
  double Apply(const RoiTap& t, const double* p) const {
    if (t.zero) return 0;
    double v1 = t.w1 * p[t.o1], v2 = t.w2 * p[t.o2], v3 = t.w3 * p[t.o3], v4 = t.w4 * p[t.o4];
    return o_.max_mode ? std::max(std::max(v1, v2), std::max(v3, v4)) : v1 + v2 + v3 + v4;
  }

  RoiAlignOptions o_;
};

// --- MaxRoiPool ---

class MaxRoiPoolKernel : public Kernel {
 public:
  MaxRoiPoolKernel(int64_t ph, int64_t pw, double scale) : ph_(ph), pw_(pw), scale_(scale) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* rois, ctx.Input(1));
    if (!IsFloat(x->dtype()) || rois->dtype() != x->dtype() || x->rank() != 4 || rois->rank() != 2 ||
        rois->dim(1) != 5) {
      return absl::InvalidArgumentError(absl::StrCat("MaxRoiPool needs float X [N, C, H, W] and rois [R, 5], got ",
                                                     DescribeTensor(*x), " and ", DescribeTensor(*rois)));
    }
    int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3), r = rois->dim(0);
    std::vector<double> xv = Doubles(*x), rv = Doubles(*rois), y(static_cast<size_t>(r * c * ph_ * pw_), 0);
    for (int64_t ri = 0; ri < r; ++ri) {
      const double* roi = rv.data() + ri * 5;
      int64_t b = static_cast<int64_t>(roi[0]);
      if (!(roi[0] >= 0) || b >= n) return absl::InvalidArgumentError(absl::StrCat("roi batch index ", roi[0], " is outside [0, ", n, ")"));
      int64_t x0 = std::llround(roi[1] * scale_), y0 = std::llround(roi[2] * scale_);
      int64_t x1 = std::llround(roi[3] * scale_), y1 = std::llround(roi[4] * scale_);
      double bin_h = static_cast<double>(std::max<int64_t>(y1 - y0 + 1, 1)) / static_cast<double>(ph_);
      double bin_w = static_cast<double>(std::max<int64_t>(x1 - x0 + 1, 1)) / static_cast<double>(pw_);
      for (int64_t ch = 0; ch < c; ++ch) {
        const double* plane = xv.data() + (b * c + ch) * h * w;
        for (int64_t py = 0; py < ph_; ++py) {
          int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(py) * bin_h)) + y0, 0, h);
          int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(py + 1) * bin_h)) + y0, 0, h);
          for (int64_t px = 0; px < pw_; ++px) {
            int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(px) * bin_w)) + x0, 0, w);
            int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(px + 1) * bin_w)) + x0, 0, w);
            double m = 0;
            bool any = false;
            for (int64_t yy = hs; yy < he; ++yy) {
              for (int64_t xx = ws; xx < we; ++xx) {
                m = any ? std::max(m, plane[yy * w + xx]) : plane[yy * w + xx];
                any = true;
              }
            }
            y[static_cast<size_t>(((ri * c + ch) * ph_ + py) * pw_ + px)] = m;
          }
        }
      }
    }
    return Store(ctx, x->dtype(), {r, c, ph_, pw_}, y);
  }

 private:
  int64_t ph_, pw_;
  double scale_;
};

// --- DeformConv (2-D) ---

class DeformConvKernel : public Kernel {
 public:
  DeformConvKernel(WindowAttrs attrs, int64_t group, int64_t offset_group)
      : attrs_(std::move(attrs)), group_(group), offset_group_(offset_group) {}

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* in[5] = {};
    for (int i = 0; i < 5; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
      if (in[i] != nullptr && (!IsFloat(in[i]->dtype()) || in[i]->dtype() != in[0]->dtype())) {
        return absl::InvalidArgumentError("DeformConv inputs must be one float type");
      }
    }
    const Tensor &x = *in[0], &wt = *in[1], &offset = *in[2];
    if (x.rank() != 4 || wt.rank() != 4) {
      return absl::InvalidArgumentError(absl::StrCat("DeformConv supports 2-D images: X ", DescribeTensor(x), ", W ",
                                                     DescribeTensor(wt)));
    }
    int64_t n = x.dim(0), c = x.dim(1), m = wt.dim(0), kh = wt.dim(2), kw = wt.dim(3);
    if (group_ < 1 || c != wt.dim(1) * group_ || m % group_ != 0 || offset_group_ < 1 || c % offset_group_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat("X ", DescribeTensor(x), " and W ", DescribeTensor(wt),
                                                     " do not fit group ", group_, " and offset_group ", offset_group_));
    }
    std::vector<int64_t> kernel = {kh, kw};
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return absl::InvalidArgumentError(absl::StrCat("kernel_shape ", ShapeString(attrs_.kernel_shape),
                                                     " does not match W ", DescribeTensor(wt)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Window win, ResolveWindow(attrs_, std::vector<int64_t>{x.dim(2), x.dim(3)}, kernel));
    int64_t oh = win.out[0], ow = win.out[1], taps = kh * kw;
    if (offset.shape() != std::vector<int64_t>{n, offset_group_ * taps * 2, oh, ow}) {
      return absl::InvalidArgumentError(absl::StrCat("offset ", DescribeTensor(offset), " must be ",
                                                     ShapeString(std::vector<int64_t>{n, offset_group_ * taps * 2, oh, ow})));
    }
    if (in[3] != nullptr && in[3]->shape() != std::vector<int64_t>{m}) {
      return absl::InvalidArgumentError(absl::StrCat("B ", DescribeTensor(*in[3]), " must be [", m, "]"));
    }
    if (in[4] != nullptr && in[4]->shape() != std::vector<int64_t>{n, offset_group_ * taps, oh, ow}) {
      return absl::InvalidArgumentError(absl::StrCat("mask ", DescribeTensor(*in[4]), " must be ",
                                                     ShapeString(std::vector<int64_t>{n, offset_group_ * taps, oh, ow})));
    }
    std::vector<double> xv = Doubles(x), wv = Doubles(wt), ov = Doubles(offset);
    std::vector<double> bv = in[3] ? Doubles(*in[3]) : std::vector<double>(), mv = in[4] ? Doubles(*in[4]) : std::vector<double>();
    int64_t h = x.dim(2), w = x.dim(3), cg = c / group_, mg = m / group_, cog = c / offset_group_, osz = oh * ow;
    auto col_size = CheckedMul(c * taps, osz);
    if (!col_size) return absl::InvalidArgumentError("DeformConv buffer size overflows");
    ONNXKIT_ASSIGN_OR_RETURN(Tensor col_t, Scratch<double>(*col_size));
    double* col = col_t.mutable_data<double>();
    std::vector<double> y(static_cast<size_t>(n * m * osz), 0);
    for (int64_t b = 0; b < n; ++b) {
      // col[(ch * taps + t), (i * ow + j)]: the masked sample each tap reads.
      for (int64_t ch = 0; ch < c; ++ch) {
        int64_t og = ch / cog;
        const double* plane = xv.data() + (b * c + ch) * h * w;
        for (int64_t t = 0; t < taps; ++t) {
          int64_t ki = t / kw, kj = t % kw;
          const double* dy = ov.data() + ((b * offset_group_ + og) * taps * 2 + t * 2) * osz;
          const double* dx = dy + osz;
          const double* mk = mv.empty() ? nullptr : mv.data() + ((b * offset_group_ + og) * taps + t) * osz;
          double* dst = col + (ch * taps + t) * osz;
          for (int64_t i = 0; i < oh; ++i) {
            for (int64_t j = 0; j < ow; ++j) {
              int64_t o = i * ow + j;
              double py = static_cast<double>(i * win.strides[0] - win.pad_begin[0] + ki * win.dilations[0]) + dy[o];
              double px = static_cast<double>(j * win.strides[1] - win.pad_begin[1] + kj * win.dilations[1]) + dx[o];
              dst[o] = Bilinear(plane, h, w, py, px) * (mk ? mk[o] : 1.0);
            }
          }
        }
      }
      for (int64_t g = 0; g < group_; ++g) {
        MatMulAccumulate<double>(mg, osz, cg * taps, wv.data() + g * mg * cg * taps, cg * taps, 1,
                                 col + g * cg * taps * osz, osz, y.data() + (b * m + g * mg) * osz, osz, false);
      }
      for (int64_t oc = 0; !bv.empty() && oc < m; ++oc) {
        for (int64_t o = 0; o < osz; ++o) y[static_cast<size_t>((b * m + oc) * osz + o)] += bv[static_cast<size_t>(oc)];
      }
    }
    return Store(ctx, x.dtype(), {n, m, oh, ow}, y);
  }

 private:
  // Bilinear interpolation with zero outside the image (corners that fall
  // outside contribute nothing).
  static double Bilinear(const double* p, int64_t h, int64_t w, double y, double x) {
    double fy = std::floor(y), fx = std::floor(x);
    if (!(fy > -2 && fy < static_cast<double>(h) && fx > -2 && fx < static_cast<double>(w))) return 0;
    int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
    double ly = y - fy, lx = x - fx, r = 0;
    for (int dy = 0; dy < 2; ++dy) {
      for (int dx = 0; dx < 2; ++dx) {
        int64_t yy = y0 + dy, xx = x0 + dx;
        if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
        r += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * p[yy * w + xx];
      }
    }
    return r;
  }

  WindowAttrs attrs_;
  int64_t group_, offset_group_;
};

// --- NonMaxSuppression ---

struct Box {
  double x0, y0, x1, y1;
};

// IoU above the threshold (as the ONNX reference decides it).
bool Suppresses(const Box& a, const Box& b, double threshold) {
  double ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  double iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (ix1 <= ix0 || iy1 <= iy0) return false;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  double uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// The boxes kept so far, sorted by x0, and the widest one's width: a kept
// box k can suppress a candidate a only if their x ranges overlap, so
// a.x0 - max width < k.x0 < a.x1, and only those are tested (a search
// instead of a scan of every kept box; the answer is the same). A box with
// a NaN coordinate never suppresses nor is suppressed (its comparisons are
// false), so it is counted but not indexed.
class KeptBoxes {
 public:
  int64_t size() const { return count_; }

  void Add(const Box& b) {
    ++count_;
    if (std::isnan(b.x0) || std::isnan(b.y0) || std::isnan(b.x1) || std::isnan(b.y1)) return;
    auto at =
        std::upper_bound(by_x0_.begin(), by_x0_.end(), b.x0, [](double v, const Box& k) { return v < k.x0; });
    by_x0_.insert(at, b);
    max_width_ = std::max(max_width_, b.x1 - b.x0);
  }

  bool AnySuppresses(const Box& a, double threshold) const {
    if (by_x0_.empty() || std::isnan(a.x0) || std::isnan(a.y0) || std::isnan(a.x1) || std::isnan(a.y1)) {
      return false;
    }
    // One step below the rounded difference: never above the exact bound.
    const double lo = std::nextafter(a.x0 - max_width_, -std::numeric_limits<double>::infinity());
    auto it =
        std::lower_bound(by_x0_.begin(), by_x0_.end(), lo, [](const Box& k, double v) { return k.x0 < v; });
    if (std::isnan(lo)) it = by_x0_.begin();  // inf - inf: test them all
    for (; it != by_x0_.end() && it->x0 < a.x1; ++it) {
      if (Suppresses(a, *it, threshold)) return true;
    }
    return false;
  }

 private:
  std::vector<Box> by_x0_;
  double max_width_ = -std::numeric_limits<double>::infinity();
  int64_t count_ = 0;
};

class NmsKernel : public Kernel {
 public:
  explicit NmsKernel(bool center_point_box) : center_(center_point_box) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* boxes, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* scores, ctx.Input(1));
    const Tensor* opt[3] = {};
    for (int i = 0; i < 3; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(opt[i], ctx.OptionalInput(i + 2));
    }
    if (!IsFloat(boxes->dtype()) || !IsFloat(scores->dtype()) || boxes->rank() != 3 || boxes->dim(2) != 4 ||
        scores->rank() != 3 || scores->dim(0) != boxes->dim(0) || scores->dim(2) != boxes->dim(1)) {
      return absl::InvalidArgumentError(absl::StrCat("NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N], got ",
                                                     DescribeTensor(*boxes), " and ", DescribeTensor(*scores)));
    }
    int64_t max_out = 0;
    if (opt[0] != nullptr && opt[0]->size() > 0) {
      ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*opt[0]));
      max_out = std::max<int64_t>(v[0], 0);
    }
    double iou = 0, score_threshold = 0;
    bool use_score = false;
    for (int i = 1; i < 3; ++i) {
      if (opt[i] == nullptr || opt[i]->size() == 0) continue;
      if (!IsFloat(opt[i]->dtype())) return absl::InvalidArgumentError("thresholds must be float tensors");
      double v = Doubles(*opt[i])[0];
      if (i == 1) {
        iou = v;
      } else {
        score_threshold = v;
        use_score = true;
      }
    }
    int64_t nb = boxes->dim(0), nbox = boxes->dim(1), nc = scores->dim(1);
    std::vector<double> bv = Doubles(*boxes), sv = Doubles(*scores);
    std::vector<int64_t> selected;
    for (int64_t b = 0; b < nb; ++b) {
      std::vector<Box> bx(static_cast<size_t>(nbox));
      for (int64_t i = 0; i < nbox; ++i) {
        const double* p = bv.data() + (b * nbox + i) * 4;
        if (center_) {
          bx[static_cast<size_t>(i)] = {p[0] - p[2] / 2, p[1] - p[3] / 2, p[0] + p[2] / 2, p[1] + p[3] / 2};
        } else {
          bx[static_cast<size_t>(i)] = {std::min(p[1], p[3]), std::min(p[0], p[2]), std::max(p[1], p[3]),
                                        std::max(p[0], p[2])};
        }
      }
      for (int64_t c = 0; c < nc; ++c) {
        const double* s = sv.data() + (b * nc + c) * nbox;
        std::vector<int64_t> order;
        for (int64_t i = 0; i < nbox; ++i) {
          if (!use_score || s[i] > score_threshold) order.push_back(i);
        }
        // Highest score first; ties keep the lower index first.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t z) { return s[a] > s[z]; });
        KeptBoxes kept;
        for (int64_t i : order) {
          if (kept.size() >= max_out) break;
          const Box& box = bx[static_cast<size_t>(i)];
          if (kept.AnySuppresses(box, iou)) continue;
          kept.Add(box);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, {static_cast<int64_t>(selected.size() / 3), 3}));
    std::copy(selected.begin(), selected.end(), y->mutable_data<int64_t>());
    return absl::OkStatus();
  }

 private:
  bool center_;
};

}  // namespace

absl::StatusOr<RoiAlignOptions> ParseRoiAlign(const ir::Node& node, const KernelInfo& info) {
  RoiAlignOptions o;
  std::string mode = AttrString(node, "mode", "avg");
  if (mode != "avg" && mode != "max") return absl::InvalidArgumentError(absl::StrCat("mode '", mode, "' is not avg or max"));
  // Opset 10 had no coordinate_transformation_mode and behaved as output_half_pixel.
  std::string ctm = AttrString(node, "coordinate_transformation_mode", info.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return absl::InvalidArgumentError(absl::StrCat("coordinate_transformation_mode '", ctm, "' is not supported"));
  }
  o.max_mode = mode == "max";
  o.half_pixel = ctm == "half_pixel";
  o.out_h = AttrInt(node, "output_height", 1), o.out_w = AttrInt(node, "output_width", 1);
  o.sampling_ratio = AttrInt(node, "sampling_ratio", 0);
  if (o.out_h < 1 || o.out_w < 1 || o.sampling_ratio < 0) {
    return absl::InvalidArgumentError("output_height and output_width must be positive, sampling_ratio non-negative");
  }
  o.scale = AttrFloat(node, "spatial_scale", 1.0f);
  return o;
}

absl::StatusOr<RoiGrid> MakeRoiGrid(const RoiAlignOptions& o, int64_t ri, int64_t b, int64_t n,
                                    const double* roi) {
  if (b < 0 || b >= n)
    return absl::InvalidArgumentError(absl::StrCat("batch index ", b, " is outside [0, ", n, ")"));
  RoiGrid g;
  g.batch = b;
  double off = o.half_pixel ? 0.5 : 0.0;
  g.x0 = roi[0] * o.scale - off, g.y0 = roi[1] * o.scale - off;
  double rw = roi[2] * o.scale - off - g.x0, rh = roi[3] * o.scale - off - g.y0;
  if (!o.half_pixel) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  g.bin_h = rh / static_cast<double>(o.out_h), g.bin_w = rw / static_cast<double>(o.out_w);
  // Adaptive grids: ceil(roi size / bins) points per bin, bounded (a roi
  // of NaN or astronomical size is an error, not a loop forever).
  const double adaptive_h = std::ceil(rh / static_cast<double>(o.out_h)),
               adaptive_w = std::ceil(rw / static_cast<double>(o.out_w));
  if (o.sampling_ratio <= 0 && !(adaptive_h < 65536 && adaptive_w < 65536)) {
    return absl::InvalidArgumentError(absl::StrCat("RoiAlign roi ", ri, " needs a sampling grid of ",
                                                   adaptive_h, " x ", adaptive_w, " points per bin"));
  }
  g.grid_h = std::max<int64_t>(o.sampling_ratio > 0 ? o.sampling_ratio : static_cast<int64_t>(adaptive_h), 0);
  g.grid_w = std::max<int64_t>(o.sampling_ratio > 0 ? o.sampling_ratio : static_cast<int64_t>(adaptive_w), 0);
  // The sample points depend on the roi only: their corners and weights
  // are computed once, for every channel.
  std::optional<int64_t> points =
      CheckedElementCount(std::vector<int64_t>{o.out_h, o.out_w, g.grid_h, g.grid_w});
  if (!points || *points > (int64_t{1} << 22)) {
    return absl::InvalidArgumentError(absl::StrCat("RoiAlign roi ", ri, " has more than 2^22 sample points (",
                                                   o.out_h, " x ", o.out_w, " bins of ", g.grid_h, " x ",
                                                   g.grid_w, ")"));
  }
  g.points = *points;
  return g;
}

void RoiTaps(const RoiAlignOptions& o, const RoiGrid& g, int64_t h, int64_t w, std::vector<RoiTap>& taps) {
  taps.clear();
  for (int64_t ph = 0; ph < o.out_h; ++ph) {
    for (int64_t pw = 0; pw < o.out_w; ++pw) {
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        double yy = g.y0 + static_cast<double>(ph) * g.bin_h +
                    (static_cast<double>(iy) + 0.5) * g.bin_h / static_cast<double>(g.grid_h);
        for (int64_t ix = 0; ix < g.grid_w; ++ix) {
          double xx = g.x0 + static_cast<double>(pw) * g.bin_w +
                      (static_cast<double>(ix) + 0.5) * g.bin_w / static_cast<double>(g.grid_w);
          taps.push_back(SampleTap(h, w, yy, xx));
        }
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRoiAlign(const ir::Node& node, const KernelInfo& info) {
  ONNXKIT_ASSIGN_OR_RETURN(RoiAlignOptions o, ParseRoiAlign(node, info));
  return std::unique_ptr<Kernel>(new RoiAlignKernel(o));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeMaxRoiPool(const ir::Node& node, const KernelInfo&) {
  std::vector<int64_t> pooled = AttrInts(node, "pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1) {
    return absl::InvalidArgumentError(absl::StrCat("pooled_shape ", ShapeString(pooled), " must be two positive values"));
  }
  return std::unique_ptr<Kernel>(new MaxRoiPoolKernel(pooled[0], pooled[1], AttrFloat(node, "spatial_scale", 1.0f)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeDeformConv(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseWindowAttrs(node));
  attrs.auto_pad = "NOTSET";
  attrs.ceil_mode = false;
  return std::unique_ptr<Kernel>(new DeformConvKernel(std::move(attrs), AttrInt(node, "group", 1),
                                                      AttrInt(node, "offset_group", 1)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeNonMaxSuppression(const ir::Node& node, const KernelInfo&) {
  int64_t c = AttrInt(node, "center_point_box", 0);
  if (c != 0 && c != 1) return absl::InvalidArgumentError(absl::StrCat("center_point_box must be 0 or 1, got ", c));
  return std::unique_ptr<Kernel>(new NmsKernel(c == 1));
}

}  // namespace onnxkit::runner::reference
