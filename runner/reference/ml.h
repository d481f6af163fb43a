// Reference kernels: ai.onnx.ml ops, and the text ops of ai.onnx (string
// ops and TfIdfVectorizer), listed in ml.def.
#ifndef ONNXKIT_RUNNER_REFERENCE_ML_H_
#define ONNXKIT_RUNNER_REFERENCE_ML_H_

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
absl::StatusOr<std::unique_ptr<Kernel>> MakeLabelEncoder(const ir::Node& node, const KernelInfo& info);
absl::Status ArrayFeatureExtractor(KernelContext& ctx);
absl::Status Binarizer(KernelContext& ctx);

// ml_tree.cc: TreeEnsemble (ai.onnx.ml 5).
absl::StatusOr<std::unique_ptr<Kernel>> MakeTreeEnsemble(const ir::Node& node, const KernelInfo& info);

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_ML_H_
