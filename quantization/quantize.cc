// The quantize driver (see quantize.h).
#include "quantization/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "passes/convert/convert.h"
#include "passes/manager.h"
#include "passes/registry.h"
#include "passes/util.h"
#include "quantization/dynamic.h"

namespace onnxkit::quant {
namespace {

void SetMetadata(pb::ModelProto& m, const std::vector<std::pair<std::string, std::string>>& entries) {
  for (const auto& [key, value] : entries) {
    bool found = false;
    for (pb::StringStringEntryProto& e : m.metadata_props) {
      if (e.key == key) {
        e.value = value;
        found = true;
      }
    }
    if (!found) {
      pb::StringStringEntryProto e;
      e.key = key;
      e.value = value;
      m.metadata_props.push_back(std::move(e));
    }
  }
}

// A cosine c as -10 log10(1 - c) dB (200 at c = 1), so that cosine and
// SQNR margins compare on one scale.
double CosineDb(double c) {
  double d = 1 - c;
  return d <= 1e-20 ? 200 : std::min(200.0, -10 * std::log10(d));
}

class Driver {
 public:
  // `model` is quantized; `judge`, the model as given (before any
  // preprocessing or opset conversion), is what the error report measures
  // the quantized model against.
  Driver(const io::LoadedModel& model, const io::LoadedModel& judge, const QuantizeOptions& options)
      : model_(model), judge_(judge), options_(options) {}

  absl::StatusOr<QuantizeResult> Run(const SampleSource* samples) {
    QuantizeResult r;
    std::unique_ptr<SampleSource> calib, held;
    if (samples != nullptr) {
      int n = samples->count();
      int h = std::max(1, options_.holdout);
      r.samples = samples->Describe();
      if (n > h) {
        calib = SliceSamples(samples, 0, n - h);
        held = SliceSamples(samples, n - h, n);
      } else {
        calib = SliceSamples(samples, 0, n);
        held = SliceSamples(samples, 0, n);
        r.warnings.push_back(absl::StrCat("only ", n, " sample(s): the error is measured on calibration data"));
      }
      r.holdout_samples = held->count();
    }
    if (options_.dynamic || options_.weights_only) {
      if (options_.dynamic) {
        ONNXKIT_ASSIGN_OR_RETURN(r.qdq, QuantizeDynamic(model_, options_.qdq));
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(r.qdq, QuantizeWeightsOnly(model_, options_.qdq, options_.weights_only_options));
      }
      if (held == nullptr) return Finish(r);
      held = SliceSamples(samples, 0, samples->count());  // nothing is calibrated on
      r.holdout_samples = held->count();
      ONNXKIT_ASSIGN_OR_RETURN(
          evaluator_, Evaluator::Create(judge_, held.get(), options_.backend, options_.timeout_seconds));
      ONNXKIT_ASSIGN_OR_RETURN(r.report, evaluator_->Evaluate(r.qdq.model, nullptr));
      if (Margin(r.report.min_output_sqnr(), r.report.min_output_cosine()) < 0) {
        ONNXKIT_RETURN_IF_ERROR(Fallback(r));
        if (!r.kept_float.empty()) {
          ONNXKIT_ASSIGN_OR_RETURN(r.report, evaluator_->Evaluate(r.qdq.model, nullptr));
        }
      }
      return Finish(r);
    }
    if (options_.calibration) {
      r.calibration = *options_.calibration;
    } else {
      if (calib == nullptr) return absl::InvalidArgumentError("no calibration samples");
      CalibrateOptions co;
      co.backend = options_.backend;
      co.timeout_seconds = options_.timeout_seconds;
      co.bins = options_.bins;
      co.histograms = options_.qdq.calibrator.method != Method::kMinMax;
      if (options_.progress) {
        co.progress = [this](int pass, int i, int total) {
          options_.progress(absl::StrCat("calibration pass ", pass), i, total);
        };
      }
      ONNXKIT_ASSIGN_OR_RETURN(r.calibration, Calibrate(model_, *calib, co));
    }
    r.calibration_samples = r.calibration.samples;
    ONNXKIT_ASSIGN_OR_RETURN(r.qdq, InsertQdq(model_, r.calibration, options_.qdq));
    if (held == nullptr) return Finish(r);
    ONNXKIT_ASSIGN_OR_RETURN(
        evaluator_, Evaluator::Create(judge_, held.get(), options_.backend, options_.timeout_seconds));
    ONNXKIT_ASSIGN_OR_RETURN(r.report, evaluator_->Evaluate(r.qdq.model, nullptr));
    if (Margin(r.report.min_output_sqnr(), r.report.min_output_cosine()) < 0) {
      ONNXKIT_RETURN_IF_ERROR(Fallback(r));
    }
    if (options_.report_tensors) {
      ONNXKIT_ASSIGN_OR_RETURN(r.report, evaluator_->Evaluate(r.qdq.model, &r.qdq.activations));
    } else if (!r.kept_float.empty()) {  // the report of the model written
      ONNXKIT_ASSIGN_OR_RETURN(r.report, evaluator_->Evaluate(r.qdq.model, nullptr));
    }
    held_ = std::move(held);
    calib_ = std::move(calib);
    return Finish(r);
  }

 private:
  // How far the worst output is above the targets (dB; >= 0: met); +inf
  // without targets.
  double Margin(double sqnr, double cosine) const {
    double m = std::numeric_limits<double>::infinity();
    if (options_.target_sqnr_db) m = std::min(m, sqnr - *options_.target_sqnr_db);
    if (options_.target_cosine) m = std::min(m, CosineDb(cosine) - CosineDb(*options_.target_cosine));
    return m;
  }

  struct Trial {
    QdqResult qdq;
    double sqnr, cosine, margin;
  };

  // The model quantized in this run's mode with the nodes of `keep` left in float.
  absl::StatusOr<QdqResult> QuantizeKeeping(const std::set<std::string>& keep) {
    QdqOptions o = options_.qdq;
    o.keep_float = keep;
    if (options_.dynamic) return QuantizeDynamic(model_, o);
    if (options_.weights_only) return QuantizeWeightsOnly(model_, o, options_.weights_only_options);
    return InsertQdq(model_, calib_result_ ? *calib_result_ : Calibration{}, o);
  }

  absl::StatusOr<Trial> Try(const std::set<std::string>& keep) {
    ONNXKIT_ASSIGN_OR_RETURN(QdqResult q, QuantizeKeeping(keep));
    ONNXKIT_ASSIGN_OR_RETURN(ErrorReport rep, evaluator_->Evaluate(q.model, nullptr));
    double sqnr = rep.min_output_sqnr(), cosine = rep.min_output_cosine();
    return Trial{std::move(q), sqnr, cosine, Margin(sqnr, cosine)};
  }

  // Greedy fallback: rank nodes by the output margin (SQNR and/or cosine
  // against their targets) reached with each alone left in float, then keep
  // the k best-ranked in float, with the smallest k that meets the targets
  // found by bisection (the margin grows with k, up to noise); the best
  // model measured wins.
  absl::Status Fallback(QuantizeResult& r) {
    calib_result_ = &r.calibration;
    std::vector<std::string> nodes = r.qdq.quantized_nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (options_.progress) options_.progress("sensitivity", static_cast<int>(i), static_cast<int>(nodes.size()));
      ONNXKIT_ASSIGN_OR_RETURN(Trial t, Try({nodes[i]}));
      r.sensitivity.push_back(Sensitivity{nodes[i], t.sqnr, t.cosine});
    }
    std::stable_sort(r.sensitivity.begin(), r.sensitivity.end(), [this](const Sensitivity& a, const Sensitivity& b) {
      return Margin(a.sqnr_db, a.cosine) > Margin(b.sqnr_db, b.cosine);
    });
    double best = Margin(r.report.min_output_sqnr(), r.report.min_output_cosine());
    size_t best_k = 0;
    auto attempt = [&](size_t k) -> absl::StatusOr<bool> {
      std::set<std::string> keep;
      for (size_t i = 0; i < k; ++i) keep.insert(r.sensitivity[i].node);
      ONNXKIT_ASSIGN_OR_RETURN(Trial t, Try(keep));
      bool met = t.margin >= 0;
      // Prefer a model that meets the targets with fewer float layers, else the largest margin.
      bool better = met ? (best < 0 || k < best_k) : (best < 0 && t.margin > best);
      if (better) {
        best = t.margin;
        best_k = k;
        r.qdq = std::move(t.qdq);
      }
      return met;
    };
    size_t lo = 0, hi = r.sensitivity.size();  // keeping lo fails; hi is tried first
    ONNXKIT_ASSIGN_OR_RETURN(bool all_met, attempt(hi));
    if (all_met) {
      while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        ONNXKIT_ASSIGN_OR_RETURN(bool met, attempt(mid));
        (met ? hi : lo) = mid;
      }
    }
    for (size_t i = 0; i < best_k; ++i) r.kept_float.push_back(r.sensitivity[i].node);
    r.target_met = best >= 0;
    return absl::OkStatus();
  }

  absl::StatusOr<QuantizeResult> Finish(QuantizeResult& r) {
    SetMetadata(r.qdq.model, options_.metadata);
    for (const std::string& w : r.qdq.warnings) r.warnings.push_back(w);
    return std::move(r);
  }

  const io::LoadedModel& model_;
  const io::LoadedModel& judge_;
  const QuantizeOptions& options_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<SampleSource> held_, calib_;
  const Calibration* calib_result_ = nullptr;
};

}  // namespace

absl::StatusOr<QuantizeResult> Quantize(const io::LoadedModel& model, const SampleSource* samples,
                                        const QuantizeOptions& options) {
  if (samples == nullptr && !options.calibration && !options.dynamic && !options.weights_only) {
    return absl::InvalidArgumentError("no calibration data");
  }
  // Initializers listed as graph inputs (IR < 4 style) become constants:
  // a quantized weight is baked into the model and cannot be fed anyway.
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Model> m, ir::FromProto(model.proto));
  // Calibration ranges and the error report are keyed by value name: a
  // body value shadowing an enclosing one (invalid ONNX, which some
  // exporters write) would share its range, and be compared with it. Both
  // the model quantized and the one judged get the fresh names.
  io::LoadedModel judge = model;
  ONNXKIT_ASSIGN_OR_RETURN(int renamed, passes::RenameShadowingValues(m->graph()));
  if (renamed > 0) {
    judge.proto = ir::ToProto(std::move(m));
    ONNXKIT_ASSIGN_OR_RETURN(m, ir::FromProto(judge.proto));
  }
  std::vector<ir::Value*> listed;
  for (ir::Value* v : m->graph().inputs()) {
    if (v->kind() == ir::ValueKind::kInitializer) listed.push_back(v);
  }
  for (ir::Value* v : listed) ONNXKIT_RETURN_IF_ERROR(m->graph().RemoveInput(v));
  if (!listed.empty() && m->ir_version() < 4) m->set_ir_version(4);
  if (!options.preprocess.empty()) {
    auto pipeline = passes::ParsePipeline(options.preprocess);
    if (!pipeline.ok()) return absl::InvalidArgumentError(absl::StrCat("--preprocess: ", pipeline.status().message()));
    passes::ManagerOptions mo;
    mo.base_dir = model.base_dir;
    // Weights made at run time (ConstantOfShape, Tile...) fold whatever
    // their size: quantization stores every weight anyway.
    mo.pass.fold_limit_bytes = int64_t{1} << 31;
    ONNXKIT_RETURN_IF_ERROR(passes::RunPipeline(m, *pipeline, mo).status());
  }
  std::vector<std::string> notes;
  if (renamed > 0) {
    notes.push_back(
        absl::StrCat(renamed,
                     " subgraph value(s) shadowing a name of an enclosing graph renamed (ONNX forbids "
                     "shadowing; each now has its own calibration range)"));
  }
  io::LoadedModel pre = model;
  pre.proto = ir::ToProto(std::move(m));
  std::optional<int64_t> opset;
  for (const pb::OperatorSetIdProto& o : pre.proto.opset_import) {
    if (o.domain.empty() || o.domain == "ai.onnx") opset = o.version;
  }
  if (opset && (*opset < options.min_opset || *opset < options.preferred_opset)) {
    // The preferred opset first (it is at least as new as the minimum one
    // wherever both apply), then the minimum one.
    std::vector<int64_t> targets;
    if (*opset < options.preferred_opset)
      targets.push_back(std::max(options.preferred_opset, options.min_opset));
    if (*opset < options.min_opset && (targets.empty() || targets.back() != options.min_opset))
      targets.push_back(options.min_opset);
    std::optional<passes::convert::Blocker> blocked;
    size_t blockers = 0;
    for (int64_t target : targets) {
      passes::convert::ConvertOptions co;
      co.target_opset = target;
      co.verify = false;  // the error report compares with the original (Driver's judge)
      auto c = passes::convert::Convert(pre, co);
      if (!c.ok()) return c.status();
      if (!c->blockers.empty()) {
        blocked = c->blockers.front();
        blockers = c->blockers.size();
        if (target == options.preferred_opset && target > options.min_opset) {
          notes.push_back(absl::StrCat("not converted from ai.onnx opset ", *opset, " to ", target, ": ",
                                       c->blockers.size(), " node(s) block it, first ",
                                       c->blockers.front().node, ": ", c->blockers.front().reason));
        }
        continue;
      }
      pre.proto = std::move(c->model);
      notes.push_back(absl::StrCat("converted from ai.onnx opset ", *opset, " to ", target, " first"));
      blocked.reset();
      break;
    }
    if (blocked && *opset < options.min_opset) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this quantization needs ai.onnx opset >= ", options.min_opset, "; converting from opset ", *opset,
          " is blocked by ", blockers, " node(s), first ", blocked->node, " in ", blocked->graph, ": ",
          blocked->reason, " (`onnxkit convert --opset ", options.min_opset,
          " --dry-run` lists every blocking node; re-export the model at a newer opset)"));
    }
  }
  Driver d(pre, judge, options);
  auto r = d.Run(samples);
  if (r.ok()) r->warnings.insert(r->warnings.begin(), notes.begin(), notes.end());
  return r;
}

}  // namespace onnxkit::quant
