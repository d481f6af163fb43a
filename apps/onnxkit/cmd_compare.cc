// `onnxkit compare`: outputs of two executions (two models and/or two
// backends) or of one execution against reference outputs, with error
// metrics per output and, with --per-layer, per intermediate tensor.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "apps/onnxkit/commands.h"
#include "lib/base/json_writer.h"
#include "lib/base/scratch_dir.h"
#include "lib/base/status_macros.h"
#include "lib/io/model_io.h"
#include "lib/io/spill_file.h"
#include "lib/ir/node_labels.h"
#include "runner/compare/compare.h"
#include "runner/convert.h"
#include "runner/cuda/cuda_backend.h"
#include "runner/inputs.h"
#include "runner/session.h"

namespace onnxkit::app {
namespace {

namespace fs = std::filesystem;

struct CompareOptions {
  std::string a, b, reference;
  std::vector<std::string> models;  // given as arguments: A, then B
  std::string a_backend = "reference", b_backend = "reference";
  runner::InputSpec inputs;
  double atol = -1, rtol = -1;
  std::vector<std::string> per_output_tol;  // NAME=ATOL,RTOL
  bool per_layer = false;
  double timeout = 0;  // seconds per run of a side (0: none)
  bool json = false;
  int device = 0;  // the CUDA device of a cuda side
  bool tf32 = false;
  std::string a_precision = "fp32", b_precision = "fp32";
};

struct Row {
  std::string name;
  std::string producer;  // node label (per-layer rows)
  runner::Metrics metrics;
};

absl::StatusOr<runner::Backend> Backend(const std::string& name) {
  if (name == "reference") return runner::Backend::kReference;
  if (name == "cpu") return runner::Backend::kCpu;
  if (name == "cuda") return runner::Backend::kCuda;
  return UsageError("backends are reference, cpu or cuda");
}

// The type to read a dumped value back as: the declared one, or, for an
// undeclared sequence, optional or map (whose dump is not a TensorProto),
// the kind the live value has.
const pb::TypeProto* ReadBackType(const ir::Value& value, const runner::RtValue& live,
                                  pb::TypeProto* scratch) {
  if (value.type() != nullptr || live.is_tensor()) return value.type();
  switch (live.kind()) {
    case runner::RtValue::Kind::kSequence:
      scratch->sequence_type = pb::TypeProto::Sequence{};
      break;
    case runner::RtValue::Kind::kOptional:
      scratch->optional_type = pb::TypeProto::Optional{};
      break;
    case runner::RtValue::Kind::kMap:
      scratch->map_type = pb::TypeProto::Map{};
      break;
    default:
      return nullptr;
  }
  return scratch;
}

absl::StatusOr<std::unique_ptr<runner::Session>> Open(const std::string& path, const std::string& backend,
                                                      runner::SessionOptions options) {
  ONNXKIT_ASSIGN_OR_RETURN(options.backend, Backend(backend));
  auto loaded = io::LoadModel(path);
  if (!loaded.ok()) return loaded.status();
  auto session = runner::Session::Create(std::move(*loaded), std::move(options));
  if (!session.ok()) return AnnotateStatus(session.status(), path);
  return std::move(*session);
}

// Tolerances: per-output overrides, then --atol/--rtol, then type defaults.
class Tolerances {
 public:
  static absl::StatusOr<Tolerances> Parse(const CompareOptions& o) {
    Tolerances t;
    t.atol_ = o.atol;
    t.rtol_ = o.rtol;
    for (const std::string& flag : o.per_output_tol) {
      size_t eq = flag.rfind('=');
      std::vector<std::string> parts = absl::StrSplit(eq == std::string::npos ? "" : flag.substr(eq + 1), ',');
      runner::Tolerance tol;
      if (eq == std::string::npos || parts.size() != 2 || !absl::SimpleAtod(parts[0], &tol.atol) ||
          !absl::SimpleAtod(parts[1], &tol.rtol) || !(tol.atol >= 0 && tol.rtol >= 0) ||
          !std::isfinite(tol.atol) || !std::isfinite(tol.rtol)) {
        return UsageError(absl::StrCat("--tol '", flag, "' must be NAME=ATOL,RTOL"));
      }
      t.per_output_[flag.substr(0, eq)] = tol;
    }
    return t;
  }
  // The --tol names that are none of `known` (the outputs, and with
  // --per-layer every tensor side A computes): usage errors.
  absl::Status CheckNames(const std::set<std::string>& known, bool per_layer) const {
    for (const auto& [name, tol] : per_output_) {
      if (known.count(name) == 0) {
        return UsageError(absl::StrCat(
            "--tol names '", name, "', which is not an output of --a",
            per_layer ? " nor a tensor it computes" : " (intermediate tensors need --per-layer)"));
      }
    }
    return absl::OkStatus();
  }
  std::optional<runner::Tolerance> For(const std::string& name, const runner::RtValue& expected) const {
    auto it = per_output_.find(name);
    if (it != per_output_.end()) return it->second;
    if (atol_ < 0 && rtol_ < 0) return std::nullopt;
    int32_t dtype = expected.is_tensor() ? expected.tensor().dtype() : 1;
    runner::Tolerance def = runner::DefaultTolerance(dtype);
    return runner::Tolerance{atol_ >= 0 ? atol_ : def.atol, rtol_ >= 0 ? rtol_ : def.rtol};
  }

 private:
  double atol_ = -1, rtol_ = -1;
  std::map<std::string, runner::Tolerance> per_output_;
};

void PrintRows(const char* title, const std::vector<Row>& rows) {
  std::cout << title << ":\n";
  for (const Row& r : rows) {
    std::cout << "  " << (r.metrics.within_tolerance ? "ok  " : "FAIL") << " " << r.name
              << (r.producer.empty() ? "" : " (" + r.producer + ")") << ": " << runner::FormatMetrics(r.metrics);
    if (!r.metrics.within_tolerance && r.metrics.worst_index >= 0) {
      std::cout << absl::StrCat("; worst at ", r.metrics.worst_index, ": ", r.metrics.worst_actual, " vs ",
                                r.metrics.worst_expected);
    }
    std::cout << "\n";
  }
}

void JsonRows(JsonWriter& w, const std::vector<Row>& rows) {
  w.BeginArray();
  for (const Row& r : rows) {
    const runner::Metrics& m = r.metrics;
    w.BeginObject();
    w.KeyString("name", r.name);
    if (!r.producer.empty()) w.KeyString("node", r.producer);
    w.KeyBool("within_tolerance", m.within_tolerance);
    w.KeyBool("comparable", m.comparable);
    if (!m.comparable) w.KeyString("mismatch", m.mismatch);
    w.KeyInt("elements", m.elements);
    w.KeyDouble("max_abs", m.max_abs);
    w.KeyDouble("max_rel", m.max_rel);
    w.KeyDouble("mean_abs", m.mean_abs);
    w.KeyDouble("cosine", m.cosine);
    w.KeyDouble("sqnr_db", m.sqnr_db);
    w.KeyDouble("out_of_tolerance_share", m.share_out_of_tolerance());
    w.KeyInt("nan_inf_mismatches", m.nan_inf_mismatches);
    w.KeyInt("worst_index", m.worst_index);
    w.KeyDouble("atol", m.tolerance.atol);
    w.KeyDouble("rtol", m.tolerance.rtol);
    w.EndObject();
  }
  w.EndArray();
}

absl::StatusOr<int> RunCompare(CompareOptions o) {
  if (o.models.size() > 2) return UsageError("at most two models are compared (A and B)");
  if (!o.models.empty()) {
    if (!o.a.empty() || (o.models.size() > 1 && !o.b.empty())) {
      return UsageError("give the models as arguments or with --a and --b, not both");
    }
    o.a = o.models[0];
    if (o.models.size() > 1) o.b = o.models[1];
  }
  if (o.a.empty()) return UsageError("a model is needed: --a MODEL (or MODEL as the first argument)");
  if (o.b.empty() == o.reference.empty()) return UsageError("give exactly one of --b MODEL or --reference DIR");
  if (o.per_layer && !o.reference.empty()) return UsageError("--per-layer needs two executions (--b)");
  if (o.device < 0) return UsageError("--device must be 0 or more");
  if ((o.a_precision == "bf16" && o.a_backend != "cpu") ||
      (o.b_precision == "bf16" && o.b_backend != "cpu")) {
    return UsageError("--a-precision / --b-precision bf16 apply to a cpu side");
  }
  if (o.a_precision == "bf16" || o.b_precision == "bf16") NoteWhenBf16Unsupported();
  // Without a usable device nothing else happens (not even loading).
  for (const std::string* side : {&o.a_backend, &o.b_backend}) {
    if (*side == "cuda") ONNXKIT_RETURN_IF_ERROR(runner::cuda::CheckDevice(o.device));
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tolerances tolerances, Tolerances::Parse(o));
  runner::InputSpec spec = o.inputs;
  if (!o.reference.empty() && spec.dir.empty() && spec.files.empty() && !spec.random) spec.dir = o.reference;

  // Side A, dumping intermediates to a scratch folder for --per-layer,
  // removed on every way out (Ctrl-C included).
  std::optional<ScratchDir> scratch_dir;
  fs::path scratch;
  std::vector<std::pair<std::string, std::string>> a_layers;  // tensor name, producer label
  // A's values, one after another in one scratch file (one file per value
  // spent most of a large model's time creating files).
  std::vector<io::SpillFile::Span> a_spans;
  io::SpillFile spill;
  runner::SessionOptions a_options;
  a_options.device = o.device;
  a_options.allow_tf32 = o.tf32;
  a_options.bf16 = o.a_precision == "bf16";
  a_options.timeout_seconds = o.timeout;
  // Values inside If/Loop/Scan bodies are compared too: a value computed
  // more than once (a Loop body's, once per iteration) is "NAME (run K)"
  // from its second run on, for its first kMaxRuns runs.
  constexpr int kMaxRuns = 16;
  std::map<std::string, int> a_runs;
  std::set<std::string> a_names_seen;  // plain names, for --tol
  runner::ObservedValueKeys a_keys;
  auto layer_key = [](const std::string& name, int run) {
    return run == 0 ? name : absl::StrCat(name, " (run ", run + 1, ")");
  };
  ir::NodeLabels producer_labels;  // (NodeLabel walks the graph for each unnamed node)
  if (o.per_layer) {
    scratch_dir.emplace("onnxkit-compare");
    scratch = scratch_dir->path();
    if (scratch.empty())
      return absl::PermissionDeniedError("compare --per-layer: cannot create a scratch folder");
    ONNXKIT_RETURN_IF_ERROR(spill.Create(scratch / "values.bin"));
    a_options.observe_subgraphs = true;
    a_options.observer = [&](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
      const std::string& key = a_keys.For(value);
      a_names_seen.insert(value.name());
      const int run = a_runs[key]++;
      if (run >= kMaxRuns) return absl::OkStatus();
      a_layers.emplace_back(layer_key(key, run),
                            value.producer() ? producer_labels.Of(*value.producer()) : "");
      ONNXKIT_ASSIGN_OR_RETURN(io::SpillFile::Span span,
                               spill.Append(runner::ValueToPbBytes(v, value.name())));
      a_spans.push_back(span);
      return absl::OkStatus();
    };
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> a, Open(o.a, o.a_backend, a_options));
  auto feeds = runner::PrepareInputs(a->FeedInputs(), spec, a->OverridableInputs());
  // Flags that do not fit the model are usage errors; files that cannot be read are not.
  if (!feeds.ok()) return feeds.status();
  auto a_out = a->Run(*feeds);
  if (!a_out.ok()) return AnnotateStatus(a_out.status(), absl::StrCat("--a ", o.a));

  std::vector<Row> outputs, layers;
  std::vector<const ir::Value*> a_names = a->Outputs();
  {
    std::set<std::string> known;
    for (const ir::Value* v : a_names) known.insert(v->name());
    known.insert(a_names_seen.begin(), a_names_seen.end());
    ONNXKIT_RETURN_IF_ERROR(tolerances.CheckNames(known, o.per_layer));
  }
  if (!o.reference.empty()) {
    for (size_t i = 0; i < a_names.size(); ++i) {
      fs::path file = fs::path(o.reference) / absl::StrCat("output_", i, ".pb");
      auto mapped = io::MappedFile::Open(file, int64_t{1} << 31);
      if (!mapped.ok()) return mapped.status();
      auto expected = runner::ValueFromPbBytes((*mapped)->bytes(), a_names[i]->type());
      if (!expected.ok()) return AnnotateStatus(expected.status(), file.string());
      const std::string& name = a_names[i]->name();
      outputs.push_back({name, "", runner::CompareValues((*a_out)[i], *expected, tolerances.For(name, *expected))});
    }
  } else {
    std::map<std::string, size_t> a_index;
    for (size_t i = 0; i < a_layers.size(); ++i) a_index[a_layers[i].first] = i;
    std::map<std::string, runner::Metrics> layer_metrics;
    runner::SessionOptions b_options;
    b_options.device = o.device;
    b_options.allow_tf32 = o.tf32;
    b_options.bf16 = o.b_precision == "bf16";
    b_options.timeout_seconds = o.timeout;
    std::map<std::string, int> b_runs;
    runner::ObservedValueKeys b_keys;
    if (o.per_layer) {
      // Compare each value of B as it is computed with A's copy on disk.
      b_options.observe_subgraphs = true;
      b_options.observer = [&](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
        const std::string& plain_key = b_keys.For(value);
        const std::string key = layer_key(plain_key, b_runs[plain_key]++);
        auto it = a_index.find(key);
        if (it == a_index.end()) return absl::OkStatus();
        ONNXKIT_ASSIGN_OR_RETURN(const std::string bytes, spill.Read(a_spans[it->second]));
        pb::TypeProto scratch_type;
        auto a_value = runner::ValueFromPbBytes(bytes, ReadBackType(value, v, &scratch_type));
        if (!a_value.ok()) return a_value.status();
        layer_metrics[key] = runner::CompareValues(*a_value, v, tolerances.For(value.name(), v));
        return absl::OkStatus();
      };
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> b, Open(o.b, o.b_backend, b_options));
    // B takes A's values of the inputs it has. An input of A that B lacks
    // (pruned as unused) is not fed to it; one of B that A lacks gets seeded
    // random values of its own under --random (else B's run names it).
    std::vector<std::pair<std::string, runner::RtValue>> b_feeds;
    {
      std::set<std::string> takes;
      for (const ir::Value* v : b->FeedInputs()) takes.insert(v->name());
      // An initializer of B is overridden only by a value from a file: one
      // A overrides too, or any when nothing is random.
      std::set<std::string> a_overridable;
      for (const ir::Value* v : a->OverridableInputs()) a_overridable.insert(v->name());
      for (const ir::Value* v : b->OverridableInputs()) {
        if (!spec.random || a_overridable.contains(v->name())) takes.insert(v->name());
      }
      std::set<std::string> fed;
      std::vector<std::string> dropped;
      for (const auto& [name, value] : *feeds) {
        fed.insert(name);
        if (takes.contains(name)) {
          b_feeds.emplace_back(name, value);
        } else {
          dropped.push_back(name);
        }
      }
      if (!dropped.empty()) {
        std::cerr << "onnxkit: note: --b has no input " << absl::StrJoin(dropped, ", ")
                  << ": not fed to it\n";
      }
      std::vector<const ir::Value*> missing;
      for (const ir::Value* v : b->FeedInputs()) {
        if (!fed.contains(v->name())) missing.push_back(v);
      }
      if (!missing.empty() && !spec.random) {
        std::vector<std::string> names;
        for (const ir::Value* v : missing) names.push_back(v->name());
        return UsageError(absl::StrCat("--b input ", absl::StrJoin(names, ", "),
                                       " is not an input of --a: give it with --input NAME=FILE, or use --random"));
      }
      if (!missing.empty()) {
        runner::InputSpec extra;
        extra.random = true;
        extra.seed = spec.seed;
        extra.low = spec.low;
        extra.high = spec.high;
        for (const std::string& shape : spec.shapes) {
          for (const ir::Value* v : missing) {
            if (absl::StartsWith(shape, v->name() + "=")) extra.shapes.push_back(shape);
          }
        }
        auto more = runner::PrepareInputs(missing, extra);
        if (!more.ok()) return AnnotateStatus(more.status(), absl::StrCat("--b ", o.b));
        std::vector<std::string> names;
        for (auto& [name, value] : *more) {
          names.push_back(name);
          b_feeds.emplace_back(name, std::move(value));
        }
        std::cerr << "onnxkit: note: --b input " << absl::StrJoin(names, ", ")
                  << " is not an input of --a: fed its own random values\n";
      }
    }
    auto b_out = b->Run(b_feeds);
    if (!b_out.ok()) return AnnotateStatus(b_out.status(), absl::StrCat("--b ", o.b));
    std::vector<const ir::Value*> b_names = b->Outputs();
    // Outputs pair by name; when the two models share no output name and
    // have as many outputs, by position (said on stderr). Outputs left
    // without a partner are named on stderr; none paired is a usage error.
    std::vector<std::pair<size_t, size_t>> pairs;
    std::vector<bool> b_paired(b_names.size(), false);
    for (size_t i = 0; i < a_names.size(); ++i) {
      for (size_t k = 0; k < b_names.size(); ++k) {
        if (!b_paired[k] && b_names[k]->name() == a_names[i]->name()) {
          pairs.emplace_back(i, k);
          b_paired[k] = true;
          break;
        }
      }
    }
    const bool by_position = pairs.empty() && a_names.size() == b_names.size();
    if (by_position) {
      for (size_t i = 0; i < a_names.size(); ++i) pairs.emplace_back(i, i);
      std::cerr << "onnxkit: note: --a and --b share no output name; outputs are paired by position\n";
    } else {
      std::vector<std::string> alone;
      std::vector<bool> a_paired(a_names.size(), false);
      for (const auto& [i, k] : pairs) a_paired[i] = true;
      for (size_t i = 0; i < a_names.size(); ++i) {
        if (!a_paired[i]) alone.push_back(absl::StrCat("--a '", a_names[i]->name(), "'"));
      }
      for (size_t k = 0; k < b_names.size(); ++k) {
        if (!b_paired[k]) alone.push_back(absl::StrCat("--b '", b_names[k]->name(), "'"));
      }
      if (pairs.empty()) {
        return UsageError(
            absl::StrCat("--a and --b have no output name in common and different output counts (",
                         absl::StrJoin(alone, ", "), ")"));
      }
      if (!alone.empty()) {
        std::cerr << "onnxkit: note: not compared (no output of that name on the other side): "
                  << absl::StrJoin(alone, ", ") << "\n";
      }
    }
    for (const auto& [i, j] : pairs) {
      if (i >= a_out->size() || j >= b_out->size()) continue;
      std::string name = a_names[i]->name();
      if (by_position && b_names[j]->name() != name)
        absl::StrAppend(&name, " (--b '", b_names[j]->name(), "')");
      outputs.push_back(
          {name, "",
           runner::CompareValues((*a_out)[i], (*b_out)[j], tolerances.For(a_names[i]->name(), (*b_out)[j]))});
    }
    for (const auto& [name, producer] : a_layers) {
      auto it = layer_metrics.find(name);
      if (it != layer_metrics.end()) layers.push_back({name, producer, it->second});
    }
  }

  bool ok = std::all_of(outputs.begin(), outputs.end(), [](const Row& r) { return r.metrics.within_tolerance; });
  const Row* first_bad = nullptr;
  for (const Row& r : layers) {
    if (!r.metrics.within_tolerance) {
      first_bad = &r;
      break;
    }
  }
  if (o.json) {
    JsonWriter w;
    w.BeginObject();
    w.KeyBool("within_tolerance", ok);
    w.Key("outputs");
    JsonRows(w, outputs);
    if (o.per_layer) {
      w.Key("layers");
      JsonRows(w, layers);
      w.Key("first_divergence");
      if (first_bad) {
        w.BeginObject();
        w.KeyString("tensor", first_bad->name);
        w.KeyString("node", first_bad->producer);
        w.EndObject();
      } else {
        w.Null();
      }
    }
    w.EndObject();
    std::cout << w.Take();
  } else {
    PrintRows("outputs", outputs);
    if (o.per_layer) {
      PrintRows("layers (execution order of --a)", layers);
      if (first_bad) {
        std::cout << "first divergence: tensor '" << first_bad->name << "' made by node " << first_bad->producer << "\n";
      } else {
        std::cout << "no intermediate tensor diverges\n";
      }
    }
    std::cout << (ok ? "within tolerance\n" : "beyond tolerance\n");
  }
  return ok ? kExitOk : kExitNo;
}

}  // namespace

void RegisterCompare(CLI::App& app, Action& action) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Compare two executions (--a and --b: two models and/or two backends) or one execution against "
      "reference outputs (--reference DIR, a test_data_set folder). Exit codes: 0 within tolerance, "
      "1 beyond, 2 usage, 3 a model unreadable or a run failed.");
  sub->add_option("models", o->models, "MODEL_A [MODEL_B]: the same as --a MODEL_A --b MODEL_B");
  sub->add_option("--a", o->a, "Model of side A (required, here or as the first argument)");
  sub->add_option("--a-backend", o->a_backend, "Backend of side A: reference (default), cpu or cuda")
      ->check(CLI::IsMember({"reference", "cpu", "cuda"}));
  sub->add_option("--b", o->b, "Model of side B (may be the same file with another backend)");
  sub->add_option("--b-backend", o->b_backend, "Backend of side B: reference (default), cpu or cuda")
      ->check(CLI::IsMember({"reference", "cpu", "cuda"}));
  sub->add_option("--a-precision", o->a_precision,
                  "fp32 (default) or bf16: a cpu side A computes float32 Conv/ConvTranspose, and MatMul/Gemm "
                  "with constant weights, in bfloat16 (as run --precision)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  sub->add_option("--b-precision", o->b_precision, "fp32 (default) or bf16: the same for side B")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  sub->add_option("--device", o->device, "CUDA device index of a cuda side (default 0)");
  sub->add_flag("--tf32", o->tf32, "cuda sides: let fp32 MatMul/Gemm/Conv use TF32 tensor cores (~1e-3 error)");
  sub->add_option("--reference", o->reference,
                  "A test_data_set folder: expected output_<i>.pb (inputs from its input_<i>.pb unless given)");
  sub->add_option("--inputs", o->inputs.dir, "A test_data_set folder with input_<i>.pb");
  sub->add_option("--input", o->inputs.files, "NAME=FILE (.pb or .npy), or FILE.npz; repeatable");
  sub->add_flag("--random", o->inputs.random, "Seeded random inputs (same values for both sides)");
  sub->add_option("--seed", o->inputs.seed, "Seed of --random (default 0)");
  AddRangeFlag(sub, &o->inputs);
  sub->add_option("--shape", o->inputs.shapes, "NAME=1x3x224x224 for inputs with symbolic dims; repeatable");
  sub->add_option("--atol", o->atol, "Absolute tolerance for every output (default by element type)")
      ->check(FiniteNonNegative());
  sub->add_option("--rtol", o->rtol, "Relative tolerance for every output (default by element type)")
      ->check(FiniteNonNegative());
  sub->add_option("--tol", o->per_output_tol, "NAME=ATOL,RTOL for one output or tensor; repeatable");
  sub->add_option("--timeout", o->timeout,
                  "Fail when a run of either side takes longer than this many seconds")
      ->check(FiniteNonNegative());
  sub->add_flag("--per-layer", o->per_layer,
                "Also compare every intermediate tensor present on both sides, those of If/Loop/Scan bodies "
                "too (NAME (run K) from a body's second run on, its first 16 runs; a body value whose name "
                "another graph also defines is NAME (in 'node' (Op).attribute)), and report the first that "
                "diverges (A's values are streamed to a scratch folder: memory stays bounded)");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([o, &action] { action = [o] { return RunCompare(*o); }; });
}

}  // namespace onnxkit::app
