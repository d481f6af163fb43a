// Attribute builders (see attributes.h).
#include "lib/ir/attributes.h"

#include <utility>

namespace onnxkit::ir {
namespace {

pb::AttributeProto Named(std::string name, int32_t type) {
  pb::AttributeProto a;
  a.name = std::move(name);
  a.type = type;
  return a;
}

}  // namespace

pb::AttributeProto IntAttr(std::string name, int64_t v) {
  pb::AttributeProto a = Named(std::move(name), pb::kAttrInt);
  a.i = v;
  return a;
}

pb::AttributeProto FloatAttr(std::string name, float v) {
  pb::AttributeProto a = Named(std::move(name), pb::kAttrFloat);
  a.f = v;
  return a;
}

pb::AttributeProto StringAttr(std::string name, std::string v) {
  pb::AttributeProto a = Named(std::move(name), pb::kAttrString);
  a.s = std::move(v);
  return a;
}

pb::AttributeProto IntsAttr(std::string name, std::vector<int64_t> v) {
  pb::AttributeProto a = Named(std::move(name), pb::kAttrInts);
  a.ints = std::move(v);
  return a;
}

pb::AttributeProto FloatsAttr(std::string name, std::vector<float> v) {
  pb::AttributeProto a = Named(std::move(name), pb::kAttrFloats);
  a.floats = std::move(v);
  return a;
}

pb::AttributeProto StringsAttr(std::string name, std::vector<std::string> v) {
  pb::AttributeProto a = Named(std::move(name), pb::kAttrStrings);
  a.strings = std::move(v);
  return a;
}

}  // namespace onnxkit::ir
