// Model-local function calls.
#include "runner/function_kernel.h"

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"

namespace onnxkit::runner {
namespace {

void Substitute(std::vector<pb::NodeProto>* nodes, const pb::FunctionProto& function, const ir::Node& caller);

void SubstituteGraph(pb::GraphProto* g, const pb::FunctionProto& function, const ir::Node& caller) {
  Substitute(&g->node, function, caller);
}

void Substitute(std::vector<pb::NodeProto>* nodes, const pb::FunctionProto& function, const ir::Node& caller) {
  for (pb::NodeProto& node : *nodes) {
    std::vector<pb::AttributeProto> kept;
    for (pb::AttributeProto& attr : node.attribute) {
      if (!attr.ref_attr_name.empty()) {
        const ir::Attribute* given = caller.FindAttribute(attr.ref_attr_name);
        const pb::AttributeProto* value = given != nullptr ? &given->proto : nullptr;
        if (value == nullptr) {
          for (const auto& def : function.attribute_proto) {
            if (def.name == attr.ref_attr_name) value = &def;
          }
        }
        if (value == nullptr) continue;  // unset and no default: the attribute is absent
        std::string name = attr.name;
        attr = *value;
        attr.name = name;
        attr.ref_attr_name.clear();
      }
      if (attr.g) SubstituteGraph(attr.g.get(), function, caller);
      for (auto& sub : attr.graphs) SubstituteGraph(&sub, function, caller);
      kept.push_back(std::move(attr));
    }
    node.attribute = std::move(kept);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Graph>> InstantiateFunction(const pb::FunctionProto& function,
                                                               const ir::Node& caller) {
  pb::FunctionProto copy = function;
  // A GRAPH attribute of the caller cannot be substituted from the ir form
  // (the ir owns its subgraphs); such calls are rare and refused clearly.
  for (const auto& attr : caller.attributes()) {
    if (attr.g || !attr.graphs.empty()) {
      return absl::UnimplementedError(absl::StrCat("function '", function.name, "' called with a graph attribute"));
    }
  }
  Substitute(&copy.node, function, caller);
  auto body = ir::FunctionBodyFromProto(copy);
  if (!body.ok()) return AnnotateStatus(body.status(), absl::StrCat("function '", function.name, "'"));
  return std::move(*body);
}

absl::Status FunctionKernel::Run(KernelContext& ctx) {
  std::vector<RtValue> inputs;
  for (size_t i = 0; i < body_->inputs().size(); ++i) {
    const RtValue* v = ctx.Value(static_cast<int>(i));
    inputs.push_back(v != nullptr ? *v : RtValue());
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outputs, ctx.subgraphs()->RunIsolated(*body_, std::move(inputs)));
  for (int i = 0; i < ctx.num_outputs() && i < static_cast<int>(outputs.size()); ++i) {
    if (ctx.OutputRequested(i)) ONNXKIT_RETURN_IF_ERROR(ctx.SetOutput(i, std::move(outputs[static_cast<size_t>(i)])));
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::runner
