// ThreadsScope (runner/cpu/threads.h) and the per-node width of cpu
// sessions: small nodes run on one thread, the pool's width comes back;
// the bound scan of Conv sequences split among threads.
#include "runner/cpu/threads.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "runner/cpu/conv_common.h"
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

TEST(CpuThreadsTest, MaxAbsSplitAmongThreadsFindsEveryValue) {
  // Sizes that split into unequal shares of whole vectors, on one to three
  // threads: the largest magnitude, wherever it is (each share's first and
  // last float included), and infinity for a NaN or an infinity anywhere.
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (int64_t n : {int64_t{17}, int64_t{65536 * 2 - 1}, int64_t{65536 * 2 + 5}, int64_t{65536 * 3 + 17}}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        x[static_cast<size_t>(i)] = static_cast<float>((i * 7919) % 1000) / 1000.f - 0.5f;
      std::vector<int64_t> at = {0,
                                 n - 1,
                                 n / 2,
                                 n / 3,
                                 (n + 15) / 16 / 2 * 16,
                                 (n + 15) / 16 / 2 * 16 - 1,
                                 (n + 15) / 16 / 3 * 16,
                                 (n + 15) / 16 * 2 / 3 * 16 - 1};
      for (int64_t i : at) {
        SCOPED_TRACE(::testing::Message() << threads << " threads, n " << n << ", at " << i);
        std::vector<float> y = x;
        y[static_cast<size_t>(i)] = -3.f;
        EXPECT_EQ(runner::cpu::MaxAbs(y.data(), n), 3.0);
        for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
          y[static_cast<size_t>(i)] = bad;
          EXPECT_TRUE(std::isinf(runner::cpu::MaxAbs(y.data(), n)));
        }
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST(CpuThreadsTest, CopyAmongThreadsCopiesEveryByteAndNoMore) {
  // Sizes below and above the 1 MiB the threads share, odd ones among them
  // (the last run short of a cache line), at offsets off any alignment; the
  // bytes around the destination stay as they were.
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (size_t bytes : {size_t{100}, (size_t{1} << 20) - 1, size_t{1} << 20, (size_t{3} << 20) + 37}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << bytes << " bytes");
      std::vector<unsigned char> src(bytes + 3), dst(bytes + 8, 0xAB);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>((i * 131) % 251);
      runner::cpu::CopyAmongThreads(dst.data() + 5, src.data() + 3, bytes);
      for (size_t i = 0; i < 5; ++i) ASSERT_EQ(dst[i], 0xAB) << i;
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[i + 5], src[i + 3]) << i;
      for (size_t i = bytes + 5; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << i;
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace onnxkit::testing
