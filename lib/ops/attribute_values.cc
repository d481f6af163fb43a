// The enumerated string attributes of ai.onnx ops, as the operator
// documentation lists them (see attribute_values.h).
#include "lib/ops/attribute_values.h"

namespace onnxkit::ops {
namespace {

// The values of `attribute` of `op` from schema version `since` on, until a
// later entry of the same op and attribute.
struct EnumAttribute {
  std::string_view op;
  std::string_view attribute;
  int64_t since;
  std::vector<std::string_view> values;
};

const std::vector<EnumAttribute>& Table() {
  static const auto* table = [] {
    const std::vector<std::string_view> auto_pad = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    const std::vector<std::string_view> direction = {"forward", "reverse", "bidirectional"};
    const std::vector<std::string_view> loss_reduction = {"none", "sum", "mean"};
    const std::vector<std::string_view> nearest_mode = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    // tf_half_pixel_for_nn left the list at Resize-13; runtimes still accept it.
    const std::vector<std::string_view> coord11 = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                                   "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    std::vector<std::string_view> coord19 = coord11;
    coord19.push_back("half_pixel_symmetric");
    auto* t = new std::vector<EnumAttribute>{
        {"Pad", "mode", 1, {"constant", "reflect", "edge"}},
        {"Pad", "mode", 19, {"constant", "reflect", "edge", "wrap"}},
        // "bilinear": the spelling of Upsample-1, still accepted by runtimes.
        {"Upsample", "mode", 1, {"nearest", "linear", "bilinear"}},
        {"Resize", "mode", 10, {"nearest", "linear", "bilinear"}},
        {"Resize", "mode", 11, {"nearest", "linear", "bilinear", "cubic"}},
        {"Resize", "coordinate_transformation_mode", 11, coord11},
        {"Resize", "coordinate_transformation_mode", 19, coord19},
        {"Resize", "nearest_mode", 11, nearest_mode},
        {"Resize", "keep_aspect_ratio_policy", 18, {"stretch", "not_larger", "not_smaller"}},
        {"GridSample", "mode", 16, {"bilinear", "nearest", "bicubic"}},
        {"GridSample", "mode", 20, {"linear", "nearest", "cubic"}},
        {"GridSample", "padding_mode", 16, {"zeros", "border", "reflection"}},
        {"ScatterElements", "reduction", 16, {"none", "add", "mul"}},
        {"ScatterElements", "reduction", 18, {"none", "add", "mul", "max", "min"}},
        {"ScatterND", "reduction", 16, {"none", "add", "mul"}},
        {"ScatterND", "reduction", 18, {"none", "add", "mul", "max", "min"}},
        {"DepthToSpace", "mode", 11, {"DCR", "CRD"}},
        {"Gelu", "approximate", 20, {"none", "tanh"}},
        {"RoiAlign", "mode", 10, {"avg", "max"}},
        {"RoiAlign", "coordinate_transformation_mode", 16, {"half_pixel", "output_half_pixel"}},
        {"BitShift", "direction", 11, {"LEFT", "RIGHT"}},
        {"RNN", "direction", 1, direction},
        {"GRU", "direction", 1, direction},
        {"LSTM", "direction", 1, direction},
        {"NegativeLogLikelihoodLoss", "reduction", 12, loss_reduction},
        {"SoftmaxCrossEntropyLoss", "reduction", 12, loss_reduction},
        {"StringNormalizer", "case_change_action", 10, {"LOWER", "UPPER", "NONE"}},
        {"TfIdfVectorizer", "mode", 9, {"TF", "IDF", "TFIDF"}},
        {"ImageDecoder", "pixel_format", 20, {"RGB", "BGR", "Grayscale"}},
    };
    for (std::string_view op :
         {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool"}) {
      t->push_back({op, "auto_pad", 1, auto_pad});
    }
    return t;
  }();
  return *table;
}

// The entry in effect for `op`'s `attribute` at schema version `version`.
const EnumAttribute* Find(std::string_view op, std::string_view attribute, int64_t version) {
  const EnumAttribute* best = nullptr;
  for (const EnumAttribute& e : Table()) {
    if (e.op == op && e.attribute == attribute && e.since <= version && (best == nullptr || e.since > best->since)) {
      best = &e;
    }
  }
  return best;
}

}  // namespace

const std::vector<std::string_view>* EnumValues(std::string_view op, std::string_view attribute, int64_t version) {
  const EnumAttribute* e = Find(op, attribute, version);
  return e == nullptr ? nullptr : &e->values;
}

bool AcceptsValue(std::string_view op, std::string_view attribute, int64_t version, std::string_view value) {
  const std::vector<std::string_view>* values = EnumValues(op, attribute, version);
  if (values == nullptr) return true;
  for (std::string_view v : *values) {
    if (v == value) return true;
  }
  return false;
}

int64_t FirstVersionAccepting(std::string_view op, std::string_view attribute, std::string_view value,
                              int64_t version) {
  int64_t first = 0;
  for (const EnumAttribute& later : Table()) {
    if (later.op != op || later.attribute != attribute || later.since <= version) continue;
    for (std::string_view v : later.values) {
      if (v == value && (first == 0 || later.since < first)) first = later.since;
    }
  }
  return first;
}

}  // namespace onnxkit::ops
