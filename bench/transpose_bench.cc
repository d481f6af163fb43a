// The cpu backend's own transposes between plain and channels-last or
// 16-channel blocks (runner/cpu/conv_shuffle.cc) against oneDNN's reorder
// for the same tensors, on 1 and 2 threads. Run by hand:
// build/bench/transpose_bench.
#include <omp.h>

#include <vector>

#include "benchmark/benchmark.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/conv_common.h"
#include "runner/cpu/dnnl_util.h"

namespace {

using dnnl::memory;
using onnxkit::runner::cpu::Engine;

memory::format_tag Tag(int64_t kind) {
  return kind == 0 ? memory::format_tag::nhwc : memory::format_tag::nChw16c;
}

// Channels and height = width of the cases: Inception's, ResNet's and
// DenseNet's shapes, then channels that leave the last block padded,
// SqueezeNet's, and an image's three colour planes.
constexpr int64_t kCases[][2] = {{576, 14}, {128, 28},  {1024, 7}, {64, 56},   {192, 56}, {512, 7},
                                 {256, 14}, {1024, 14}, {2048, 7}, {832, 7},   {480, 14}, {32, 112},
                                 {256, 56}, {58, 28},   {116, 14}, {1000, 13}, {64, 55},  {32, 27},
                                 {128, 27}, {48, 13},   {192, 13}, {512, 13},  {3, 224},  {16, 55}};

// Arguments: channels, height = width, 0 channels-last / 1 blocked, 0 to /
// 1 from plain, threads.
void Args(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (const auto& c : kCases) {
      for (int64_t kind : {0, 1}) {
        for (int64_t back : {0, 1}) b->Args({c[0], c[1], kind, back, threads});
      }
    }
  }
}

// The two layouts of a case, in the direction it reorders.
struct Case {
  memory::desc from, to;
};

Case CaseOf(const benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(4)));
  const memory::dims dims = {1, state.range(0), state.range(1), state.range(1)};
  const memory::desc plain(dims, memory::data_type::f32, memory::format_tag::nchw);
  const memory::desc other(dims, memory::data_type::f32, Tag(state.range(2)));
  return state.range(3) == 0 ? Case{plain, other} : Case{other, plain};
}

void BM_OwnTranspose(benchmark::State& state) {
  const Case c = CaseOf(state);
  std::vector<float> x(c.from.get_size() / sizeof(float), 1.f), y(c.to.get_size() / sizeof(float));
  for (auto _ : state) {
    if (!onnxkit::runner::cpu::TransposeChannels(c.from, c.to, x.data(), y.data()).ok()) {
      state.SkipWithError("not a transpose");
      break;
    }
    benchmark::DoNotOptimize(y.data());
  }
}

void BM_OneDnnReorder(benchmark::State& state) {
  const Case c = CaseOf(state);
  memory a(c.from, Engine()), b(c.to, Engine());
  dnnl::reorder r(a, b);
  dnnl::stream s(Engine());
  for (auto _ : state) {
    r.execute(s, a, b);
    benchmark::DoNotOptimize(b.get_data_handle());
  }
}

BENCHMARK(BM_OwnTranspose)->Apply(Args);
BENCHMARK(BM_OneDnnReorder)->Apply(Args);

}  // namespace

BENCHMARK_MAIN();
