// Verification by execution (see verify.h).
#include "passes/verify.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/status_macros.h"
#include "lib/ir/ir.h"
#include "runner/reference/float_types.h"
#include "runner/session.h"

namespace onnxkit::passes {
namespace {

// "NAME=2x3x4" for an input whose declared shape has symbolic or unknown
// dims, with those dims from `dims` or the default; "" when the shape is
// fixed or unknown in rank.
std::string ShapeFlagFor(const ir::Value& input, const VerifyOptions& options) {
  const pb::TypeProto* type = input.type();
  if (type == nullptr || !type->tensor_type || !type->tensor_type->shape) return "";
  bool symbolic = false;
  std::vector<std::string> parts;
  for (const auto& d : type->tensor_type->shape->dim) {
    if (d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value >= 0) {
      parts.push_back(absl::StrCat(d.dim_value));
      continue;
    }
    symbolic = true;
    auto it = d.kind == pb::TensorShapeProto::Dimension::kParam ? options.dims.find(d.dim_param) : options.dims.end();
    parts.push_back(absl::StrCat(it != options.dims.end() ? it->second : options.default_dim));
  }
  if (!symbolic) return "";
  if (parts.empty()) return "";
  return absl::StrCat(input.name(), "=", absl::StrJoin(parts, "x"));
}

bool IsHalf(int32_t dtype) { return dtype == pb::kFloat16 || dtype == pb::kBfloat16; }

// `t` (float32, float16 or bfloat16) as `dtype` (one of those), rounded to
// nearest even; `t` itself when it already is.
absl::StatusOr<runner::Tensor> Retype(const runner::Tensor& t, int32_t dtype) {
  if (t.dtype() == dtype) return t;
  ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor out, runner::Tensor::AllocateUninitialized(dtype, t.shape()));
  for (int64_t i = 0; i < t.size(); ++i) {
    float x = t.dtype() == pb::kFloat      ? t.data<float>()[i]
              : t.dtype() == pb::kFloat16 ? static_cast<float>(t.data<runner::Float16>()[i])
                                          : static_cast<float>(t.data<runner::BFloat16>()[i]);
    if (dtype == pb::kFloat) {
      out.mutable_data<float>()[i] = x;
    } else if (dtype == pb::kFloat16) {
      out.mutable_data<runner::Float16>()[i] = runner::Float16(x);
    } else {
      out.mutable_data<runner::BFloat16>()[i] = runner::BFloat16(x);
    }
  }
  return out;
}

// The declared element type of a graph input; 0 when unknown.
int32_t DeclaredElem(const ir::Value& v) {
  const pb::TypeProto* t = v.type();
  return t != nullptr && t->tensor_type ? t->tensor_type->elem_type : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Verifier>> Verifier::Create(const io::LoadedModel& original, VerifyOptions options) {
  std::unique_ptr<Verifier> v(new Verifier());
  v->source_.path = original.path;
  v->source_.base_dir = original.base_dir;
  v->source_.mapping = original.mapping;
  if (options.inputs.dir.empty() && options.inputs.files.empty()) options.inputs.random = true;
  v->options_ = options;
  v->options_.observer = nullptr;

  io::LoadedModel copy = v->source_;
  copy.proto = original.proto;
  runner::SessionOptions session_options;
  session_options.backend = options.backend;
  session_options.timeout_seconds = options.timeout_seconds;
  session_options.observer = options.observer;
  session_options.observe_subgraphs = options.observe_subgraphs;
  auto session = runner::Session::Create(std::move(copy), session_options);
  if (!session.ok()) return AnnotateStatus(session.status(), "the original model cannot run");
  runner::InputSpec spec = options.inputs;
  std::vector<std::string> given_shapes;
  for (const std::string& s : spec.shapes) given_shapes.push_back(s.substr(0, s.find('=')));
  std::vector<std::string> defaulted;  // inputs whose symbolic dims take the default
  for (const ir::Value* input : (*session)->FeedInputs()) {
    if (std::find(given_shapes.begin(), given_shapes.end(), input->name()) != given_shapes.end()) continue;
    std::string flag = ShapeFlagFor(*input, options);
    if (flag.empty()) continue;
    spec.shapes.push_back(flag);
    defaulted.push_back(flag);
  }
  ONNXKIT_ASSIGN_OR_RETURN(v->feeds_, runner::PrepareInputs((*session)->FeedInputs(), spec));
  if (options.observer) {
    for (const ir::Value* input : (*session)->FeedInputs()) {
      for (const auto& [name, value] : v->feeds_) {
        if (name == input->name()) ONNXKIT_RETURN_IF_ERROR(options.observer(*input, value));
      }
    }
  }
  for (const ir::Value* out : (*session)->Outputs()) v->output_names_.push_back(out->name());
  auto outputs = (*session)->Run(v->feeds_);
  if (!outputs.ok()) {
    // Random values may be ones the model cannot take (a loop count of 0, an
    // index past a table): say how to give others.
    if (!spec.random)
      return AnnotateStatus(outputs.status(), "the original model fails on the verification inputs");
    std::string dims = defaulted.empty()
                           ? ""
                           : absl::StrCat(", other dims than ", absl::StrJoin(defaulted, ", "),
                                          " (symbolic dims at their default) with --shape NAME=DIMS");
    return AnnotateStatus(
        outputs.status(),
        absl::StrCat("the original model fails on the seeded random verification inputs (give "
                     "real ones with --input or --inputs",
                     dims, ", or skip the check with --no-verify)"));
  }
  v->expected_ = std::move(*outputs);
  if (!options.inputs.dir.empty()) {
    v->input_description_ = absl::StrCat("inputs from ", options.inputs.dir);
  } else if (!options.inputs.files.empty()) {
    v->input_description_ = absl::StrCat("inputs from ", absl::StrJoin(options.inputs.files, ", "));
  } else {
    v->input_description_ = absl::StrCat("random inputs, seed ", options.inputs.seed);
  }
  return v;
}

absl::StatusOr<std::vector<runner::RtValue>> Verifier::Execute(const pb::ModelProto& model,
                                                               std::vector<std::string>* output_names) const {
  io::LoadedModel copy = source_;
  copy.proto = model;
  runner::SessionOptions session_options;
  session_options.backend = options_.backend;
  session_options.timeout_seconds = options_.timeout_seconds;
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> session,
                           runner::Session::Create(std::move(copy), session_options));
  for (const ir::Value* out : session->Outputs()) output_names->push_back(out->name());
  // Feed what the candidate still takes (a pass may drop unused inputs).
  std::vector<std::pair<std::string, runner::RtValue>> feeds;
  for (const ir::Value* in : session->FeedInputs()) {
    bool found = false;
    for (const auto& [name, value] : feeds_) {
      if (name != in->name()) continue;
      found = true;
      int32_t want = DeclaredElem(*in);
      if (value.is_tensor() && value.tensor().dtype() == pb::kFloat && IsHalf(want)) {
        ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, Retype(value.tensor(), want));
        feeds.emplace_back(name, runner::RtValue::FromTensor(std::move(t)));
      } else {
        feeds.emplace_back(name, value);
      }
    }
    if (!found) return absl::InvalidArgumentError(absl::StrCat("the new model has an input '", in->name(),
                                                               "' the original does not have"));
  }
  return session->Run(std::move(feeds));
}

namespace {

// " (...)" when many of a float32 output's values are ones float16 cannot
// hold (nonzero below its smallest subnormal, or beyond its largest
// finite): the output's own type is the problem, not the computation.
std::string OutsideFloat16(const runner::Tensor& t) {
  constexpr float kSmallest = 5.9604645e-08f, kLargest = 65504.f;
  int64_t tiny = 0, huge = 0, nonzero = 0;
  const float* v = t.data<float>();
  for (int64_t k = 0; k < t.size(); ++k) {
    const float a = std::fabs(v[k]);
    if (!(a > 0) || !std::isfinite(a)) continue;
    ++nonzero;
    tiny += a < kSmallest / 2;
    huge += a > kLargest;
  }
  if (nonzero == 0 || 2 * (tiny + huge) < nonzero) return "";
  return absl::StrCat("; the float32 output itself is outside float16's range (", tiny + huge, " of ",
                      nonzero, " nonzero values ",
                      huge == 0   ? "below 5.96e-08"
                      : tiny == 0 ? "beyond 65504"
                                  : "below 5.96e-08 or beyond 65504",
                      "): keep the graph's inputs and outputs float32 (--keep-io-types)");
}

}  // namespace

absl::StatusOr<VerifyResult> Verifier::Check(const pb::ModelProto& candidate) const {
  VerifyResult result;
  std::vector<std::string> names;
  auto outputs = Execute(candidate, &names);
  if (!outputs.ok()) {
    result.ok = false;
    result.error = std::string(outputs.status().message());
    result.summary = absl::StrCat("the new model fails to run: ", result.error);
    return result;
  }
  if (outputs->size() != expected_.size()) {
    result.ok = false;
    result.summary = absl::StrCat("the new model has ", outputs->size(), " outputs, the original ", expected_.size());
    return result;
  }
  double worst = -1;
  std::string worst_text;
  for (size_t i = 0; i < expected_.size(); ++i) {
    runner::RtValue actual = (*outputs)[i];
    const bool float16_output = actual.is_tensor() && actual.tensor().dtype() == pb::kFloat16;
    if (actual.is_tensor() && IsHalf(actual.tensor().dtype()) && expected_[i].is_tensor() &&
        expected_[i].tensor().dtype() == pb::kFloat) {
      ONNXKIT_ASSIGN_OR_RETURN(runner::Tensor t, Retype(actual.tensor(), pb::kFloat));
      actual = runner::RtValue::FromTensor(std::move(t));
    }
    runner::Metrics m = runner::CompareValues(actual, expected_[i], runner::Tolerance{options_.atol, options_.rtol});
    bool low_sqnr = options_.min_sqnr_db && m.comparable && expected_[i].is_tensor() &&
                    expected_[i].tensor().dtype() == pb::kFloat && m.sqnr_db < *options_.min_sqnr_db;
    if (!m.comparable || !m.within_tolerance || low_sqnr) {
      if (result.ok) {
        result.summary = absl::StrCat("output '", output_names_[i], "' differs: ",
                                      m.comparable ? runner::FormatMetrics(m) : m.mismatch);
        if (m.comparable && m.within_tolerance) {
          absl::StrAppend(&result.summary, " (SQNR ", m.sqnr_db, " dB below ", *options_.min_sqnr_db, ")");
        }
        if (float16_output && expected_[i].is_tensor() && expected_[i].tensor().dtype() == pb::kFloat) {
          absl::StrAppend(&result.summary, OutsideFloat16(expected_[i].tensor()));
        }
      }
      result.ok = false;
    } else if (m.max_abs > worst) {
      worst = m.max_abs;
      worst_text = absl::StrCat("worst: '", output_names_[i], "' max abs ", m.max_abs);
      if (options_.min_sqnr_db) absl::StrAppend(&worst_text, ", SQNR ", m.sqnr_db, " dB");
    }
    result.outputs.push_back(OutputCheck{i < names.size() ? names[i] : output_names_[i], std::move(m)});
  }
  if (result.ok) {
    result.summary = expected_.empty() ? "no outputs to compare" : absl::StrCat("outputs match (", worst_text, ")");
  }
  return result;
}

}  // namespace onnxkit::passes
