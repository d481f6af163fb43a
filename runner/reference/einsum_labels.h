// Einsum's labels: every axis of every input and of the output named by its
// equation letter (or by its position in the broadcast "..." dims), and the
// size of each label. Shared by the reference kernel (nn_einsum.cc), which
// sums over every label combination, and the cpu backend's
// (runner/cpu/einsum.cc), which runs two-input contractions as matrix
// products.
#ifndef ONNXKIT_RUNNER_REFERENCE_EINSUM_LABELS_H_
#define ONNXKIT_RUNNER_REFERENCE_EINSUM_LABELS_H_

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace onnxkit::runner::reference {

struct EinsumLabels {
  // Letters are their char codes; "..." dim k (left to right) is 256 + k.
  std::vector<std::vector<int>> inputs;  // per input, per axis
  std::vector<int> output;               // per output axis
  std::map<int, int64_t> size;           // broadcast "..." dims: the larger
};

// The labels of an Einsum with `equation` on inputs of `shapes`;
// InvalidArgument for a malformed equation, a term that does not fit its
// input, sizes that disagree or an output label that is unknown or repeated.
// Implicit mode ("ij,jk") outputs the "..." dims then the letters used once,
// in alphabetical order.
absl::StatusOr<EinsumLabels> LabelEinsum(std::string_view equation, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_EINSUM_LABELS_H_
