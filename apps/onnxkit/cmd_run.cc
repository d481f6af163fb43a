// `onnxkit run MODEL`: execute a model on the cpu (default), reference or
// cuda backend, inputs from files or seeded random values, outputs summarized
// and saved, intermediates dumped, latency benchmarked; on cuda, where each
// node ran and what the host<->device copies cost.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "apps/onnxkit/commands.h"
#include "lib/base/data_type.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/io/model_io.h"
#include "passes/optimize.h"
#include "runner/convert.h"
#include "runner/cpu/threads.h"
#include "runner/cuda/cuda_backend.h"
#include "runner/inputs.h"
#include "runner/session.h"

namespace onnxkit::app {
namespace {

// A name as one index.tsv field: backslash, tab, newline and carriage return
// written as \\, \t, \n and \r.
std::string TsvEscape(std::string_view name) {
  std::string out;
  for (char c : name) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// More threads than any machine this runs on has cores: refused (each one
// is an OpenMP thread with its own stack).
constexpr int kMaxThreads = 256;

struct RunOptions {
  std::string model;
  runner::InputSpec inputs;
  std::string save_outputs;
  std::string dump_all;
  std::string backend = "cpu";
  int threads = 1;
  int device = 0;
  bool tf32 = false;
  bool no_cuda_graphs = false;
  bool cuda_experimental = false;
  std::string precision = "fp32";
  int bench = 0;
  int warmup = 1;
  bool json = false;
  bool profile = false;
  double timeout = 0;
  int64_t memory_limit_mb = 0;
  bool quiet = false;
};

double PeakRssMb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = p * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

absl::StatusOr<runner::Backend> ParseBackend(const std::string& name) {
  if (name == "reference") return runner::Backend::kReference;
  if (name == "cpu") return runner::Backend::kCpu;
  if (name == "cuda") return runner::Backend::kCuda;
  return UsageError("--backend must be reference, cpu or cuda");
}

// One main-graph node of a cuda run: where it ran and its copies.
struct Placed {
  std::string node;
  std::string op;
  runner::NodeRun run;
};

void WritePlacementJson(JsonWriter& w, const std::vector<Placed>& placed, const runner::CopyStats& copies) {
  w.Key("placement");
  w.BeginArray();
  for (const Placed& p : placed) {
    w.BeginObject();
    w.KeyString("node", p.node);
    w.KeyString("op", p.op);
    w.KeyString("backend", std::string(runner::BackendName(p.run.backend)));
    w.KeyDouble("ms", p.run.seconds * 1000);
    w.KeyInt("copies", p.run.copies.count);
    w.KeyDouble("copy_ms", p.run.copies.seconds * 1000);
    w.EndObject();
  }
  w.EndArray();
  w.Key("copies");
  w.BeginObject();
  w.KeyInt("count", copies.count);
  w.KeyInt("bytes", copies.bytes);
  w.KeyDouble("ms", copies.seconds * 1000);
  w.EndObject();
}

void PrintPlacement(const std::vector<Placed>& placed, const runner::CopyStats& copies) {
  int on_cuda = 0;
  std::map<std::string, int> on_host;
  for (const Placed& p : placed) {
    if (p.run.backend == runner::Backend::kCuda) {
      ++on_cuda;
    } else {
      ++on_host[p.op];
    }
  }
  std::string host_ops;
  for (const auto& [op, n] : on_host) absl::StrAppend(&host_ops, host_ops.empty() ? "" : ", ", op, " x", n);
  std::cout << absl::StrCat("placement (first run): ", on_cuda, " nodes on cuda, ", placed.size() - on_cuda,
                            " on cpu", host_ops.empty() ? "" : absl::StrCat(" (", host_ops, ")"), "; ", copies.count,
                            " host<->device copies, ", static_cast<double>(copies.bytes) / (1 << 20), " MiB, ",
                            copies.seconds * 1000, " ms\n");
}

void WriteOutputsJson(JsonWriter& w, const std::vector<const ir::Value*>& names, const std::vector<runner::RtValue>& values) {
  w.Key("outputs");
  w.BeginArray();
  for (size_t i = 0; i < values.size(); ++i) {
    w.BeginObject();
    w.KeyString("name", names[i]->name());
    const runner::RtValue& v = values[i];
    if (v.is_tensor()) {
      const runner::Tensor& t = v.tensor();
      w.KeyString("dtype", std::string(DataTypeName(t.dtype())));
      w.Key("shape");
      w.BeginArray();
      for (int64_t d : t.shape()) w.Int(d);
      w.EndArray();
      runner::TensorStats s = runner::StatsOf(t);
      w.KeyDouble("min", s.min);
      w.KeyDouble("max", s.max);
      w.KeyDouble("mean", s.mean);
      w.Key("first");
      w.BeginArray();
      for (double x : s.first) w.Double(x);
      w.EndArray();
    } else {
      w.KeyString("summary", runner::SummarizeValue(v));
    }
    w.EndObject();
  }
  w.EndArray();
}

absl::StatusOr<int> RunRun(const RunOptions& o) {
  ONNXKIT_ASSIGN_OR_RETURN(runner::Backend backend, ParseBackend(o.backend));
  if (o.bench < 0 || o.warmup < 0 || o.threads < 1) return UsageError("--bench, --warmup and --threads must be positive");
  if (o.threads > kMaxThreads) return UsageError(absl::StrCat("--threads must be at most ", kMaxThreads));
  if (o.inputs.low > o.inputs.high) return UsageError("--range: low must not exceed high");
  if (o.device < 0) return UsageError("--device must be 0 or more");
  const bool bf16 = o.precision == "bf16";
  if (bf16 && backend != runner::Backend::kCpu)
    return UsageError("--precision bf16 applies to --backend cpu");
  if (bf16) NoteWhenBf16Unsupported();
  if (o.cuda_experimental && backend != runner::Backend::kCuda)
    return UsageError("--cuda-experimental applies to --backend cuda");
  // Without a usable device nothing else happens (not even loading).
  if (backend == runner::Backend::kCuda) ONNXKIT_RETURN_IF_ERROR(runner::cuda::CheckDevice(o.device));
  runner::SetMemoryLimit(o.memory_limit_mb * (int64_t{1} << 20));
  auto loaded = io::LoadModel(o.model);
  if (!loaded.ok()) return loaded.status();

  runner::SessionOptions options;
  options.backend = backend;
  options.threads = o.threads;
  options.timeout_seconds = o.timeout;
  options.device = o.device;
  options.allow_tf32 = o.tf32;
  options.cuda_graphs = !o.no_cuda_graphs;
  options.cuda_experimental = o.cuda_experimental;
  options.bf16 = bf16;
  if (backend != runner::Backend::kReference) {
    // Layout changes that undo each other are not executed, and QDQ exports'
    // no-op Casts are dropped (the reference backend, the oracle, runs the
    // model as written).
    options.rewrite = [base_dir = loaded->base_dir,
                       mapping = loaded->mapping](std::unique_ptr<ir::Model>& model) {
      return passes::PrepareForRun(model, base_dir, mapping);
    };
  }
  std::vector<Placed> placed;
  bool placing = true;  // the first run only
  if (backend == runner::Backend::kCuda) {
    options.on_node_run = [&](const ir::Node& node, const runner::NodeRun& run) {
      if (placing) placed.push_back({ir::NodeLabel(node), node.op_type(), run});
    };
  }
  int dump_index = 0;
  bool dumping = true;  // the first run only
  std::vector<std::string> dump_manifest;
  std::map<std::string, int> dump_runs;
  runner::ObservedValueKeys dump_keys;
  if (!o.dump_all.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.dump_all, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", o.dump_all, ": ", ec.message()));
    // Streams each value to disk as soon as it is computed; memory stays
    // bounded by the session's own lifetime plan.
    // If/Loop/Scan bodies too: a value computed more than once (a Loop
    // body's, once per iteration) for its first 16 runs, the run counted in
    // index.tsv's third column.
    options.observe_subgraphs = true;
    options.observer = [&](const ir::Value& value, const runner::RtValue& v) -> absl::Status {
      if (!dumping) return absl::OkStatus();
      const std::string& key = dump_keys.For(value);
      const int run = ++dump_runs[key];
      if (run > 16) return absl::OkStatus();
      std::string file = runner::SafeFileName(value.name(), dump_index++);
      dump_manifest.push_back(absl::StrCat(file, "\t", TsvEscape(key), "\t", run));
      return io::WriteFileAtomically(std::filesystem::path(o.dump_all) / file, runner::ValueToPbBytes(v, value.name()));
    };
  }
  // op -> seconds, count: every node, inside If/Loop/Scan and function
  // bodies too; a node that runs bodies counts only its own time.
  std::map<std::string, std::pair<double, int64_t>> profile;
  bool profiling = false;
  if (o.profile) {
    options.on_node_done = [&](const ir::Node& node, double seconds) {
      if (!profiling) return;
      auto& entry = profile[node.domain().empty() ? node.op_type() : node.domain() + "::" + node.op_type()];
      entry.first += seconds;
      entry.second += 1;
    };
  }
  auto session = runner::Session::Create(std::move(*loaded), options);
  if (!session.ok()) return AnnotateStatus(session.status(), o.model);
  auto feeds = runner::PrepareInputs((*session)->FeedInputs(), o.inputs, (*session)->OverridableInputs());
  // Flags that do not fit the model are usage errors; files that cannot be read are not.
  if (!feeds.ok()) return feeds.status();

  profiling = o.bench == 0;
  auto first = (*session)->Run(*feeds);
  if (!first.ok()) return first.status();
  dumping = false;
  placing = false;
  // Later runs are not placed node by node: without the callback the
  // device kernels of a run are queued without waiting for each one.
  (*session)->set_on_node_run(nullptr);
  const runner::CopyStats first_copies = (*session)->last_run_copies();
  if (!o.dump_all.empty()) {
    std::string index;
    for (const auto& line : dump_manifest) absl::StrAppend(&index, line, "\n");
    ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(std::filesystem::path(o.dump_all) / "index.tsv", index));
  }
  std::vector<double> latencies;
  // With --bench, the outputs saved are the last run's (on cuda, a replay
  // of a recorded CUDA graph when the model allows one).
  std::vector<runner::RtValue> last = *first;
  if (o.bench > 0) {
    for (int i = 1; i < o.warmup; ++i) ONNXKIT_RETURN_IF_ERROR((*session)->Run(*feeds).status());
    profiling = true;
    for (int i = 0; i < o.bench; ++i) {
      auto start = std::chrono::steady_clock::now();
      auto outputs = (*session)->Run(*feeds);
      latencies.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      ONNXKIT_RETURN_IF_ERROR(outputs.status());
      if (i + 1 == o.bench) last = *std::move(outputs);
    }
  }
  std::vector<const ir::Value*> names = (*session)->Outputs();
  if (!o.save_outputs.empty()) ONNXKIT_RETURN_IF_ERROR(runner::SaveOutputs(o.save_outputs, names, last));

  if (o.json) {
    JsonWriter w;
    w.BeginObject();
    w.KeyString("model", o.model);
    w.KeyString("backend", o.backend);
    w.KeyInt("threads", o.threads);
    // What the products were computed in.
    w.KeyString("precision", bf16 && runner::cpu::Bf16Supported() ? "bf16" : "fp32");
    WriteOutputsJson(w, names, *first);
    if (o.bench > 0) {
      w.Key("latency_ms");
      w.BeginObject();
      w.KeyDouble("min", *std::min_element(latencies.begin(), latencies.end()));
      w.KeyDouble("median", Percentile(latencies, 0.5));
      w.KeyDouble("p90", Percentile(latencies, 0.9));
      w.KeyDouble("max", *std::max_element(latencies.begin(), latencies.end()));
      w.KeyInt("runs", o.bench);
      w.EndObject();
    }
    w.KeyDouble("peak_rss_mb", PeakRssMb());
    if (backend == runner::Backend::kCuda) {
      w.KeyInt("device", o.device);
      WritePlacementJson(w, placed, first_copies);
      // Whether the last run replayed a recorded CUDA graph.
      w.KeyBool("cuda_graph", (*session)->last_run_replayed());
    }
    // Shape computations the last run started from instead of running.
    w.KeyInt("memoized_nodes", (*session)->last_run_memoized_nodes());
    if (o.profile) {
      w.Key("profile_ms");
      w.BeginObject();
      for (const auto& [op, entry] : profile) w.KeyDouble(op, entry.first * 1000 / std::max(1, o.bench));
      w.EndObject();
    }
    w.EndObject();
    std::cout << w.Take();
    return kExitOk;
  }
  if (!o.quiet) {
    for (size_t i = 0; i < names.size(); ++i) {
      std::cout << names[i]->name() << ": " << runner::SummarizeValue((*first)[i]) << "\n";
    }
  }
  if (o.bench > 0) {
    std::cout << absl::StrCat("latency over ", o.bench, " runs: min ", *std::min_element(latencies.begin(), latencies.end()),
                              " ms, median ", Percentile(latencies, 0.5), " ms, p90 ", Percentile(latencies, 0.9),
                              " ms; peak RSS ", PeakRssMb(), " MB\n");
  }
  if (backend == runner::Backend::kCuda && (o.profile || !o.quiet)) {
    PrintPlacement(placed, first_copies);
    if ((*session)->last_run_replayed()) std::cout << "the last run replayed a recorded CUDA graph\n";
  }
  if (o.profile) {
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(profile.begin(), profile.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (const auto& r : rows) total += r.second.first;
    std::cout << "time per op type (nodes inside subgraphs and functions included"
              << (o.bench > 0 ? absl::StrCat(", mean of ", o.bench, " runs") : "") << "):\n";
    int runs = std::max(1, o.bench);
    for (const auto& [op, entry] : rows) {
      std::cout << absl::StrCat("  ", op, std::string(op.size() < 28 ? 28 - op.size() : 1, ' '),
                                entry.first * 1000 / runs, " ms  ", 100 * entry.first / std::max(total, 1e-12), "%  (",
                                entry.second / runs, " nodes)\n");
    }
    if ((*session)->last_run_memoized_nodes() > 0) {
      std::cout << absl::StrCat("  (", (*session)->last_run_memoized_nodes(),
                                " shape-computation nodes of the main graph kept from the first run of these "
                                "input shapes, not run)\n");
    }
  }
  return kExitOk;
}

}  // namespace

void RegisterRun(CLI::App& app, Action& action) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run",
                                     "Execute a model. Exit codes: 0 ok, 2 usage (incl. missing inputs and "
                                     "names that are not inputs), 3 model "
                                     "unreadable or invalid, or the run failed (unsupported op, shape error, "
                                     "an input of the wrong type or dims, "
                                     "timeout, memory limit), 4 internal error.");
  sub->add_option("model", o->model, "Model file (.onnx)")->required();
  sub->add_option("--inputs", o->inputs.dir, "A test_data_set folder: input_<i>.pb in graph-input order");
  sub->add_option("--input", o->inputs.files, "NAME=FILE (.pb or .npy), or FILE.npz (arrays by name); repeatable");
  sub->add_flag("--random", o->inputs.random, "Seeded random values for inputs not given otherwise");
  sub->add_option("--seed", o->inputs.seed, "Seed of --random (default 0)");
  AddRangeFlag(sub, &o->inputs);
  sub->add_option("--shape", o->inputs.shapes, "NAME=1x3x224x224: shape of an input with symbolic dims; repeatable");
  sub->add_option(
      "--save-outputs", o->save_outputs,
      "Write output_<i>.pb (test_data_set layout) into this folder (with --bench: the last run's)");
  sub->add_option(
      "--dump-all", o->dump_all,
      "Write every intermediate tensor into this folder as it is computed, those of If/Loop/Scan "
      "bodies too (<index>_<name>.pb, listed in index.tsv with the run of the body: a Loop body's "
      "values for its first 16 iterations; a body value whose name another graph also defines is "
      "listed as \"NAME (in 'node' (Op).attribute)\")");
  sub->add_option("--backend", o->backend,
                  "cpu (oneDNN for the heavy ops, the reference kernels for the rest; default), reference "
                  "(simple kernels for every op, the oracle) or cuda (NVIDIA GPU; nodes without a CUDA kernel run "
                  "on cpu)")
      ->check(CLI::IsMember({"reference", "cpu", "cuda"}));
  sub->add_option("--device", o->device, "CUDA device index of --backend cuda (default 0)");
  sub->add_flag("--tf32", o->tf32, "--backend cuda: let fp32 MatMul/Gemm/Conv use TF32 tensor cores (~1e-3 error)");
  sub->add_flag(
      "--no-cuda-graphs", o->no_cuda_graphs,
      "--backend cuda: run node by node every time instead of recording the second run with the same "
      "input shapes as a CUDA graph and replaying it");
  sub->add_flag(
      "--cuda-experimental", o->cuda_experimental,
      "--backend cuda: also what is written but not yet checked on a GPU: linear layers (MatMul, the Add "
      "of a bias row, the Add of a residual) as one cuBLASLt product, MatMuls reading and writing "
      "through the Transposes around them (attention heads), element-wise ops and the Softmax that alone "
      "reads "
      "them (scale and mask) as one kernel, Gemm's bias and C on cuBLASLt, Resize and Upsample");
  sub->add_option("--threads", o->threads,
                  "Threads of the cpu backend, 1 to 256 (default 1; the reference backend runs on one)");
  sub->add_option(
         "--precision", o->precision,
         "fp32 (default) or bf16: --backend cpu computes float32 Conv and ConvTranspose, and MatMul and "
         "Gemm with constant weights (B), in bfloat16 (8 significant bits; float32 accumulation and "
         "tensors) where the processor has bfloat16 instructions (AVX512_BF16 or AMX), else float32 "
         "with a note; measure the error with compare --b-precision bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  sub->add_option("--bench", o->bench, "Time N runs after warm-up and report min/median/p90 latency");
  sub->add_option("--warmup", o->warmup, "Warm-up runs before --bench (default 1; the first run counts)");
  sub->add_flag("--profile", o->profile,
                "Report time per op type, nodes inside If/Loop/Scan bodies and functions included (a node running "
                "a body counts only its own time)");
  sub->add_flag("--json", o->json,
                "Print one JSON object (outputs, precision, latency_ms, peak_rss_mb, memoized_nodes, "
                "profile_ms; on cuda: "
                "placement, copies)");
  sub->add_option("--timeout", o->timeout, "Fail a run that takes longer than this many seconds")
      ->check(FiniteNonNegative());
  sub->add_option("--memory-limit", o->memory_limit_mb,
                  "Fail when tensors would need more than this many MiB")
      ->check(FiniteNonNegative());
  sub->add_flag("-q,--quiet", o->quiet, "Do not print output summaries");
  sub->callback([o, &action] { action = [o] { return RunRun(*o); }; });
}

}  // namespace onnxkit::app
