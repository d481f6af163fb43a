// The range guard of precision conversion (see precision.h): the original
// model runs once on the verification inputs while an observer reduces
// every float32 value (If/Loop/Scan bodies' included) to its largest finite |x|; a node
// that reads or writes a value outside the guard's limits stays float32, so
// that no value the target type cannot hold is ever cast to it.
//
//   ValueMagnitudes seen;
//   verify_options.observer = MagnitudeObserver(&seen);  // the one run
//   std::vector<ir::Node*> keep =
//       NodesBeyondRange(model.graph(), seen, RangeGuardLimits(pb::kFloat16));
//
// What it sees and decides:
//   - only finite elements count: a value that is Inf or NaN in float32 is
//     no reason to keep its node (float32 does not hold it either);
//   - the upper limit is half the target's largest finite value (32752 for
//     float16, about 1.7e38 for bfloat16): the guard sees one set of
//     inputs, and the converted node rounds its inputs and may accumulate
//     in the target type, so a value at half the range on these inputs is
//     taken as one that can reach the range on others;
//   - the lower limit is the target's smallest normal value (2^-14, about
//     6.1e-5, for float16; 2^-126 for bfloat16, float32's own): a value
//     that is not all zero but whose every element lies below it is held
//     by the target only as subnormals, with fewer significant bits the
//     smaller it is, and below 6e-8 not at all (it flushes to zero);
//   - the observer sees If/Loop/Scan bodies too (a Loop body's values over
//     every iteration, by name), so a node of any graph is kept when it
//     reads or writes a value past the limit; a node that does keeps every
//     node of those of its bodies that did not run at all (a branch not
//     taken: nothing is known of what it computes);
//   - values it has not seen (a node added by the opset step under a new
//     name) do not count.
#ifndef ONNXKIT_PASSES_CONVERT_RANGE_GUARD_H_
#define ONNXKIT_PASSES_CONVERT_RANGE_GUARD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "lib/ir/ir.h"
#include "runner/value.h"

namespace onnxkit::passes::convert {

// Largest finite |x| of each float32 value seen, by value name.
using ValueMagnitudes = absl::flat_hash_map<std::string, float>;

// The limits of the guard for `target` (pb::kFloat16 or pb::kBfloat16): a
// value keeps its nodes float32 when its largest finite |x| is above `high`,
// or above 0 and below `low`.
struct RangeLimits {
  double high = 0;
  double low = 0;
};
RangeLimits RangeGuardLimits(int32_t target);

// An observer (runner::SessionOptions::observer, VerifyOptions::observer)
// that folds each float32 tensor it is shown into `*seen` (the largest
// finite |x| per value name, over every call); it keeps no tensor.
std::function<absl::Status(const ir::Value&, const runner::RtValue&)> MagnitudeObserver(
    ValueMagnitudes* seen);

// The nodes the guard keeps float32, each once, in pre-order (a node before
// the nodes of its bodies): every node of `main` or of a body that reads or
// writes a value whose magnitude is outside `limits`, and every node of the
// bodies (nested ones too) of such a node that did not run.
std::vector<ir::Node*> NodesBeyondRange(ir::Graph& main, const ValueMagnitudes& seen,
                                        const RangeLimits& limits);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_RANGE_GUARD_H_
