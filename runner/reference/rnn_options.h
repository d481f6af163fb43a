// The attributes of RNN, GRU and LSTM as the kernels use them: the cell,
// hidden size, directions, layout, clip, GRU's linear_before_reset, LSTM's
// input_forget and the activations per direction (with their alpha and
// beta). Shared by the reference kernels (nn_rnn.cc) and the cpu backend's
// (runner/cpu/rnn.cc), so both read a node the same way.
#ifndef ONNXKIT_RUNNER_REFERENCE_RNN_OPTIONS_H_
#define ONNXKIT_RUNNER_REFERENCE_RNN_OPTIONS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/kernel.h"

namespace onnxkit::runner::reference {

enum class RnnCell { kRnn, kGru, kLstm };

// Gates per cell: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c).
inline int RnnGates(RnnCell c) { return c == RnnCell::kRnn ? 1 : (c == RnnCell::kGru ? 3 : 4); }
// Activations per direction: RNN 1, GRU 2, LSTM 3.
inline int RnnActivationsPerDirection(RnnCell c) {
  return c == RnnCell::kRnn ? 1 : (c == RnnCell::kGru ? 2 : 3);
}

struct RnnActivation {
  enum Kind {
    kRelu,
    kTanh,
    kSigmoid,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  };
  Kind kind = kTanh;
  double alpha = 0, beta = 0;

  template <typename T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta), zero = 0, one = 1;
    switch (kind) {
      case kRelu:
        return std::max(x, zero);
      case kTanh:
        return std::tanh(x);
      case kSigmoid:
        return one / (one + std::exp(-x));
      case kAffine:
        return a * x + b;
      case kLeakyRelu:
        return x >= zero ? x : a * x;
      case kThresholdedRelu:
        return x > a ? x : zero;
      case kScaledTanh:
        return a * std::tanh(b * x);
      case kHardSigmoid:
        return std::clamp(a * x + b, zero, one);
      case kElu:
        return x >= zero ? x : a * (std::exp(x) - one);
      case kSoftsign:
        return x / (one + std::abs(x));
      case kSoftplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

struct RnnOptions {
  RnnCell cell = RnnCell::kRnn;
  int64_t hidden = 0;  // 0: from R's shape
  int directions = 1;
  bool reverse_only = false;
  bool batch_first = false;  // layout = 1
  std::optional<double> clip;
  bool linear_before_reset = false;
  bool input_forget = false;
  std::vector<RnnActivation> acts;  // per direction, RnnActivationsPerDirection each
};

// The options of an RNN, GRU or LSTM node at `info.opset`; InvalidArgument
// for attributes outside their ranges or an unknown activation.
absl::StatusOr<RnnOptions> ParseRnnOptions(const ir::Node& node, const KernelInfo& info, RnnCell cell);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_RNN_OPTIONS_H_
