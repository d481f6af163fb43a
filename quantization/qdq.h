// QDQ insertion: decides, node by node in graph order and by the rules
// table, which activations get QuantizeLinear -> DequantizeLinear and with
// which parameters, which weights are stored int8 + DequantizeLinear and
// which biases int32, then rewrites the main graph.
//
// Before: %y = Conv(%x, %w, %b)
// After:  %xq = QuantizeLinear(%x, %xs, %xz); %xd = DequantizeLinear(%xq, %xs, %xz)
//         %wd = DequantizeLinear(%w_q, %ws, %wz, axis=0); %bd = DequantizeLinear(%b_q, %bs, %bz, axis=0)
//         %y0 = Conv(%xd, %wd, %bd); %y = DequantizeLinear(QuantizeLinear(%y0 ...)) for its consumers
#ifndef ONNXKIT_QUANTIZATION_QDQ_H_
#define ONNXKIT_QUANTIZATION_QDQ_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/io/model_io.h"
#include "quantization/calibration.h"
#include "quantization/calibrators.h"
#include "quantization/params.h"

namespace onnxkit::quant {

struct QdqOptions {
  std::vector<std::string> op_types;     // empty: every op of the rules table
  std::vector<std::string> exclude_ops;
  std::string exclude_nodes;             // ECMAScript regex on node names (labels for unnamed nodes)
  std::set<std::string> keep_float;      // node keys (NodeKey) left in float (--target-sqnr)
  QType act_type = QType::kUint8;
  QType weight_type = QType::kInt8;
  bool per_channel = true;
  // false: only the inputs of the quantized ops get QDQ, never their
  // outputs (and the same-scale family, which needs a quantized input
  // it would pass on, is skipped).
  bool quantize_outputs = true;
  CalibratorOptions calibrator;
};

struct ActivationRecord {
  std::string tensor;      // name in the float model
  std::string dq_output;   // its DequantizeLinear output in the quantized model
  std::string node;        // the node it was quantized for
  QParams params;
  Range range;             // what the calibrator chose
  double observed_min = 0, observed_max = 0;
  bool shared = false;     // takes its input's parameters (kSameScale)
  bool narrowed = false;   // range of the Relu/Clip that consumes it (values below 0 clamp)
  bool softmax = false;    // a Softmax output: fixed uint8 parameters (SoftmaxParams)
};

struct QdqResult {
  pb::ModelProto model;
  std::vector<ActivationRecord> activations;
  std::vector<std::string> quantized_nodes;  // NodeKey, in graph order
  int64_t weights = 0, per_channel_weights = 0, int32_biases = 0;
  std::vector<std::string> float_biases;     // biases kept float by the overflow guard
  // Weights whose scale was raised so that their int32 bias fits.
  std::vector<std::string> raised_weight_scales;
  std::vector<std::string> warnings;
};

// The key naming a main-graph node in reports and fallback lists: its name,
// or "#<index> (<op>)" when unnamed.
std::string NodeKey(const ir::Node& node, int index);

// Quantizes `model`. Errors: FailedPrecondition for opset < 10;
// InvalidArgument for a bad regex; the graph mutation's errors.
absl::StatusOr<QdqResult> InsertQdq(const io::LoadedModel& model, const Calibration& calibration,
                                    const QdqOptions& options);

}  // namespace onnxkit::quant

#endif  // ONNXKIT_QUANTIZATION_QDQ_H_
