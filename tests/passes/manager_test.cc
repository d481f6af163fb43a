// The pass manager: rewrite numbering and --bisect-limit, transactions (a
// failing rewrite is undone and skipped), bottom-up recursion into bodies
// and functions, fixed points, statistics; the pass table and pipelines.
#include "passes/manager.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "passes/registry.h"
#include "passes/util.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"

namespace onnxkit::passes {
namespace {

using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::ModelFromGraph;
using ::onnxkit::testing::OpCount;
using ::testing::HasSubstr;

// A test pass: turns every Neg into Abs, one rewrite each; when `g_fail_on`
// is set, the rewrite of node 'n2' fails half-way (after changing the op
// type, before finishing), as a buggy pass would.
bool g_fail_on = false;
std::vector<std::string> g_visited;

class NegToAbs : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    g_visited.push_back(graph.name());
    bool changed = false;
    for (ir::Node* n : SnapshotNodes(graph)) {
      if (n->op_type() != "Neg") continue;
      if (!ctx.Allow(*n, "neg to abs")) continue;
      n->set_op_type("Abs");
      if (g_fail_on && n->name() == "n2") return absl::InternalError("half-way failure");
      changed = true;
    }
    return changed;
  }
};

std::unique_ptr<Pass> CreateNegToAbs() { return std::make_unique<NegToAbs>(); }
const PassInfo kNegToAbs{"neg-to-abs", "test", false, false, false, &CreateNegToAbs};

pb::ModelProto ThreeNegs() {
  return ModelFromGraph(GraphBuilder("main")
                            .Input("x", pb::kFloat, {{2}})
                            .Node("Neg", {"x"}, {"a"}, {}, "n1")
                            .Node("Neg", {"a"}, {"b"}, {}, "n2")
                            .Node("Neg", {"b"}, {"y"}, {}, "n3")
                            .Output("y", pb::kFloat, {{2}})
                            .Build());
}

absl::StatusOr<ManagerReport> RunNegToAbs(std::unique_ptr<ir::Model>& model, ManagerOptions options = {}) {
  return RunPipeline(model, {&kNegToAbs}, options);
}

TEST(PassManagerTest, NumbersEveryRewriteAndReachesAFixedPoint) {
  g_fail_on = false;
  auto model = ir::FromProto(ThreeNegs());
  ASSERT_TRUE(model.ok());
  auto report = RunNegToAbs(*model);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rewrites.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(report->rewrites[i].number, i + 1);
  EXPECT_EQ(report->rewrites[1].node, "'n2' (Neg)");
  EXPECT_EQ(report->rewrites[0].graph, "main");
  EXPECT_TRUE(report->fixed_point);
  EXPECT_EQ(report->iterations, 2);
  EXPECT_EQ(report->passes[0].rewrites, 3);
  EXPECT_EQ(OpCount(ir::ToProto(**model), "Abs"), 3);
}

TEST(PassManagerTest, BisectLimitAppliesOnlyTheFirstRewrites) {
  g_fail_on = false;
  auto model = ir::FromProto(ThreeNegs());
  ASSERT_TRUE(model.ok());
  ManagerOptions options;
  options.bisect_limit = 2;
  auto report = RunNegToAbs(*model, options);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->rewrites.size(), 2u);
  EXPECT_TRUE(report->limit_reached);
  pb::ModelProto out = ir::ToProto(**model);
  EXPECT_EQ(OpCount(out, "Abs"), 2);
  EXPECT_EQ(OpCount(out, "Neg"), 1);
}

TEST(PassManagerTest, AFailingRewriteIsUndoneSkippedAndReported) {
  g_fail_on = true;
  auto model = ir::FromProto(ThreeNegs());
  ASSERT_TRUE(model.ok());
  auto report = RunNegToAbs(*model);
  g_fail_on = false;
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_GE(report->failures.size(), 1u);
  EXPECT_EQ(report->failures[0].number, 2);
  EXPECT_EQ(report->failures[0].node, "'n2' (Neg)");
  EXPECT_THAT(report->failures[0].message, HasSubstr("half-way"));
  EXPECT_TRUE(ir::Verify(**model).ok());
  // Rewrites 1 and 3 applied; n2 left exactly as it was.
  ASSERT_EQ(report->rewrites.size(), 2u);
  EXPECT_EQ(report->rewrites[0].node, "'n1' (Neg)");
  EXPECT_EQ(report->rewrites[1].node, "'n3' (Neg)");
  pb::ModelProto out = ir::ToProto(**model);
  EXPECT_EQ(OpCount(out, "Abs"), 2);
  EXPECT_EQ(OpCount(out, "Neg"), 1);
  EXPECT_TRUE(report->fixed_point);
}

TEST(PassManagerTest, VisitsBodiesBeforeTheirParentAndFunctions) {
  g_fail_on = false;
  g_visited.clear();
  pb::ModelProto m = ::onnxkit::testing::IfModelWithOuterRefs();
  auto model = ir::FromProto(m);
  ASSERT_TRUE(model.ok());
  auto report = RunNegToAbs(*model);
  ASSERT_TRUE(report.ok());
  ASSERT_GE(g_visited.size(), 3u);
  EXPECT_EQ(g_visited[2], (*model)->graph().name());  // the main graph last
  ASSERT_EQ(report->rewrites.size(), 1u);             // the else branch's Neg
  EXPECT_THAT(report->rewrites[0].graph, HasSubstr("else_branch"));
}

TEST(PassManagerTest, RewritesInsideModelLocalFunctions) {
  g_fail_on = false;
  pb::ModelProto m = ModelFromGraph(GraphBuilder("main")
                                        .Input("x", pb::kFloat, {{2}})
                                        .Node("F", {"x"}, {"y"})
                                        .Output("y", pb::kFloat, {{2}})
                                        .Build());
  m.graph->node[0].domain = "local";
  pb::FunctionProto f;
  f.name = "F";
  f.domain = "local";
  f.input = {"a"};
  f.output = {"b"};
  f.node.push_back(::onnxkit::testing::MakeNode("Neg", {"a"}, {"b"}));
  pb::OperatorSetIdProto o;
  o.version = 17;
  f.opset_import.push_back(o);
  m.functions.push_back(f);
  pb::OperatorSetIdProto local;
  local.domain = "local";
  local.version = 1;
  m.opset_import.push_back(local);
  auto model = ir::FromProto(m);
  ASSERT_TRUE(model.ok()) << model.status();
  auto report = RunNegToAbs(*model);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->rewrites.size(), 1u);
  EXPECT_EQ(report->rewrites[0].graph, "function 'F'");
  EXPECT_EQ((*model)->functions()[0].node[0].op_type, "Abs");
}

TEST(PassRegistryTest, ParsesPipelinesAndNamesTheValidPasses) {
  auto p = ParsePipeline(" fold , dce,fuse-conv-bn ");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[2]->name, "fuse-conv-bn");
  auto bad = ParsePipeline("fold,no-such-pass");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("valid passes: dce"));
  EXPECT_FALSE(ParsePipeline(",").ok());
  auto d = ParsePipeline("default");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), DefaultPipeline().size());
  auto w = WithoutPasses(*d, {"fold"});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->size(), d->size() - 1);
  EXPECT_FALSE(WithoutPasses(*d, {"nope"}).ok());
}

TEST(PassRegistryTest, EveryPassRunsOnAnEmptyGraphWithoutChangingIt) {
  for (const PassInfo& info : AllPasses()) {
    pb::ModelProto m = ModelFromGraph(GraphBuilder("main").Input("x", pb::kFloat, {{2}}).Output("x").Build());
    auto r = ::onnxkit::testing::RunPasses(m, info.name);
    ASSERT_TRUE(r.ok()) << info.name << ": " << r.status();
    EXPECT_EQ(r->rewrites, 0) << info.name;
  }
}

}  // namespace
}  // namespace onnxkit::passes
