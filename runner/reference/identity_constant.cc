// Reference kernels: Identity (any value kind, no copy) and Constant (the
// value attribute, or value_float(s)/value_int(s)/value_string(s); the
// tensor is converted once at creation).
#include <cstring>

#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/misc.h"

namespace onnxkit::runner::reference {

absl::Status Identity(KernelContext& ctx) {
  const RtValue* v = ctx.Value(0);
  if (v == nullptr || !v->defined()) return absl::InvalidArgumentError("input 0 is missing");
  return ctx.SetOutput(0, *v);
}

namespace {

class ConstantKernel : public Kernel {
 public:
  explicit ConstantKernel(Tensor value) : value_(std::move(value)) {}
  absl::Status Run(KernelContext& ctx) override { return ctx.SetOutput(0, RtValue::FromTensor(value_)); }

 private:
  Tensor value_;
};

template <typename T>
absl::StatusOr<Tensor> FromValues(int32_t dtype, const std::vector<T>& values, bool scalar) {
  std::vector<int64_t> shape;
  if (!scalar) shape.push_back(static_cast<int64_t>(values.size()));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  if (!values.empty()) std::memcpy(t.mutable_raw(), values.data(), values.size() * sizeof(T));
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeConstant(const ir::Node& node, const KernelInfo&) {
  if (node.attributes().size() != 1) {
    return absl::InvalidArgumentError("Constant needs exactly one value attribute");
  }
  const pb::AttributeProto& a = node.attributes()[0].proto;
  Tensor value;
  if (a.name == "value" && a.t) {
    ONNXKIT_ASSIGN_OR_RETURN(value, TensorFromProto(*a.t));
  } else if (a.name == "value_float") {
    ONNXKIT_ASSIGN_OR_RETURN(value, FromValues<float>(1, {a.f}, true));
  } else if (a.name == "value_floats") {
    ONNXKIT_ASSIGN_OR_RETURN(value, FromValues<float>(1, a.floats, false));
  } else if (a.name == "value_int") {
    ONNXKIT_ASSIGN_OR_RETURN(value, FromValues<int64_t>(7, {a.i}, true));
  } else if (a.name == "value_ints") {
    ONNXKIT_ASSIGN_OR_RETURN(value, FromValues<int64_t>(7, a.ints, false));
  } else if (a.name == "value_string") {
    ONNXKIT_ASSIGN_OR_RETURN(value, Tensor::Strings({}, {a.s}));
  } else if (a.name == "value_strings") {
    ONNXKIT_ASSIGN_OR_RETURN(value, Tensor::Strings({static_cast<int64_t>(a.strings.size())}, a.strings));
  } else {
    return absl::UnimplementedError(absl::StrCat("Constant attribute '", a.name, "' is not supported"));
  }
  return std::unique_ptr<Kernel>(new ConstantKernel(std::move(value)));
}

}  // namespace onnxkit::runner::reference
