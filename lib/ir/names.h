// NameGenerator: fresh, deterministic names for values and nodes created by
// passes.
//
// A generator holds every name reserved so far (seeded with all names of a
// model: values and nodes of every graph and subgraph, and of model-local
// functions) and a counter per hint. Fresh("conv") returns "conv" when it is
// free, otherwise "conv_1", "conv_2", ... (the first free one); the same model
// and the same sequence of calls always give the same names. Graph::FreshName
// is the usual entry point; it also checks the live name indexes of the graph
// tree, so names added after seeding never collide either.
#ifndef ONNXKIT_LIB_IR_NAMES_H_
#define ONNXKIT_LIB_IR_NAMES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "lib/io/proto.h"

namespace onnxkit::ir {

class Graph;

class NameGenerator {
 public:
  // Returns a name that is neither reserved nor `in_use`, derived from `hint`
  // ("v" when empty), and reserves it.
  std::string Fresh(std::string_view hint, absl::FunctionRef<bool(std::string_view)> in_use);
  std::string Fresh(std::string_view hint) {
    return Fresh(hint, [](std::string_view) { return false; });
  }
  // Marks `name` as taken (no-op for an empty name).
  void Reserve(std::string_view name);
  bool IsReserved(std::string_view name) const;
  size_t size() const { return reserved_.size(); }

 private:
  absl::flat_hash_set<std::string> reserved_;
  absl::flat_hash_map<std::string, int64_t> next_suffix_;  // index only
};

// Reserves every value and node name of `graph` and its subgraphs.
void ReserveGraphNames(const Graph& graph, NameGenerator* names);
// Reserves every name a function uses: inputs, outputs, node inputs, outputs
// and names, value_info, also inside graph attributes of its nodes.
void ReserveFunctionNames(const pb::FunctionProto& function, NameGenerator* names);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_NAMES_H_
