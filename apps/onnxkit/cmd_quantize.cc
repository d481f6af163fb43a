// `onnxkit quantize MODEL -o OUT.onnx`: calibrate, insert QDQ, measure the
// error per layer on held-out samples, optionally fall back to float until
// a target SQNR is met, and write the model atomically.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "apps/onnxkit/commands.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/io/model_io.h"
#include "quantization/presets.h"
#include "quantization/quantize.h"
#include "quantization/rules.h"

namespace onnxkit::app {
namespace {

struct QuantizeFlags {
  std::string model, output, calibration_dir, method = "minmax", act_type, weight_type, preset;
  std::vector<std::string> inputs, shapes, op_types, exclude_ops;
  std::string preprocess = std::string(quant::kDefaultPreprocess), exclude_nodes, report, save_calibration,
              load_calibration, mode = "static";
  bool allow_random = false, per_tensor = false, json = false, quiet = false, weights_only = false;
  int samples = 32, holdout = 2, bins = 2048;
  double timeout = 0;  // seconds per run of a model (0: none)
  std::optional<int> bits;            // --weights-only: 4 unless given
  std::optional<int64_t> block_size;  // --weights-only: 32 unless given
  uint64_t seed = 0;
  double random_low = 0, random_high = 1;  // --range of --allow-random-calibration
  bool range_given = false;
  double percentile = 99.99, target_sqnr = NAN, target_cosine = NAN;
};

double PeakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

std::vector<std::string> SplitList(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const std::string& f : flags) {
    for (absl::string_view p : absl::StrSplit(f, ',', absl::SkipEmpty())) out.emplace_back(p);
  }
  return out;
}

void WriteReport(JsonWriter& w, const QuantizeFlags& f, const quant::QuantizeResult& r, bool written) {
  w.BeginObject();
  w.KeyString("model", f.model);
  w.KeyString("output", f.output);
  w.KeyBool("written", written);
  w.KeyString("method", f.method);
  w.KeyString("samples", r.samples);
  w.KeyInt("calibration_samples", r.calibration_samples);
  w.KeyInt("holdout_samples", r.holdout_samples);
  w.KeyInt("quantized_nodes", static_cast<int64_t>(r.qdq.quantized_nodes.size()));
  w.KeyInt("quantized_activations", static_cast<int64_t>(r.qdq.activations.size()));
  w.KeyInt("weights", r.qdq.weights);
  w.KeyInt("per_channel_weights", r.qdq.per_channel_weights);
  w.KeyInt("int32_biases", r.qdq.int32_biases);
  w.Key("float_biases");
  w.BeginArray();
  for (const std::string& b : r.qdq.float_biases) w.String(b);
  w.EndArray();
  w.Key("raised_weight_scales");
  w.BeginArray();
  for (const std::string& n : r.qdq.raised_weight_scales) w.String(n);
  w.EndArray();
  w.Key("output_sqnr_db");  // null when nothing was measured (--load-calibration without data)
  if (r.report.outputs.empty()) {
    w.Null();
  } else {
    w.Double(r.report.min_output_sqnr());
  }
  w.Key("outputs");
  w.BeginArray();
  for (const quant::OutputError& o : r.report.outputs) {
    w.BeginObject();
    w.KeyString("name", o.name);
    w.KeyDouble("sqnr_db", o.stats.sqnr_db());
    w.KeyDouble("cosine", o.stats.cosine());
    w.KeyDouble("max_abs", o.stats.max_abs);
    if (o.stats.top1() >= 0) w.KeyDouble("top1_agreement", o.stats.top1());
    w.EndObject();
  }
  w.EndArray();
  w.Key("tensors");
  w.BeginArray();
  for (const quant::TensorError& t : r.report.tensors) {
    w.BeginObject();
    w.KeyString("tensor", t.record->tensor);
    w.KeyString("node", t.record->node);
    w.KeyDouble("scale", t.record->params.scale);
    w.KeyInt("zero_point", t.record->params.zero_point);
    w.KeyBool("shared_scale", t.record->shared);
    w.KeyDouble("range_min", t.record->range.lo);
    w.KeyDouble("range_max", t.record->range.hi);
    w.KeyDouble("observed_min", t.record->observed_min);
    w.KeyDouble("observed_max", t.record->observed_max);
    w.KeyDouble("sqnr_db", t.stats.sqnr_db());
    w.KeyDouble("cosine", t.stats.cosine());
    w.KeyDouble("max_abs", t.stats.max_abs);
    w.EndObject();
  }
  w.EndArray();
  if (!std::isnan(f.target_sqnr) || !std::isnan(f.target_cosine)) {
    if (!std::isnan(f.target_sqnr)) w.KeyDouble("target_sqnr_db", f.target_sqnr);
    if (!std::isnan(f.target_cosine)) w.KeyDouble("target_cosine", f.target_cosine);
    w.KeyBool("target_met", r.target_met);
    w.Key("kept_float");
    w.BeginArray();
    for (const std::string& n : r.kept_float) w.String(n);
    w.EndArray();
    w.Key("sensitivity");  // worst output SQNR and cosine with each node alone in float, best first
    w.BeginArray();
    for (const quant::Sensitivity& x : r.sensitivity) {
      w.BeginObject();
      w.KeyString("node", x.node);
      w.KeyDouble("sqnr_db", x.sqnr_db);
      w.KeyDouble("cosine", x.cosine);
      w.EndObject();
    }
    w.EndArray();
  }
  w.Key("warnings");
  w.BeginArray();
  for (const std::string& s : r.warnings) w.String(s);
  w.EndArray();
  w.KeyDouble("peak_rss_mb", PeakRssMb());
  w.EndObject();
}

void PrintHuman(const QuantizeFlags& f, const quant::QuantizeResult& r) {
  std::ostream& out = std::cout;
  std::vector<const quant::TensorError*> worst;
  for (const quant::TensorError& t : r.report.tensors) worst.push_back(&t);
  std::stable_sort(worst.begin(), worst.end(), [](auto* a, auto* b) { return a->stats.sqnr_db() < b->stats.sqnr_db(); });
  if (worst.size() > 20) worst.resize(20);
  if (!worst.empty()) {
    out << absl::StrFormat("%-40s %-24s %9s %8s %10s %11s\n", "tensor (20 worst)", "node", "sqnr_db", "cosine",
                           "max_abs", "scale");
    for (const auto* t : worst) {
      out << absl::StrFormat("%-40s %-24s %9.2f %8.5f %10.4g %11.4g\n", t->record->tensor.substr(0, 40),
                             t->record->node.substr(0, 24), t->stats.sqnr_db(), t->stats.cosine(), t->stats.max_abs,
                             t->record->params.scale);
    }
  }
  for (const quant::OutputError& o : r.report.outputs) {
    out << absl::StrFormat("output %s: sqnr %.2f dB, cosine %.6f, max abs %.4g", o.name, o.stats.sqnr_db(),
                           o.stats.cosine(), o.stats.max_abs);
    if (o.stats.top1() >= 0) out << absl::StrFormat(", top-1 agreement %.1f%%", 100 * o.stats.top1());
    out << "\n";
  }
  if (!r.kept_float.empty()) out << "kept in float: " << absl::StrJoin(r.kept_float, ", ") << "\n";
  out << absl::StrFormat("wrote %s: %d nodes quantized, %d activations, %d weights (%d per channel), %d int32 biases\n",
                         f.output, r.qdq.quantized_nodes.size(), r.qdq.activations.size(), r.qdq.weights,
                         r.qdq.per_channel_weights, r.qdq.int32_biases);
}

absl::StatusOr<int> RunQuantize(const QuantizeFlags& f) {
  if (f.model.empty() || f.output.empty()) return UsageError("quantize needs MODEL and -o OUT.onnx");
  if (f.mode != "static" && f.mode != "dynamic") return UsageError("--mode must be static or dynamic");
  if (f.weights_only) {
    if (f.mode != "static") return UsageError("--weights-only and --mode dynamic exclude each other");
    if (!f.load_calibration.empty()) return UsageError("--weights-only calibrates nothing: drop --load-calibration");
    if (!f.act_type.empty() || !f.weight_type.empty() || f.per_tensor) {
      return UsageError("--weights-only takes --bits and --block-size, not --act-type, --weight-type or --per-tensor");
    }
    if (f.bits && *f.bits != 4 && *f.bits != 8) return UsageError("--bits must be 4 or 8");
    if (f.block_size && (*f.block_size < 1 || *f.block_size > (int64_t{1} << 30))) {
      return UsageError("--block-size must be in [1, 2^30]");
    }
  } else if (f.bits || f.block_size) {
    return UsageError("--bits and --block-size need --weights-only");
  }
  // No file written over another this command reads or writes.
  auto same_file = [](const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return false;
    std::error_code ec;
    return a == b || std::filesystem::equivalent(a, b, ec);
  };
  for (const auto& [flag, path] :
       {std::pair<std::string, std::string>{"--report", f.report},
        std::pair<std::string, std::string>{"--save-calibration", f.save_calibration}}) {
    if (same_file(path, f.model) || same_file(path, f.output) ||
        (flag == "--report" && same_file(path, f.save_calibration)) ||
        (flag == "--report" && same_file(path, f.load_calibration))) {
      return UsageError(
          absl::StrCat(flag, " ", path, " would overwrite the model, -o or the calibration file"));
    }
  }
  int sources = (!f.calibration_dir.empty()) + (!f.inputs.empty()) + f.allow_random;
  if (sources == 0 && f.load_calibration.empty() && f.mode == "static" && !f.weights_only) {
    return UsageError("quantize needs calibration data: --calibration DIR, --input FILE, or "
                      "--allow-random-calibration (random data gives poor scales)");
  }
  if (sources > 1) return UsageError("give only one of --calibration, --input, --allow-random-calibration");
  if (f.range_given && !f.allow_random)
    return UsageError("--range sets the values of --allow-random-calibration's samples");
  if (!(f.random_low <= f.random_high)) return UsageError("--range: LOW must not exceed HIGH");
  if (sources == 0 && (!std::isnan(f.target_sqnr) || !std::isnan(f.target_cosine))) {
    return UsageError("--target-sqnr and --target-cosine measure the quantized model on samples: give --calibration "
                      "DIR, --input FILE or --allow-random-calibration");
  }
  if (f.samples < 1 || f.holdout < 1 || f.bins < 16 || f.bins > (1 << 20)) {
    return UsageError("--samples and --holdout must be >= 1, --bins in [16, 1048576]");
  }
  if (!(f.percentile > 0 && f.percentile <= 100)) return UsageError("--percentile must be in (0, 100]");
  const quant::Preset* preset = quant::FindPreset(f.preset.empty() ? "generic" : f.preset);
  if (preset == nullptr) {
    std::vector<std::string> valid;
    for (const quant::Preset& p : quant::AllPresets()) valid.emplace_back(p.name);
    return UsageError(absl::StrCat("--preset must be one of ", absl::StrJoin(valid, ", ")));
  }
  if (!f.preset.empty() && (f.mode == "dynamic" || f.weights_only)) {
    return UsageError("--preset is for static QDQ (not --mode dynamic or --weights-only)");
  }
  auto type_name = [](quant::QType t) {
    switch (t) {
      case quant::QType::kInt8: return "int8";
      case quant::QType::kUint8: return "uint8";
      case quant::QType::kInt4: return "int4";
      case quant::QType::kInt16: return "int16";
      case quant::QType::kUint16: return "uint16";
    }
    return "int8";
  };
  // Explicit flags override the preset.
  const std::string act_type = f.act_type.empty() ? type_name(preset->act_type) : f.act_type;
  const std::string weight_type = f.weight_type.empty() ? type_name(preset->weight_type) : f.weight_type;
  quant::QuantizeOptions o;
  auto method = quant::ParseMethod(f.method);
  if (!method.ok()) return UsageError(StdSv(method.status().message()));
  o.qdq.calibrator.method = *method;
  o.qdq.calibrator.percentile = f.percentile;
  o.qdq.act_type = act_type == "int8"    ? quant::QType::kInt8
                   : act_type == "int16"  ? quant::QType::kInt16
                   : act_type == "uint16" ? quant::QType::kUint16
                                          : quant::QType::kUint8;
  o.qdq.weight_type = weight_type == "uint8" ? quant::QType::kUint8
                      : weight_type == "int4" ? quant::QType::kInt4
                                              : quant::QType::kInt8;
  if (act_type == "int16" || act_type == "uint16" || weight_type == "int4") {
    if (f.mode == "dynamic" || f.weights_only) {
      return UsageError("--act-type int16|uint16 and --weight-type int4 are for static QDQ (not --mode dynamic or --weights-only)");
    }
    o.min_opset = 21;  // QuantizeLinear/DequantizeLinear with int4 and 16-bit types
  }
  o.qdq.per_channel = preset->per_channel && !f.per_tensor;
  o.qdq.quantize_outputs = preset->quantize_outputs;
  o.qdq.op_types = SplitList(f.op_types);
  if (o.qdq.op_types.empty()) {
    for (std::string_view op : preset->op_types) o.qdq.op_types.emplace_back(op);
  }
  o.qdq.exclude_ops = SplitList(f.exclude_ops);
  o.qdq.exclude_nodes = f.exclude_nodes;
  // A name no rule quantizes is a typo ('Matmul'): in --exclude-ops too,
  // where it would silently exclude nothing.
  for (const auto& [flag, ops] :
       {std::pair<const char*, const std::vector<std::string>*>{"--op-types", &o.qdq.op_types},
        {"--exclude-ops", &o.qdq.exclude_ops}}) {
    for (const std::string& op : *ops) {
      if (quant::FindRule(op) != nullptr) continue;
      std::vector<std::string> valid;
      for (const quant::Rule& rule : quant::AllRules()) valid.emplace_back(rule.op_type);
      return UsageError(absl::StrCat(flag, ": '", op,
                                     "' is not quantized by any rule; valid: ", absl::StrJoin(valid, ", ")));
    }
  }
  o.preprocess = f.preprocess == "none" ? "" : f.preprocess;
  o.dynamic = f.mode == "dynamic";
  o.weights_only = f.weights_only;
  if (f.weights_only) {
    o.weights_only_options.bits = f.bits.value_or(4);
    o.weights_only_options.block_size = f.block_size.value_or(32);
    o.min_opset = quant::kWeightsOnlyOpset;
  } else {
    // QuantizeLinear needs opset 10, DynamicQuantizeLinear 11, per-channel
    // weights 13: an older model is converted first.
    o.min_opset = std::max<int64_t>(o.min_opset, o.dynamic ? 11 : 10);
    if (!o.dynamic && o.qdq.per_channel) o.preferred_opset = 13;
  }
  o.holdout = f.holdout;
  o.timeout_seconds = f.timeout;
  o.bins = f.bins;
  if (!std::isnan(f.target_sqnr)) o.target_sqnr_db = f.target_sqnr;
  if (!std::isnan(f.target_cosine)) {
    if (!(f.target_cosine > 0 && f.target_cosine <= 1)) return UsageError("--target-cosine must be in (0, 1]");
    o.target_cosine = f.target_cosine;
  }
  std::string mode = f.weights_only ? absl::StrCat("weights-only bits=", o.weights_only_options.bits,
                                                  " block-size=", o.weights_only_options.block_size)
                                   : f.mode;
  o.metadata = {{"onnxkit.quantize.version", "onnxkit 0.1.0"},
                {"onnxkit.quantize.options",
                 absl::StrCat("mode=", mode, " preset=", Sv(preset->name), " method=", f.method, " act=", act_type,
                              " weight=", weight_type,
                              f.per_tensor ? " per-tensor" : " per-channel", " percentile=", f.percentile,
                              " samples=", f.calibration_dir.empty() ? (f.allow_random ? "random" : "input") : "dir")}};
  bool progress = isatty(2) && !f.quiet;
  if (progress) {
    o.progress = [](const std::string& stage, int i, int total) {
      std::cerr << "\r" << stage << " " << (i + 1) << "/" << total << "   " << (i + 1 == total ? "\n" : "") << std::flush;
    };
  }
  if (!f.load_calibration.empty()) {
    std::ifstream in(f.load_calibration, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(f.load_calibration, ": cannot read"));
    std::stringstream ss;
    ss << in.rdbuf();
    absl::StatusOr<quant::Calibration> calibration = quant::CalibrationFromJson(ss.str());
    if (!calibration.ok()) return AnnotateStatus(calibration.status(), f.load_calibration);
    if (calibration->tensors.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(f.load_calibration, ": holds no tensor ranges"));
    }
    if (f.method != "minmax" && calibration->bins == 0) {
      return UsageError(
          absl::StrCat("--method ", f.method, " needs histograms, and ", f.load_calibration,
                       " holds ranges only (saved from a minmax calibration): calibrate again with "
                       "--method ",
                       f.method, ", or use --method minmax"));
    }
    o.calibration = *std::move(calibration);
  }
  auto loaded = io::LoadModel(f.model);
  if (!loaded.ok()) return loaded.status();
  if (o.calibration) {
    // The calibration must be this model's: its tensors named in the model.
    std::set<std::string> names;
    std::function<void(const pb::GraphProto&)> collect = [&](const pb::GraphProto& g) {
      for (const pb::ValueInfoProto& v : g.input) names.insert(v.name);
      for (const pb::NodeProto& n : g.node) {
        for (const std::string& out : n.output) names.insert(out);
        for (const pb::AttributeProto& a : n.attribute) {
          if (a.g) collect(*a.g);
          for (const pb::GraphProto& sub : a.graphs) collect(sub);
        }
      }
    };
    if (loaded->proto.graph) collect(*loaded->proto.graph);
    size_t known = 0;
    for (const auto& [name, range] : o.calibration->tensors) known += names.count(name);
    if (known == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.load_calibration, ": none of its ", o.calibration->tensors.size(),
                       " tensors is a tensor of ", f.model, " (a calibration of another model?)"));
    }
    if (known < o.calibration->tensors.size()) {
      std::cerr << "warning: " << (o.calibration->tensors.size() - known) << " of the "
                << o.calibration->tensors.size() << " tensors of " << f.load_calibration << " are not in "
                << f.model << "\n";
    }
  }
  std::unique_ptr<quant::SampleSource> samples;
  if (!f.calibration_dir.empty()) {
    auto s = quant::FolderSamples(f.calibration_dir, f.shapes);
    if (!s.ok()) return s.status().code() == absl::StatusCode::kInvalidArgument ? absl::NotFoundError(s.status().message()) : s.status();
    samples = std::move(*s);
  } else if (!f.inputs.empty()) {
    samples = quant::FileSamples(f.inputs, f.shapes);
  } else if (f.allow_random) {
    std::cerr << (f.mode == "dynamic" || f.weights_only ? "WARNING: measuring the error on RANDOM data (--allow-random-calibration)\n"
                                      : "WARNING: calibrating on RANDOM data (--allow-random-calibration): the scales "
                                        "will not fit real inputs; use --calibration DIR for a model you deploy\n");
    samples = quant::RandomSamples(f.samples, f.seed, f.random_low, f.random_high, f.shapes);
  }
  // Every file to write has its folder, before anything is written.
  for (const std::string& path : {f.output, f.report, f.save_calibration}) {
    if (path.empty()) continue;
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::absolute(path, ec).parent_path();
    if (!std::filesystem::is_directory(parent, ec)) {
      return absl::NotFoundError(
          absl::StrCat("cannot write ", path, ": folder ", parent.string(), " does not exist"));
    }
  }
  auto result = quant::Quantize(*loaded, samples.get(), o);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kInvalidArgument &&
        (absl::StrContains(result.status().message(), "--exclude-nodes") ||
         absl::StrContains(result.status().message(), "--preprocess"))) {
      return UsageError(StdSv(result.status().message()));
    }
    return result.status().code() == absl::StatusCode::kInternal ? result.status()
                                                                  : AnnotateStatus(result.status(), f.model);
  }
  for (const std::string& w : result->warnings) std::cerr << "warning: " << w << "\n";
  if (!f.save_calibration.empty()) {
    ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(f.save_calibration, quant::CalibrationToJson(result->calibration)));
  }
  ONNXKIT_RETURN_IF_ERROR(io::SaveModel(result->qdq.model, loaded->base_dir, f.output));
  JsonWriter w;
  WriteReport(w, f, *result, true);
  std::string json = w.Take();
  if (!f.report.empty()) ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(f.report, json));
  if (f.json) {
    std::cout << json;
  } else if (!f.quiet) {
    PrintHuman(f, *result);
  }
  return result->target_met ? kExitOk : kExitNo;
}

}  // namespace

void RegisterQuantize(CLI::App& app, Action& action) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Insert QuantizeLinear/DequantizeLinear with calibration; report the error per layer. Exit codes: 0 "
      "written, "
      "1 --target-sqnr/--target-cosine not met (the best model is still written), 2 usage (also random "
      "calibration without --allow-random-calibration), 3 model or data unreadable, or an older opset that "
      "cannot be converted to the one needed (10 static, 11 dynamic, 21 int4/16-bit/weights-only), 4 "
      "internal "
      "error.");
  sub->add_option("model", f->model, "Model file (.onnx)");
  sub->add_option("-o,--output", f->output, "Where to write the quantized model");
  sub->add_option("--calibration", f->calibration_dir, "Folder of test_data_set_* folders (input_<i>.pb) or .npz files");
  sub->add_option("--input", f->inputs, "One calibration sample: NAME=FILE (.pb, .npy) or FILE.npz; repeatable");
  sub->add_flag("--allow-random-calibration", f->allow_random, "Calibrate on seeded random data (testing only)");
  sub->add_option("--samples", f->samples, "Random samples (default 32)");
  sub->add_option("--seed", f->seed, "Seed of the random samples (default 0)");
  sub->add_option_function<std::vector<double>>(
         "--range",
         [f](const std::vector<double>& r) {
           f->random_low = r[0];
           f->random_high = r[1];
           f->range_given = true;
         },
         "LOW,HIGH: range of the random samples' values (default 0,1; integer inputs use the integers in it)")
      ->delimiter(',')
      ->expected(2)
      ->check(Finite());
  sub->add_option("--shape", f->shapes, "NAME=1x3x224x224 for inputs with symbolic dims; repeatable");
  sub->add_option("--method", f->method, "Calibration: minmax (default), percentile, entropy, mse");
  sub->add_option("--percentile", f->percentile, "Percentile of --method percentile (default 99.99)");
  sub->add_option("--bins", f->bins, "Histogram bins (default 2048)");
  sub->add_option("--op-types", f->op_types, "Only quantize these op types (comma-separated)");
  sub->add_option("--exclude-ops", f->exclude_ops, "Never quantize these op types (comma-separated)");
  sub->add_option("--exclude-nodes", f->exclude_nodes, "Never quantize nodes whose name matches this regex");
  sub->add_option("--act-type", f->act_type, "Activations: uint8 (asymmetric, default), int8 (symmetric), uint16 or int16 (opset 21; "
                  "older models are converted first)")
      ->check(CLI::IsMember({"uint8", "int8", "uint16", "int16"}));
  sub->add_option("--weight-type", f->weight_type, "Weights: int8 (symmetric, default), uint8, or int4 (symmetric [-7, 7], "
                  "opset 21; older models are converted first)")
      ->check(CLI::IsMember({"int8", "uint8", "int4"}));
  sub->add_option("--preset", f->preset,
                  "Defaults for a target: generic (default: uint8 activations, int8 per-channel weights, every "
                  "rule), ort-cpu (the same types, only the ops ONNX Runtime's CPU provider runs quantized), trt "
                  "(int8 symmetric activations, QDQ only on the inputs of Conv/ConvTranspose/MatMul/Gemm/pooling); "
                  "--act-type, --weight-type, --per-tensor, --op-types override it");
  sub->add_flag("--per-tensor", f->per_tensor, "One scale per weight tensor (default: per channel, opset >= 13)");
  sub->add_option("--mode", f->mode,
                  "static (default: calibrated QDQ) or dynamic (MatMul weights int8, activations quantized at run "
                  "time with DynamicQuantizeLinear + MatMulInteger; data, when given, only measures the error)");
  sub->add_option(
      "--preprocess", f->preprocess,
      "Passes run first (default fold,eliminate-identity,dce,push-transpose,merge-transpose; 'none' to "
      "skip; e.g. add fuse-conv-bn)");
  sub->add_flag("--weights-only", f->weights_only,
                "Only the constant weights of MatMul/Gemm: int4/int8 with one symmetric scale per block along the "
                "reduction axis (DequantizeLinear block_size, opset 21; older models are converted first); "
                "activations stay float, nothing is calibrated (data, when given, only measures the error)");
  sub->add_option("--bits", f->bits, "--weights-only: 4 (int4, default) or 8 (int8)");
  sub->add_option("--block-size", f->block_size, "--weights-only: elements per scale along the reduction axis (default 32)");
  sub->add_option("--holdout", f->holdout, "The last N samples measure the error (default 2)");
  sub->add_option(
         "--timeout", f->timeout,
         "Fail when one run of the float or the quantized model (calibration, error report) takes longer "
         "than this many seconds")
      ->check(FiniteNonNegative());
  sub->add_option("--target-sqnr", f->target_sqnr,
                  "Keep the most sensitive layers in float until every output "
                  "reaches this SQNR (dB); exit 1 when it cannot")
      ->check(Finite());
  sub->add_option("--target-cosine", f->target_cosine,
                  "Keep the most sensitive layers in float until every output's cosine similarity with float "
                  "reaches this (0, 1]; with --target-sqnr both must hold; exit 1 when it cannot")
      ->check(Finite());
  sub->add_option("--report", f->report, "Write the JSON report here");
  sub->add_option("--save-calibration", f->save_calibration, "Write the calibration (ranges, histograms) as JSON");
  sub->add_option("--load-calibration", f->load_calibration, "Use a saved calibration instead of calibrating");
  sub->add_flag("--json", f->json, "Print the JSON report on stdout");
  sub->add_flag("-q,--quiet", f->quiet, "Print nothing on success");
  sub->callback([f, &action] { action = [f] { return RunQuantize(*f); }; });
}

}  // namespace onnxkit::app
