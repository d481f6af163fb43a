// KernelContext.
#include "runner/kernel.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"

namespace onnxkit::runner {

absl::StatusOr<const Tensor*> KernelContext::Input(int i) const {
  const RtValue* v = Value(i);
  if (v == nullptr || !v->defined()) {
    return absl::InvalidArgumentError(absl::StrCat("required input ", i, " is missing"));
  }
  if (!v->is_tensor()) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a tensor"));
  return &v->tensor();
}

absl::StatusOr<const Tensor*> KernelContext::OptionalInput(int i) const {
  const RtValue* v = Value(i);
  if (v == nullptr || !v->defined()) return nullptr;
  if (v->is_optional()) {
    if (!v->has_value()) return nullptr;
    if (!v->value().is_tensor())
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a tensor"));
    return &v->value().tensor();
  }
  if (!v->is_tensor()) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a tensor"));
  return &v->tensor();
}

bool KernelContext::OutputRequested(int i) const {
  if (i < 0 || i >= node_.num_outputs()) return false;
  const ir::Value* out = node_.output(i);
  return out != nullptr && !out->name().empty();
}

absl::StatusOr<Tensor*> KernelContext::AllocateOutput(int i, int32_t dtype, std::vector<int64_t> shape) {
  return AllocateOutputImpl(i, dtype, std::move(shape), true);
}

absl::StatusOr<Tensor*> KernelContext::AllocateOutputUninitialized(int i, int32_t dtype,
                                                                   std::vector<int64_t> shape) {
  return AllocateOutputImpl(i, dtype, std::move(shape), false);
}

absl::StatusOr<Tensor*> KernelContext::AllocateOutputReusing(int out, int in, int32_t dtype,
                                                             std::vector<int64_t> shape) {
  // A placed output goes where the session planned it.
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * placed, Placed(out, dtype, shape, false));
  if (placed != nullptr) return placed;
  const RtValue* v = Value(in);
  if (in >= 0 && static_cast<size_t>(in) < reusable_.size() && reusable_[static_cast<size_t>(in)] &&
      v != nullptr && v->is_tensor() && v->tensor().dtype() == dtype && v->tensor().shape() == shape &&
      out >= 0 && out < num_outputs()) {
    reusable_[static_cast<size_t>(in)] = false;
    (*outputs_)[static_cast<size_t>(out)] = *v;  // shares the buffer the input is about to release
    return &(*outputs_)[static_cast<size_t>(out)].mutable_tensor();
  }
  return AllocateOutputImpl(out, dtype, std::move(shape), false, /*ask_place=*/false);
}

absl::StatusOr<Tensor*> KernelContext::Placed(int i, int32_t dtype, const std::vector<int64_t>& shape,
                                              bool zero_fill) {
  if (place_output_ == nullptr || i < 0 || i >= num_outputs()) return nullptr;
  std::shared_ptr<Buffer> buffer = place_output_(place_output_state_, i, dtype, shape);
  if (buffer == nullptr) return nullptr;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Wrap(dtype, shape, std::move(buffer)));
  if (zero_fill && t.nbytes() > 0) std::memset(t.mutable_raw(), 0, t.nbytes());
  (*outputs_)[static_cast<size_t>(i)] = RtValue::FromTensor(std::move(t));
  return &(*outputs_)[static_cast<size_t>(i)].mutable_tensor();
}

absl::StatusOr<Tensor*> KernelContext::AllocateOutputImpl(int i, int32_t dtype, std::vector<int64_t> shape,
                                                          bool zero_fill, bool ask_place) {
  if (i < 0 || i >= num_outputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output ", i, " does not exist (the node has ", num_outputs(), ")"));
  }
  if (ask_place) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * placed, Placed(i, dtype, shape, zero_fill));
    if (placed != nullptr) return placed;
  }
  auto t = zero_fill ? Tensor::Allocate(dtype, std::move(shape))
                     : Tensor::AllocateUninitialized(dtype, std::move(shape));
  if (!t.ok()) return t.status();
  (*outputs_)[static_cast<size_t>(i)] = RtValue::FromTensor(std::move(*t));
  return &(*outputs_)[static_cast<size_t>(i)].mutable_tensor();
}

absl::Status KernelContext::SetOutput(int i, RtValue value) {
  if (i < 0 || i >= num_outputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output ", i, " does not exist (the node has ", num_outputs(), ")"));
  }
  (*outputs_)[static_cast<size_t>(i)] = std::move(value);
  return absl::OkStatus();
}

namespace {
thread_local const absl::flat_hash_set<const ir::Value*>* g_folded = nullptr;
}  // namespace

SessionConstantsScope::SessionConstantsScope(const absl::flat_hash_set<const ir::Value*>* folded)
    : saved_(g_folded) {
  g_folded = folded;
}
SessionConstantsScope::~SessionConstantsScope() { g_folded = saved_; }

bool IsSessionConstantInput(const ir::Node& node, int i) {
  if (i < 0 || i >= node.num_inputs()) return false;
  const ir::Value* v = node.inputs()[static_cast<size_t>(i)];
  if (v == nullptr) return false;
  if (v->kind() == ir::ValueKind::kInitializer)
    return v->IsConstant() || (g_folded != nullptr && g_folded->contains(v));
  if (v->kind() != ir::ValueKind::kNodeOutput || v->producer() == nullptr) return false;
  if (v->producer()->op_type() == "Constant" && v->producer()->domain().empty()) return true;
  return g_folded != nullptr && g_folded->contains(v);
}

}  // namespace onnxkit::runner
