// Input preparation, output writing and summaries.
#include "runner/inputs.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/base/usage_error.h"
#include "lib/io/model_io.h"
#include "lib/io/proto_codec.h"
#include "lib/ops/type_string.h"
#include "lib/tensor/tensor_file.h"
#include "runner/convert.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/float_types.h"

namespace onnxkit::runner {
namespace fs = std::filesystem;

namespace {

absl::StatusOr<std::pair<std::string, std::vector<int64_t>>> ParseShapeFlag(const std::string& flag) {
  size_t eq = flag.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--shape '", flag, "' must be NAME=DIMS, e.g. x=1x3x224x224"));
  }
  std::vector<int64_t> dims;
  std::string spec = flag.substr(eq + 1);
  if (!spec.empty()) {
    for (absl::string_view part : absl::StrSplit(spec, absl::ByAnyChar("x,"))) {
      int64_t d;
      if (!absl::SimpleAtoi(part, &d) || d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("--shape '", flag, "': '", part, "' is not a dimension"));
      }
      dims.push_back(d);
    }
  }
  return std::make_pair(flag.substr(0, eq), dims);
}

// Shape of `input` for random data: declared dims, --shape overrides.
absl::StatusOr<std::vector<int64_t>> ShapeFor(const ir::Value& input,
                                              const std::map<std::string, std::vector<int64_t>>& overrides) {
  auto it = overrides.find(input.name());
  if (it != overrides.end()) return it->second;
  const pb::TypeProto* type = input.type();
  if (type == nullptr || !type->tensor_type || !type->tensor_type->shape) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name(),
                                                   "' has no declared shape; give one with --shape ", input.name(),
                                                   "=DIMS"));
  }
  std::vector<int64_t> dims;
  std::vector<std::string> symbolic;
  for (const auto& d : type->tensor_type->shape->dim) {
    if (d.kind == pb::TensorShapeProto::Dimension::kValue && d.dim_value >= 0) {
      dims.push_back(d.dim_value);
    } else {
      symbolic.push_back(d.kind == pb::TensorShapeProto::Dimension::kParam ? d.dim_param : "?");
      dims.push_back(-1);
    }
  }
  if (!symbolic.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name(), "' has symbolic dims (",
                                                   absl::StrJoin(symbolic, ", "), "); give a shape with --shape ",
                                                   input.name(), "=DIMS"));
  }
  return dims;
}

template <typename T, typename Gen>
void FillInts(Tensor* t, Gen& gen, double low, double high) {
  int64_t lo = static_cast<int64_t>(std::floor(low));
  int64_t hi = static_cast<int64_t>(std::ceil(high));
  if (hi < lo) hi = lo;
  uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  for (int64_t i = 0; i < t->size(); ++i) {
    t->mutable_data<T>()[i] = static_cast<T>(lo + static_cast<int64_t>(gen() % span));
  }
}

absl::StatusOr<Tensor> RandomTensor(int32_t dtype, std::vector<int64_t> shape, std::mt19937_64& gen, double low,
                                    double high) {
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, std::move(shape)));
  auto uniform = [&]() { return low + (high - low) * (static_cast<double>(gen() >> 11) * 0x1.0p-53); };
  switch (dtype) {
    case 1: for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<float>()[i] = static_cast<float>(uniform()); break;
    case 11: for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<double>()[i] = uniform(); break;
    case 10: for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<Float16>()[i] = Float16(static_cast<float>(uniform())); break;
    case 16: for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<BFloat16>()[i] = BFloat16(static_cast<float>(uniform())); break;
    case 2: FillInts<uint8_t>(&t, gen, low, high); break;
    case 3: FillInts<int8_t>(&t, gen, low, high); break;
    case 4: FillInts<uint16_t>(&t, gen, low, high); break;
    case 5: FillInts<int16_t>(&t, gen, low, high); break;
    case 6: FillInts<int32_t>(&t, gen, low, high); break;
    case 7: FillInts<int64_t>(&t, gen, low, high); break;
    case 12: FillInts<uint32_t>(&t, gen, low, high); break;
    case 13: FillInts<uint64_t>(&t, gen, low, high); break;
    case 9: for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(gen() & 1); break;
    default:
      return absl::UnimplementedError(absl::StrCat("random values of type ", Sv(DataTypeName(dtype)),
                                                   " are not supported; give the input as a file"));
  }
  return t;
}

absl::StatusOr<RtValue> ValueFromFile(const fs::path& path, const ir::Value& input) {
  if (path.extension() == ".pb") {
    ONNXKIT_ASSIGN_OR_RETURN(std::shared_ptr<const io::MappedFile> file,
                             io::MappedFile::Open(path, int64_t{1} << 31));
    return ValueFromPbBytes(file->bytes(), input.type());
  }
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<pb::TensorProto> tensors, tensor::ReadTensorFile(path));
  if (tensors.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " holds ", tensors.size(), " arrays, expected 1"));
  }
  ONNXKIT_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(tensors[0]));
  return RtValue::FromTensor(std::move(t));
}

const ir::Value* FindInput(const std::vector<const ir::Value*>& inputs, const std::string& name) {
  for (const ir::Value* v : inputs) {
    if (v->name() == name) return v;
  }
  return nullptr;
}

absl::Status UnknownInput(const std::vector<const ir::Value*>& inputs, const std::string& name) {
  std::vector<std::string> names;
  for (const ir::Value* v : inputs) names.push_back(v->name());
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not an input of the model; inputs: ",
                                                 absl::StrJoin(names, ", ")));
}

// An error reading input file `file`: an input that cannot be read (3),
// not a usage error, whatever code the reader gave it.
absl::Status FileError(const absl::Status& status, const std::string& file) {
  absl::Status annotated = AnnotateStatus(status, file);
  if (annotated.code() != absl::StatusCode::kInvalidArgument) return annotated;
  return absl::DataLossError(annotated.message());
}

}  // namespace

namespace {

absl::StatusOr<std::vector<std::pair<std::string, RtValue>>> PrepareInputsUnmarked(
    const std::vector<const ir::Value*>& required, const std::vector<const ir::Value*>& overridable,
    const InputSpec& spec) {
  // Names resolve among every input a run takes; values are made up
  // (--random) for the required ones only.
  std::vector<const ir::Value*> inputs = required;
  inputs.insert(inputs.end(), overridable.begin(), overridable.end());
  std::map<std::string, RtValue> given;
  if (!spec.dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(spec.dir, ec))
      return absl::NotFoundError(absl::StrCat("--inputs ", spec.dir, ": not a folder"));
    for (size_t i = 0; i < inputs.size(); ++i) {
      fs::path file = fs::path(spec.dir) / absl::StrCat("input_", i, ".pb");
      std::error_code ec;
      if (!fs::exists(file, ec)) continue;
      // A TensorProto's own name, when it names an input, decides the input.
      absl::StatusOr<std::shared_ptr<const io::MappedFile>> opened =
          io::MappedFile::Open(file, int64_t{1} << 31);
      if (!opened.ok()) return FileError(opened.status(), file.string());
      const std::shared_ptr<const io::MappedFile>& mapped = *opened;
      // Past the required inputs, a file feeds an initializer only when it
      // names one.
      const ir::Value* target = i < required.size() ? inputs[i] : nullptr;
      auto as_tensor = io::DecodeTensor(mapped->bytes());
      if (as_tensor.ok() && !as_tensor->name.empty()) {
        if (const ir::Value* named = FindInput(inputs, as_tensor->name)) target = named;
      }
      if (target == nullptr) continue;
      auto value = ValueFromPbBytes(mapped->bytes(), target->type());
      if (!value.ok()) return FileError(value.status(), file.string());
      given[target->name()] = std::move(*value);
    }
  }
  for (const std::string& entry : spec.files) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      if (fs::path(entry).extension() != ".npz") {
        return absl::InvalidArgumentError(absl::StrCat("--input '", entry, "' must be NAME=FILE or FILE.npz"));
      }
      absl::StatusOr<std::vector<pb::TensorProto>> arrays = tensor::ReadTensorFile(entry);
      if (!arrays.ok()) return FileError(arrays.status(), entry);
      for (const auto& a : *arrays) {
        if (FindInput(inputs, a.name) == nullptr) return UnknownInput(inputs, a.name);
        absl::StatusOr<Tensor> t = TensorFromProto(a);
        if (!t.ok()) return FileError(t.status(), absl::StrCat(entry, " '", a.name, "'"));
        given[a.name] = RtValue::FromTensor(*std::move(t));
      }
      continue;
    }
    std::string name = entry.substr(0, eq);
    const ir::Value* input = FindInput(inputs, name);
    if (input == nullptr) return UnknownInput(inputs, name);
    auto value = ValueFromFile(entry.substr(eq + 1), *input);
    if (!value.ok())
      return FileError(value.status(), absl::StrCat("input '", name, "' (", entry.substr(eq + 1), ")"));
    if (!given.emplace(name, std::move(*value)).second) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is given twice"));
    }
  }
  // bfloat16 arrays have no .npy type: written as uint16 ('<u2'), they are
  // read back as the bfloat16 an input declares (the same bits).
  for (auto& [name, value] : given) {
    const ir::Value* input = FindInput(inputs, name);
    const pb::TypeProto* type = input != nullptr ? input->type() : nullptr;
    if (type == nullptr || !type->tensor_type || type->tensor_type->elem_type != pb::kBfloat16 ||
        !value.is_tensor() || value.tensor().dtype() != pb::kUint16) {
      continue;
    }
    const Tensor& t = value.tensor();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor bf16, Tensor::Wrap(pb::kBfloat16, t.shape(), t.buffer()));
    value = RtValue::FromTensor(std::move(bf16));
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& flag : spec.shapes) {
    ONNXKIT_ASSIGN_OR_RETURN(auto parsed, ParseShapeFlag(flag));
    if (FindInput(inputs, parsed.first) == nullptr) return UnknownInput(inputs, parsed.first);
    shapes[parsed.first] = parsed.second;
  }
  std::mt19937_64 gen(spec.seed);
  std::vector<std::pair<std::string, RtValue>> feeds;
  for (const ir::Value* input : overridable) {
    auto it = given.find(input->name());
    if (it != given.end()) feeds.emplace_back(input->name(), std::move(it->second));
  }
  for (const ir::Value* input : required) {
    auto it = given.find(input->name());
    if (it != given.end()) {
      feeds.emplace_back(input->name(), std::move(it->second));
      continue;
    }
    if (!spec.random) {
      return absl::InvalidArgumentError(absl::StrCat("no value for input '", input->name(),
                                                     "': give --inputs DIR, --input NAME=FILE or --random"));
    }
    if (!(spec.low <= spec.high) || !std::isfinite(spec.low) || !std::isfinite(spec.high)) {
      return absl::InvalidArgumentError("--range: LOW must be finite and not above HIGH");
    }
    const pb::TypeProto* type = input->type();
    if (type == nullptr || !type->tensor_type) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input->name(), "' is not a tensor; give it as a file"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ShapeFor(*input, shapes));
    auto t = RandomTensor(type->tensor_type->elem_type, shape, gen, spec.low, spec.high);
    if (!t.ok()) return AnnotateStatus(t.status(), absl::StrCat("input '", input->name(), "'"));
    feeds.emplace_back(input->name(), RtValue::FromTensor(std::move(*t)));
  }
  return feeds;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, RtValue>>> PrepareInputs(
    const std::vector<const ir::Value*>& inputs, const InputSpec& spec,
    const std::vector<const ir::Value*>& overridable) {
  auto feeds = PrepareInputsUnmarked(inputs, overridable, spec);
  // Files that cannot be read are DataLoss/NotFound (FileError); what is left
  // as InvalidArgument is the flags not fitting the model.
  if (!feeds.ok() && feeds.status().code() == absl::StatusCode::kInvalidArgument) {
    return AsUsageError(feeds.status());
  }
  return feeds;
}

absl::Status SaveOutputs(const fs::path& dir, const std::vector<const ir::Value*>& names,
                         const std::vector<RtValue>& values) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  for (size_t i = 0; i < values.size(); ++i) {
    std::string bytes = ValueToPbBytes(values[i], i < names.size() ? names[i]->name() : "");
    ONNXKIT_RETURN_IF_ERROR(io::WriteFileAtomically(dir / absl::StrCat("output_", i, ".pb"), bytes));
  }
  return absl::OkStatus();
}

TensorStats StatsOf(const Tensor& t) {
  TensorStats s;
  if (t.is_string() || t.size() == 0) return s;
  if (!reference::IsStandardNumeric(t.dtype())) return s;
  auto at = [&](int64_t i) { return reference::ElementAsDouble(t, i); };
  if (!at(0)) return s;
  s.min = s.max = *at(0);
  double sum = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = *at(i);
    s.min = std::fmin(s.min, v);
    s.max = std::fmax(s.max, v);
    sum += v;
    if (i < 8) s.first.push_back(v);
  }
  s.mean = sum / static_cast<double>(t.size());
  return s;
}

std::string SummarizeValue(const RtValue& v) {
  switch (v.kind()) {
    case RtValue::Kind::kSequence:
      return absl::StrCat("sequence of ", v.elements().size(), v.elements().empty() ? "" : ", first: ",
                          v.elements().empty() ? "" : SummarizeValue(v.elements()[0]));
    case RtValue::Kind::kOptional:
      return v.has_value() ? absl::StrCat("optional: ", SummarizeValue(v.value())) : "optional: none";
    case RtValue::Kind::kMap:
      return absl::StrCat("map of ", v.map_keys().size(), " entries");
    case RtValue::Kind::kEmpty:
      return "undefined";
    case RtValue::Kind::kTensor:
      break;
  }
  const Tensor& t = v.tensor();
  std::string out = DescribeTensor(t);
  if (t.is_string()) {
    std::vector<std::string> first;
    for (int64_t i = 0; i < std::min<int64_t>(t.size(), 4); ++i) first.push_back(t.strings()[static_cast<size_t>(i)]);
    return absl::StrCat(out, " first [\"", absl::StrJoin(first, "\", \""), "\"]");
  }
  TensorStats s = StatsOf(t);
  if (t.size() == 0 || s.first.empty()) return out;
  return absl::StrCat(out, " min ", s.min, " max ", s.max, " mean ", s.mean, " first [", absl::StrJoin(s.first, ", "),
                      t.size() > 8 ? ", ...]" : "]");
}

std::string SafeFileName(const std::string& name, int index) {
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    out += ok ? c : '_';
  }
  if (out.size() > 100) out.resize(100);
  return absl::StrCat(index, "_", out, ".pb");
}

namespace {

// "'loop' (Loop).body", outermost first, joined by " › ".
std::string ScopeOf(const ir::Graph& graph) {
  std::vector<std::string> parts;
  for (const ir::Graph* g = &graph; g->parent() != nullptr && g->owner_node() != nullptr; g = g->parent()) {
    const ir::Node& owner = *g->owner_node();
    std::string attr = "?";
    for (const ir::Attribute& a : owner.attributes()) {
      if (a.g.get() == g) attr = a.name();
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        if (a.graphs[i].get() == g) attr = absl::StrCat(a.name(), "[", i, "]");
      }
    }
    parts.push_back(absl::StrCat(ir::NodeLabel(owner), ".", attr));
  }
  std::reverse(parts.begin(), parts.end());
  return absl::StrJoin(parts, " › ");
}

}  // namespace

const std::string& ObservedValueKeys::For(const ir::Value& value) {
  auto it = keys_.find(&value);
  if (it != keys_.end()) return it->second;
  const ir::Graph* graph = value.graph();
  if (!counted_ && graph != nullptr) {
    counted_ = true;
    const ir::Graph* root = graph;
    while (root->parent() != nullptr) root = root->parent();
    ir::ForEachGraph(*root, [&](const ir::Graph& g) {
      std::set<std::string> local;
      for (const ir::Value* v : g.values()) {
        if (v->graph() == &g && !v->name().empty()) local.insert(v->name());
      }
      for (const std::string& name : local) ++graphs_defining_[name];
    });
  }
  std::string key = value.name();
  if (graph != nullptr && graph->parent() != nullptr) {
    auto defs = graphs_defining_.find(value.name());
    if (defs != graphs_defining_.end() && defs->second > 1) {
      key = absl::StrCat(value.name(), " (in ", ScopeOf(*graph), ")");
    }
  }
  return keys_.emplace(&value, std::move(key)).first->second;
}

}  // namespace onnxkit::runner
