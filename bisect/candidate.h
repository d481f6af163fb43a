// Candidate models of `onnxkit bisect`: a subset of the main graph's nodes
// made into a standalone model. Tensors the kept nodes read but no kept node
// produces become graph inputs (typed from the golden run, else from type
// inference), fed at test time with their recorded values.
#ifndef ONNXKIT_BISECT_CANDIDATE_H_
#define ONNXKIT_BISECT_CANDIDATE_H_

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bisect/golden.h"
#include "lib/io/proto.h"

namespace onnxkit::bisect {

// Where candidate graph inputs get their types: the golden run's concrete
// types first, then what type inference found on the original.
class TypeSource {
 public:
  TypeSource(const GoldenStore* golden, std::map<std::string, pb::TypeProto> inferred)
      : golden_(golden), inferred_(std::move(inferred)) {}
  const pb::TypeProto* Find(const std::string& name) const;

 private:
  const GoldenStore* golden_;
  std::map<std::string, pb::TypeProto> inferred_;
};

// Names `node` reads: its non-empty inputs, then the outer-scope names its
// If/Loop/Scan bodies read (recursively), without duplicates.
std::vector<std::string> NodeReads(const pb::NodeProto& node);

// Indices of the nodes of `graph` needed to compute `names` (backwards
// from them to graph inputs and initializers), ascending.
std::vector<int> ConeOf(const pb::GraphProto& graph, const std::vector<std::string>& names);

// The model keeping main-graph nodes `keep` (indices, any order) of
// `model`. Graph inputs: original inputs read by kept nodes, then cut
// tensors; initializers: those read; outputs: original outputs still
// produced, then values produced by kept nodes that no kept node reads.
// InvalidArgument when `model` has no graph or an index is out of range.
absl::StatusOr<pb::ModelProto> KeepNodes(const pb::ModelProto& model, const std::vector<int>& keep,
                                         const TypeSource& types);

// Feeds for every graph input of `model` without an initializer, from the
// golden store, then for the initializers that are graph inputs and that the
// original run was fed. NotFound names the first input without a recorded
// value.
absl::StatusOr<std::vector<std::pair<std::string, runner::RtValue>>> GoldenFeeds(const pb::ModelProto& model,
                                                                                 const GoldenStore& golden);

// Nodes of the main graph (0 when there is no graph).
int MainNodeCount(const pb::ModelProto& model);

// Nodes of every graph: the main graph's and, recursively, those of the
// If/Loop/Scan bodies in it.
int TotalNodeCount(const pb::ModelProto& model);

}  // namespace onnxkit::bisect

#endif  // ONNXKIT_BISECT_CANDIDATE_H_
