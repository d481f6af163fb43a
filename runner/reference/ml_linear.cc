// Reference kernels: ai.onnx.ml numeric transforms and linear models.
//
// Normalizer: each row of [N, C] (or the vector [C]) is first divided by its
//   max |x| (when not 0), then for L1/L2 by that norm (when not 0); float out.
// Scaler: (x - offset) * scale, offset/scale per tensor or per column.
// Imputer: x equal to replaced_value_* (NaN matches NaN) becomes the imputed
//   value of its column (one value, or one per column).
// OneHotEncoder: X.shape + [categories], 1 where x equals the category; an
//   unknown value is an error when zeros is 0.
// LinearRegressor: [N, C] . coefficients^T + intercepts, then post_transform.
// LinearClassifier: the same scores (a single score with two class labels
//   becomes [-s, s]), post_transform, then the label of the best score (or,
//   with one score column, the first label where score >= 0, or >= 0.5 after
//   a transform).
// ZipMap: each row of [N, C] becomes a map from the C class labels to the
//   row's values (scalar float tensors); the output is the sequence of maps.
#include <cmath>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {


// X as rows x cols of a numeric tensor ([C] is one row).
absl::Status RowsCols(const Tensor& x, int64_t* rows, int64_t* cols) {
  if (x.is_string() || x.rank() == 0 || x.rank() > 2 || x.dtype() == 9) {
    return absl::InvalidArgumentError(absl::StrCat("X must be a numeric [N, C] or [C] tensor, got ", DescribeTensor(x)));
  }
  *cols = x.shape().back();
  *rows = x.rank() == 2 ? x.dim(0) : 1;
  return absl::OkStatus();
}

// Per-column parameter j of a list holding one value or `cols` values.
absl::StatusOr<std::vector<float>> PerColumn(const ir::Node& node, std::string_view name, int64_t cols, float def) {
  std::vector<float> v = AttrFloats(node, name, {def});
  if (v.size() != 1 && static_cast<int64_t>(v.size()) != cols) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", Sv(name), "' has ", v.size(), " values for ", cols,
                                                   " columns"));
  }
  if (v.size() == 1) v.assign(static_cast<size_t>(cols), v[0]);
  return v;
}

// Scores of a linear model: rows x targets, in float unless X is double.
absl::StatusOr<std::vector<double>> LinearScores(KernelContext& ctx, const Tensor& x, int64_t targets) {
  int64_t rows = 0, cols = 0;
  ONNXKIT_RETURN_IF_ERROR(RowsCols(x, &rows, &cols));
  std::vector<float> coef = AttrFloats(ctx.node(), "coefficients");
  std::vector<float> icpt = AttrFloats(ctx.node(), "intercepts");
  if (targets < 1 || static_cast<int64_t>(coef.size()) != targets * cols ||
      (!icpt.empty() && static_cast<int64_t>(icpt.size()) != targets)) {
    return absl::InvalidArgumentError(absl::StrCat("need ", targets, " x ", cols, " coefficients and ", targets,
                                                   " intercepts, got ", coef.size(), " and ", icpt.size()));
  }
  const bool single = x.dtype() != 11;
  std::vector<double> scores(static_cast<size_t>(rows * targets));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < targets; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += shape_ops::LoadDouble(x, r * cols + c) * coef[static_cast<size_t>(t * cols + c)];
      if (!icpt.empty()) acc += icpt[static_cast<size_t>(t)];
      scores[static_cast<size_t>(r * targets + t)] = single ? static_cast<double>(DoubleToFloat(acc)) : acc;
    }
  }
  return scores;
}

absl::Status StoreFloats(KernelContext& ctx, int out, std::vector<int64_t> shape, const std::vector<double>& v) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(out, 1, std::move(shape)));
  for (size_t i = 0; i < v.size(); ++i) y->mutable_data<float>()[i] = DoubleToFloat(v[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status Normalizer(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t rows = 0, cols = 0;
  ONNXKIT_RETURN_IF_ERROR(RowsCols(*x, &rows, &cols));
  std::string norm = AttrString(ctx.node(), "norm", "MAX");
  if (norm != "MAX" && norm != "L1" && norm != "L2") {
    return absl::InvalidArgumentError(absl::StrCat("norm must be MAX, L1 or L2, got '", norm, "'"));
  }
  std::vector<double> v(static_cast<size_t>(x->size()));
  for (int64_t r = 0; r < rows; ++r) {
    double* row = v.data() + r * cols;
    double mx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = shape_ops::LoadDouble(*x, r * cols + c);
      mx = std::max(mx, std::fabs(row[c]));
    }
    for (int64_t c = 0; c < cols && mx != 0; ++c) row[c] /= mx;
    if (norm == "MAX") continue;
    double n = 0;
    for (int64_t c = 0; c < cols; ++c) n += norm == "L1" ? std::fabs(row[c]) : row[c] * row[c];
    if (norm == "L2") n = std::sqrt(n);
    for (int64_t c = 0; c < cols && n != 0; ++c) row[c] /= n;
  }
  return StoreFloats(ctx, 0, x->shape(), v);
}

absl::Status Scaler(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t rows = 0, cols = 0;
  ONNXKIT_RETURN_IF_ERROR(RowsCols(*x, &rows, &cols));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<float> offset, PerColumn(ctx.node(), "offset", cols, 0));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<float> scale, PerColumn(ctx.node(), "scale", cols, 1));
  std::vector<double> v(static_cast<size_t>(x->size()));
  for (int64_t i = 0; i < x->size(); ++i) {
    size_t c = static_cast<size_t>(i % cols);
    v[static_cast<size_t>(i)] = (shape_ops::LoadDouble(*x, i) - offset[c]) * scale[c];
  }
  return StoreFloats(ctx, 0, x->shape(), v);
}

absl::Status Imputer(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->rank() == 0 || (x->dtype() != 1 && x->dtype() != 11 && x->dtype() != 6 && x->dtype() != 7)) {
    return absl::InvalidArgumentError(absl::StrCat("X must be a float/double/int32/int64 tensor, got ", DescribeTensor(*x)));
  }
  const bool is_float = x->dtype() == 1 || x->dtype() == 11;
  const int64_t cols = x->shape().back();
  std::vector<double> imputed;
  if (is_float) {
    for (float f : AttrFloats(ctx.node(), "imputed_value_floats")) imputed.push_back(f);
  } else {
    for (int64_t i : AttrInts(ctx.node(), "imputed_value_int64s")) imputed.push_back(static_cast<double>(i));
  }
  if (imputed.size() != 1 && static_cast<int64_t>(imputed.size()) != cols) {
    return absl::InvalidArgumentError(absl::StrCat("need 1 or ", cols, " imputed values, got ", imputed.size()));
  }
  const double replaced = is_float ? static_cast<double>(AttrFloat(ctx.node(), "replaced_value_float", 0))
                                   : static_cast<double>(AttrInt(ctx.node(), "replaced_value_int64", 0));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  return VisitNumeric(x->dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    for (int64_t i = 0; i < x->size(); ++i) {
      double v = shape_ops::LoadDouble(*x, i);
      bool hit = std::isnan(replaced) ? std::isnan(v) : v == replaced;
      double out = hit ? imputed[imputed.size() == 1 ? 0 : static_cast<size_t>(i % cols)] : v;
      y->mutable_data<T>()[i] = hit ? static_cast<T>(out) : x->data<T>()[i];
    }
    return absl::OkStatus();
  });
}

absl::Status OneHotEncoder(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  std::vector<int64_t> cats_int = AttrInts(ctx.node(), "cats_int64s");
  std::vector<std::string> cats_str;
  if (const ir::Attribute* a = ctx.node().FindAttribute("cats_strings")) cats_str = a->proto.strings;
  const bool zeros = AttrInt(ctx.node(), "zeros", 1) != 0;
  if (x->is_string() ? cats_str.empty() : cats_int.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no categories of X's kind (cats_", x->is_string() ? "strings" : "int64s",
                                                   ") for ", DescribeTensor(*x)));
  }
  const int64_t n = static_cast<int64_t>(x->is_string() ? cats_str.size() : cats_int.size());
  std::vector<int64_t> shape = x->shape();
  shape.push_back(n);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 1, shape));
  for (int64_t i = 0; i < x->size(); ++i) {
    int64_t hit = -1;
    for (int64_t c = 0; c < n && hit < 0; ++c) {
      bool eq = x->is_string() ? x->strings()[static_cast<size_t>(i)] == cats_str[static_cast<size_t>(c)]
                               : shape_ops::LoadDouble(*x, i) == static_cast<double>(cats_int[static_cast<size_t>(c)]);
      if (eq) hit = c;
    }
    if (hit < 0 && !zeros) return absl::InvalidArgumentError(absl::StrCat("element ", i, " of X is not a category"));
    if (hit >= 0) y->mutable_data<float>()[i * n + hit] = 1;
  }
  return absl::OkStatus();
}

absl::Status LinearRegressor(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t targets = AttrInt(ctx.node(), "targets", 1);
  ONNXKIT_ASSIGN_OR_RETURN(int64_t post, ml_util::PostTransformCode(AttrString(ctx.node(), "post_transform", "NONE")));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> scores, LinearScores(ctx, *x, targets));
  const int64_t rows = static_cast<int64_t>(scores.size()) / targets;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(scores.begin() + r * targets, scores.begin() + (r + 1) * targets);
    ml_util::ApplyPostTransform(post, row);
    std::copy(row.begin(), row.end(), scores.begin() + r * targets);
  }
  return StoreFloats(ctx, 0, {rows, targets}, scores);
}

absl::Status LinearClassifier(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  std::vector<int64_t> labels_int = AttrInts(ctx.node(), "classlabels_ints");
  std::vector<std::string> labels_str;
  if (const ir::Attribute* a = ctx.node().FindAttribute("classlabels_strings")) labels_str = a->proto.strings;
  const int64_t n_classes = static_cast<int64_t>(std::max(labels_int.size(), labels_str.size()));
  const int64_t cols = x->rank() > 0 ? x->shape().back() : 0;
  const int64_t targets = cols > 0 ? static_cast<int64_t>(AttrFloats(ctx.node(), "coefficients").size()) / cols : 0;
  ONNXKIT_ASSIGN_OR_RETURN(int64_t post, ml_util::PostTransformCode(AttrString(ctx.node(), "post_transform", "NONE")));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<double> raw, LinearScores(ctx, *x, targets));
  const int64_t rows = static_cast<int64_t>(raw.size()) / targets;
  const bool binary = targets == 1 && n_classes == 2;
  const int64_t width = binary ? 2 : targets;
  if (width > 1 && n_classes > 0 && n_classes < width) {
    return absl::InvalidArgumentError(absl::StrCat(n_classes, " class labels for ", width, " scores"));
  }
  std::vector<double> scores;
  std::vector<int64_t> best(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row = binary ? std::vector<double>{-raw[static_cast<size_t>(r)], raw[static_cast<size_t>(r)]}
                                     : std::vector<double>(raw.begin() + r * targets, raw.begin() + (r + 1) * targets);
    ml_util::ApplyPostTransform(post, row);
    if (width > 1) {
      best[static_cast<size_t>(r)] = std::max_element(row.begin(), row.end()) - row.begin();
    } else {
      best[static_cast<size_t>(r)] = row[0] >= (post == 0 ? 0.0 : 0.5) ? 1 : -1;  // -1: below the threshold
    }
    scores.insert(scores.end(), row.begin(), row.end());
  }
  if (!labels_str.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 8, {rows}));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t b = best[static_cast<size_t>(r)];
      y->mutable_strings()[static_cast<size_t>(r)] = width > 1 ? labels_str[static_cast<size_t>(b)] : b > 0 ? labels_str[0] : "";
    }
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 7, {rows}));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t b = best[static_cast<size_t>(r)];
      int64_t label = width > 1 ? (labels_int.empty() ? b : labels_int[static_cast<size_t>(b)])
                                : (b > 0 ? (labels_int.empty() ? 1 : labels_int[0]) : 0);
      y->mutable_data<int64_t>()[r] = label;
    }
  }
  return StoreFloats(ctx, 1, {rows, width}, scores);
}

absl::Status ZipMap(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t rows = 0, cols = 0;
  ONNXKIT_RETURN_IF_ERROR(RowsCols(*x, &rows, &cols));
  std::vector<int64_t> ints = AttrInts(ctx.node(), "classlabels_int64s");
  std::vector<std::string> strs;
  if (const ir::Attribute* a = ctx.node().FindAttribute("classlabels_strings")) strs = a->proto.strings;
  if (ints.empty() == strs.empty() || static_cast<int64_t>(std::max(ints.size(), strs.size())) != cols) {
    return absl::InvalidArgumentError(absl::StrCat("need exactly one of classlabels_int64s and classlabels_strings with ",
                                                   cols, " labels"));
  }
  Tensor keys;
  if (!strs.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(keys, Tensor::Strings({cols}, strs));
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(keys, Tensor::Allocate(7, {cols}));
    for (int64_t c = 0; c < cols; ++c) keys.mutable_data<int64_t>()[c] = ints[static_cast<size_t>(c)];
  }
  std::vector<RtValue> maps;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<RtValue> values;
    for (int64_t c = 0; c < cols; ++c) {
      values.push_back(RtValue::FromTensor(Tensor::Scalar<float>(1, DoubleToFloat(shape_ops::LoadDouble(*x, r * cols + c)))));
    }
    maps.push_back(RtValue::FromMap(keys, RtValue::FromSequence(std::move(values), 1)));
  }
  return ctx.SetOutput(0, RtValue::FromSequence(std::move(maps)));
}

}  // namespace onnxkit::runner::reference
