// Running graphs built in code on a runner backend: see run_graph.h.
#include "tests/util/run_graph.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "lib/base/data_type.h"
#include "lib/io/model_io.h"
#include "runner/reference/dispatch.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"

namespace onnxkit::testing {
namespace {

runner::Tensor Allocate(int32_t dtype, std::vector<int64_t> shape) {
  absl::StatusOr<runner::Tensor> t = runner::Tensor::Allocate(dtype, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : runner::Tensor();
}

// Element i of a numeric tensor as double; nullopt for the types compared
// byte for byte here (float16, bfloat16, float8, sub-byte, strings).
std::optional<double> At(const runner::Tensor& t, int64_t i) {
  if (!runner::reference::IsStandardNumeric(t.dtype()) || t.dtype() == pb::kFloat16 ||
      t.dtype() == pb::kBfloat16) {
    return std::nullopt;
  }
  return runner::reference::ElementAsDouble(t, i);
}

bool IsFloating(int32_t dtype) { return dtype == pb::kFloat || dtype == pb::kDouble; }

}  // namespace

absl::StatusOr<std::vector<runner::RtValue>> RunGraphOn(runner::Backend backend, const pb::GraphProto& graph,
                                                        const Feeds& feeds, int64_t opset, int threads,
                                                        bool bf16) {
  io::LoadedModel loaded;
  loaded.proto = ModelFromGraph(graph, opset);
  pb::OperatorSetIdProto ml;
  ml.domain = "ai.onnx.ml";
  ml.version = 5;
  loaded.proto.opset_import.push_back(ml);
  pb::OperatorSetIdProto ms;
  ms.domain = "com.microsoft";
  ms.version = 1;
  loaded.proto.opset_import.push_back(ms);
  pb::OperatorSetIdProto nchwc;
  nchwc.domain = "com.microsoft.nchwc";
  nchwc.version = 1;
  loaded.proto.opset_import.push_back(nchwc);
  pb::OperatorSetIdProto preview;
  preview.domain = "ai.onnx.preview";
  preview.version = 1;
  loaded.proto.opset_import.push_back(preview);
  runner::SessionOptions options;
  options.backend = backend;
  options.threads = threads;
  options.bf16 = bf16;
  absl::StatusOr<std::unique_ptr<runner::Session>> session =
      runner::Session::Create(std::move(loaded), options);
  if (!session.ok()) return session.status();
  std::vector<std::pair<std::string, runner::RtValue>> values;
  for (const auto& [name, t] : feeds) values.emplace_back(name, runner::RtValue::FromTensor(t));
  return (*session)->Run(std::move(values));
}

absl::StatusOr<std::vector<runner::RtValue>> RunNodeOn(runner::Backend backend, const std::string& op,
                                                       const std::vector<runner::Tensor>& inputs,
                                                       std::vector<pb::AttributeProto> attributes,
                                                       int64_t opset, int num_outputs,
                                                       const std::string& domain,
                                                       const NodeRunOptions& options) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      names.push_back("");
      continue;
    }
    names.push_back("x" + std::to_string(i));
    if (options.declare_shapes) {
      g.Input(names.back(), inputs[i].dtype(), inputs[i].shape());
    } else {
      g.Input(names.back(), inputs[i].dtype());
    }
    feeds.emplace_back(names.back(), inputs[i]);
  }
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) {
    const bool omitted =
        std::find(options.omitted.begin(), options.omitted.end(), i) != options.omitted.end();
    outs.push_back(omitted ? "" : "y" + std::to_string(i));
  }
  g.Node(op, names, outs, std::move(attributes));
  if (!domain.empty()) g.graph().node.back().domain = domain;
  for (const std::string& o : outs) {
    if (!o.empty()) g.Output(o, 0);
  }
  return RunGraphOn(backend, g.Build(), feeds, opset);
}

absl::StatusOr<std::vector<runner::RtValue>> RunSingleNode(const std::string& op,
                                                           const std::vector<runner::Tensor>& inputs,
                                                           std::vector<pb::AttributeProto> attributes,
                                                           int64_t opset, int num_outputs,
                                                           const std::string& domain,
                                                           runner::Backend backend) {
  return RunNodeOn(backend, op, inputs, std::move(attributes), opset, num_outputs, domain, {});
}

absl::StatusOr<std::vector<runner::Tensor>> RunSingleNodeTensors(const std::string& op,
                                                                 const std::vector<runner::Tensor>& inputs,
                                                                 std::vector<pb::AttributeProto> attributes,
                                                                 int64_t opset, int num_outputs) {
  absl::StatusOr<std::vector<runner::RtValue>> out =
      RunSingleNode(op, inputs, std::move(attributes), opset, num_outputs);
  if (!out.ok()) return out.status();
  std::vector<runner::Tensor> tensors;
  for (const runner::RtValue& v : *out) {
    if (!v.is_tensor()) return absl::InternalError("an output is not a tensor");
    tensors.push_back(v.tensor());
  }
  return tensors;
}

runner::Tensor RandomFloats(std::vector<int64_t> shape, uint32_t seed, float lo, float hi) {
  runner::Tensor t = Allocate(pb::kFloat, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<float>()[i] = dist(rng);
  return t;
}

runner::Tensor RandomInts(int32_t dtype, std::vector<int64_t> shape, uint32_t seed, int64_t lo, int64_t hi) {
  runner::Tensor t = Allocate(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) {
    int64_t v = dist(rng);
    switch (dtype) {
      case pb::kInt8:
        t.mutable_data<int8_t>()[i] = static_cast<int8_t>(v);
        break;
      case pb::kUint8:
        t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case pb::kInt16:
        t.mutable_data<int16_t>()[i] = static_cast<int16_t>(v);
        break;
      case pb::kUint16:
        t.mutable_data<uint16_t>()[i] = static_cast<uint16_t>(v);
        break;
      case pb::kInt32:
        t.mutable_data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case pb::kInt64:
        t.mutable_data<int64_t>()[i] = v;
        break;
      default:
        ADD_FAILURE() << "RandomInts: unsupported type " << dtype;
        return t;
    }
  }
  return t;
}

void ExpectTensorsClose(const runner::Tensor& expected, const runner::Tensor& actual, double atol,
                        double rtol, const std::string& what) {
  ASSERT_EQ(DataTypeName(expected.dtype()), DataTypeName(actual.dtype())) << what;
  ASSERT_EQ(expected.shape(), actual.shape()) << what;
  if (expected.is_string()) {
    ASSERT_TRUE(actual.is_string()) << what;
    return;
  }
  bool floating = IsFloating(expected.dtype());
  int64_t bad = 0;
  int64_t worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    std::optional<double> e = At(expected, i);
    std::optional<double> a = At(actual, i);
    if (!e || !a) {
      ASSERT_EQ(expected.nbytes(), actual.nbytes()) << what;
      ASSERT_EQ(0, std::memcmp(expected.raw(), actual.raw(), expected.nbytes())) << what << ": bytes differ";
      return;
    }
    if (std::isnan(*e) || std::isnan(*a)) {
      if (std::isnan(*e) != std::isnan(*a)) ++bad, worst = i, worst_excess = INFINITY;
      continue;
    }
    double tol = floating ? atol + rtol * std::fabs(*e) : 0;
    double excess = std::fabs(*e - *a) - tol;
    if (*e == *a) excess = -1;
    if (excess > 0) {
      ++bad;
      if (excess > worst_excess || worst < 0) worst_excess = excess, worst = i;
    }
  }
  if (bad > 0) {
    ADD_FAILURE() << what << ": " << bad << " of " << expected.size()
                  << " elements beyond tolerance; worst at flat index " << worst << ": expected "
                  << *At(expected, worst) << ", got " << *At(actual, worst);
  }
}

void ExpectCpuMatchesReference(const pb::GraphProto& graph, const Feeds& feeds, int64_t opset, double atol,
                               double rtol) {
  absl::StatusOr<std::vector<runner::RtValue>> ref =
      RunGraphOn(runner::Backend::kReference, graph, feeds, opset);
  ASSERT_TRUE(ref.ok()) << "reference: " << ref.status();
  absl::StatusOr<std::vector<runner::RtValue>> cpu = RunGraphOn(runner::Backend::kCpu, graph, feeds, opset);
  ASSERT_TRUE(cpu.ok()) << "cpu: " << cpu.status();
  ASSERT_EQ(ref->size(), cpu->size());
  for (size_t i = 0; i < ref->size(); ++i) {
    ASSERT_TRUE((*ref)[i].is_tensor() && (*cpu)[i].is_tensor()) << "output " << i;
    ExpectTensorsClose((*ref)[i].tensor(), (*cpu)[i].tensor(), atol, rtol, "output " + std::to_string(i));
  }
}

void ExpectRepeatedRunsMatch(const pb::GraphProto& graph, const std::vector<Feeds>& runs, double atol,
                             int64_t opset, int64_t ir_version) {
  std::unique_ptr<runner::Session> sessions[2];
  const runner::Backend backends[2] = {runner::Backend::kReference, runner::Backend::kCpu};
  for (int i = 0; i < 2; ++i) {
    io::LoadedModel loaded;
    loaded.proto = ModelFromGraph(graph, opset, ir_version);
    runner::SessionOptions options;
    options.backend = backends[i];
    auto s = runner::Session::Create(std::move(loaded), options);
    ASSERT_TRUE(s.ok()) << s.status();
    sessions[i] = std::move(*s);
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<runner::RtValue> outs[2];
    for (int i = 0; i < 2; ++i) {
      std::vector<std::pair<std::string, runner::RtValue>> feeds;
      for (const auto& [name, t] : runs[r]) feeds.emplace_back(name, runner::RtValue::FromTensor(t));
      auto o = sessions[i]->Run(std::move(feeds));
      ASSERT_TRUE(o.ok()) << "run " << r << ": " << o.status();
      outs[i] = std::move(*o);
    }
    ASSERT_EQ(outs[0].size(), outs[1].size());
    for (size_t k = 0; k < outs[0].size(); ++k) {
      ExpectTensorsClose(outs[0][k].tensor(), outs[1][k].tensor(), atol, 1e-4,
                         "run " + std::to_string(r) + ", output " + std::to_string(k));
    }
  }
}

pb::TensorProto InitializerFrom(const std::string& name, const runner::Tensor& t) {
  pb::TensorProto p;
  p.name = name;
  p.data_type = t.dtype();
  p.dims = t.shape();
  p.raw_data = Bytes::Own(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  return p;
}

}  // namespace onnxkit::testing
