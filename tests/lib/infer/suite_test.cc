// Inference over every model of the ONNX backend suites (onnx 1.23 in
// ../shared/onnx-backend-data: node, simple, light; Debian's
// libonnx-testdata: node, simple, pytorch-converted, pytorch-operator).
// These are valid models whose graph outputs declare the types of the real
// results, so InferModel must report no issue: each issue is a place where
// onnxkit's inference disagrees with ONNX. Models listed in
// testdata/infer_exceptions.txt are expected to report issues; a listed
// model that reports none fails the test until the list is updated.
//
// Coverage is printed (not asserted): how many graph outputs get their
// declared element type and full shape back when the declarations of the
// outputs are removed before inferring.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lib/infer/engine.h"
#include "lib/infer/infer.h"
#include "lib/infer/types.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/util/test_paths.h"

namespace onnxkit::infer {
namespace {

namespace fs = std::filesystem;

struct Exception {
  std::string suffix;
  std::string reason;
  bool seen = false;
};

std::vector<Exception> LoadExceptions() {
  std::vector<Exception> out;
  std::ifstream in(testing::TestdataPath("infer_exceptions.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      ADD_FAILURE() << "infer_exceptions.txt: no TAB in '" << line << "'";
      continue;
    }
    out.push_back({line.substr(0, tab), line.substr(tab + 1)});
    EXPECT_GT(out.back().reason.size(), 10u) << "give a specific reason for " << out.back().suffix;
  }
  return out;
}

// `dir`/*/model.onnx (or `dir`/*.onnx when `flat`), sorted.
std::vector<fs::path> ModelsIn(const fs::path& dir, bool flat) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (flat) {
      if (entry.path().extension() == ".onnx") out.push_back(entry.path());
    } else if (fs::is_regular_file(entry.path() / "model.onnx", ec)) {
      out.push_back(entry.path() / "model.onnx");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Coverage {
  int outputs = 0;        // main-graph outputs with a declared tensor type and full shape
  int type_matched = 0;   // element type inferred and equal
  int shape_matched = 0;  // every dim inferred and equal
  std::map<std::string, int> missed_ops;  // producer op of outputs whose shape was not inferred
};

bool FullyKnown(const std::optional<Dims>& dims) {
  return dims && std::all_of(dims->begin(), dims->end(), [](const Dim& d) { return d.known(); });
}

// Infers `model` with its main-graph output declarations removed and counts
// what came back.
void MeasureCoverage(const pb::ModelProto& model, Coverage* coverage) {
  pb::ModelProto stripped = model;
  std::map<std::string, Type> declared;
  for (pb::ValueInfoProto& out : stripped.graph->output) {
    if (out.type) declared[out.name] = TypeFromProto(*out.type);
    out.type.reset();
  }
  std::set<std::string> declared_elsewhere;
  for (const pb::ValueInfoProto& vi : stripped.graph->value_info) declared_elsewhere.insert(vi.name);
  std::map<std::string, std::string> producer;
  for (const pb::NodeProto& n : stripped.graph->node) {
    for (const std::string& o : n.output) producer[o] = n.op_type;
  }
  std::map<std::string, pb::TypeProto> inferred = InferredTypes(stripped);
  for (const auto& [name, type] : declared) {
    if (!type.is_tensor() || !FullyKnown(type.shape) || declared_elsewhere.count(name) > 0) continue;
    ++coverage->outputs;
    auto it = inferred.find(name);
    Type got = it == inferred.end() ? Type{} : TypeFromProto(it->second);
    if (got.is_tensor() && got.elem_type == type.elem_type) {
      ++coverage->type_matched;
    } else if (std::getenv("ONNXKIT_INFER_VERBOSE") != nullptr) {
      std::cout << "missed type: " << model.graph->name << " " << name << ": declared " << TypeName(type)
                << ", inferred " << TypeName(got) << "\n";
    }
    if (got.is_tensor() && got.shape && FullyKnown(got.shape) && got.shape->size() == type.shape->size() &&
        std::equal(got.shape->begin(), got.shape->end(), type.shape->begin())) {
      ++coverage->shape_matched;
    } else {
      const std::string op = producer.count(name) > 0 ? producer[name] : "(input)";
      ++coverage->missed_ops[op];
      if (std::getenv("ONNXKIT_INFER_VERBOSE") != nullptr) {
        std::cout << "missed: " << model.graph->name << " " << name << " (" << op << "): declared "
                  << DimsToString(type.shape) << ", inferred " << DimsToString(got.shape) << "\n";
      }
    }
  }
}

TEST(InferSuiteTest, BackendSuitesHaveNoIssues) {
  struct Folder {
    fs::path root;
    std::string sub;
    bool flat;
  };
  std::vector<Folder> folders;
  if (fs::path b = testing::BackendDataDir(); !b.empty()) {
    for (const char* sub : {"node", "simple"}) folders.push_back({b, sub, false});
    folders.push_back({b, "light", true});
  }
  if (fs::path d = testing::DebianBackendDataDir(); !d.empty()) {
    for (const char* sub : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
      folders.push_back({d, sub, false});
    }
  }
  if (folders.empty()) GTEST_SKIP() << "no backend suite data";
  std::vector<Exception> exceptions = LoadExceptions();
  Coverage coverage;
  int models = 0;
  int clean = 0;
  int excepted = 0;
  for (const Folder& f : folders) {
    for (const fs::path& path : ModelsIn(f.root / f.sub, f.flat)) {
      ++models;
      const std::string shown = (fs::path(f.root.filename()) / fs::relative(path, f.root)).string();
      absl::StatusOr<io::LoadedModel> loaded = io::LoadModel(path);
      ASSERT_TRUE(loaded.ok()) << shown << ": " << loaded.status();
      std::vector<InferenceIssue> issues = InferModel(loaded->proto);
      MeasureCoverage(loaded->proto, &coverage);
      Exception* listed = nullptr;
      for (Exception& e : exceptions) {
        if (path.string().size() >= e.suffix.size() &&
            path.string().compare(path.string().size() - e.suffix.size(), e.suffix.size(), e.suffix) == 0) {
          listed = &e;
        }
      }
      if (listed != nullptr) {
        listed->seen = true;
        ++excepted;
        EXPECT_FALSE(issues.empty()) << shown << " now infers without issues: remove '" << listed->suffix
                                     << "' from testdata/infer_exceptions.txt";
        continue;
      }
      if (issues.empty()) {
        ++clean;
        continue;
      }
      std::ostringstream msg;
      for (const InferenceIssue& i : issues) {
        msg << "\n  " << IssueCode(i.rule) << " " << i.location << ": " << i.message;
      }
      ADD_FAILURE() << shown << ":" << msg.str();
    }
  }
  for (const Exception& e : exceptions) {
    EXPECT_TRUE(e.seen) << "infer_exceptions.txt lists '" << e.suffix << "', which matches no suite model";
  }
  std::cout << "inference: " << models << " models, " << clean << " without issues, " << excepted
            << " listed exceptions\n"
            << "coverage: " << coverage.outputs << " graph outputs with declared shapes; "
            << coverage.type_matched << " element types and " << coverage.shape_matched
            << " full shapes inferred and equal\n";
  std::vector<std::pair<int, std::string>> missed;
  for (const auto& [op, n] : coverage.missed_ops) missed.emplace_back(-n, op);
  std::sort(missed.begin(), missed.end());
  std::cout << "outputs without a full shape, by producer:";
  for (const auto& [n, op] : missed) std::cout << " " << op << "=" << -n;
  std::cout << "\n";
}

}  // namespace
}  // namespace onnxkit::infer
