// ThreadsScope (runner/cpu/threads.h) and the per-node width of cpu
// sessions: small nodes run on one thread, the pool's width comes back.
#include <omp.h>

#include <vector>

#include "gtest/gtest.h"
#include "runner/cpu/threads.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

TEST(CpuThreadsTest, ScopeSetsAndRestoresTheWidth) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  {
    runner::cpu::ThreadsScope one(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    {
      runner::cpu::ThreadsScope two(2);
      EXPECT_EQ(omp_get_max_threads(), 2);
    }
    EXPECT_EQ(omp_get_max_threads(), 1);
    runner::cpu::ThreadsScope none(0);  // at least one
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(saved);
}

TEST(CpuThreadsTest, SmallAndLargeNodesOfATwoThreadSession) {
  // A small Mul, a large Add and a small Relu after a large Softmax: the
  // results are the reference's and the session leaves the width it set.
  GraphBuilder g("g");
  g.Input("a").Input("b");
  g.Node("Mul", {"a", "a"}, {"m"}).Node("Add", {"b", "b"}, {"s"}).Node("Softmax", {"s"}, {"p"});
  g.Node("ReduceSum", {"p"}, {"r"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)});
  g.Node("Relu", {"r"}, {"y"}).Output("m").Output("y");
  Feeds feeds = {{"a", RandomFloats({4, 8}, 1)}, {"b", RandomFloats({64, 512}, 2)}};
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 12);
  auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 12, /*threads=*/2);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (size_t i = 0; i < ref->size(); ++i) {
    ExpectTensorsClose((*ref)[i].tensor(), (*cpu)[i].tensor(), 1e-5, 1e-4, "output " + std::to_string(i));
  }
  EXPECT_EQ(omp_get_max_threads(), 2);
}

}  // namespace
}  // namespace onnxkit::testing
