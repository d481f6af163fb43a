// Reference kernels: ai.onnx.ml ops, the text ops of ai.onnx (string ops
// and TfIdfVectorizer) and the ai.onnx.preview.training optimizers, listed
// in ml.def.
#ifndef ONNXKIT_RUNNER_REFERENCE_ML_H_
#define ONNXKIT_RUNNER_REFERENCE_ML_H_

#include <memory>
#include <string_view>
#include <vector>

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// ml_strings.cc: StringNormalizer, StringConcat, StringSplit, RegexFullMatch.
absl::StatusOr<std::unique_ptr<Kernel>> MakeStringNormalizer(const ir::Node& node, const KernelInfo& info);
absl::Status StringConcat(KernelContext& ctx);
absl::Status StringSplit(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRegexFullMatch(const ir::Node& node, const KernelInfo& info);

// ml_tfidf.cc
absl::StatusOr<std::unique_ptr<Kernel>> MakeTfIdfVectorizer(const ir::Node& node, const KernelInfo& info);

// ml_basic.cc: ai.onnx.ml feature transforms.
absl::StatusOr<std::unique_ptr<Kernel>> MakeLabelEncoder1(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeLabelEncoder(const ir::Node& node, const KernelInfo& info);
absl::Status ArrayFeatureExtractor(KernelContext& ctx);
absl::Status Binarizer(KernelContext& ctx);

// ml_linear.cc: numeric transforms and linear models.
absl::Status Normalizer(KernelContext& ctx);
absl::Status Scaler(KernelContext& ctx);
absl::Status Imputer(KernelContext& ctx);
absl::Status OneHotEncoder(KernelContext& ctx);
absl::Status LinearRegressor(KernelContext& ctx);
absl::Status LinearClassifier(KernelContext& ctx);
absl::Status ZipMap(KernelContext& ctx);

// ml_training.cc: the optimizers of ai.onnx.preview.training.
absl::Status Adagrad(KernelContext& ctx);
absl::Status Momentum(KernelContext& ctx);
absl::Status Adam(KernelContext& ctx);
// Gradient: reverse-mode derivative of the nodes of its graph computing y (gradient.cc).
absl::StatusOr<std::unique_ptr<Kernel>> MakeGradient(const ir::Node& node, const KernelInfo& info);

// ml_tree.cc: TreeEnsemble (ai.onnx.ml 5), TreeEnsembleRegressor and
// TreeEnsembleClassifier (1, 3).
absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsemble(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsembleRegressor(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsembleClassifier(const ir::Node& node, const KernelInfo& info);

// ml_svm.cc: SVMClassifier, SVMRegressor.
absl::StatusOr<std::unique_ptr<Kernel>> MakeSVMClassifier(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeSVMRegressor(const ir::Node& node, const KernelInfo& info);

// ml_maps.cc: CategoryMapper, FeatureVectorizer, DictVectorizer, CastMap.
absl::StatusOr<std::unique_ptr<Kernel>> MakeCategoryMapper(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeFeatureVectorizer(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeDictVectorizer(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeCastMap(const ir::Node& node, const KernelInfo& info);

// Score post-processing shared by the ml models (ml_tree.cc).
namespace ml_util {

// The code of a post_transform name: NONE 0, SOFTMAX 1, LOGISTIC 2,
// SOFTMAX_ZERO 3, PROBIT 4; InvalidArgument for another name.
absl::StatusOr<int64_t> PostTransformCode(std::string_view name);
// Applies post_transform `code` to one row of scores in place.
void ApplyPostTransform(int64_t code, std::vector<double>& row);

}  // namespace ml_util

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_ML_H_
