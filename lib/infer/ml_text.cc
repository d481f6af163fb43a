// Shape functions of ai.onnx.ml ops (LabelEncoder, CategoryMapper, the
// classifiers, TreeEnsemble, ArrayFeatureExtractor), text ops (TfIdfVectorizer, StringNormalizer,
// StringSplit) and the optimizers of ai.onnx.preview.training (Adagrad,
// Momentum, Adam: each new tensor is shaped like the one it updates).
//
//   TreeEnsemble(X [N, F], n_targets=2) -> [N, 2]
//   TfIdfVectorizer(X [N, C], ngram_indexes=[0, 1, 2]) -> [N, 3]
//   Adam(R, T, X1, X2, G1, G2, V1, V2, H1, H2) -> X1', X2', V1', V2', H1', H2'
#include <algorithm>
#include <limits>
#include <utility>

#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"

namespace onnxkit::infer {

void ShapeTreeEnsemble(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr || x->empty()) return;
  const int64_t targets = ctx.attr_int("n_targets", -1);
  ctx.set_shape(0, {(*x)[0], targets >= 0 ? Dim::Of(targets) : Dim::Unknown()});
}

void ShapeArrayFeatureExtractor(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  const Dims* y = ctx.input_shape(1);
  if (x == nullptr || y == nullptr || x->empty()) return;
  Dims out = x->size() == 1 ? Dims{Dim::Of(1)} : Dims(x->begin(), x->end() - 1);
  out.push_back(ctx.Product(*y));
  ctx.set_shape(0, std::move(out));
}

void ShapeTfIdfVectorizer(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  std::optional<std::vector<int64_t>> indexes = ctx.attr_ints("ngram_indexes");
  if (x == nullptr || (x->size() != 1 && x->size() != 2)) return;
  Dim width = Dim::Unknown();
  if (indexes && !indexes->empty()) {
    int64_t max = *std::max_element(indexes->begin(), indexes->end());
    if (max >= 0 && max < std::numeric_limits<int64_t>::max()) width = Dim::Of(max + 1);
  }
  ctx.set_shape(0, x->size() == 1 ? Dims{width} : Dims{(*x)[0], width});
}

// StringNormalizer: [C] or [1, C]; stopwords may remove elements.
void ShapeStringNormalizer(NodeContext& ctx) {
  const Dims* x = ctx.input_shape(0);
  if (x == nullptr || x->empty()) return;
  Dims out = *x;
  if (ctx.has_attr("stopwords")) out.back() = Dim::Unknown();
  ctx.set_shape(0, std::move(out));
}

// Adagrad (X, G, H -> X', H'), Momentum (X, G, V -> X', V'), Adam
// (X, G, V, H -> X', V', H'), each group holding n tensors after R and T.
void ShapeOptimizer(NodeContext& ctx) {
  const bool adam = ctx.op() == "Adam";
  const int groups_in = adam ? 4 : 3;
  const int n = (ctx.num_inputs() - 2) / groups_in;
  if (n <= 0) return;
  // Output group k reads input group input_group[k].
  const int input_group[3] = {0, 2, 3};
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    int group = i / n;
    if (group >= (adam ? 3 : 2)) break;
    // The formals are heterogeneous variadic: the schema binds no type.
    if (const Type* t = ctx.input_type(2 + input_group[group] * n + i % n)) ctx.set_type(i, *t);
  }
}

// ai.onnx.ml LabelEncoder: shaped like the input, typed by the values_*
// attribute present.
void ShapeLabelEncoder(NodeContext& ctx) {
  if (ctx.has_attr("values_strings")) {
    ctx.set_elem(0, pb::kString);
  } else if (ctx.has_attr("values_int64s")) {
    ctx.set_elem(0, pb::kInt64);
  } else if (ctx.has_attr("values_floats")) {
    ctx.set_elem(0, pb::kFloat);
  } else if (const ir::Attribute* a = ctx.attr("values_tensor"); a != nullptr && a->proto.t) {
    ctx.set_elem(0, a->proto.t->data_type);
  } else if (ctx.opset() == 1 && ctx.input_elem(0) != 0) {
    // LabelEncoder-1 maps strings to int64 and back.
    ctx.set_elem(0, ctx.input_elem(0) == pb::kString ? pb::kInt64 : pb::kString);
  }
  ctx.PropagateShape(0, 0);
}

// ai.onnx.ml LinearClassifier, SVMClassifier, TreeEnsembleClassifier: the
// labels Y are strings or int64 after the classlabels_* attribute, one per
// row of X.
void ShapeClassifier(NodeContext& ctx) {
  ctx.set_elem(0, ctx.has_attr("classlabels_strings") ? pb::kString : pb::kInt64);
  const Dims* x = ctx.input_shape(0);
  if (x != nullptr && x->size() == 2) ctx.set_shape(0, {(*x)[0]});
}

// ai.onnx.ml CategoryMapper: strings to int64 and back, shaped like the input.
void ShapeCategoryMapper(NodeContext& ctx) {
  if (int32_t in = ctx.input_elem(0); in != 0) ctx.set_elem(0, in == pb::kString ? pb::kInt64 : pb::kString);
  ctx.PropagateShape(0, 0);
}

// StringSplit: Y is the input shape plus a dim for the substrings; Z the
// input shape.
void ShapeStringSplit(NodeContext& ctx) {
  const Dims* in = ctx.input_shape(0);
  if (in == nullptr) return;
  Dims y = *in;
  y.push_back(Dim::Unknown());
  ctx.set_shape(0, std::move(y));
  ctx.set_shape(1, *in);
}

}  // namespace onnxkit::infer
