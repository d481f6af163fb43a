// The error report (see report.h).
#include "quantization/report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/proto.h"
#include "runner/session.h"

namespace onnxkit::quant {

void ErrorStats::Add(const runner::Tensor& e, const runner::Tensor& a, bool top1, bool clamp_zero) {
  if (e.dtype() != pb::kFloat || a.dtype() != pb::kFloat || e.size() != a.size()) return;
  const float* pe = e.data<float>();
  const float* pa = a.data<float>();
  for (int64_t i = 0; i < e.size(); ++i) {
    double x = clamp_zero ? std::max(0.0f, pe[i]) : pe[i], y = pa[i];
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    signal += x * x;
    noise += (x - y) * (x - y);
    dot += x * y;
    actual += y * y;
    max_abs = std::max(max_abs, std::fabs(x - y));
  }
  int64_t last = e.rank() > 0 ? e.dim(e.rank() - 1) : 0;
  if (!top1 || last < 2) return;
  for (int64_t r = 0; r < e.size() / last; ++r) {
    const float* re = pe + r * last;
    const float* ra = pa + r * last;
    rows += 1;
    top1_match += (std::max_element(re, re + last) - re) == (std::max_element(ra, ra + last) - ra) ? 1 : 0;
  }
}

double ErrorStats::sqnr_db() const {
  if (noise <= 0) return 200;
  if (signal <= 0) return 0;
  return std::min(200.0, 10 * std::log10(signal / noise));
}

double ErrorStats::cosine() const {
  if (signal <= 0 && actual <= 0) return 1;
  if (signal <= 0 || actual <= 0) return 0;
  return dot / std::sqrt(signal * actual);
}

double ErrorStats::top1() const { return rows == 0 ? -1 : static_cast<double>(top1_match) / static_cast<double>(rows); }

double ErrorReport::min_output_sqnr() const {
  double m = 200;
  for (const OutputError& o : outputs) m = std::min(m, o.stats.sqnr_db());
  return m;
}

double ErrorReport::min_output_cosine() const {
  double m = 1;
  for (const OutputError& o : outputs) m = std::min(m, o.stats.cosine());
  return m;
}

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const io::LoadedModel& float_model,
                                                             const SampleSource* holdout,
                                                             runner::Backend backend,
                                                             double timeout_seconds) {
  std::unique_ptr<Evaluator> ev(new Evaluator());
  ev->float_model_ = &float_model;
  ev->holdout_ = holdout;
  ev->backend_ = backend;
  ev->timeout_seconds_ = timeout_seconds;
  runner::SessionOptions so;
  so.backend = backend;
  so.timeout_seconds = timeout_seconds;
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> s, runner::Session::Create(float_model, so));
  for (const ir::Value* v : s->Outputs()) ev->output_names_.push_back(v->name());
  for (int i = 0; i < holdout->count(); ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(Feeds feeds, holdout->Get(i, s->FeedInputs()));
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<runner::RtValue> out, s->Run(std::move(feeds)));
    ev->expected_.push_back(std::move(out));
  }
  return ev;
}

absl::StatusOr<ErrorReport> Evaluator::Evaluate(const pb::ModelProto& qdq,
                                                const std::vector<ActivationRecord>* records) const {
  ErrorReport report;
  for (const std::string& n : output_names_) report.outputs.push_back(OutputError{n, {}});
  std::map<std::string, size_t> by_float, by_dq;
  if (records != nullptr) {
    for (const ActivationRecord& r : *records) {
      by_float[r.tensor] = report.tensors.size();
      by_dq[r.dq_output] = report.tensors.size();
      report.tensors.push_back(TensorError{&r, {}});
    }
  }
  io::LoadedModel q;
  q.proto = qdq;
  q.base_dir = float_model_->base_dir;
  q.mapping = float_model_->mapping;
  // The float values of one sample by name, in the order computed (a Loop
  // body's once per iteration, at most kMaxOccurrences), and how many of
  // each the quantized run has reached: its k-th value meets the float k-th.
  constexpr size_t kMaxOccurrences = 64;
  std::map<std::string, std::vector<runner::RtValue>> captured;
  std::map<std::string, size_t> reached;
  runner::SessionOptions fo;
  fo.backend = backend_;
  fo.timeout_seconds = timeout_seconds_;
  fo.observe_subgraphs = true;
  fo.observer = [&](const ir::Value& v, const runner::RtValue& rv) -> absl::Status {
    if (!by_float.count(v.name()) || !rv.is_tensor()) return absl::OkStatus();
    std::vector<runner::RtValue>& seen = captured[v.name()];
    if (seen.size() < kMaxOccurrences) seen.push_back(rv);
    return absl::OkStatus();
  };
  runner::SessionOptions qo;
  qo.backend = runner::Backend::kReference;
  qo.timeout_seconds = timeout_seconds_;
  qo.observe_subgraphs = true;
  if (records != nullptr) {
    qo.observer = [&](const ir::Value& v, const runner::RtValue& rv) -> absl::Status {
      auto it = by_dq.find(v.name());
      if (it == by_dq.end() || !rv.is_tensor()) return absl::OkStatus();
      TensorError& t = report.tensors[it->second];
      const size_t k = reached[v.name()]++;
      auto f = captured.find(t.record->tensor);
      if (f != captured.end() && k < f->second.size() && f->second[k].is_tensor() &&
          f->second[k].tensor().shape() == rv.tensor().shape()) {
        t.stats.Add(f->second[k].tensor(), rv.tensor(), false, t.record->narrowed);
      }
      return absl::OkStatus();
    };
  }
  std::unique_ptr<runner::Session> fs;
  if (records != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(fs, runner::Session::Create(*float_model_, fo));
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> qs, runner::Session::Create(q, qo));
  for (int i = 0; i < holdout_->count(); ++i) {
    captured.clear();
    reached.clear();
    if (fs != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(Feeds feeds, holdout_->Get(i, fs->FeedInputs()));
      for (const auto& [name, v] : feeds) {  // graph inputs are not observed
        if (by_float.count(name) && v.is_tensor()) captured[name] = {v};
      }
      ONNXKIT_RETURN_IF_ERROR(fs->Run(std::move(feeds)).status());
    }
    ONNXKIT_ASSIGN_OR_RETURN(Feeds feeds, holdout_->Get(i, qs->FeedInputs()));
    auto out = qs->Run(std::move(feeds));
    if (!out.ok()) return absl::InternalError(absl::StrCat("the quantized model does not run: ", out.status().message()));
    const std::vector<runner::RtValue>& exp = expected_[static_cast<size_t>(i)];
    for (size_t o = 0; o < out->size() && o < exp.size(); ++o) {
      if ((*out)[o].is_tensor() && exp[o].is_tensor()) report.outputs[o].stats.Add(exp[o].tensor(), (*out)[o].tensor(), true);
    }
  }
  return report;
}

}  // namespace onnxkit::quant
