// Matrix product shape functions: MatMul (rank-1 promotion, batch
// broadcasting), MatMulInteger, QLinearMatMul, Gemm, Einsum.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checker/infer/infer_test_util.h"

namespace onnxkit::checker::infer::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

TEST(MatMulTest, Shapes) {
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {3, 4}), In("b", {4, 5})}}), "float[3, 5]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {2, 1, 3, 4}), In("b", {5, 4, 6})}}), "float[2, 5, 3, 6]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {4}), In("b", {4, 5})}}), "float[5]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {3, 4}), In("b", {4})}}), "float[3]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {4}), In("b", {4})}}), "float[]");
  EXPECT_EQ(Infer({.op = "MatMul", .inputs = {In("a", {-1, 8, 4}), In("b", {4, -1})}}), "float[d0, 8, d1]");
}

TEST(MatMulTest, InnerDimsDifferIsE0601) {
  EXPECT_THAT(IssuesOf({.op = "MatMul", .inputs = {In("a", {3, 4}), In("b", {5, 6})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (MatMul): MatMul: inner dimensions differ: A [3, 4] and "
                          "B [5, 6] (4 vs 5)"));
  EXPECT_THAT(IssuesOf({.op = "MatMul", .inputs = {In("a", {}), In("b", {5, 6})}}), SizeIs(1));
  EXPECT_THAT(IssuesOf({.op = "MatMul", .inputs = {In("a", {2, 3, 4}), In("b", {3, 4, 5})}}), SizeIs(1));
}

TEST(MatMulTest, IntegerAndQuantized) {
  EXPECT_EQ(Infer({.op = "MatMulInteger", .inputs = {In("a", {3, 4}, pb::kUint8), In("b", {4, 2}, pb::kInt8)}}),
            "int32[3, 2]");
  OneNode q{.op = "QLinearMatMul",
            .inputs = {In("a", {3, 4}, pb::kUint8), In("as", {}), In("az", {}, pb::kUint8), In("b", {4, 2}, pb::kUint8),
                       In("bs", {}), In("bz", {}, pb::kUint8), In("ys", {}), In("yz", {}, pb::kInt8)}};
  EXPECT_EQ(Infer(q), "int8[3, 2]");
}

TEST(GemmTest, Transposes) {
  EXPECT_EQ(Infer({.op = "Gemm", .inputs = {In("a", {3, 4}), In("b", {4, 5})}}), "float[3, 5]");
  EXPECT_EQ(Infer({.op = "Gemm",
                   .inputs = {In("a", {4, 3}), In("b", {5, 4}), In("c", {5})},
                   .attributes = {AttrInt("transA", 1), AttrInt("transB", 1)}}),
            "float[3, 5]");
}

TEST(GemmTest, Errors) {
  EXPECT_THAT(IssuesOf({.op = "Gemm", .inputs = {In("a", {3, 4}), In("b", {5, 4})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Gemm): Gemm: inner dimensions differ: A [3, 4] and B [5, 4] "
                          "(4 vs 5)"));
  EXPECT_THAT(IssuesOf({.op = "Gemm", .inputs = {In("a", {2, 3, 4}), In("b", {4, 5})}}),
              ElementsAre("E0601 graph 'g' › node 'n' (Gemm): Gemm: input A must have rank 2, got rank 3"));
  EXPECT_THAT(IssuesOf({.op = "Gemm", .inputs = {In("a", {3, 4}), In("b", {4, 5}), In("c", {4})}}), SizeIs(1));
}

TEST(EinsumTest, ExplicitAndImplicit) {
  auto einsum = [](std::string eq, std::vector<pb::ValueInfoProto> inputs) {
    return Infer({.op = "Einsum", .inputs = std::move(inputs), .attributes = {AttrString("equation", eq)}});
  };
  EXPECT_EQ(einsum("bij,bjk->bik", {In("a", {2, 3, 4}), In("b", {2, 4, 5})}), "float[2, 3, 5]");
  EXPECT_EQ(einsum("ij,jk", {In("a", {3, 4}), In("b", {4, 5})}), "float[3, 5]");
  EXPECT_EQ(einsum("ii->i", {In("a", {3, 3})}), "float[3]");
  EXPECT_EQ(einsum("ij->", {In("a", {3, 3})}), "float[]");
  EXPECT_EQ(einsum("...ij,...jk->...ik", {In("a", {7, 2, 3, 4}), In("b", {2, 4, 5})}), "float[7, 2, 3, 5]");
  EXPECT_EQ(einsum("ba", {In("a", {3, 4})}), "float[4, 3]");  // implicit output: letters sorted
}

TEST(EinsumTest, MalformedEquationsAreE0601) {
  auto issues = [](std::string eq, std::vector<pb::ValueInfoProto> inputs) {
    return IssuesOf({.op = "Einsum", .inputs = std::move(inputs), .attributes = {AttrString("equation", eq)}});
  };
  EXPECT_THAT(issues("ij,jk->ik", {In("a", {3, 4})}), SizeIs(1));        // 2 terms, 1 input
  EXPECT_THAT(issues("ij->ik", {In("a", {3, 4})}), SizeIs(1));           // k appears in no input
  EXPECT_THAT(issues("i1->i", {In("a", {3, 4})}), SizeIs(1));            // not a letter
  EXPECT_THAT(issues("ijk->i", {In("a", {3, 4})}), SizeIs(1));           // 3 labels for rank 2
  EXPECT_THAT(issues("i..j->ij", {In("a", {3, 4})}), SizeIs(1));         // broken ellipsis
  EXPECT_THAT(issues("i->i", {In("a", {})}), SizeIs(1));                 // scalar for a labelled term
}

}  // namespace
}  // namespace onnxkit::checker::infer::testing
