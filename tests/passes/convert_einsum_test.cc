// `onnxkit convert` below opset 12 for Einsum: each contraction a MatMul
// between Transposes and Reshapes, sums over labels one operand alone
// holds as ReduceSum; proven by running both models.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/convert/convert.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using passes::convert::ConvertResult;
using ::testing::HasSubstr;

struct EinsumCase {
  std::string equation;
  std::vector<std::vector<int64_t>> shapes;
};

pb::ModelProto EinsumModel(const EinsumCase& c, bool dynamic, int32_t elem = pb::kFloat) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    std::vector<int64_t> dims = c.shapes[i];
    if (dynamic) dims.assign(dims.size(), -1);
    g.Input(names.back(), elem, {dims});
  }
  g.Node("Einsum", names, {"y"}, {AttrString("equation", c.equation)}).Output("y", elem);
  return ModelFromGraph(g.Build(), 12, 7);
}

TEST(ConvertEinsumTest, ContractionsBecomeMatMulsBelow12) {
  const EinsumCase cases[] = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}},
      {"bhqk,bhkd->bhqd", {{2, 3, 4, 5}, {2, 3, 5, 8}}},
      {"ij->ji", {{3, 4}}},
      {"ij->i", {{3, 4}}},
      {"ij->", {{3, 4}}},
      {"i,i->", {{5}, {5}}},
      {"i,j->ij", {{3}, {4}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"...ij,...jk->...ik", {{2, 3, 3, 4}, {3, 4, 5}}},
      {"...ij,...jk", {{2, 1, 3, 4}, {3, 4, 5}}},  // implicit output, "..." broadcasting 1 against 3
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"abc,cd,bd->ad", {{2, 3, 4}, {4, 5}, {3, 5}}},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},
      {"ji", {{3, 4}}},
      {"ijk,kj->ik", {{2, 3, 4}, {4, 3}}},
      {"...i,...i->...", {{2, 3, 4}, {3, 4}}},
      {"ab,cd->abcd", {{2, 3}, {4, 5}}},
      {"abc,b->ac", {{2, 3, 4}, {3}}},
      {"i,ij,j->", {{3}, {3, 4}, {4}}},
      {"abcd,dcx->xba", {{2, 3, 4, 5}, {5, 4, 6}}},
  };
  for (const EinsumCase& c : cases) {
    for (bool dynamic : {false, true}) {
      SCOPED_TRACE(::testing::Message() << c.equation << (dynamic ? " (dims unknown)" : ""));
      pb::ModelProto m = EinsumModel(c, dynamic);
      Feeds feeds;
      for (size_t i = 0; i < c.shapes.size(); ++i) {
        feeds.push_back({"x" + std::to_string(i), RandomFloats(c.shapes[i], 10 + static_cast<uint32_t>(i))});
      }
      for (int64_t opset : {11, 7}) {
        SCOPED_TRACE(opset);
        ConvertResult down = ConvertTo(m, opset);
        ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
        EXPECT_EQ(OpCount(down.model, "Einsum"), 0);
        ExpectValid(down.model);
        ExpectSameOutputs(m, down.model, feeds, 1e-5, 1e-5);
      }
    }
  }
}

TEST(ConvertEinsumTest, MatrixShapedOperandsNeedNoReshape) {
  // Attention scores: one Transpose of the keys and a batched MatMul.
  ConvertResult r = ConvertTo(EinsumModel({"bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}}, true), 11);
  ASSERT_TRUE(r.blockers.empty()) << r.blockers[0].reason;
  EXPECT_EQ(OpCount(r.model, "MatMul"), 1);
  EXPECT_EQ(OpCount(r.model, "Transpose"), 1);
  EXPECT_EQ(OpCount(r.model, "Reshape"), 0);
  // Known dims make the shapes constants: no Shape nodes.
  ConvertResult known = ConvertTo(EinsumModel({"abc,cd,bd->ad", {{2, 3, 4}, {4, 5}, {3, 5}}}, false), 11);
  ASSERT_TRUE(known.blockers.empty()) << known.blockers[0].reason;
  EXPECT_EQ(OpCount(known.model, "Shape"), 0);
  EXPECT_EQ(OpCount(known.model, "MatMul"), 2);
}

TEST(ConvertEinsumTest, WhatHasNoExpansionBlocksWithItsReason) {
  ConvertResult diagonal = ConvertTo(EinsumModel({"ii->i", {{3, 3}}}, false), 11);
  ASSERT_EQ(diagonal.blockers.size(), 1u);
  EXPECT_THAT(diagonal.blockers[0].reason, HasSubstr("diagonal"));
  ConvertResult int8 = ConvertTo(EinsumModel({"ij,jk->ik", {{2, 3}, {3, 4}}}, false, pb::kInt8), 11);
  ASSERT_EQ(int8.blockers.size(), 1u);
  EXPECT_THAT(int8.blockers[0].reason, HasSubstr("element type"));
  // "..." needs the rank of its input.
  pb::ModelProto unranked =
      ModelFromGraph(GraphBuilder("g")
                         .Input("x0", pb::kFloat)
                         .Input("x1", pb::kFloat, {{3, 4}})
                         .Node("Einsum", {"x0", "x1"}, {"y"}, {AttrString("equation", "...j,jk->...k")})
                         .Output("y", pb::kFloat)
                         .Build(),
                     12, 7);
  ConvertResult rank = ConvertTo(unranked, 11);
  ASSERT_EQ(rank.blockers.size(), 1u);
  EXPECT_THAT(rank.blockers[0].reason, HasSubstr("known rank"));
}

}  // namespace
}  // namespace onnxkit::testing
