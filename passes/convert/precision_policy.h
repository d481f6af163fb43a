// What precision conversion may do to one node (see precision.h): the kept
// op list, and the role of each input from the operator's schema.
#ifndef ONNXKIT_PASSES_CONVERT_PRECISION_POLICY_H_
#define ONNXKIT_PASSES_CONVERT_PRECISION_POLICY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/ir.h"

namespace onnxkit::passes::convert {

// What a converted node expects of one input.
enum class SlotRole : uint8_t {
  kNone,     // not a float tensor of interest
  kTarget,   // computes in the target type (bound to the node's data type)
  kFloat32,  // must stay float32 (a concrete tensor(float), or coordinates)
  kEither,   // takes the value as it is (a type of its own, e.g. Pow's exponent)
};

struct SlotPlan {
  std::vector<SlotRole> inputs;
  // Whether input i, when kEither, may be the target type (else it gets a
  // Cast back to float32).
  std::vector<bool> either_allows_target;
  // Outputs that become the target type.
  std::vector<bool> outputs;
};

// The schema's plan for converting `node` to `target` at `opset`, or the
// reason it must stay float32. `is_float32(value)` tells whether a value is
// a float32 tensor in the original model.
struct NodeVerdict {
  bool convert = false;
  std::string reason;  // why kept (empty when converted)
  SlotPlan plan;
};
NodeVerdict PlanNode(const ir::Node& node, int64_t opset, int32_t target,
                     const std::function<bool(const ir::Value*)>& is_float32);

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_PRECISION_POLICY_H_
