// The reducer of `onnxkit bisect`: holds the current (interesting) model,
// runs the chosen strategies in rounds until a round shrinks nothing, and
// gives strategies one way to propose a candidate: TryFirst, which skips
// invalid candidates, asks the oracle (in parallel batches where the oracle
// allows), keeps the first interesting one and counts every call.
#ifndef ONNXKIT_BISECT_REDUCER_H_
#define ONNXKIT_BISECT_REDUCER_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bisect/candidate.h"
#include "bisect/oracle.h"

namespace onnxkit::bisect {

struct ReduceOptions {
  std::vector<std::string> strategies;  // empty: the default list
  int64_t max_calls = 2000;             // oracle calls at most
  double time_limit_seconds = 600;
  int max_rounds = 5;
  int jobs = 1;                         // batch size of TryFirst (command oracle)
  bool progress = false;                // one line per accepted step on stderr
};

struct StrategyEffect {
  std::string name;
  int64_t calls = 0;
  int64_t accepted = 0;
  int nodes_before = 0, nodes_after = 0;  // every graph's nodes, bodies included
  int nodes_removed = 0;                  // by this strategy's own steps, all rounds
  double seconds = 0;
};

struct ReduceResult {
  pb::ModelProto model;
  int nodes_before = 0, nodes_after = 0;  // every graph's nodes, bodies included
  int64_t calls = 0;             // oracle calls (Prepare's included)
  int64_t invalid = 0;           // candidates skipped before any call
  double seconds = 0;
  // Removing any one node loses the failure: claimed only where every node
  // is in the main graph (ddmin does not remove nodes inside bodies).
  bool one_minimal = false;
  bool budget_hit = false;
  int rounds = 0;
  std::vector<StrategyEffect> effects;
  std::string detail;            // the oracle's detail on the result
};

class Reducer {
 public:
  Reducer(pb::ModelProto original, Oracle* oracle, const GoldenStore* golden, const TypeSource* types,
          const OracleOptions& oracle_options, ReduceOptions options);

  // Runs the strategies (InvalidArgument lists valid names on a bad one).
  absl::StatusOr<ReduceResult> Run();

  // --- for strategies ---
  const pb::ModelProto& current() const { return current_; }
  // Nodes of the main graph: what the strategies index.
  int nodes() const { return MainNodeCount(current_); }
  // Every graph's nodes, bodies included: what the report counts.
  int total_nodes() const { return TotalNodeCount(current_); }
  absl::StatusOr<pb::ModelProto> WithNodes(const std::vector<int>& keep) const {
    return KeepNodes(current_, keep, *types_);
  }
  // Builds candidates 0..count-1 with `make` (a NotFound/InvalidArgument
  // from `make` skips that one) and makes the first interesting one the
  // current model. Returns its index, or -1 (none, or out of budget).
  absl::StatusOr<int> TryFirst(int count, const std::function<absl::StatusOr<pb::ModelProto>(int)>& make);
  bool OutOfBudget() const;
  Oracle& oracle() { return *oracle_; }
  const GoldenStore* golden() const { return golden_; }
  const OracleOptions& oracle_options() const { return oracle_options_; }
  void set_one_minimal(bool v) { one_minimal_ = v; }
  int64_t calls() const { return calls_; }
  void AddCalls(int64_t n) { calls_ += n; }

 private:
  pb::ModelProto current_;
  Oracle* oracle_;
  const GoldenStore* golden_;
  const TypeSource* types_;
  OracleOptions oracle_options_;
  ReduceOptions options_;
  int64_t calls_ = 0, invalid_ = 0, changes_ = 0;
  bool one_minimal_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_REDUCER_H_
