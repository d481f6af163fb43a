// Which scale (and zero point) element applies to element i of x in
// QuantizeLinear and DequantizeLinear: one for the whole tensor, one per
// index along an axis, or one per block of `block` indices along an axis.
// The reference kernels and the CUDA ones read it alike; plain C++ so that
// device code can include it.
#ifndef ONNXKIT_RUNNER_REFERENCE_QUANT_SCALE_MAP_H_
#define ONNXKIT_RUNNER_REFERENCE_QUANT_SCALE_MAP_H_

#include <cstdint>

#ifdef __CUDACC__
#define ONNXKIT_HOST_DEVICE __host__ __device__
#else
#define ONNXKIT_HOST_DEVICE
#endif

namespace onnxkit::runner::reference {

// x viewed as [outer, dim, inner] around the axis; a blocked scale has
// scale_dim = ceil(dim / block) entries along it.
struct ScaleMap {
  enum Mode : int { kTensor, kAxis, kBlocked };
  Mode mode = kTensor;
  int64_t dim = 1, inner = 1, block = 1, scale_dim = 1;
  ONNXKIT_HOST_DEVICE int64_t Index(int64_t i) const {
    switch (mode) {
      case kTensor: return 0;
      case kAxis: return (i / inner) % dim;
      case kBlocked: return ((i / (inner * dim)) * scale_dim + (i / inner) % dim / block) * inner + i % inner;
    }
    return 0;
  }
};

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_QUANT_SCALE_MAP_H_
