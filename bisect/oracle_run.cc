// The oracles that run the candidate (run-fails, nan, mismatch): each call
// runs in a forked child fed from the golden store, so a crashing kernel
// or a hang (timeout) is a verdict, not the end of bisect.
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "bisect/candidate.h"
#include "bisect/oracle.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "runner/compare/compare.h"
#include "runner/convert.h"
#include "runner/session.h"

namespace onnxkit::bisect {

// std::regex throws on a bad pattern: this is the dependency boundary.
absl::StatusOr<std::regex> CompileRegex(const std::string& pattern, std::string_view flag) {
  try {
    return std::regex(pattern);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(flag), ": bad regular expression '", pattern, "': ", e.what()));
  }
}

bool RegexSearch(const std::regex& re, const std::string& text) {
  try {
    return std::regex_search(text, re);
  } catch (const std::regex_error&) {
    return false;  // complexity limits: no match
  }
}

namespace {

bool HasNonFinite(const runner::RtValue& v) {
  if (!v.is_tensor()) return false;
  const runner::Tensor& t = v.tensor();
  if (t.dtype() == pb::kFloat) {
    const float* d = t.data<float>();
    for (int64_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(d[i])) return true;
    }
  } else if (t.dtype() == pb::kDouble) {
    const double* d = t.data<double>();
    for (int64_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(d[i])) return true;
    }
  }
  return false;
}

class RunOracle : public Oracle {
 public:
  RunOracle(OracleOptions o, const GoldenStore* golden, std::optional<std::regex> re)
      : o_(std::move(o)), golden_(golden), re_(std::move(re)) {}

  std::string Describe() const override {
    switch (o_.kind) {
      case OracleKind::kRunFails: return absl::StrCat("run-fails", o_.pattern.empty() ? "" : " /" + o_.pattern + "/");
      case OracleKind::kNan: return "nan";
      default: return o_.reference_dir.empty() ? "mismatch (two backends)" : "mismatch (reference outputs)";
    }
  }

  absl::StatusOr<bool> Prepare(const pb::ModelProto& original, std::string* why) override {
    if (!o_.reference_dir.empty()) {
      for (size_t i = 0; original.graph && i < original.graph->output.size(); ++i) {
        const auto& out = original.graph->output[i];
        auto file = io::MappedFile::Open(std::filesystem::path(o_.reference_dir) / absl::StrCat("output_", i, ".pb"),
                                         int64_t{1} << 31);
        if (!file.ok()) return absl::InvalidArgumentError(absl::StrCat("--reference: ", file.status().message()));
        auto v = runner::ValueFromPbBytes((*file)->bytes(), out.type ? &*out.type : nullptr);
        if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("--reference: ", v.status().message()));
        expected_[out.name] = v->is_tensor() ? runner::RtValue::FromTensor(v->tensor().Clone()) : *v;
      }
    }
    target_.clear();
    ONNXKIT_ASSIGN_OR_RETURN(bool interesting, Test(original));
    if (!interesting && last_timed_out_) {
      *why = absl::StrCat("the original's run timed out after ", o_.timeout_seconds,
                          " s, so nothing could be judged (raise --timeout)");
      return false;
    }
    if (!interesting) {
      *why = o_.kind == OracleKind::kRunFails ? absl::StrCat("the original runs without a matching error", last_)
             : o_.kind == OracleKind::kNan    ? "no node of the original makes NaN/Inf from finite inputs"
                                              : absl::StrCat("the original's outputs match", last_);
      return false;
    }
    if (o_.kind == OracleKind::kNan || (o_.kind == OracleKind::kRunFails && !re_)) target_ = pinned_;
    return true;
  }

  const runner::RtValue* Expected(const std::string& name) const override {
    auto it = expected_.find(name);
    return it == expected_.end() ? nullptr : &it->second;
  }

  absl::StatusOr<bool> Test(const pb::ModelProto& candidate) override {
    auto feeds = GoldenFeeds(candidate, *golden_);
    if (!feeds.ok()) return false;  // a cut tensor the golden run never computed
    ChildResult r = RunInChild([&] { return Execute(candidate, *feeds); }, o_.timeout_seconds);
    std::string verdict, message;
    if (r.finished) {
      size_t nl = r.output.find('\n');
      verdict = r.output.substr(0, nl);
      message = nl == std::string::npos ? "" : r.output.substr(nl + 1);
    } else if (r.timed_out) {
      verdict = "fail DeadlineExceeded";
      message = "timed out";
    } else {
      verdict = "fail Crash";
      message = absl::StrCat("crashed (signal ", r.signal, ")");
    }
    last_ = message.empty() ? "" : absl::StrCat(" (", message, ")");
    last_timed_out_ = !r.finished && r.timed_out;
    bool interesting = false;
    if (o_.kind == OracleKind::kRunFails) {
      if (verdict.rfind("fail ", 0) != 0) return false;
      pinned_ = verdict;
      interesting = re_ ? RegexSearch(*re_, message) : (target_.empty() || verdict == target_);
    } else if (o_.kind == OracleKind::kNan) {
      if (verdict.rfind("nan ", 0) != 0) return false;
      pinned_ = verdict;
      interesting = target_.empty() || verdict == target_;
    } else {
      interesting = verdict == "mismatch";
    }
    if (interesting) detail_ = message.empty() ? verdict : message;
    return interesting;
  }

 private:
  absl::StatusOr<std::vector<runner::RtValue>> RunOn(const pb::ModelProto& model, runner::Backend backend,
                                                     const std::vector<std::pair<std::string, runner::RtValue>>& feeds,
                                                     std::vector<std::string>* names,
                                                     std::function<absl::Status(const ir::Value&, const runner::RtValue&)> obs) {
    io::LoadedModel loaded;
    loaded.proto = model;
    loaded.base_dir = o_.base_dir;
    runner::SessionOptions so;
    so.backend = backend;
    // The NaN oracle looks inside bodies too: a NaN made in an If branch is
    // pinned to the body's tensor, which keeps its name once inlined.
    so.observe_subgraphs = o_.kind == OracleKind::kNan;
    so.observer = std::move(obs);
    ONNXKIT_ASSIGN_OR_RETURN(auto session, runner::Session::Create(std::move(loaded), so));
    for (const ir::Value* v : session->Outputs()) names->push_back(v->name());
    return session->Run(feeds);
  }

  // In the child: one line verdict, then a message.
  std::string Execute(const pb::ModelProto& model, const std::vector<std::pair<std::string, runner::RtValue>>& feeds) {
    std::vector<std::string> names;
    if (o_.kind == OracleKind::kNan) {
      std::set<std::string> bad;
      for (const auto& [name, v] : feeds) {
        if (HasNonFinite(v)) bad.insert(name);
      }
      std::string found;
      auto obs = [&](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
        if (!found.empty() || !HasNonFinite(v)) return absl::OkStatus();
        bad.insert(value.name());
        const ir::Node* node = value.producer();
        if (node == nullptr) return absl::OkStatus();
        for (const ir::Value* in : node->inputs()) {
          if (in != nullptr && bad.count(in->name()) > 0) return absl::OkStatus();
        }
        found = value.name();
        return absl::OkStatus();
      };
      auto r = RunOn(model, o_.a_backend, feeds, &names, obs);
      if (!found.empty()) return absl::StrCat("nan ", found, "\ntensor '", found, "' is NaN/Inf from finite inputs");
      return r.ok() ? "ok\n" : absl::StrCat("error\n", r.status().message());
    }
    auto a = RunOn(model, o_.a_backend, feeds, &names, nullptr);
    if (o_.kind == OracleKind::kRunFails) {
      if (a.ok()) return "ok\n";
      return absl::StrCat("fail ", absl::StatusCodeToString(a.status().code()), "\n", a.status().message());
    }
    if (!a.ok()) return absl::StrCat("error\n", a.status().message());
    std::vector<runner::RtValue> b;
    std::vector<std::string> b_names;
    if (o_.reference_dir.empty()) {
      auto rb = RunOn(model, o_.b_backend, feeds, &b_names, nullptr);
      if (!rb.ok()) return absl::StrCat("error\n", rb.status().message());
      b = std::move(*rb);
    }
    for (size_t i = 0; i < a->size(); ++i) {
      const runner::RtValue* expected = nullptr;
      if (o_.reference_dir.empty()) {
        expected = &b[i];
      } else if (auto it = expected_.find(names[i]); it != expected_.end()) {
        expected = &it->second;
      }
      if (expected == nullptr) continue;
      std::optional<runner::Tolerance> tol;
      if (o_.atol || o_.rtol) {
        runner::Tolerance t = (*a)[i].is_tensor() ? runner::DefaultTolerance((*a)[i].tensor().dtype()) : runner::Tolerance{};
        if (o_.atol) t.atol = *o_.atol;
        if (o_.rtol) t.rtol = *o_.rtol;
        tol = t;
      }
      runner::Metrics m = runner::CompareValues((*a)[i], *expected, tol);
      if (!m.within_tolerance) return absl::StrCat("mismatch\n", names[i], ": ", runner::FormatMetrics(m));
    }
    return "ok\n";
  }

  OracleOptions o_;
  const GoldenStore* golden_;
  std::optional<std::regex> re_;
  std::map<std::string, runner::RtValue> expected_;
  std::string target_, pinned_, last_;
  bool last_timed_out_ = false;  // the last run passed --timeout
};

}  // namespace

absl::StatusOr<std::unique_ptr<Oracle>> MakeRunOracle(const OracleOptions& options, const GoldenStore* golden) {
  std::optional<std::regex> re;
  if (options.kind == OracleKind::kRunFails && !options.pattern.empty()) {
    ONNXKIT_ASSIGN_OR_RETURN(re, CompileRegex(options.pattern, "--run-fails"));
  }
  return std::unique_ptr<Oracle>(new RunOracle(options, golden, std::move(re)));
}

}  // namespace onnxkit::bisect
