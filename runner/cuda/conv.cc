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

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/cuda/kernels.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::cuda {
namespace {

class ConvKernel : public CudaKernel {
 public:
  ConvKernel(std::shared_ptr<Context> context, reference::WindowAttrs attrs, int64_t group)
      : context_(std::move(context)), attrs_(std::move(attrs)), group_(group) {}

  ~ConvKernel() override {
    if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
    if (b_desc_ != nullptr) cudnnDestroyTensorDescriptor(b_desc_);
    if (w_desc_ != nullptr) cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
  }

  absl::Status Init() {
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&x_desc_), "descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&y_desc_), "descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&b_desc_), "descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&w_desc_), "descriptor"));
    return CudnnStatus(cudnnCreateConvolutionDescriptor(&conv_desc_), "descriptor");
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
    return Geometry(*(*in)[0], *(*in)[1], in->size() > 2 ? (*in)[2] : nullptr).has_value();
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
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionForward(context_->cudnn(), &one, x_desc_, x.raw(), w_desc_, w.raw(), conv_desc_, algo_,
                                workspace->data(), workspace_bytes_, &zero, y_desc_, y.mutable_raw()),
        "cudnnConvolutionForward"));
    if (b != nullptr) {
      ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
          cudnnAddTensor(context_->cudnn(), &one, b_desc_, b->raw(), &one, y_desc_, y.mutable_raw()),
          "cudnnAddTensor"));
    }
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
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
  // float32 error is well above 1e-6); GEMM-based and direct algorithms only.
  static bool Usable(const cudnnConvolutionFwdAlgoPerf_t& perf) {
    switch (perf.algo) {
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return false;
      default:
        return perf.status == CUDNN_STATUS_SUCCESS;
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
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetTensorNdDescriptor(x_desc_, type, n, s.x.data(), Packed(s.x).data()), "input descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetTensorNdDescriptor(y_desc_, type, n, s.y.data(), Packed(s.y).data()), "output descriptor"));
    std::vector<int> b_dims(static_cast<size_t>(n), 1);
    b_dims[1] = s.y[1];
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetTensorNdDescriptor(b_desc_, type, n, b_dims.data(), Packed(b_dims).data()), "bias descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetFilterNdDescriptor(w_desc_, type, CUDNN_TENSOR_NCHW, n, s.w.data()), "filter descriptor"));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetConvolutionNdDescriptor(conv_desc_, spatial, s.pads.data(), s.strides.data(), s.dilations.data(),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "convolution descriptor"));
    ONNXKIT_RETURN_IF_ERROR(
        CudnnStatus(cudnnSetConvolutionGroupCount(conv_desc_, static_cast<int>(group_)), "group count"));
    const cudnnMathType_t math = dtype == kFloat16          ? CUDNN_TENSOR_OP_MATH
                                 : context_->allow_tf32() ? CUDNN_DEFAULT_MATH
                                                          : CUDNN_FMA_MATH;
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(conv_desc_, math), "math type"));
    // cuDNN must agree with the reference geometry.
    std::vector<int> out(static_cast<size_t>(n));
    ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
        cudnnGetConvolutionNdForwardOutputDim(conv_desc_, x_desc_, w_desc_, n, out.data()), "output dims"));
    if (out != s.y) return absl::InternalError("cuDNN computes another Conv output shape than the reference");
    // The fastest algorithm measured on this device for these shapes (cuDNN
    // runs each candidate once); its heuristic choice when measuring fails.
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    if (cudnnFindConvolutionForwardAlgorithm(context_->cudnn(), x_desc_, w_desc_, conv_desc_, y_desc_,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                             perf) != CUDNN_STATUS_SUCCESS) {
      returned = 0;
    }
    bool found = false;
    for (int i = 0; i < returned; ++i) found = found || Usable(perf[i]);
    if (!found) {
      ONNXKIT_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionForwardAlgorithm_v7(context_->cudnn(), x_desc_, w_desc_, conv_desc_, y_desc_,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
          "choosing a convolution algorithm"));
    }
    for (int i = 0; i < returned; ++i) {
      if (!Usable(perf[i])) continue;
      algo_ = perf[i].algo;
      return CudnnStatus(cudnnGetConvolutionForwardWorkspaceSize(context_->cudnn(), x_desc_, w_desc_, conv_desc_,
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
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> MakeConv(const std::shared_ptr<Context>& context, const ir::Node& node,
                                                     const KernelInfo&) {
  auto attrs = reference::ParseWindowAttrs(node);
  if (!attrs.ok() || attrs->ceil_mode) return std::unique_ptr<CudaKernel>();  // the cpu kernel reports it
  auto kernel = std::make_unique<ConvKernel>(context, *std::move(attrs), reference::AttrInt(node, "group", 1));
  ONNXKIT_RETURN_IF_ERROR(kernel->Init());
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

}  // namespace onnxkit::runner::cuda
