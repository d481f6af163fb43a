// Type-generic slicing and stacking of tensors, shared by the control flow
// and sequence kernels (Loop/Scan outputs, Scan inputs, SplitToSequence,
// ConcatFromSequence).
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/control_flow.h"
#include "runner/reference/dispatch.h"

namespace onnxkit::runner::reference::tensor_ops {
namespace {

std::string ShapeStr(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

// Product of dims [begin, end) of a valid tensor shape (cannot overflow: the
// tensor exists).
int64_t Prod(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

}  // namespace

absl::StatusOr<Tensor> SliceRange(const Tensor& x, int64_t axis, int64_t start, int64_t count) {
  if (axis < 0 || axis >= x.rank()) {
    return absl::OutOfRangeError(absl::StrCat("axis ", axis, " is out of range for ", DescribeTensor(x)));
  }
  int64_t dim = x.dim(static_cast<int>(axis));
  if (start < 0 || count < 0 || start > dim || count > dim - start) {
    return absl::OutOfRangeError(absl::StrCat("range [", start, ", ", start, " + ", count, ") is outside axis ", axis,
                                              " of ", DescribeTensor(x)));
  }
  std::vector<int64_t> shape = x.shape();
  shape[static_cast<size_t>(axis)] = count;
  ONNXKIT_ASSIGN_OR_RETURN(Tensor y, Tensor::Allocate(x.dtype(), shape));
  int64_t outer = Prod(x.shape(), 0, static_cast<size_t>(axis));
  int64_t inner = Prod(x.shape(), static_cast<size_t>(axis) + 1, x.shape().size());
  ElementCopier copy(x, y);
  for (int64_t o = 0; o < outer; ++o) {
    copy.CopyRun((o * dim + start) * inner, o * count * inner, count * inner);
  }
  return y;
}

absl::StatusOr<Tensor> SliceAt(const Tensor& x, int64_t axis, int64_t index) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor y, SliceRange(x, axis, index, 1));
  std::vector<int64_t> shape = y.shape();
  shape.erase(shape.begin() + axis);
  return y.Reshaped(std::move(shape));
}

absl::StatusOr<Tensor> Concat(std::span<const Tensor> parts, int64_t axis, bool new_axis, std::string_view what) {
  if (parts.empty()) return absl::InvalidArgumentError(absl::StrCat("no ", Sv(what), " to concatenate"));
  const Tensor& first = parts[0];
  int64_t out_rank = first.rank() + (new_axis ? 1 : 0);
  if (axis < 0 || axis >= out_rank) {
    return absl::OutOfRangeError(absl::StrCat("axis ", axis, " is out of range for ", Sv(what), " ",
                                              DescribeTensor(first)));
  }
  std::vector<int64_t> out_shape = first.shape();
  if (new_axis) out_shape.insert(out_shape.begin() + axis, 0);
  int64_t total = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Tensor& t = parts[p];
    bool same = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int d = 0; same && d < t.rank(); ++d) {
      same = t.dim(d) == first.dim(d) || (!new_axis && d == axis);
    }
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(Sv(what), " ", p, " is ", DescribeTensor(t), ", expected ",
                                                     new_axis ? "" : "the same type and dims except at axis ",
                                                     new_axis ? "" : absl::StrCat(axis, " as "),
                                                     DescribeTensor(first)));
    }
    auto sum = CheckedAdd(total, new_axis ? 1 : t.dim(static_cast<int>(axis)));
    if (!sum) return absl::InvalidArgumentError(absl::StrCat(Sv(what), ": concatenated size overflows"));
    total = *sum;
  }
  out_shape[static_cast<size_t>(axis)] = total;
  if (!CheckedElementCount(out_shape)) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), ": result shape ", ShapeStr(out_shape), " is too large"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor y, Tensor::Allocate(first.dtype(), out_shape));
  int64_t outer = Prod(out_shape, 0, static_cast<size_t>(axis));
  int64_t out_block = Prod(out_shape, static_cast<size_t>(axis), out_shape.size());
  int64_t offset = 0;  // start of the current part within one outer block
  for (const Tensor& t : parts) {
    int64_t block = Prod(t.shape(), static_cast<size_t>(axis), t.shape().size());
    ElementCopier copy(t, y);
    for (int64_t o = 0; o < outer; ++o) copy.CopyRun(o * block, o * out_block + offset, block);
    offset += block;
  }
  return y;
}

int32_t DeclaredElemType(const pb::TypeProto* type) {
  while (type != nullptr) {
    if (type->tensor_type) return type->tensor_type->elem_type;
    if (type->sequence_type && type->sequence_type->elem_type) {
      type = type->sequence_type->elem_type.get();
    } else if (type->optional_type && type->optional_type->elem_type) {
      type = type->optional_type->elem_type.get();
    } else {
      return 0;
    }
  }
  return 0;
}

absl::StatusOr<Tensor> EmptyLike(const pb::TypeProto* type, std::vector<int64_t> lead) {
  int32_t dtype = DeclaredElemType(type);
  if (dtype == 0) dtype = 1;
  std::vector<int64_t> shape = std::move(lead);
  if (type != nullptr && type->tensor_type && type->tensor_type->shape) {
    std::vector<int64_t> dims;
    bool known = true;
    for (const auto& d : type->tensor_type->shape->dim) {
      known = known && d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value >= 0;
      dims.push_back(d.dim_value);
    }
    if (known) shape.insert(shape.end(), dims.begin(), dims.end());
  }
  return Tensor::Allocate(dtype, std::move(shape));
}

}  // namespace onnxkit::runner::reference::tensor_ops
