// `onnxkit convert` below opset 27 for CausalConvWithState (expanded into a
// grouped Conv over the state and the input), and below 18 for the
// OptionalHasElement / OptionalGetElement forms that 15-17 lack.
#include <string>

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

struct ConvCase {
  bool bias, past, silu;
  int64_t kernel;
  bool dynamic;  // input dims unknown, weight a graph input of unknown length
};

TEST(ConvertSequenceTest, CausalConvWithStateExpandsBelow27) {
  const ConvCase cases[] = {{false, false, false, 4, false}, {true, true, true, 4, false},
                            {true, false, true, 3, false},   {false, true, false, 1, false},
                            {true, true, true, 2, true},     {false, false, true, 5, true}};
  const int64_t b = 2, c = 3, len = 6;
  for (const ConvCase& cc : cases) {
    SCOPED_TRACE(::testing::Message() << "bias " << cc.bias << " past " << cc.past << " silu " << cc.silu
                                      << " kernel " << cc.kernel << " dynamic " << cc.dynamic);
    GraphBuilder g("g");
    if (cc.dynamic) {
      g.Input("x", pb::kFloat, {{-1, c, -1}}).Input("w", pb::kFloat, {{c, 1, -1}});
    } else {
      g.Input("x", pb::kFloat, {{b, c, len}}).Initializer(RawFloatTensor("w", {c, 1, cc.kernel}, 1));
    }
    std::vector<std::string> inputs = {"x", "w", cc.bias ? "bias" : "", cc.past ? "past" : ""};
    if (cc.bias) g.Initializer(RawFloatTensor("bias", {c}, 2));
    if (cc.past) g.Input("past", pb::kFloat, {{b, c, cc.kernel - 1}});
    while (inputs.back().empty()) inputs.pop_back();
    g.Node("CausalConvWithState", inputs, {"y", "state"},
           {AttrString("activation", cc.silu ? "silu" : "none")})
        .Output("y", pb::kFloat)
        .Output("state", pb::kFloat);
    pb::ModelProto m = ModelFromGraph(g.Build(), 27, 10);
    Feeds feeds = {{"x", RandomFloats({b, c, len}, 3, -2, 2)}};
    if (cc.dynamic) feeds.push_back({"w", RandomFloats({c, 1, cc.kernel}, 4)});
    if (cc.past) feeds.push_back({"past", RandomFloats({b, c, cc.kernel - 1}, 5)});
    // With the kernel size known the state's bounds are constants: down to 7.
    for (int64_t opset : {26, 17, 11, 9, 7}) {
      if (cc.dynamic && opset < 11) continue;
      SCOPED_TRACE(opset);
      ConvertResult down = ConvertTo(m, opset);
      ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
      EXPECT_EQ(OpCount(down.model, "CausalConvWithState"), 0);
      EXPECT_EQ(OpCount(down.model, "Conv"), 1);
      ExpectValid(down.model);
      ExpectSameOutputs(m, down.model, feeds, 1e-5, 1e-5);
    }
  }
}

TEST(ConvertSequenceTest, CausalConvWithStateBlocksWithoutAChannelCount) {
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{1, -1, 5}})
                                        .Input("w", pb::kFloat, {{-1, 1, 3}})
                                        .Node("CausalConvWithState", {"x", "w"}, {"y", "state"})
                                        .Output("y", pb::kFloat)
                                        .Build(),
                                    27, 10);
  ConvertResult r = ConvertTo(m, 26);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_THAT(r.blockers[0].reason, HasSubstr("channel count"));
}

TEST(ConvertSequenceTest, OptionalOpsOfPlainValuesGoBelow18) {
  // HasElement of nothing, of a tensor; GetElement of a tensor.
  pb::ModelProto m = ModelFromGraph(GraphBuilder("g")
                                        .Input("x", pb::kFloat, {{2, 3}})
                                        .Node("OptionalHasElement", {}, {"none"})
                                        .Node("OptionalHasElement", {"x"}, {"some"})
                                        .Node("OptionalGetElement", {"x"}, {"v"})
                                        .Node("Neg", {"v"}, {"y"})
                                        .Output("none", pb::kBool, {{}})
                                        .Output("some", pb::kBool, {{}})
                                        .Output("y", pb::kFloat, {{2, 3}})
                                        .Build(),
                                    18, 8);
  ConvertResult down = ConvertTo(m, 15);
  ASSERT_TRUE(down.blockers.empty()) << down.blockers[0].reason;
  EXPECT_EQ(OpCount(down.model, "OptionalHasElement"), 0);
  EXPECT_EQ(OpCount(down.model, "OptionalGetElement"), 0);
  ExpectValid(down.model);
  ExpectSameOutputs(m, down.model, {{"x", RandomFloats({2, 3}, 1)}});
  auto out = RunModel(down.model, {{"x", RandomFloats({2, 3}, 1)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().data<uint8_t>()[0], 0);
  EXPECT_EQ((*out)[1].tensor().data<uint8_t>()[0], 1);
}

}  // namespace
}  // namespace onnxkit::testing
