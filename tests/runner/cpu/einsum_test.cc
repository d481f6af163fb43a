// The cpu backend's Einsum (runner/cpu/einsum.cc) against the reference:
// batched, transposed and permuted contractions, outer and dot products,
// "..." dims, implicit outputs, empty dims, and the equations that fall back
// (one or three inputs, diagonals, sums over one input, broadcast "...").
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing {
namespace {

void ExpectEinsum(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes, uint32_t seed,
                  int threads = 1) {
  GraphBuilder g("g");
  std::vector<std::string> names;
  Feeds feeds;
  for (size_t i = 0; i < shapes.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    g.Input(names.back());
    feeds.push_back({names.back(), RandomFloats(shapes[i], seed + static_cast<uint32_t>(i))});
  }
  g.Node("Einsum", names, {"y"}, {AttrString("equation", equation)}).Output("y");
  auto ref = RunGraphOn(runner::Backend::kReference, g.Build(), feeds, 13);
  auto cpu = RunGraphOn(runner::Backend::kCpu, g.Build(), feeds, 13, threads);
  ASSERT_EQ(ref.ok(), cpu.ok()) << equation << ": " << ref.status() << " / " << cpu.status();
  if (!ref.ok()) {
    EXPECT_EQ(ref.status().code(), cpu.status().code()) << equation;
    return;
  }
  ExpectTensorsClose((*ref)[0].tensor(), (*cpu)[0].tensor(), 1e-5, 1e-4, equation);
}

TEST(CpuEinsumTest, ContractionsMatchReference) {
  struct Case {
    std::string eq;
    std::vector<std::vector<int64_t>> shapes;
  };
  std::vector<Case> cases = {
      {"bhqd,bhkd->bhqk", {{2, 3, 17, 8}, {2, 3, 13, 8}}},  // attention scores: B transposed
      {"bhqk,bhkd->bhqd", {{2, 3, 17, 13}, {2, 3, 13, 8}}},
      {"bsd,de->bse", {{2, 9, 16}, {16, 24}}},
      {"ij,jk->ik", {{5, 7}, {7, 3}}},
      {"ij,kj->ik", {{5, 7}, {3, 7}}},
      {"ji,jk->ik", {{7, 5}, {7, 3}}},   // A transposed
      {"ij,jk->ki", {{5, 7}, {7, 3}}},   // output permuted
      {"abc,cda->bd", {{4, 5, 6}, {6, 3, 4}}},  // two contracted labels, A copied
      {"bn,anm->bam", {{3, 4}, {2, 4, 5}}},
      {"...ij,...jk->...ik", {{2, 3, 4, 5}, {2, 3, 5, 6}}},
      {"ij,jk", {{4, 6}, {6, 2}}},        // implicit output
      {"i,i->", {{9}, {9}}},              // dot product
      {"i,j->ij", {{4}, {6}}},            // outer product
      {"bij,bjk->bik", {{40, 6, 7}, {40, 7, 5}}},  // many small products
      {"ij,jk->ik", {{0, 7}, {7, 3}}},    // empty
      {"ij,jk->ik", {{4, 0}, {0, 3}}},    // empty contraction: zeros
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (int threads : {1, 2}) ExpectEinsum(c.eq, c.shapes, seed++, threads);
  }
}

TEST(CpuEinsumTest, OtherEquationsFallBackToTheReference) {
  ExpectEinsum("ii->i", {{4, 4}}, 1);
  ExpectEinsum("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, 2);
  ExpectEinsum("ij,j->", {{3, 4}, {4}}, 3);             // i summed over A alone
  ExpectEinsum("ii,ij->j", {{3, 3}, {3, 5}}, 4);        // diagonal
  ExpectEinsum("...ij,...jk->...ik", {{1, 3, 4}, {5, 4, 2}}, 5);  // broadcast "..."
  ExpectEinsum("ij,jk->ik", {{2, 3}, {4, 5}}, 6);       // sizes disagree: the reference's error
  ExpectEinsum("ij,jk->iz", {{2, 3}, {3, 5}}, 7);       // unknown output label
}

}  // namespace
}  // namespace onnxkit::testing
