// The reducer loop: strategies in rounds until nothing shrinks.
#include "bisect/reducer.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "bisect/strategies.h"
#include "lib/base/strings.h"

namespace onnxkit::bisect {

Reducer::Reducer(pb::ModelProto original, Oracle* oracle, const GoldenStore* golden, const TypeSource* types,
                 const OracleOptions& oracle_options, ReduceOptions options)
    : current_(std::move(original)),
      oracle_(oracle),
      golden_(golden),
      types_(types),
      oracle_options_(oracle_options),
      options_(std::move(options)),
      start_(std::chrono::steady_clock::now()) {}

bool Reducer::OutOfBudget() const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return calls_ >= options_.max_calls || elapsed > options_.time_limit_seconds;
}

absl::StatusOr<int> Reducer::TryFirst(int count,
                                      const std::function<absl::StatusOr<pb::ModelProto>(int)>& make) {
  int next = 0;
  while (next < count) {
    if (OutOfBudget()) return -1;
    // No more candidates at once than calls are left.
    const int batch =
        static_cast<int>(std::min<int64_t>(std::max(1, options_.jobs), options_.max_calls - calls_));
    std::vector<pb::ModelProto> candidates;
    std::vector<int> index;
    while (next < count && static_cast<int>(candidates.size()) < batch) {
      int i = next++;
      auto c = make(i);
      if (!c.ok()) {
        if (c.status().code() == absl::StatusCode::kInternal) return c.status();
        ++invalid_;
        continue;
      }
      if (!oracle_->Valid(*c)) {
        ++invalid_;
        continue;
      }
      candidates.push_back(std::move(*c));
      index.push_back(i);
    }
    if (candidates.empty()) continue;
    int64_t calls = 0;
    auto first = oracle_->TestFirst(candidates, &calls);
    calls_ += calls;
    if (!first.ok()) return first.status();
    if (*first >= 0) {
      current_ = std::move(candidates[static_cast<size_t>(*first)]);
      ++changes_;
      if (options_.progress) {
        std::cerr << absl::StrCat("\rbisect: ", total_nodes(), " nodes, ", calls_, " oracle calls   ")
                  << std::flush;
      }
      return index[static_cast<size_t>(*first)];
    }
  }
  return -1;
}

absl::StatusOr<ReduceResult> Reducer::Run() {
  auto strategies = ParseStrategies(options_.strategies);
  if (!strategies.ok()) return strategies.status();
  ReduceResult result;
  result.nodes_before = total_nodes();
  for (const StrategyInfo* s : *strategies) result.effects.push_back(StrategyEffect{std::string(s->name)});
  for (int round = 0; round < options_.max_rounds && !OutOfBudget(); ++round) {
    ++result.rounds;
    bool changed = false;
    for (size_t i = 0; i < strategies->size() && !OutOfBudget(); ++i) {
      StrategyEffect& e = result.effects[i];
      int before = total_nodes();
      int64_t calls_before = calls_, changes_before = changes_;
      auto start = std::chrono::steady_clock::now();
      one_minimal_ = false;
      absl::Status st = (*strategies)[i]->run(*this);
      if (!st.ok()) return st;
      e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      e.calls += calls_ - calls_before;
      if (round == 0) e.nodes_before = before;
      e.nodes_after = total_nodes();
      e.nodes_removed += before - total_nodes();
      e.accepted += changes_ - changes_before;
      changed = changed || changes_ != changes_before;
      // 1-minimal: the last ddmin ended at single-node granularity, and
      // nothing removed nodes after it.
      if ((*strategies)[i]->name == "ddmin") {
        result.one_minimal = one_minimal_;
      } else if (total_nodes() != before) {
        result.one_minimal = false;
      }
    }
    if (!changed) break;
  }
  if (options_.progress) std::cerr << "\n";
  result.budget_hit = OutOfBudget();
  result.model = current_;
  result.nodes_after = total_nodes();
  if (result.nodes_after != nodes()) result.one_minimal = false;
  result.calls = calls_;
  result.invalid = invalid_;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result.detail = oracle_->detail();
  return result;
}

}  // namespace onnxkit::bisect
