// Reference kernels: ai.onnx.ml feature transforms.
//
// LabelEncoder (1: classes_strings, int64 <-> string by position; 2+: keys_*
//   and values_* lists; 4+: keys_tensor / values_tensor / default_tensor).
//   Float keys compare by value (0.0 == -0.0, NaN matches NaN). A missing
//   key maps to the default: default_tensor, else default_string
//   ("_Unused"), default_int64 (-1) or default_float (-0.0) by value type.
// ArrayFeatureExtractor: X[..., indices] ([1, k] for 1-D X).
// Binarizer: x > threshold ? 1 : 0.
#include <cmath>
#include <cstring>
#include <map>
#include <type_traits>

#include "lib/base/status_macros.h"
#include "runner/convert.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

bool IsIntType(int32_t t) { return t == 2 || t == 3 || t == 4 || t == 5 || t == 6 || t == 7 || t == 12 || t == 13; }
bool IsFloatType(int32_t t) { return t == 1 || t == 10 || t == 11 || t == 16; }


// A map key for element i of a string, integer or float tensor.
std::string KeyOf(const Tensor& t, int64_t i) {
  if (t.is_string()) return "s" + t.strings()[static_cast<size_t>(i)];
  double v = shape_ops::LoadDouble(t, i);
  if (IsIntType(t.dtype())) return absl::StrCat("i", static_cast<int64_t>(v));
  if (std::isnan(v)) return "fnan";
  if (v == 0) v = 0;  // -0.0 == 0.0
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return absl::StrCat("f", bits);
}

absl::StatusOr<Tensor> TensorAttr(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (a == nullptr || !a->proto.t) return Tensor();
  return TensorFromProto(*a->proto.t);
}

template <typename T>
absl::StatusOr<Tensor> Vector1D(int32_t dtype, const std::vector<T>& values) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, {static_cast<int64_t>(values.size())}));
  for (size_t i = 0; i < values.size(); ++i) t.mutable_data<T>()[i] = values[i];
  return t;
}

class LabelEncoderKernel : public Kernel {
 public:
  LabelEncoderKernel(std::map<std::string, int64_t> index, Tensor values, Tensor fallback)
      : index_(std::move(index)), values_(std::move(values)), default_(std::move(fallback)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, values_.dtype(), x->shape()));
    ElementCopier from_values(values_, *y), from_default(default_, *y);
    for (int64_t i = 0; i < x->size(); ++i) {
      auto it = index_.find(KeyOf(*x, i));
      if (it != index_.end()) {
        from_values.Copy(it->second, i);
      } else {
        from_default.Copy(0, i);
      }
    }
    return absl::OkStatus();
  }

 private:
  std::map<std::string, int64_t> index_;
  Tensor values_;
  Tensor default_;
};

// LabelEncoder-1: classes_strings maps int64 i <-> classes_strings[i].
class LabelEncoder1Kernel : public Kernel {
 public:
  LabelEncoder1Kernel(std::vector<std::string> classes, int64_t default_int, std::string default_string)
      : classes_(std::move(classes)), default_int_(default_int), default_string_(std::move(default_string)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->is_string()) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, x->shape()));
      for (int64_t i = 0; i < x->size(); ++i) {
        auto it = std::find(classes_.begin(), classes_.end(), x->strings()[static_cast<size_t>(i)]);
        y->mutable_data<int64_t>()[i] = it == classes_.end() ? default_int_ : it - classes_.begin();
      }
      return absl::OkStatus();
    }
    if (x->dtype() != 7) return absl::InvalidArgumentError(absl::StrCat("X must be int64 or string, got ", DescribeTensor(*x)));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 8, x->shape()));
    for (int64_t i = 0; i < x->size(); ++i) {
      int64_t v = x->data<int64_t>()[i];
      bool in_range = v >= 0 && v < static_cast<int64_t>(classes_.size());
      y->mutable_strings()[static_cast<size_t>(i)] = in_range ? classes_[static_cast<size_t>(v)] : default_string_;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> classes_;
  int64_t default_int_;
  std::string default_string_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeLabelEncoder1(const ir::Node& node, const KernelInfo&) {
  std::vector<std::string> classes;
  if (const ir::Attribute* a = node.FindAttribute("classes_strings")) classes = a->proto.strings;
  return std::unique_ptr<Kernel>(new LabelEncoder1Kernel(std::move(classes), AttrInt(node, "default_int64", -1),
                                                         AttrString(node, "default_string", "_Unused")));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeLabelEncoder(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor keys, TensorAttr(node, "keys_tensor"));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor values, TensorAttr(node, "values_tensor"));
  if (!keys.defined()) {
    if (const ir::Attribute* a = node.FindAttribute("keys_strings")) {
      ONNXKIT_ASSIGN_OR_RETURN(keys, Tensor::Strings({static_cast<int64_t>(a->proto.strings.size())}, a->proto.strings));
    } else if (node.FindAttribute("keys_int64s") != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(keys, Vector1D<int64_t>(7, AttrInts(node, "keys_int64s")));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(keys, Vector1D<float>(1, AttrFloats(node, "keys_floats")));
    }
  }
  if (!values.defined()) {
    if (const ir::Attribute* a = node.FindAttribute("values_strings")) {
      ONNXKIT_ASSIGN_OR_RETURN(values, Tensor::Strings({static_cast<int64_t>(a->proto.strings.size())}, a->proto.strings));
    } else if (node.FindAttribute("values_int64s") != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(values, Vector1D<int64_t>(7, AttrInts(node, "values_int64s")));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(values, Vector1D<float>(1, AttrFloats(node, "values_floats")));
    }
  }
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("LabelEncoder has ", keys.size(), " keys but ", values.size(), " values"));
  }
  if (!keys.is_string() && !IsIntType(keys.dtype()) && !IsFloatType(keys.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported key type ", DescribeTensor(keys)));
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor fallback, TensorAttr(node, "default_tensor"));
  if (fallback.defined() && (fallback.dtype() != values.dtype() || fallback.size() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("default_tensor must hold one ", Sv(DataTypeName(values.dtype())),
                                                   ", got ", DescribeTensor(fallback)));
  }
  if (!fallback.defined()) {
    if (values.is_string()) {
      ONNXKIT_ASSIGN_OR_RETURN(fallback, Tensor::Strings({1}, {AttrString(node, "default_string", "_Unused")}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(fallback, Tensor::Allocate(values.dtype(), {1}));
      double def = IsFloatType(values.dtype()) ? AttrFloat(node, "default_float", -0.0f)
                                                : static_cast<double>(AttrInt(node, "default_int64", -1));
      ONNXKIT_RETURN_IF_ERROR(VisitNumeric(values.dtype(), [&](auto tag) -> absl::Status {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
          fallback.mutable_data<T>()[0] = static_cast<T>(def);
        } else if constexpr (std::is_integral_v<T>) {
          fallback.mutable_data<T>()[0] = static_cast<T>(static_cast<int64_t>(def));
        } else {
          fallback.mutable_data<T>()[0] = T(static_cast<float>(def));
        }
        return absl::OkStatus();
      }));
    }
  }
  std::map<std::string, int64_t> index;
  for (int64_t i = 0; i < keys.size(); ++i) index.emplace(KeyOf(keys, i), i);
  return std::unique_ptr<Kernel>(new LabelEncoderKernel(std::move(index), std::move(values), std::move(fallback)));
}

absl::Status ArrayFeatureExtractor(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* idx_t, ctx.Input(1));
  if (x->rank() == 0 || idx_t->dtype() != 7) {
    return absl::InvalidArgumentError(absl::StrCat("need X of rank >= 1 and int64 indices, got ", DescribeTensor(*x),
                                                   " and ", DescribeTensor(*idx_t)));
  }
  const int64_t width = x->shape().back(), k = idx_t->size();
  const int64_t* idx = idx_t->data<int64_t>();
  for (int64_t j = 0; j < k; ++j) {
    if (idx[j] < 0 || idx[j] >= width) {
      return absl::OutOfRangeError(absl::StrCat("index ", idx[j], " is outside [0, ", width, ")"));
    }
  }
  std::vector<int64_t> shape = x->shape();
  shape.back() = k;
  if (x->rank() == 1) shape.insert(shape.begin(), 1);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), shape));
  ElementCopier copy(*x, *y);
  const int64_t rows = width == 0 ? 0 : x->size() / width;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < k; ++j) copy.Copy(r * width + idx[j], r * k + j);
  }
  return absl::OkStatus();
}

absl::Status Binarizer(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const double threshold = AttrFloat(ctx.node(), "threshold", 0.0f);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    for (int64_t i = 0; i < x->size(); ++i) {
      y->mutable_data<T>()[i] = static_cast<T>(static_cast<ComputeT<T>>(shape_ops::LoadDouble(*x, i) > threshold ? 1 : 0));
    }
    return absl::OkStatus();
  });
}

}  // namespace onnxkit::runner::reference
