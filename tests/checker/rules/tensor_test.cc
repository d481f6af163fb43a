// Tests of the tensor rules (checker/rules/tensor.cc): element types, dims,
// data size and field, sparse tensors, external data (policy, existence,
// range), in initializers, attribute tensors, subgraphs and functions.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checker/check_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kSep[] = " \xe2\x80\xba ";

// A model with the tensors as initializers and (float-typed) graph outputs.
pb::ModelProto Typed(std::vector<pb::TensorProto> tensors) {
  pb::ModelProto m = MinimalModel(std::move(tensors));
  for (pb::ValueInfoProto& out : m.graph->output) out.type = TensorType(pb::kFloat);
  return m;
}
pb::ModelProto WithInitializer(pb::TensorProto t) { return Typed({std::move(t)}); }

std::string InitializerAt(const std::string& name) {
  return std::string("graph 'g'") + kSep + "initializer '" + name + "': ";
}

TEST(TensorRulesTest, ValidTensorsPass) {
  pb::TensorProto typed;
  typed.name = "i";
  typed.data_type = pb::kInt64;
  typed.dims = {3};
  typed.int64_data = {1, 2, 3};
  checker::CheckResult r = Check(Typed({RawFloatTensor("w", {2, 3}), typed}));
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
}

TEST(TensorRulesTest, DataType) {
  pb::TensorProto t = RawFloatTensor("w", {2});
  t.data_type = 0;
  EXPECT_EQ(Only(Check(WithInitializer(t)), "E0500"),
            InitializerAt("w") + "tensor 'w': data_type is undefined (0)");
  t.data_type = 9999;
  EXPECT_EQ(Only(Check(WithInitializer(t)), "E0500"),
            InitializerAt("w") + "tensor 'w': data_type 9999 is not a known element type (1 to 26)");
  t.data_type = -5;
  EXPECT_THAT(Only(Check(WithInitializer(t)), "E0500"),
              HasSubstr("data_type -5 is not a known element type"));
}

TEST(TensorRulesTest, Dims) {
  pb::TensorProto t = RawFloatTensor("w", {2});
  t.dims = {-1, 4};
  EXPECT_EQ(Only(Check(WithInitializer(t)), "E0501"),
            InitializerAt("w") + "tensor 'w' (float, dims [-1, 4]): negative dim -1");
  t.dims = {int64_t{1} << 62, int64_t{1} << 62};
  EXPECT_EQ(Only(Check(WithInitializer(t)), "E0501"),
            InitializerAt("w") +
                "tensor 'w' (float, dims [4611686018427387904, 4611686018427387904]): element count "
                "overflows int64");
}

TEST(TensorRulesTest, DataSizeWithoutAllocating) {
  pb::TensorProto t = RawFloatTensor("w", {1});
  t.dims = {1000000};
  EXPECT_EQ(
      Only(Check(WithInitializer(t)), "E0502"),
      InitializerAt("w") + "tensor 'w' (float, dims [1000000]): raw_data has 4 bytes, expected 4000000");
  t.dims = {};  // a scalar: 4 bytes is right
  EXPECT_THAT(Check(WithInitializer(t)).diagnostics, IsEmpty());
  t.dims = {0};  // near miss the other way: no element, but data
  EXPECT_THAT(Only(Check(WithInitializer(t)), "E0502"), HasSubstr("raw_data has 4 bytes, expected 0"));
  // A billion strings declared, none given: an error, not 32 GB of strings.
  pb::TensorProto s;
  s.name = "s";
  s.data_type = pb::kString;
  s.dims = {1000000000};
  EXPECT_THAT(Only(Check(WithInitializer(s)), "E0502"),
              HasSubstr("no data, expected 1000000000 elements in string_data"));
}

TEST(TensorRulesTest, DataField) {
  pb::TensorProto t = RawFloatTensor("w", {2});
  t.float_data = {1, 2};
  EXPECT_EQ(Only(Check(WithInitializer(t)), "E0503"),
            InitializerAt("w") + "tensor 'w' (float, dims [2]): data in both raw_data and float_data");
  pb::TensorProto wrong;
  wrong.name = "w";
  wrong.data_type = pb::kFloat;
  wrong.dims = {2};
  wrong.int64_data = {1, 2};
  EXPECT_EQ(
      Only(Check(WithInitializer(wrong)), "E0503"),
      InitializerAt("w") + "tensor 'w': data is in int64_data, but float tensors use float_data or raw_data");
  pb::TensorProto raw_string;
  raw_string.name = "s";
  raw_string.data_type = pb::kString;
  raw_string.dims = {1};
  raw_string.raw_data = Bytes::Copy("abcd");
  EXPECT_EQ(Only(Check(WithInitializer(raw_string)), "E0503"),
            InitializerAt("s") + "tensor 's': string data must be in string_data, not raw_data");
}

TEST(TensorRulesTest, ConstantTensorsInSubgraphsAndFunctions) {
  pb::ModelProto m = IfModelWithOuterRefs();
  pb::TensorProto bad = RawFloatTensor("k", {3});
  bad.dims = {5};
  pb::GraphProto& then_graph = *m.graph->node[0].attribute[0].g;
  then_graph.node.push_back(MakeNode("Constant", {}, {"k"}, {AttrTensor("value", bad)}, "const"));
  checker::CheckResult r = Check(m);
  EXPECT_EQ(Only(r, "E0502"),
            std::string("graph 'main'") + kSep + "node 'if' (If)" + kSep + "attribute 'then_branch'" + kSep +
                "node 'const' (Constant)" + kSep +
                "attribute 'value': tensor 'k' (float, dims [5]): raw_data has 12 bytes, expected 20");
  pb::FunctionProto f;
  f.domain = "local";
  f.name = "F";
  f.output = {"o"};
  f.attribute_proto.push_back(AttrTensor("init", bad));
  f.node = {MakeNode("Constant", {}, {"o"}, {AttrTensor("value", bad)}, "c")};
  f.opset_import = m.opset_import;
  pb::ModelProto with_function = IfModelWithOuterRefs();
  with_function.functions.push_back(f);
  r = Check(with_function);
  std::vector<checker::Diagnostic> found = Findings(r, "E0502");
  ASSERT_EQ(found.size(), 2u) << Dump(r);
  EXPECT_EQ(found[0].location,
            std::string("function 'local::F'") + kSep + "default" + kSep + "attribute 'init'");
  EXPECT_EQ(found[1].location,
            std::string("function 'local::F'") + kSep + "node 'c' (Constant)" + kSep + "attribute 'value'");
}

pb::TensorProto Int64s(std::string name, std::vector<int64_t> dims, std::vector<int64_t> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kInt64;
  t.dims = std::move(dims);
  t.int64_data = std::move(values);
  return t;
}

// A sparse tensor of dense shape `dims` with values 0, 1, ... at `indices`.
pb::SparseTensorProto Sparse(std::vector<int64_t> dims, std::vector<int64_t> index_dims,
                             std::vector<int64_t> indices, int64_t nnz) {
  pb::SparseTensorProto s;
  s.dims = std::move(dims);
  s.values = RawFloatTensor("sp", {nnz});
  s.indices = Int64s("", std::move(index_dims), std::move(indices));
  return s;
}

checker::CheckResult CheckSparse(const pb::SparseTensorProto& s) {
  pb::ModelProto m = MinimalModel();
  m.graph->sparse_initializer.push_back(s);
  m.graph->output.push_back(MakeValueInfo("sp", pb::kFloat));
  return Check(m);
}

TEST(TensorRulesTest, SparseTensors) {
  EXPECT_THAT(CheckSparse(Sparse({10}, {3}, {1, 4, 9}, 3)).diagnostics, IsEmpty());
  EXPECT_THAT(CheckSparse(Sparse({3, 4}, {2, 2}, {0, 1, 2, 3}, 2)).diagnostics, IsEmpty());
  const std::string at = std::string("graph 'g'") + kSep + "sparse initializer 'sp': sparse tensor 'sp'";
  EXPECT_EQ(Only(CheckSparse(Sparse({10}, {3}, {1, 4, 10}, 3)), "E0504"),
            at + ": index #2 is 10, outside [0, 10)");
  EXPECT_EQ(Only(CheckSparse(Sparse({10}, {3}, {1, 4, -1}, 3)), "E0504"),
            at + ": index #2 is -1, outside [0, 10)");
  EXPECT_EQ(Only(CheckSparse(Sparse({10}, {3}, {4, 1, 9}, 3)), "E0504"),
            at + ": indices are not strictly ascending: index #1 is below the previous one");
  EXPECT_EQ(Only(CheckSparse(Sparse({10}, {3}, {1, 1, 9}, 3)), "E0504"),
            at + ": indices are not strictly ascending: index #1 repeats the previous one");
  EXPECT_EQ(Only(CheckSparse(Sparse({3, 4}, {2, 2}, {0, 1, 2, 4}, 2)), "E0504"),
            at + ": coordinate 1 of index #1 is 4, outside [0, 4)");
  EXPECT_EQ(Only(CheckSparse(Sparse({10}, {2}, {1, 4}, 3)), "E0504"),
            at + ": indices have dims [2], expected [3] (linearized) or [3, 1] (coordinates) for 3 values");
  pb::SparseTensorProto int32_indices = Sparse({10}, {1}, {1}, 1);
  int32_indices.indices->data_type = pb::kInt32;
  int32_indices.indices->int32_data = {1};
  int32_indices.indices->int64_data.clear();
  EXPECT_EQ(Only(CheckSparse(int32_indices), "E0504"), at + ": indices are int32, expected int64");
  pb::SparseTensorProto matrix_values = Sparse({10}, {1}, {1}, 1);
  matrix_values.values->dims = {1, 1};
  EXPECT_EQ(Only(CheckSparse(matrix_values), "E0504"),
            at + ": values must have rank 1 ([NNZ]), got dims [1, 1]");
}

TEST(TensorRulesTest, SparseDenseShapeOverflowIsAnErrorNotUndefinedBehavior) {
  pb::SparseTensorProto s = Sparse({int64_t{1} << 40, int64_t{1} << 40}, {1}, {5}, 1);
  EXPECT_THAT(
      Only(CheckSparse(s), "E0501"),
      HasSubstr(
          "dims [1099511627776, 1099511627776] have a negative dim or an element count that overflows"));
}

class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    std::ofstream(dir_ / "w.bin", std::ios::binary) << FloatBytes(4);  // 16 bytes
  }
  checker::CheckResult CheckExternal(pb::TensorProto t) {
    return Check(WithInitializer(std::move(t)), {}, dir_);
  }

  std::filesystem::path dir_;
};

TEST_F(ExternalDataTest, ValidExternalTensorPasses) {
  checker::CheckResult r = CheckExternal(ExternalTensor("w", {2, 2}, pb::kFloat, "w.bin", 0, 16));
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
  r = CheckExternal(ExternalTensor("w", {2}, pb::kFloat, "w.bin", 8));  // to the end of the file
  EXPECT_THAT(r.diagnostics, IsEmpty()) << Dump(r);
}

TEST_F(ExternalDataTest, UnsafeLocationsAreRefused) {
  for (const char* location : {"../w.bin", "/etc/passwd", "sub/../../w.bin", "*/_ORT_MEM_ADDR_/*"}) {
    checker::CheckResult r = CheckExternal(ExternalTensor("w", {4}, pb::kFloat, location));
    EXPECT_EQ(Findings(r, "E0506").size(), 1u) << location << "\n" << Dump(r);
    EXPECT_EQ(r.status(), checker::FileStatus::kRefused) << location;
  }
  std::filesystem::create_symlink(dir_ / "w.bin", dir_ / "link.bin");
  checker::CheckResult r = CheckExternal(ExternalTensor("w", {4}, pb::kFloat, "link.bin"));
  EXPECT_THAT(Only(r, "E0506"), HasSubstr("is a symlink"));
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  r = CheckExternal(ExternalTensor("w", {4}, pb::kFloat, "fifo"));
  EXPECT_THAT(Only(r, "E0506"), HasSubstr("a FIFO, not a regular file"));
}

TEST_F(ExternalDataTest, NoModelFolderIsRefused) {
  checker::CheckResult r = Check(WithInitializer(ExternalTensor("w", {4}, pb::kFloat, "w.bin")));
  EXPECT_THAT(Only(r, "E0506"), HasSubstr("no model folder"));
}

TEST_F(ExternalDataTest, MissingFile) {
  checker::CheckResult r = CheckExternal(ExternalTensor("w", {4}, pb::kFloat, "missing.bin"));
  EXPECT_THAT(Only(r, "E0508"), HasSubstr("external data file 'missing.bin' not found"));
  EXPECT_EQ(r.status(), checker::FileStatus::kInvalid);
}

TEST_F(ExternalDataTest, RangeAgainstTheRealFileAndDims) {
  EXPECT_THAT(Only(CheckExternal(ExternalTensor("w", {4}, pb::kFloat, "w.bin", 20)), "E0507"),
              HasSubstr("offset 20 is past the end of the file"));
  EXPECT_THAT(Only(CheckExternal(ExternalTensor("w", {4}, pb::kFloat, "w.bin", 8, 16)), "E0507"),
              HasSubstr("offset 8 + length 16 is past the end of the file"));
  EXPECT_THAT(Only(CheckExternal(ExternalTensor("w", {3}, pb::kFloat, "w.bin", 0, 16)), "E0507"),
              HasSubstr("length 16 does not match dims [3] of float (12 bytes)"));
  // A petabyte length: an error, nothing allocated.
  EXPECT_THAT(
      Only(CheckExternal(ExternalTensor("w", {4}, pb::kFloat, "w.bin", 0, int64_t{1} << 50)), "E0507"),
      HasSubstr("past the end of the file"));
}

TEST_F(ExternalDataTest, MalformedEntries) {
  pb::TensorProto t = ExternalTensor("w", {4}, pb::kFloat, "w.bin");
  t.external_data.push_back(Entry("__class__", "x"));
  EXPECT_THAT(Only(CheckExternal(t), "E0505"), HasSubstr("unknown external_data key '__class__'"));
  t = ExternalTensor("w", {4}, pb::kFloat, "w.bin");
  t.external_data[1].value = "-4";
  EXPECT_THAT(Only(CheckExternal(t), "E0505"), HasSubstr("offset '-4' is negative"));
  t = ExternalTensor("w", {4}, pb::kFloat, "w.bin");
  t.data_location = 0;  // entries that readers would ignore
  EXPECT_EQ(Only(CheckExternal(t), "E0505"),
            InitializerAt("w") + "tensor 'w' has external_data entries but data_location is DEFAULT");
  t = ExternalTensor("w", {4}, pb::kFloat, "w.bin");
  t.raw_data = Bytes::Copy(FloatBytes(4));
  EXPECT_EQ(Only(CheckExternal(t), "E0503"),
            InitializerAt("w") +
                "tensor 'w' stores its data externally (data_location EXTERNAL) but also holds raw_data");
}

TEST_F(ExternalDataTest, SparseTensorPartsInExternalData) {
  // Indices stored externally are validated like any tensor, then read.
  std::string bytes(16, '\0');
  bytes[0] = 7;
  bytes[8] = 3;  // 7 then 3: not ascending
  std::ofstream(dir_ / "idx.bin", std::ios::binary) << bytes;
  pb::SparseTensorProto s;
  s.dims = {10};
  s.values = RawFloatTensor("sp", {2});
  s.indices = ExternalTensor("", {2}, pb::kInt64, "idx.bin", 0, 16);
  pb::ModelProto m = MinimalModel();
  m.graph->sparse_initializer.push_back(s);
  m.graph->output.push_back(MakeValueInfo("sp", pb::kFloat));
  checker::CheckResult r = Check(m, {}, dir_);
  EXPECT_THAT(Only(r, "E0504"), HasSubstr("index #1 is below the previous one"));
  s.indices = ExternalTensor("", {2}, pb::kInt64, "../idx.bin", 0, 16);
  m.graph->sparse_initializer[0] = s;
  EXPECT_EQ(Check(m, {}, dir_).status(), checker::FileStatus::kRefused);
}

}  // namespace
}  // namespace onnxkit::testing
