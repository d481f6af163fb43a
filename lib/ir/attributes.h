// Builders of AttributeProto values for NodeSpec / Node::SetAttribute,
// shared by the passes, convert's adapters and the runner's translations.
//
//   ir::NodeSpec spec{.op_type = "Cast", .attributes = {ir::IntAttr("to", pb::kFloat)}};
#ifndef ONNXKIT_LIB_IR_ATTRIBUTES_H_
#define ONNXKIT_LIB_IR_ATTRIBUTES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/io/proto.h"

namespace onnxkit::ir {

pb::AttributeProto IntAttr(std::string name, int64_t v);
pb::AttributeProto FloatAttr(std::string name, float v);
pb::AttributeProto StringAttr(std::string name, std::string v);
pb::AttributeProto IntsAttr(std::string name, std::vector<int64_t> v);
pb::AttributeProto FloatsAttr(std::string name, std::vector<float> v);
pb::AttributeProto StringsAttr(std::string name, std::vector<std::string> v);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_ATTRIBUTES_H_
