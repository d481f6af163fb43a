// Reference kernels: SequenceConstruct, SequenceEmpty, SequenceAt,
// SequenceInsert, SequenceErase, SequenceLength, SplitToSequence and
// ConcatFromSequence. Sequences share their element tensors (no copies).
#include "lib/base/status_macros.h"
#include "runner/reference/control_flow.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/sequence.h"

namespace onnxkit::runner::reference {
namespace {

absl::StatusOr<const RtValue*> SequenceInput(KernelContext& ctx, int i) {
  const RtValue* v = ctx.Value(i);
  if (v == nullptr || !v->defined()) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is missing"));
  if (!v->is_sequence()) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a sequence"));
  return v;
}

// The element type of a sequence: its recorded type, else its first element's.
int32_t ElemType(const RtValue& seq) {
  if (seq.elem_dtype() != 0) return seq.elem_dtype();
  for (const RtValue& e : seq.elements()) {
    if (e.is_tensor()) return e.tensor().dtype();
  }
  return 0;
}

// The optional position input `i` (an int32/int64 scalar) normalized against
// [-size, size - 1] (or [-size, size] when `allow_end`); `def` when omitted.
absl::StatusOr<int64_t> Position(KernelContext& ctx, int i, int64_t size, bool allow_end, int64_t def) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* p, ctx.OptionalInput(i));
  int64_t pos = def;
  if (p != nullptr) {
    if ((p->dtype() != 6 && p->dtype() != 7) || p->size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("position must be an int32 or int64 scalar, got ", DescribeTensor(*p)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*p));
    pos = v[0];
  }
  int64_t hi = allow_end ? size : size - 1;
  if (pos < -size || pos > hi) {
    return absl::OutOfRangeError(absl::StrCat("position ", pos, " is outside [", -size, ", ", hi,
                                              "] for a sequence of length ", size));
  }
  return pos < 0 ? pos + size : pos;
}

absl::Status SetSequence(KernelContext& ctx, std::vector<RtValue> elements, int32_t elem_dtype) {
  return ctx.SetOutput(0, RtValue::FromSequence(std::move(elements), elem_dtype));
}

}  // namespace

absl::Status SequenceConstruct(KernelContext& ctx) {
  std::vector<RtValue> elements;
  int32_t dtype = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
    if (i > 0 && t->dtype() != dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " is ", DescribeTensor(*t), ", input 0 is ",
                                                     Sv(DataTypeName(dtype)), ": all must have one element type"));
    }
    dtype = t->dtype();
    elements.push_back(RtValue::FromTensor(*t));
  }
  return SetSequence(ctx, std::move(elements), dtype);
}

absl::Status SequenceEmpty(KernelContext& ctx) {
  int64_t dtype = AttrInt(ctx.node(), "dtype", 1);
  if (!IsKnownDataType(static_cast<int32_t>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat("dtype ", dtype, " is not a tensor element type"));
  }
  return SetSequence(ctx, {}, static_cast<int32_t>(dtype));
}

absl::Status SequenceAt(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const RtValue* seq, SequenceInput(ctx, 0));
  int64_t n = static_cast<int64_t>(seq->elements().size());
  if (ctx.Value(1) == nullptr) return absl::InvalidArgumentError("input 1 (position) is required");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 1, n, /*allow_end=*/false, 0));
  return ctx.SetOutput(0, seq->elements()[static_cast<size_t>(pos)]);
}

absl::Status SequenceInsert(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const RtValue* seq, SequenceInput(ctx, 0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(1));
  int32_t dtype = ElemType(*seq);
  if (dtype != 0 && t->dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat("cannot insert ", DescribeTensor(*t), " into a sequence of ",
                                                   Sv(DataTypeName(dtype)), " tensors"));
  }
  int64_t n = static_cast<int64_t>(seq->elements().size());
  ONNXKIT_ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 2, n, /*allow_end=*/true, n));
  std::vector<RtValue> elements = seq->elements();
  elements.insert(elements.begin() + pos, RtValue::FromTensor(*t));
  return SetSequence(ctx, std::move(elements), t->dtype());
}

absl::Status SequenceErase(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const RtValue* seq, SequenceInput(ctx, 0));
  int64_t n = static_cast<int64_t>(seq->elements().size());
  if (n == 0) return absl::OutOfRangeError("cannot erase from an empty sequence");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 1, n, /*allow_end=*/false, -1));
  std::vector<RtValue> elements = seq->elements();
  elements.erase(elements.begin() + pos);
  return SetSequence(ctx, std::move(elements), ElemType(*seq));
}

absl::Status SequenceLength(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const RtValue* seq, SequenceInput(ctx, 0));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, {}));
  y->mutable_data<int64_t>()[0] = static_cast<int64_t>(seq->elements().size());
  return absl::OkStatus();
}

absl::Status SplitToSequence(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* split, ctx.OptionalInput(1));
  if (x->rank() == 0) return absl::InvalidArgumentError("cannot split a scalar");
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(AttrInt(ctx.node(), "axis", 0), x->rank()));
  int64_t dim = x->dim(static_cast<int>(axis));
  bool keepdims = AttrInt(ctx.node(), "keepdims", 1) != 0;
  std::vector<int64_t> sizes;
  if (split == nullptr) {
    sizes.assign(static_cast<size_t>(dim), 1);
  } else {
    if ((split->dtype() != 6 && split->dtype() != 7) || split->rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("split must be an int32/int64 scalar or 1-D tensor, got ", DescribeTensor(*split)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*split));
    if (split->rank() == 0) {
      if (v[0] <= 0) return absl::InvalidArgumentError(absl::StrCat("split size must be positive, got ", v[0]));
      for (int64_t start = 0; start < dim; start += v[0]) sizes.push_back(std::min(v[0], dim - start));
    } else {
      int64_t sum = 0;
      for (int64_t s : v) {
        if (s < 0 || s > dim - sum) {
          return absl::InvalidArgumentError(absl::StrCat("split sizes must be non-negative and sum to ", dim,
                                                         " (axis ", axis, " of ", DescribeTensor(*x), ")"));
        }
        sum += s;
      }
      if (sum != dim) {
        return absl::InvalidArgumentError(absl::StrCat("split sizes sum to ", sum, ", expected ", dim));
      }
      sizes = std::move(v);
    }
  }
  std::vector<RtValue> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Tensor part;
    if (split == nullptr && !keepdims) {
      ONNXKIT_ASSIGN_OR_RETURN(part, tensor_ops::SliceAt(*x, axis, start));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(part, tensor_ops::SliceRange(*x, axis, start, s));
    }
    parts.push_back(RtValue::FromTensor(std::move(part)));
    start += s;
  }
  return SetSequence(ctx, std::move(parts), x->dtype());
}

absl::Status ConcatFromSequence(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const RtValue* seq, SequenceInput(ctx, 0));
  std::optional<int64_t> axis_attr = ctx.node().GetInt("axis");
  if (!axis_attr) return absl::InvalidArgumentError("attribute 'axis' is required");
  bool new_axis = AttrInt(ctx.node(), "new_axis", 0) != 0;
  if (seq->elements().empty()) return absl::InvalidArgumentError("cannot concatenate an empty sequence");
  std::vector<Tensor> parts;
  for (const RtValue& e : seq->elements()) {
    if (!e.is_tensor()) return absl::InvalidArgumentError("sequence elements must be tensors");
    parts.push_back(e.tensor());
  }
  int64_t rank = parts[0].rank() + (new_axis ? 1 : 0);
  ONNXKIT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(*axis_attr, rank));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor y, tensor_ops::Concat(parts, axis, new_axis, "sequence element"));
  return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
}

}  // namespace onnxkit::runner::reference
