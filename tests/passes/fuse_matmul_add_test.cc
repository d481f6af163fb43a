// Tests of the fuse-matmul-add pass (passes/fuse_matmul_add.cc).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/passes/fuse_test_util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

using fuse::ExpectFixedPoint;
using fuse::ExpectNoChange;

const Feeds kFeeds = {{"a", RandomFloats({3, 5}, 1)}};

// a[3,5] -> Relu -> MatMul(b[5,4]) -> Add(bias) -> z[3,4]. The Relu hides a's
// declared shape, so the pass needs inferred shapes.
GraphBuilder MatMulAdd(std::vector<int64_t> c_dims, std::vector<int64_t> b_dims = {5, 4},
                       std::vector<int64_t> a_dims = {3, 5}) {
  GraphBuilder g("main");
  g.Input("a", pb::kFloat, a_dims)
      .Initializer(InitializerFrom("b", RandomFloats(b_dims, 2)))
      .Initializer(InitializerFrom("bias", RandomFloats(c_dims, 3)))
      .Node("Relu", {"a"}, {"r"})
      .Node("MatMul", {"r", "b"}, {"y"}, {}, "matmul")
      .Node("Add", {"y", "bias"}, {"z"}, {}, "add")
      .Output("z", pb::kFloat);
  return g;
}

TEST(FuseMatMulAddTest, FusesIntoGemm) {
  for (const std::vector<int64_t>& c : std::vector<std::vector<int64_t>>{{4}, {1, 4}, {3, 4}, {}, {1}}) {
    SCOPED_TRACE(::testing::PrintToString(c));
    pb::ModelProto m = ModelFromGraph(MatMulAdd(c).Build(), 13);
    PassResult r = fuse::Run(m, "fuse-matmul-add");
    EXPECT_EQ(r.rewrites, 1);
    EXPECT_EQ(OpCount(r.model, "Gemm"), 1);
    EXPECT_EQ(OpCount(r.model, "MatMul") + OpCount(r.model, "Add"), 0);
    EXPECT_EQ(r.model.graph->node.back().output[0], "z");
    ExpectSameOutputs(m, r.model, kFeeds);
    ExpectValid(r.model);
    ExpectFixedPoint(r.model, "fuse-matmul-add");
  }
}

TEST(FuseMatMulAddTest, BiasFirstAndGraphOutputOfAdd) {
  pb::GraphProto g = MatMulAdd({4}).Build();
  std::swap(g.node[2].input[0], g.node[2].input[1]);
  pb::ModelProto m = ModelFromGraph(g, 7);
  PassResult r = fuse::Run(m, "fuse-matmul-add");
  EXPECT_EQ(r.rewrites, 1);
  ExpectSameOutputs(m, r.model, kFeeds);
}

TEST(FuseMatMulAddTest, NearMissesDoNotFire) {
  ExpectNoChange(ModelFromGraph(MatMulAdd({4}).Build(), 6), "fuse-matmul-add");  // Gemm without broadcast
  ExpectNoChange(ModelFromGraph(MatMulAdd({2, 3, 4}).Build(), 13), "fuse-matmul-add");  // bias grows the rank
  ExpectNoChange(ModelFromGraph(MatMulAdd({4, 4}).Build(), 13), "fuse-matmul-add");     // bias rows != M
  ExpectNoChange(ModelFromGraph(MatMulAdd({4}, {5, 4}, {2, 3, 5}).Build(), 13),
                 "fuse-matmul-add");  // rank-3 A
  {
    SCOPED_TRACE("product also a graph output");
    GraphBuilder g = MatMulAdd({4});
    g.Output("y", pb::kFloat);
    ExpectNoChange(ModelFromGraph(g.Build(), 13), "fuse-matmul-add");
  }
  {
    SCOPED_TRACE("bias fed at run time");
    pb::GraphProto g = MatMulAdd({4}).Build();
    g.node[2].input[1] = "cin";
    g.input.push_back(MakeValueInfo("cin", pb::kFloat, std::vector<int64_t>{4}));
    ExpectNoChange(ModelFromGraph(g, 13), "fuse-matmul-add");
  }
  {
    SCOPED_TRACE("matrix fed at run time");
    pb::GraphProto g = MatMulAdd({4}).Build();
    g.node[1].input[1] = "bin";
    g.input.push_back(MakeValueInfo("bin", pb::kFloat, std::vector<int64_t>{5, 4}));
    ExpectNoChange(ModelFromGraph(g, 13), "fuse-matmul-add");
  }
}

TEST(FuseMatMulAddTest, MalformedModelsAreLeftAlone) {
  ExpectNoChange(ModelFromGraph(MatMulAdd({4}, {6, 4}).Build(), 13), "fuse-matmul-add");  // K mismatch
  ExpectNoChange(ModelFromGraph(MatMulAdd({4}, {5}).Build(), 13), "fuse-matmul-add");     // rank-1 B
  ExpectNoChange(ModelFromGraph(MatMulAdd({7}).Build(), 13), "fuse-matmul-add");  // bias of the wrong size
}

TEST(FuseMatMulAddTest, FusesInsideAnIfBody) {
  pb::GraphProto body = MatMulAdd({4}).Build();
  for (pb::NodeProto& n : body.node) {
    for (std::string& in : n.input) {
      if (in == "a") in = "x";
    }
  }
  pb::ModelProto m = fuse::InIf(body, "z", {3, 5}, {3, 4}, 13);
  PassResult r = fuse::Run(m, "fuse-matmul-add");
  EXPECT_EQ(r.rewrites, 2);
  EXPECT_EQ(OpCount(r.model, "Gemm"), 2);
  for (bool c : {true, false}) {
    ExpectSameOutputs(m, r.model,
                      {{"c", c ? fuse::TrueScalar() : fuse::FalseScalar()}, {"x", kFeeds[0].second}});
  }
  ExpectValid(r.model);
  ExpectFixedPoint(r.model, "fuse-matmul-add");
}

}  // namespace
}  // namespace onnxkit::testing
