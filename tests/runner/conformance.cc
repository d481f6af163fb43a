// Conformance driver implementation.
#include "tests/runner/conformance.h"

#include <algorithm>
#include <cstring>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/status_macros.h"
#include "lib/io/model_io.h"
#include "runner/convert.h"
#include "runner/reference/float_types.h"
#include "runner/session.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace fs = std::filesystem;
using runner::RtValue;
using runner::Tensor;

namespace {

void AddSuite(const fs::path& root, const std::string& prefix, std::vector<ConformanceCase>* out) {
  std::error_code ec;
  if (root.empty() || !fs::is_directory(root, ec)) return;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    fs::path model = entry.path() / "model.onnx";
    fs::path data = entry.path() / "test_data_set_0";
    if (!fs::exists(model, ec) || !fs::is_directory(data, ec)) continue;
    out->push_back({prefix + "/" + entry.path().filename().string(), model, data, {}});
  }
}

// Reads the value of a test data file as the kind the declared type says.
absl::StatusOr<RtValue> ReadValue(const fs::path& path, const pb::TypeProto* type) {
  std::string bytes = ReadFileOrEmpty(path);
  return runner::ValueFromPbBytes(bytes, type);
}

template <typename T>
double At(const Tensor& t, int64_t i) {
  return static_cast<double>(static_cast<float>(t.data<T>()[i]));
}

double FloatAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case 1: return t.data<float>()[i];
    case 11: return t.data<double>()[i];
    case 10: return static_cast<float>(t.data<runner::Float16>()[i]);
    case 16: return static_cast<float>(t.data<runner::BFloat16>()[i]);
    default: return 0;
  }
}

absl::Status CompareTensors(const Tensor& a, const Tensor& e, double rtol, double atol) {
  if (a.dtype() != e.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("dtype: got ", runner::DescribeTensor(a), ", expected ",
                                                   runner::DescribeTensor(e)));
  }
  if (a.shape() != e.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("shape: got ", runner::DescribeTensor(a), ", expected ",
                                                   runner::DescribeTensor(e)));
  }
  if (e.is_string()) {
    if (a.strings() != e.strings()) return absl::InvalidArgumentError("string values differ");
    return absl::OkStatus();
  }
  bool is_float = e.dtype() == 1 || e.dtype() == 10 || e.dtype() == 11 || e.dtype() == 16;
  if (!is_float) {
    if (a.nbytes() != e.nbytes() ||
        (a.nbytes() > 0 && std::memcmp(a.raw(), e.raw(), a.nbytes()) != 0)) {
      return absl::InvalidArgumentError("values differ (exact comparison)");
    }
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < e.size(); ++i) {
    double x = FloatAt(a, i), y = FloatAt(e, i);
    if (std::isnan(y)) {
      if (!std::isnan(x)) return absl::InvalidArgumentError(absl::StrCat("element ", i, ": got ", x, ", expected nan"));
      continue;
    }
    if (std::isinf(y)) {
      if (x != y) return absl::InvalidArgumentError(absl::StrCat("element ", i, ": got ", x, ", expected ", y));
      continue;
    }
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
      return absl::InvalidArgumentError(absl::StrCat("element ", i, ": got ", x, ", expected ", y));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CompareValues(const RtValue& a, const RtValue& e, double rtol, double atol) {
  if (a.kind() != e.kind()) return absl::InvalidArgumentError("value kinds differ (tensor/sequence/optional/map)");
  switch (e.kind()) {
    case RtValue::Kind::kTensor:
      return CompareTensors(a.tensor(), e.tensor(), rtol, atol);
    case RtValue::Kind::kSequence:
      if (a.elements().size() != e.elements().size()) {
        return absl::InvalidArgumentError(absl::StrCat("sequence length: got ", a.elements().size(), ", expected ",
                                                       e.elements().size()));
      }
      for (size_t i = 0; i < e.elements().size(); ++i) {
        ONNXKIT_RETURN_IF_ERROR_CTX(CompareValues(a.elements()[i], e.elements()[i], rtol, atol),
                                    absl::StrCat("sequence element ", i));
      }
      return absl::OkStatus();
    case RtValue::Kind::kOptional:
      if (a.has_value() != e.has_value()) return absl::InvalidArgumentError("optional presence differs");
      return e.has_value() ? CompareValues(a.value(), e.value(), rtol, atol) : absl::OkStatus();
    case RtValue::Kind::kMap:
      ONNXKIT_RETURN_IF_ERROR(CompareTensors(a.map_keys(), e.map_keys(), 0, 0));
      return CompareValues(a.map_values(), e.map_values(), rtol, atol);
    case RtValue::Kind::kEmpty:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

std::vector<ConformanceCase> CollectConformanceCases() {
  std::vector<ConformanceCase> cases;
  fs::path shared = BackendDataDir();
  if (!shared.empty()) {
    AddSuite(shared / "node", "onnx-1.23/node", &cases);
    AddSuite(shared / "simple", "onnx-1.23/simple", &cases);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(shared / "light", ec)) {
      std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".onnx") continue;
      std::string stem = entry.path().stem().string();
      cases.push_back({"onnx-1.23/light/" + stem, entry.path(), {}, shared / "light" / (stem + "_output_0.pb")});
    }
  }
  fs::path debian = DebianBackendDataDir();
  if (!debian.empty()) {
    for (const char* suite : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
      AddSuite(debian / suite, std::string("debian/") + suite, &cases);
    }
  }
  std::sort(cases.begin(), cases.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return cases;
}

absl::Status RunConformanceCase(const ConformanceCase& c, runner::Backend backend, int runs, bool fuse,
                                bool cuda_experimental) {
  ONNXKIT_ASSIGN_OR_RETURN(io::LoadedModel loaded, io::LoadModel(c.model));
  runner::SessionOptions options;
  options.backend = backend;
  options.fuse = fuse;
  options.cuda_experimental = cuda_experimental;
  options.timeout_seconds = 60;
  ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<runner::Session> session, runner::Session::Create(std::move(loaded), options));
  std::vector<std::pair<std::string, RtValue>> feeds;
  std::vector<const ir::Value*> inputs = session->FeedInputs();
  if (c.data_set.empty()) {
    // Light models: all-zero inputs.
    for (const ir::Value* in : inputs) {
      if (in->type() == nullptr || !in->type()->tensor_type || !in->type()->tensor_type->shape) {
        return absl::InvalidArgumentError("light model input without a static shape");
      }
      std::vector<int64_t> dims;
      for (const auto& d : in->type()->tensor_type->shape->dim) dims.push_back(d.dim_value);
      ONNXKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(in->type()->tensor_type->elem_type, dims));
      feeds.emplace_back(in->name(), RtValue::FromTensor(std::move(t)));
    }
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) {
      fs::path file = c.data_set / absl::StrCat("input_", i, ".pb");
      ONNXKIT_ASSIGN_OR_RETURN(RtValue v, ReadValue(file, inputs[i]->type()));
      feeds.emplace_back(inputs[i]->name(), std::move(v));
    }
  }
  for (int r = 1; r < runs; ++r) ONNXKIT_RETURN_IF_ERROR(session->Run(feeds).status());
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<RtValue> outputs, session->Run(std::move(feeds)));
  std::vector<const ir::Value*> declared = session->Outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    fs::path file = c.data_set.empty() ? c.light_output : c.data_set / absl::StrCat("output_", i, ".pb");
    if (c.data_set.empty() && i > 0) break;
    ONNXKIT_ASSIGN_OR_RETURN(RtValue expected, ReadValue(file, declared[i]->type()));
    ONNXKIT_RETURN_IF_ERROR_CTX(CompareValues(outputs[i], expected, 1e-3, c.atol),
                                absl::StrCat("output ", i, " ('", declared[i]->name(), "')"));
  }
  return absl::OkStatus();
}

}  // namespace onnxkit::testing
