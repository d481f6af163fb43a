// CUDA Conv on cuDNN's convolution API (cudnnConvolutionForward; the bias
// is added by cudnnAddTensor). 1-D, 2-D and 3-D convolutions of float or
// float16 tensors (fp32 accumulation), groups and dilations included. The
// window geometry (auto_pad, pads, output dims) is the reference backend's
// (runner/reference/nn.h), shared; cuDNN pads symmetrically, so windows
// padded more at one end than the other run on the cpu backend. fp32 runs
// without tensor-core (TF32) math unless the session allows it.
//
// Descriptors and the algorithm (the fastest cuDNN measures on the device,
// or its heuristic choice) are made again only when the input shape changes.
#include <climits>
#include <cmath>
#include <optional>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/cuda/libraries.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/float_types.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::cuda {
namespace {

// What a Conv chain adds to the convolution (MakeConvChain): a
// BatchNormalization folded into the weights and bias, then element-wise
// ops in one pass over the result (`ops` read value 0, the biased result,
// and the kernel inputs 7, 8... as LaunchChain inputs 2, 3...).
struct ConvFusion {
  bool batch_norm = false;
  float epsilon = 1e-5f;
  std::vector<ChainOp> ops;
  int num_extra = 0;
};

// Reads element i of a float or float16 host tensor.
double HostElement(const Tensor& t, int64_t i) {
  if (t.dtype() == kFloat16) return Float16::ToFloat(t.data<uint16_t>()[i]);
  return t.data<float>()[i];
}

class ConvKernel : public CudaKernel {
 public:
  ConvKernel(std::shared_ptr<Context> context, reference::WindowAttrs attrs, int64_t group,
             std::optional<ConvFusion> fusion = std::nullopt)
      : context_(std::move(context)), attrs_(std::move(attrs)), group_(group), fusion_(std::move(fusion)) {}

  // A chain reads the weights, bias and normalization on the host (they
  // are constants, folded once).
  Side InputSide(int i) const override {
    return fusion_.has_value() && i >= 1 && i < kFirstExtra ? Side::kHost : Side::kDevice;
  }

  ~ConvKernel() override {
    if (x_desc_ != nullptr) Libs().cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_ != nullptr) Libs().cudnnDestroyTensorDescriptor(y_desc_);
    if (b_desc_ != nullptr) Libs().cudnnDestroyTensorDescriptor(b_desc_);
    if (w_desc_ != nullptr) Libs().cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_ != nullptr) Libs().cudnnDestroyConvolutionDescriptor(conv_desc_);
  }

  absl::Status Init() {
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnCreateTensorDescriptor(&x_desc_), "descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnCreateTensorDescriptor(&y_desc_), "descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnCreateTensorDescriptor(&b_desc_), "descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnCreateFilterDescriptor(&w_desc_), "descriptor"));
    return CudnnStatus(Libs().cudnnCreateConvolutionDescriptor(&conv_desc_), "descriptor");
  }

  bool Accepts(const KernelContext& ctx) const override {
    const RtValue* bias = ctx.Value(2);
    auto in = TensorInputs(ctx, bias != nullptr ? 3 : 2);
    if (!in) return false;
    const int32_t dtype = (*in)[0]->dtype();
    if (dtype != kFloat && dtype != kFloat16) return false;
    for (const Tensor* t : *in) {
      if (t->dtype() != dtype) return false;
    }
    std::optional<Shapes> s = Geometry(*(*in)[0], *(*in)[1], in->size() > 2 ? (*in)[2] : nullptr);
    if (!s) return false;
    if (!fusion_.has_value()) return true;
    const int64_t m = (*in)[1]->dim(0);
    if (fusion_->batch_norm) {
      for (int i = kFirstNorm; i < kFirstExtra; ++i) {
        const RtValue* v = ctx.Value(i);
        if (v == nullptr || !v->is_tensor() || v->tensor().dtype() != dtype || v->tensor().rank() != 1 ||
            v->tensor().dim(0) != m) {
          return false;
        }
      }
    }
    for (int j = 0; j < fusion_->num_extra; ++j) {
      const RtValue* v = ctx.Value(kFirstExtra + j);
      if (v == nullptr || !v->is_tensor() || v->tensor().dtype() != dtype) return false;
      // Extra operands broadcast into the result's shape, never beyond it.
      std::vector<int64_t> shapes[] = {s->y_shape, v->tensor().shape()};
      auto joint = reference::BroadcastShapes(shapes);
      if (!joint.ok() || *joint != s->y_shape || v->tensor().rank() > kMaxRank) return false;
    }
    return true;
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor& x = ctx.Value(0)->tensor();
    const Tensor& w = ctx.Value(1)->tensor();
    const Tensor* b = ctx.Value(2) != nullptr ? &ctx.Value(2)->tensor() : nullptr;
    std::optional<Shapes> s = Geometry(x, w, b);
    if (!s) return absl::InternalError("Conv shapes changed after the kernel accepted them");
    if (x.shape() != planned_x_ || w.shape() != planned_w_ || x.dtype() != planned_dtype_) {
      ONNXKIT_RETURN_IF_ERROR(Plan(x.dtype(), *s));
      planned_x_ = x.shape();
      planned_w_ = w.shape();
      planned_dtype_ = x.dtype();
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, context_->Allocate(x.dtype(), s->y_shape));
    if (y.size() == 0) return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    ONNXKIT_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> workspace, context_->Scratch(workspace_bytes_));
    const float one = 1.f, zero = 0.f;
    if (fusion_.has_value()) {
      if (!folded_w_.has_value() || folded_from_ != w.raw()) ONNXKIT_RETURN_IF_ERROR(Fold(ctx, w, b));
      ONNXKIT_RETURN_IF_ERROR(
          CudnnStatus(Libs().cudnnConvolutionForward(context_->cudnn(), &one, x_desc_, x.raw(), w_desc_,
                                                     folded_w_->raw(), conv_desc_, algo_, workspace->data(),
                                                     workspace_bytes_, &zero, y_desc_, y.mutable_raw()),
                      "cudnnConvolutionForward"));
      ONNXKIT_RETURN_IF_ERROR(Epilogue(ctx, y));
      return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    }
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(Libs().cudnnConvolutionForward(context_->cudnn(), &one, x_desc_, x.raw(), w_desc_,
                                                   w.raw(), conv_desc_, algo_, workspace->data(),
                                                   workspace_bytes_, &zero, y_desc_, y.mutable_raw()),
                    "cudnnConvolutionForward"));
    if (b != nullptr) {
      ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
          Libs().cudnnAddTensor(context_->cudnn(), &one, b_desc_, b->raw(), &one, y_desc_, y.mutable_raw()),
          "cudnnAddTensor"));
    }
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

  // Kernel inputs of a chain: x, W, B (or none), the normalization's
  // scale, bias, mean and variance (or none), then the extra operands.
  static constexpr int kFirstNorm = 3;
  static constexpr int kFirstExtra = 7;

 private:
  // The weights and bias with the normalization folded in (computed in
  // double, stored in the weights' type), uploaded once.
  absl::Status Fold(const KernelContext& ctx, const Tensor& w, const Tensor* b) {
    const int64_t m = w.dim(0);
    const int64_t per = m > 0 ? w.size() / m : 0;
    std::vector<double> scale(static_cast<size_t>(m), 1.0), shift(static_cast<size_t>(m), 0.0);
    for (int64_t k = 0; k < m; ++k) shift[static_cast<size_t>(k)] = b != nullptr ? HostElement(*b, k) : 0.0;
    if (fusion_->batch_norm) {
      const Tensor& gamma = ctx.Value(kFirstNorm)->tensor();
      const Tensor& beta = ctx.Value(kFirstNorm + 1)->tensor();
      const Tensor& mean = ctx.Value(kFirstNorm + 2)->tensor();
      const Tensor& var = ctx.Value(kFirstNorm + 3)->tensor();
      for (int64_t k = 0; k < m; ++k) {
        const auto u = static_cast<size_t>(k);
        const double sk = HostElement(gamma, k) / std::sqrt(HostElement(var, k) + fusion_->epsilon);
        scale[u] = sk;
        shift[u] = (shift[u] - HostElement(mean, k)) * sk + HostElement(beta, k);
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor fw, Tensor::AllocateUninitialized(w.dtype(), w.shape()));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor fb, Tensor::AllocateUninitialized(w.dtype(), {m}));
    auto put = [](Tensor& t, int64_t i, double v) {
      if (t.dtype() == kFloat16) {
        t.mutable_data<uint16_t>()[i] = Float16::FromFloat(static_cast<float>(v));
      } else {
        t.mutable_data<float>()[i] = static_cast<float>(v);
      }
    };
    for (int64_t k = 0; k < m; ++k) {
      for (int64_t e = 0; e < per; ++e)
        put(fw, k * per + e, HostElement(w, k * per + e) * scale[static_cast<size_t>(k)]);
      put(fb, k, shift[static_cast<size_t>(k)]);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor dw, ToDevice(*context_, fw));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor db, ToDevice(*context_, fb));
    folded_w_ = std::move(dw);
    folded_b_ = std::move(db);
    folded_from_ = w.raw();
    return absl::OkStatus();
  }

  // y = ops(y + bias, extra operands), in place.
  absl::Status Epilogue(const KernelContext& ctx, Tensor& y) {
    ChainProgram p;
    p.num_ops = 1 + static_cast<int>(fusion_->ops.size());
    p.ops[0].binary = true;
    p.ops[0].binary_op = BinaryOp::kAdd;
    p.ops[0].a = kMaxChainOps;
    p.ops[0].b = kMaxChainOps + 1;
    for (size_t k = 0; k < fusion_->ops.size(); ++k) p.ops[k + 1] = fusion_->ops[k];
    p.num_inputs = 2 + fusion_->num_extra;
    p.rank = y.rank();
    for (int d = 0; d < y.rank(); ++d) p.dims[d] = y.dim(d);
    p.inputs[0].data = y.raw();
    p.inputs[1].data = folded_b_->raw();
    int64_t spatial = 1;
    for (int d = 2; d < y.rank(); ++d) spatial *= y.dim(d);
    p.inputs[1].div = spatial > 0 ? spatial : 1;
    p.inputs[1].period = y.dim(1);
    for (int j = 0; j < fusion_->num_extra; ++j) {
      const Tensor& t = ctx.Value(kFirstExtra + j)->tensor();
      ChainInput& in = p.inputs[2 + j];
      in.data = t.raw();
      if (t.shape() != y.shape()) {
        auto g = BroadcastGeometry(t.shape(), y.shape());
        if (!g) return absl::UnimplementedError("rank above the CUDA limit");
        in.strided = true;
        for (int d = 0; d < g->rank; ++d) in.strides[d] = g->a[d];
      }
    }
    return Launched(LaunchChain(y.dtype(), p, y.mutable_raw(), y.size(), context_->stream()), "Conv chain");
  }

  // cuDNN's view: at least 2 spatial dims (1-D gets a trailing 1), int dims.
  struct Shapes {
    std::vector<int> x, w, y, pads, strides, dilations;
    std::vector<int64_t> y_shape;  // ONNX output shape
  };

  std::optional<Shapes> Geometry(const Tensor& x, const Tensor& w, const Tensor* b) const {
    const int rank = x.rank();
    if (rank < 3 || rank > 5 || w.rank() != rank || x.dim(0) == 0) return std::nullopt;
    const int64_t c = x.dim(1), m = w.dim(0);
    if (group_ < 1 || c % group_ != 0 || m % group_ != 0 || w.dim(1) * group_ != c || m == 0) return std::nullopt;
    if (b != nullptr && (b->rank() != 1 || b->dim(0) != m)) return std::nullopt;
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) return std::nullopt;
    auto window = reference::ResolveWindow(attrs_, in, kernel);
    if (!window.ok()) return std::nullopt;
    Shapes s;
    s.y_shape = {x.dim(0), m};
    for (size_t d = 0; d < in.size(); ++d) {
      if (window->pad_begin[d] != window->pad_end[d] || window->out[d] < 1) return std::nullopt;
      s.y_shape.push_back(window->out[d]);
      s.pads.push_back(static_cast<int>(window->pad_begin[d]));
      s.strides.push_back(static_cast<int>(window->strides[d]));
      s.dilations.push_back(static_cast<int>(window->dilations[d]));
    }
    // cuDNN's descriptors take int dims and strides.
    std::optional<int64_t> y_size = CheckedElementCount(s.y_shape);
    if (x.size() > INT_MAX || w.size() > INT_MAX || !y_size || *y_size > INT_MAX) return std::nullopt;
    for (int64_t v : window->pad_begin) if (v > INT_MAX) return std::nullopt;
    for (int64_t v : window->strides) if (v > INT_MAX) return std::nullopt;
    for (int64_t v : window->dilations) if (v > INT_MAX) return std::nullopt;
    s.x.assign(x.shape().begin(), x.shape().end());
    s.w.assign(w.shape().begin(), w.shape().end());
    s.y.assign(s.y_shape.begin(), s.y_shape.end());
    if (rank == 3) {
      for (auto* v : {&s.x, &s.w, &s.y, &s.strides, &s.dilations}) v->push_back(1);
      s.pads.push_back(0);
    }
    return s;
  }

  // FFT and Winograd transforms round differently from a direct sum (their
  // float32 error is well above 1e-6): GEMM-based and direct algorithms only
  // for float32. For float16 every algorithm is a candidate: each result is
  // rounded to 11 significant bits anyway, far coarser than what the
  // transforms add.
  static bool Usable(const cudnnConvolutionFwdAlgoPerf_t& perf, int32_t dtype) {
    if (perf.status != CUDNN_STATUS_SUCCESS) return false;
    if (dtype == kFloat16) return true;
    switch (perf.algo) {
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return false;
      default:
        return true;
    }
  }

  static std::vector<int> Packed(const std::vector<int>& dims) {
    std::vector<int> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
    return strides;
  }

  absl::Status Plan(int32_t dtype, const Shapes& s) {
    const cudnnDataType_t type = dtype == kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    const int n = static_cast<int>(s.x.size());
    const int spatial = n - 2;
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(Libs().cudnnSetTensorNdDescriptor(x_desc_, type, n, s.x.data(), Packed(s.x).data()),
                    "input descriptor"));
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(Libs().cudnnSetTensorNdDescriptor(y_desc_, type, n, s.y.data(), Packed(s.y).data()),
                    "output descriptor"));
    std::vector<int> b_dims(static_cast<size_t>(n), 1);
    b_dims[1] = s.y[1];
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(Libs().cudnnSetTensorNdDescriptor(b_desc_, type, n, b_dims.data(), Packed(b_dims).data()),
                    "bias descriptor"));
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(Libs().cudnnSetFilterNdDescriptor(w_desc_, type, CUDNN_TENSOR_NCHW, n, s.w.data()),
                    "filter descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        Libs().cudnnSetConvolutionNdDescriptor(conv_desc_, spatial, s.pads.data(), s.strides.data(),
                                               s.dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "convolution descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        Libs().cudnnSetConvolutionGroupCount(conv_desc_, static_cast<int>(group_)), "group count"));
    const cudnnMathType_t math = dtype == kFloat16          ? CUDNN_TENSOR_OP_MATH
                                 : context_->allow_tf32() ? CUDNN_DEFAULT_MATH
                                                          : CUDNN_FMA_MATH;
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnSetConvolutionMathType(conv_desc_, math), "math type"));
    // cuDNN must agree with the reference geometry.
    std::vector<int> out(static_cast<size_t>(n));
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(Libs().cudnnGetConvolutionNdForwardOutputDim(conv_desc_, x_desc_, w_desc_, n, out.data()),
                    "output dims"));
    if (out != s.y) return absl::InternalError("cuDNN computes another Conv output shape than the reference");
    // The fastest algorithm measured on this device for these shapes; its
    // heuristic choice when measuring fails. Each search runs every candidate
    // once; it runs twice and the second is kept, as the first of a process
    // runs while the GPU's clocks are still rising from idle.
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    for (int round = 0; round < 2; ++round) {
      if (Libs().cudnnFindConvolutionForwardAlgorithm(context_->cudnn(), x_desc_, w_desc_, conv_desc_,
                                                      y_desc_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                      perf) != CUDNN_STATUS_SUCCESS) {
        returned = 0;
      }
    }
    bool found = false;
    for (int i = 0; i < returned; ++i) found = found || Usable(perf[i], dtype);
    if (!found) {
      ONNXKIT_RETURN_IF_ERROR(CudnnStatus(Libs().cudnnGetConvolutionForwardAlgorithm_v7(
                                              context_->cudnn(), x_desc_, w_desc_, conv_desc_, y_desc_,
                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                                          "choosing a convolution algorithm"));
    }
    for (int i = 0; i < returned; ++i) {
      if (!Usable(perf[i], dtype)) continue;
      algo_ = perf[i].algo;
      return CudnnStatus(
          Libs().cudnnGetConvolutionForwardWorkspaceSize(context_->cudnn(), x_desc_, w_desc_, conv_desc_,
                                                         y_desc_, algo_, &workspace_bytes_),
          "workspace size");
    }
    return absl::InternalError("cuDNN offers no algorithm for this convolution");
  }

  std::shared_ptr<Context> context_;
  reference::WindowAttrs attrs_;
  int64_t group_;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, b_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes_ = 0;
  std::vector<int64_t> planned_x_, planned_w_;
  int32_t planned_dtype_ = 0;
  std::optional<ConvFusion> fusion_;
  std::optional<Tensor> folded_w_, folded_b_;
  const void* folded_from_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeConvChain(const std::shared_ptr<Context>& context,
                                                          const ir::Node& conv, const ir::Node* batch_norm,
                                                          const std::vector<const ir::Node*>& nodes,
                                                          const std::vector<const ir::Value*>& extra) {
  auto attrs = reference::ParseWindowAttrs(conv);
  if (!attrs.ok() || attrs->ceil_mode || nodes.size() + 1 > static_cast<size_t>(kMaxChainOps) ||
      extra.size() + 2 > static_cast<size_t>(kMaxChainInputs)) {
    return std::unique_ptr<CudaKernel>();
  }
  ConvFusion fusion;
  const ir::Value* result = conv.output(0);
  if (batch_norm != nullptr) {
    fusion.batch_norm = true;
    fusion.epsilon = reference::AttrFloat(*batch_norm, "epsilon", 1e-5f);
    result = batch_norm->output(0);
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    std::optional<ChainOp> op = ElementwiseOpOf(*nodes[k]);
    if (!op || !ChainableOp(*nodes[k])) return std::unique_ptr<CudaKernel>();
    int* operands[] = {&op->a, &op->b};
    for (int i = 0; i < nodes[k]->num_inputs(); ++i) {
      const ir::Value* v = nodes[k]->input(i);
      int source = v == result ? 0 : -1;
      for (size_t m = 0; source < 0 && m < k; ++m) {
        if (nodes[m]->output(0) == v) source = static_cast<int>(m) + 1;
      }
      for (size_t j = 0; source < 0 && j < extra.size(); ++j) {
        if (extra[j] == v) source = kMaxChainOps + 2 + static_cast<int>(j);
      }
      if (v == nullptr || source < 0) return std::unique_ptr<CudaKernel>();
      *operands[i] = source;
    }
    fusion.ops.push_back(*op);
  }
  fusion.num_extra = static_cast<int>(extra.size());
  auto kernel = std::make_unique<ConvKernel>(context, *std::move(attrs), reference::AttrInt(conv, "group", 1),
                                             std::move(fusion));
  ONNXKIT_RETURN_IF_ERROR(kernel->Init());
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeConv(const std::shared_ptr<Context>& context, const ir::Node& node,
                                                     const KernelInfo&) {
  auto attrs = reference::ParseWindowAttrs(node);
  if (!attrs.ok() || attrs->ceil_mode) return std::unique_ptr<CudaKernel>();  // the cpu kernel reports it
  auto kernel = std::make_unique<ConvKernel>(context, *std::move(attrs), reference::AttrInt(node, "group", 1));
  ONNXKIT_RETURN_IF_ERROR(kernel->Init());
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace onnxkit::runner::cuda
