// Streaming calibration (see calibration.h): sample sources and the two
// passes over them.
#include "quantization/calibration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/proto.h"
#include "runner/session.h"

namespace onnxkit::quant {
namespace {

namespace fs = std::filesystem;

class SpecSamples : public SampleSource {
 public:
  SpecSamples(std::vector<runner::InputSpec> specs, std::string what) : specs_(std::move(specs)), what_(std::move(what)) {}
  int count() const override { return static_cast<int>(specs_.size()); }
  absl::StatusOr<Feeds> Get(int index, const std::vector<const ir::Value*>& inputs) const override {
    auto feeds = runner::PrepareInputs(inputs, specs_[static_cast<size_t>(index)]);
    if (!feeds.ok()) return AnnotateStatus(feeds.status(), absl::StrCat("calibration sample ", index));
    return std::move(*feeds);
  }
  std::string Describe() const override { return what_; }

 private:
  std::vector<runner::InputSpec> specs_;
  std::string what_;
};

class Slice : public SampleSource {
 public:
  Slice(const SampleSource* base, int begin, int end) : base_(base), begin_(begin), end_(end) {}
  int count() const override { return end_ - begin_; }
  absl::StatusOr<Feeds> Get(int index, const std::vector<const ir::Value*>& inputs) const override {
    return base_->Get(begin_ + index, inputs);
  }
  std::string Describe() const override {
    return absl::StrCat(base_->Describe(), " [", begin_, ", ", end_, ")");
  }

 private:
  const SampleSource* base_;
  int begin_, end_;
};

bool IsActivation(const ir::Value& value, const runner::RtValue& v) {
  if (value.kind() != ir::ValueKind::kNodeOutput && value.kind() != ir::ValueKind::kGraphInput) return false;
  return v.is_tensor() && v.tensor().dtype() == pb::kFloat && v.tensor().size() > 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> FolderSamples(const std::string& dir, std::vector<std::string> shapes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("--calibration ", dir, ": not a folder",
                     fs::is_regular_file(dir, ec)
                         ? " (one sample file is given with --input; --calibration takes a folder of them)"
                         : ""));
  }
  std::vector<std::string> sets, npz;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory(ec) && absl::StartsWith(name, "test_data_set")) sets.push_back(e.path().string());
    if (e.is_regular_file(ec) && absl::EndsWith(name, ".npz")) npz.push_back(e.path().string());
  }
  std::sort(sets.begin(), sets.end());
  std::sort(npz.begin(), npz.end());
  std::vector<runner::InputSpec> specs;
  for (const std::string& s : sets) {
    runner::InputSpec spec;
    spec.dir = s;
    spec.shapes = shapes;
    specs.push_back(spec);
  }
  for (const std::string& f : npz) {
    runner::InputSpec spec;
    spec.files = {f};
    spec.shapes = shapes;
    specs.push_back(spec);
  }
  if (specs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--calibration ", dir, ": no test_data_set_* folder and no .npz file in it"));
  }
  std::string what = absl::StrCat(specs.size(), " samples from ", dir);
  return std::unique_ptr<SampleSource>(new SpecSamples(std::move(specs), what));
}

std::unique_ptr<SampleSource> FileSamples(std::vector<std::string> files, std::vector<std::string> shapes) {
  runner::InputSpec spec;
  spec.files = std::move(files);
  spec.shapes = std::move(shapes);
  return std::make_unique<SpecSamples>(std::vector<runner::InputSpec>{spec}, "1 sample from --input files");
}

std::unique_ptr<SampleSource> RandomSamples(int count, uint64_t seed, double low, double high,
                                            std::vector<std::string> shapes) {
  std::vector<runner::InputSpec> specs;
  for (int i = 0; i < count; ++i) {
    runner::InputSpec spec;
    spec.random = true;
    spec.seed = seed + static_cast<uint64_t>(i);
    spec.low = low;
    spec.high = high;
    spec.shapes = shapes;
    specs.push_back(spec);
  }
  return std::make_unique<SpecSamples>(std::move(specs), absl::StrCat(count, " random samples, seed ", seed));
}

std::unique_ptr<SampleSource> SliceSamples(const SampleSource* base, int begin, int end) {
  return std::make_unique<Slice>(base, begin, end);
}

absl::StatusOr<Calibration> Calibrate(const io::LoadedModel& model, const SampleSource& samples,
                                      const CalibrateOptions& options) {
  if (samples.count() < 1) return absl::InvalidArgumentError("calibration needs at least one sample");
  runner::SessionOptions so;
  so.backend = options.backend;
  so.timeout_seconds = options.timeout_seconds;
  so.fuse = false;
  so.observe_subgraphs = true;  // If/Loop/Scan bodies' values too, every iteration
  Calibration cal;
  cal.samples = samples.count();
  auto minmax = [&cal](const std::string& name, const runner::RtValue& v) {
    if (!v.is_tensor() || v.tensor().dtype() != pb::kFloat || v.tensor().size() == 0) return;
    const float* p = v.tensor().data<float>();
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    int64_t n = 0;
    for (int64_t i = 0; i < v.tensor().size(); ++i) {
      if (!std::isfinite(p[i])) continue;
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
      ++n;
    }
    const int64_t nonfinite = v.tensor().size() - n;
    auto [it, fresh] = cal.tensors.try_emplace(name);
    TensorRange& r = it->second;
    r.nonfinite += nonfinite;
    if (n == 0) return;
    r.min = fresh || r.count == 0 ? lo : std::min<double>(r.min, lo);
    r.max = fresh || r.count == 0 ? hi : std::max<double>(r.max, hi);
    r.count += n;
  };
  so.observer = [&minmax, &cal](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
    if (v.is_tensor() && (v.tensor().dtype() == pb::kFloat16 || v.tensor().dtype() == pb::kBfloat16)) {
      cal.half.insert(value.name());
    }
    if (IsActivation(value, v)) minmax(value.name(), v);
    return absl::OkStatus();
  };
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> session, runner::Session::Create(model, so));
  std::vector<const ir::Value*> inputs = session->FeedInputs();
  for (int i = 0; i < samples.count(); ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(Feeds feeds, samples.Get(i, inputs));
    for (const auto& [name, v] : feeds) minmax(name, v);
    auto out = session->Run(std::move(feeds));
    if (!out.ok()) return AnnotateStatus(out.status(), absl::StrCat("calibration run ", i));
    if (options.progress) options.progress(1, i, samples.count());
  }
  if (!options.histograms) return cal;
  cal.bins = options.bins;
  for (auto& [name, r] : cal.tensors) r.hist.assign(static_cast<size_t>(options.bins), 0.0);
  auto histogram = [&cal](const std::string& name, const runner::RtValue& v) {
    if (!v.is_tensor() || v.tensor().dtype() != pb::kFloat) return;
    auto it = cal.tensors.find(name);
    if (it == cal.tensors.end()) return;
    TensorRange& r = it->second;
    const double width = (r.max - r.min) / cal.bins;
    const float* p = v.tensor().data<float>();
    for (int64_t i = 0; i < v.tensor().size(); ++i) {
      if (!std::isfinite(p[i])) continue;
      int64_t b = width > 0 ? static_cast<int64_t>((p[i] - r.min) / width) : 0;
      b = std::clamp<int64_t>(b, 0, cal.bins - 1);
      r.hist[static_cast<size_t>(b)] += 1;
    }
  };
  so.observer = [&histogram](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
    if (IsActivation(value, v)) histogram(value.name(), v);
    return absl::OkStatus();
  };
  ONNXKIT_ASSIGN_OR_RETURN(session, runner::Session::Create(model, so));
  inputs = session->FeedInputs();
  for (int i = 0; i < samples.count(); ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(Feeds feeds, samples.Get(i, inputs));
    for (const auto& [name, v] : feeds) histogram(name, v);
    auto out = session->Run(std::move(feeds));
    if (!out.ok()) return AnnotateStatus(out.status(), absl::StrCat("calibration run ", i));
    if (options.progress) options.progress(2, i, samples.count());
  }
  return cal;
}

}  // namespace onnxkit::quant
