// Tests of the reduction strategies with an in-memory oracle (a predicate
// on the candidate's nodes), and of candidate construction.
#include "bisect/strategies.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "bisect/candidate.h"
#include "bisect/golden.h"
#include "bisect/reducer.h"
#include "gtest/gtest.h"
#include "tests/util/model_builder.h"

namespace onnxkit::bisect {
namespace {

namespace fs = std::filesystem;
using testing::GraphBuilder;
using testing::ModelFromGraph;

// x -> n0 -> n1 -> ... -> n{count-1} -> y (Relu/Neg alternating), with a
// LeakyRelu (attribute alpha) at `attr_at`.
pb::ModelProto Chain(int count, int attr_at = -1) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 4}});
  std::string prev = "x";
  for (int i = 0; i < count; ++i) {
    std::string out = i + 1 == count ? "y" : "t" + std::to_string(i);
    if (i == attr_at) {
      b.Node("LeakyRelu", {prev}, {out}, {testing::AttrFloat("alpha", 0.2f)}, "n" + std::to_string(i));
    } else {
      b.Node(i % 2 ? "Neg" : "Relu", {prev}, {out}, {}, "n" + std::to_string(i));
    }
    prev = out;
  }
  b.Output("y", pb::kFloat, {{2, 4}});
  return ModelFromGraph(b.Build());
}

// Interesting when every node named in `needed` is present (and, when
// `no_if`, no If remains).
class FakeOracle : public Oracle {
 public:
  explicit FakeOracle(std::set<std::string> needed) : needed_(std::move(needed)) {}
  std::string Describe() const override { return "fake"; }
  absl::StatusOr<bool> Prepare(const pb::ModelProto& m, std::string*) override { return Test(m); }
  absl::StatusOr<bool> Test(const pb::ModelProto& m) override {
    std::set<std::string> seen;
    for (const auto& n : m.graph->node) seen.insert(n.name);
    for (const auto& n : needed_) {
      if (seen.count(n) == 0) return false;
    }
    return true;
  }
  bool Valid(const pb::ModelProto&) const override { return true; }

 private:
  std::set<std::string> needed_;
};

ReduceResult Reduce(const pb::ModelProto& model, Oracle& oracle, std::vector<std::string> strategies) {
  GoldenStore golden("/tmp/unused");
  TypeSource types(&golden, {});
  ReduceOptions options;
  options.strategies = std::move(strategies);
  Reducer r(model, &oracle, &golden, &types, OracleOptions{}, options);
  auto result = r.Run();
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : ReduceResult{};
}

// A name two bodies both define has no one golden value: dropped, so a
// candidate that needs it is skipped instead of fed the wrong tensor. The
// same value seen again (a Loop's next iteration, a fed input seen running)
// keeps its first recording.
TEST(GoldenStoreTest, NamesFromTwoSourcesAreDropped) {
  const fs::path dir = fs::temp_directory_path() / ("golden_test_" + std::to_string(getpid()));
  GoldenStore golden(dir);
  auto one = runner::Tensor::Allocate(pb::kFloat, {1});
  auto two = runner::Tensor::Allocate(pb::kFloat, {2});
  ASSERT_TRUE(one.ok() && two.ok());
  int a = 0, b = 0;
  ASSERT_TRUE(golden.Put("t", runner::RtValue::FromTensor(*one), &a).ok());
  ASSERT_TRUE(golden.Put("t", runner::RtValue::FromTensor(*two), &a).ok());  // next iteration
  ASSERT_TRUE(golden.Has("t"));
  EXPECT_EQ(golden.Load("t")->tensor().size(), 1);
  ASSERT_TRUE(golden.Put("x", runner::RtValue::FromTensor(*one)).ok());  // fed
  ASSERT_TRUE(golden.Put("x", runner::RtValue::FromTensor(*one), &b).ok());
  EXPECT_TRUE(golden.Has("x"));
  ASSERT_TRUE(golden.Put("t", runner::RtValue::FromTensor(*two), &b).ok());  // another body's t
  EXPECT_FALSE(golden.Has("t"));
  ASSERT_TRUE(golden.Put("t", runner::RtValue::FromTensor(*one), &a).ok());
  EXPECT_FALSE(golden.Has("t"));
  EXPECT_EQ(golden.order(), std::vector<std::string>{"x"});
  // A sequence reads back as a sequence (a reproducer cut at one is fed).
  ASSERT_TRUE(golden
                  .Put("s",
                       runner::RtValue::FromSequence(
                           {runner::RtValue::FromTensor(*one), runner::RtValue::FromTensor(*two)}),
                       &a)
                  .ok());
  auto s = golden.Load("s");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->is_sequence());
  EXPECT_EQ(s->elements().size(), 2u);
  fs::remove_all(dir);
}

TEST(KeepNodes, CutTensorsBecomeInputsAndSinksOutputs) {
  pb::ModelProto m = Chain(5);
  GoldenStore golden("/tmp/unused");
  TypeSource types(&golden, {});
  auto c = KeepNodes(m, {2}, types);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->graph->node.size(), 1u);
  ASSERT_EQ(c->graph->input.size(), 1u);
  EXPECT_EQ(c->graph->input[0].name, "t1");
  ASSERT_EQ(c->graph->output.size(), 1u);
  EXPECT_EQ(c->graph->output[0].name, "t2");
  EXPECT_FALSE(KeepNodes(m, {9}, types).ok());
}

TEST(ConeOf, FollowsProducersBackwards) {
  pb::ModelProto m = Chain(6);
  EXPECT_EQ(ConeOf(*m.graph, {"t2"}), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ConeOf(*m.graph, {"x"}).empty());
}

TEST(Ddmin, FindsNonContiguousPairAndIsOneMinimal) {
  FakeOracle oracle({"n3", "n27"});
  ReduceResult r = Reduce(Chain(40), oracle, {"ddmin"});
  EXPECT_EQ(r.nodes_after, 2);
  EXPECT_TRUE(r.one_minimal);
  EXPECT_LT(r.calls, 120);
}

TEST(PrefixSuffix, BaselineKeepsTheWholeRange) {
  FakeOracle oracle({"n3", "n27"});
  ReduceResult r = Reduce(Chain(40), oracle, {"prefix-suffix"});
  EXPECT_EQ(r.nodes_after, 25);  // n3..n27
}

TEST(Attributes, DropsOptionalAttribute) {
  FakeOracle oracle({"n2"});
  ReduceResult r = Reduce(Chain(4, 2), oracle, {"ddmin", "attributes"});
  ASSERT_EQ(r.model.graph->node.size(), 1u);
  EXPECT_TRUE(r.model.graph->node[0].attribute.empty());
}

TEST(Initializers, ZeroesWeights) {
  GraphBuilder b("main");
  b.Input("x", pb::kFloat, {{2, 3}}).Initializer(testing::RawFloatTensor("w", {2, 3}, 1));
  b.Node("Add", {"x", "w"}, {"y"}, {}, "add").Output("y", pb::kFloat, {{2, 3}});
  FakeOracle oracle({"add"});
  ReduceResult r = Reduce(ModelFromGraph(b.Build()), oracle, {"initializers"});
  ASSERT_EQ(r.model.graph->initializer.size(), 1u);
  EXPECT_EQ(r.model.graph->initializer[0].raw_data.str(), std::string(24, '\0'));
}

TEST(Subgraphs, InlinesIfBranch) {
  pb::ModelProto m = testing::IfModelWithOuterRefs();
  FakeOracle oracle({"add"});
  ReduceResult r = Reduce(m, oracle, {"subgraphs"});
  bool has_if = false;
  for (const auto& n : r.model.graph->node) has_if = has_if || n.op_type == "If";
  EXPECT_FALSE(has_if);
}

// y = Loop(trip, cond, x) with body (i, c, x_in) -> (c_out, x_out):
// c_out = Identity(c), x_out = Abs(x_in), and a dead d1 = Sin(Neg(x_in))
// and k = Cos(x_in) (named "keep_me").
pb::ModelProto LoopWithDeadBodyNodes() {
  GraphBuilder body("body");
  body.Input("i", pb::kInt64, {{}}).Input("c", pb::kBool, {{}}).Input("x_in", pb::kFloat, {{2}});
  body.Node("Identity", {"c"}, {"c_out"}, {}, "keep_cond")
      .Node("Abs", {"x_in"}, {"x_out"}, {}, "abs")
      .Node("Neg", {"x_in"}, {"d0"}, {}, "dead0")
      .Node("Sin", {"d0"}, {"d1"}, {}, "dead1")
      .Node("Cos", {"x_in"}, {"k"}, {}, "keep_me")
      .Output("c_out", pb::kBool, {{}})
      .Output("x_out", pb::kFloat, {{2}});
  GraphBuilder b("main");
  pb::TensorProto trip;
  trip.name = "trip";
  trip.data_type = pb::kInt64;
  trip.int64_data = {3};
  pb::TensorProto cond;
  cond.name = "cond";
  cond.data_type = pb::kBool;
  cond.int32_data = {1};
  b.Input("x", pb::kFloat, {{2}}).Initializer(trip).Initializer(cond);
  b.Node("Loop", {"trip", "cond", "x"}, {"y"}, {testing::AttrGraph("body", body.Build())}, "loop");
  b.Output("y", pb::kFloat, {{2}});
  return ModelFromGraph(b.Build());
}

// Interesting when a Loop body holds a node named `name`.
class BodyOracle : public FakeOracle {
 public:
  explicit BodyOracle(std::string name) : FakeOracle({"loop"}), name_(std::move(name)) {}
  absl::StatusOr<bool> Test(const pb::ModelProto& m) override {
    for (const auto& n : m.graph->node) {
      for (const auto& a : n.attribute) {
        if (!a.g) continue;
        for (const auto& b : a.g->node) {
          if (b.name == name_) return true;
        }
      }
    }
    return false;
  }

 private:
  std::string name_;
};

std::vector<std::string> BodyNames(const pb::ModelProto& m) {
  std::vector<std::string> names;
  for (const auto& n : m.graph->node) {
    for (const auto& a : n.attribute) {
      if (a.g) {
        for (const auto& b : a.g->node) names.push_back(b.name);
      }
    }
  }
  return names;
}

TEST(Bodies, RemovesDeadLoopBodyNodesButKeepsTheInterestingOne) {
  BodyOracle oracle("keep_me");
  ReduceResult r = Reduce(LoopWithDeadBodyNodes(), oracle, {"bodies"});
  EXPECT_EQ(BodyNames(r.model), (std::vector<std::string>{"keep_cond", "abs", "keep_me"}));
  EXPECT_LE(r.calls, 10);
}

TEST(Bodies, RemovesEveryDeadNodeAtOnceWhenTheFailureIsElsewhere) {
  BodyOracle oracle("abs");
  ReduceResult r = Reduce(LoopWithDeadBodyNodes(), oracle, {"bodies"});
  EXPECT_EQ(BodyNames(r.model), (std::vector<std::string>{"keep_cond", "abs"}));
  // A second run finds nothing to do.
  ReduceResult again = Reduce(r.model, oracle, {"bodies"});
  EXPECT_EQ(BodyNames(again.model), BodyNames(r.model));
}

TEST(Bodies, NoLoopNothingToDo) {
  FakeOracle oracle({"n1"});
  ReduceResult r = Reduce(Chain(3), oracle, {"bodies"});
  EXPECT_EQ(r.nodes_after, 3);
}

TEST(Strategies, UnknownNameListsValidOnes) {
  auto r = ParseStrategies({"ddmin,nope"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prefix-suffix"), std::string::npos);
  EXPECT_EQ(ParseStrategies({}).value().size(), 7u);
}

}  // namespace
}  // namespace onnxkit::bisect
