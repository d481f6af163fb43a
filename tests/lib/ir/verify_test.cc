// Tests for lib/ir/verify.cc: valid IR verifies (imported, built in code,
// standalone subgraphs); what the API cannot prevent (nesting built deeper
// than the limit) is reported.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/base/limits.h"
#include "lib/ir/ir.h"
#include "tests/util/model_builder.h"

namespace onnxkit::ir {
namespace {

using ::onnxkit::testing::IfModelWithOuterRefs;
using ::testing::HasSubstr;

TEST(IrVerifyTest, ImportedAndEmptyModelsVerify) {
  auto model = FromProto(IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(Verify(**model).ok());
  Graph* then_g = (*model)->graph().FindNode("if")->Subgraphs()[0];
  EXPECT_TRUE(Verify(*then_g).ok());
  Model empty;
  EXPECT_TRUE(Verify(empty).ok());
  Graph standalone;
  EXPECT_TRUE(Verify(standalone).ok());
}

TEST(IrVerifyTest, ReportsNestingBeyondTheLimit) {
  Model model;
  Graph* g = &model.graph();
  auto c = g->AddInput("c");
  ASSERT_TRUE(c.ok());
  for (int depth = 0; depth <= limits::kMaxGraphDepth; ++depth) {
    auto n = g->AddNode({.op_type = "If", .inputs = {*c}, .outputs = {g->FreshName("o")}});
    ASSERT_TRUE(n.ok()) << n.status();
    g = (*n)->AddSubgraph("then_branch");
  }
  EXPECT_EQ(g->depth(), limits::kMaxGraphDepth + 1);
  absl::Status s = Verify(model);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("nested deeper than limits::kMaxGraphDepth"));
}

TEST(IrVerifyTest, ModelGraphSwap) {
  Model model;
  auto g = std::make_unique<Graph>();
  g->set_name("replacement");
  ASSERT_TRUE(g->AddInput("in").ok());
  model.set_graph(std::move(g));
  EXPECT_EQ(model.graph().model(), &model);
  EXPECT_TRUE(Verify(model).ok());
  EXPECT_EQ(model.graph().FreshName("in"), "in_1");
}

}  // namespace
}  // namespace onnxkit::ir
