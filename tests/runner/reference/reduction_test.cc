// Tests of the reduction reference kernels (runner/reference/reduction_*):
// axes as attribute or input by opset, keepdims, noop_with_empty_axes,
// reductions over empty sets, integer wrapping, ArgMax/ArgMin tie rules,
// and error paths (bad axes are errors, not crashes).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "runner/session.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {
namespace {

using runner::RtValue;
using runner::Tensor;



// Runs one node `op` on the inputs (x0, x1...; an undefined tensor leaves
// that input out) at `opset`; returns output 0.
absl::StatusOr<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                             std::vector<pb::AttributeProto> attrs = {}, int64_t opset = 18) {
  absl::StatusOr<std::vector<Tensor>> out = RunSingleNodeTensors(op, inputs, std::move(attrs), opset);
  if (!out.ok()) return out.status();
  return (*out)[0];
}


// [[1, 2, 3], [4, 5, 6]]
Tensor X() { return Floats({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(ReductionTest, AxesMoveFromAttributeToInput) {
  // ReduceSum takes axes as an input from opset 13; the others from 18.
  absl::StatusOr<Tensor> attr = RunOp("ReduceSum", {X()}, {AttrInts("axes", {1})}, 11);
  absl::StatusOr<Tensor> input = RunOp("ReduceSum", {X(), Int64s({1}, {1})}, {}, 13);
  absl::StatusOr<Tensor> mean_attr = RunOp("ReduceMean", {X()}, {AttrInts("axes", {0}), AttrInt("keepdims", 0)}, 17);
  absl::StatusOr<Tensor> mean_input = RunOp("ReduceMean", {X(), Int64s({1}, {0})}, {AttrInt("keepdims", 0)}, 18);
  ASSERT_TRUE(attr.ok() && input.ok() && mean_attr.ok() && mean_input.ok());
  EXPECT_EQ(attr->shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Values<float>(*attr), (std::vector<float>{6, 15}));
  EXPECT_EQ(Values<float>(*input), (std::vector<float>{6, 15}));
  EXPECT_EQ(mean_attr->shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(Values<float>(*mean_attr), (std::vector<float>{2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(Values<float>(*mean_input), (std::vector<float>{2.5f, 3.5f, 4.5f}));
}

TEST(ReductionTest, EmptyAxesReduceAllOrNothing) {
  absl::StatusOr<Tensor> all = RunOp("ReduceMax", {X()}, {AttrInt("keepdims", 0)});
  absl::StatusOr<Tensor> noop = RunOp("ReduceSum", {X(), Int64s({0}, {})}, {AttrInt("noop_with_empty_axes", 1)}, 13);
  absl::StatusOr<Tensor> square = RunOp("ReduceSumSquare", {X()}, {AttrInt("noop_with_empty_axes", 1)});
  ASSERT_TRUE(all.ok() && noop.ok() && square.ok());
  EXPECT_EQ(all->rank(), 0);
  EXPECT_EQ(Values<float>(*all), (std::vector<float>{6}));
  EXPECT_EQ(noop->shape(), X().shape());
  EXPECT_EQ(Values<float>(*noop), Values<float>(X()));
  EXPECT_EQ(Values<float>(*square), (std::vector<float>{1, 4, 9, 16, 25, 36}));
}

TEST(ReductionTest, EmptySetsGiveTheIdentityOfTheOperation) {
  Tensor empty = Floats({0, 2}, {});
  const float inf = std::numeric_limits<float>::infinity();
  struct Want {
    const char* op;
    float value;
  };
  for (Want w : {Want{"ReduceSum", 0}, Want{"ReduceProd", 1}, Want{"ReduceMin", inf}, Want{"ReduceMax", -inf},
                 Want{"ReduceL2", 0}, Want{"ReduceLogSum", -inf}, Want{"ReduceLogSumExp", -inf}}) {
    absl::StatusOr<Tensor> y = RunOp(w.op, {empty, Int64s({1}, {0})});
    ASSERT_TRUE(y.ok()) << w.op << ": " << y.status();
    EXPECT_EQ(y->shape(), (std::vector<int64_t>{1, 2})) << w.op;
    EXPECT_EQ(Values<float>(*y), (std::vector<float>{w.value, w.value})) << w.op;
  }
}

TEST(ReductionTest, IntegersWrapAndBoolsReduce) {
  Tensor big = MakeTensor<int32_t>(pb::kInt32, {2}, {std::numeric_limits<int32_t>::max(), 1});
  absl::StatusOr<Tensor> sum = RunOp("ReduceSum", {big});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Values<int32_t>(*sum), (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  Tensor flags = MakeTensor<bool>(pb::kBool, {2, 2}, {true, false, true, true});
  absl::StatusOr<Tensor> any = RunOp("ReduceMax", {flags, Int64s({1}, {1})}, {}, 20);
  absl::StatusOr<Tensor> all = RunOp("ReduceMin", {flags, Int64s({1}, {1})}, {}, 20);
  ASSERT_TRUE(any.ok() && all.ok());
  EXPECT_EQ(Values<bool>(*any), (std::vector<bool>{true, true}));
  EXPECT_EQ(Values<bool>(*all), (std::vector<bool>{false, true}));
  EXPECT_FALSE(RunOp("ReduceSum", {flags}).ok());
}

TEST(ReductionTest, BadAxesAreErrors) {
  absl::StatusOr<Tensor> out_of_range = RunOp("ReduceSum", {X(), Int64s({1}, {2})}, {}, 13);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(std::string(out_of_range.status().message()).find("out of range"), std::string::npos);
  absl::StatusOr<Tensor> repeated = RunOp("ReduceMin", {X()}, {AttrInts("axes", {1, -1})}, 13);
  ASSERT_FALSE(repeated.ok());
  EXPECT_NE(std::string(repeated.status().message()).find("repeated"), std::string::npos);
  EXPECT_FALSE(RunOp("ReduceSum", {X(), Int64s({1, 1}, {0})}, {}, 13).ok());  // axes must be 1-D
  EXPECT_FALSE(RunOp("ReduceSum", {X(), Floats({1}, {0})}, {}, 13).ok());     // and integer
}

TEST(ArgReductionTest, SelectLastIndexPicksTheLastTie) {
  Tensor x = Floats({2, 3}, {1, 5, 5, 7, 2, 7});
  absl::StatusOr<Tensor> first = RunOp("ArgMax", {x}, {AttrInt("axis", 1)}, 13);
  absl::StatusOr<Tensor> last = RunOp("ArgMax", {x}, {AttrInt("axis", 1), AttrInt("select_last_index", 1)}, 13);
  absl::StatusOr<Tensor> min = RunOp("ArgMin", {x}, {AttrInt("axis", 0), AttrInt("keepdims", 0)}, 13);
  ASSERT_TRUE(first.ok() && last.ok() && min.ok());
  EXPECT_EQ(first->shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Values<int64_t>(*first), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Values<int64_t>(*last), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int64_t>(*min), (std::vector<int64_t>{0, 1, 0}));
}

TEST(ArgReductionTest, EmptyAxisAndBadAxisAreErrors) {
  absl::StatusOr<Tensor> empty = RunOp("ArgMax", {Floats({2, 0}, {})}, {AttrInt("axis", 1)}, 13);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RunOp("ArgMin", {X()}, {AttrInt("axis", -3)}, 13).ok());
}

}  // namespace
}  // namespace onnxkit::testing
