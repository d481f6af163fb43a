// NodeContext: what a shape function sees of one node (its input states,
// attributes, opset) and where it writes (output states, failures), plus the
// dim arithmetic every shape function shares.
//
// A shape function reads inputs, sets output shapes (types are already set
// from the schema when it runs) and calls Fail() for shapes that are
// impossible for the op; a failure is reported as E0601 with the op name in
// front: "Reshape: cannot reshape 24 elements into shape [5, 5]". Unknown
// inputs are never failures: the function leaves what it cannot compute
// unknown. All arithmetic on dims is checked.
#ifndef ONNXKIT_LIB_INFER_CONTEXT_H_
#define ONNXKIT_LIB_INFER_CONTEXT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/infer/types.h"
#include "lib/ir/graph.h"
#include "lib/ir/node.h"

namespace onnxkit::infer {

// Infers a subgraph (If/Loop/Scan body) given the types of its inputs;
// implemented by the engine.
class SubgraphInferrer {
 public:
  virtual ~SubgraphInferrer() = default;
  // Infers `body` with `inputs` (one per body input, unknown where not
  // known) and returns the types of its outputs.
  virtual std::vector<Type> InferBody(const ir::Graph& body, const std::vector<Type>& inputs) = 0;
};

class NodeContext {
 public:
  NodeContext(const ir::Node& node, int64_t opset, std::vector<const ValueState*> inputs,
              SubgraphInferrer* subgraphs);

  const ir::Node& node() const { return node_; }
  const std::string& op() const { return node_.op_type(); }
  int64_t opset() const { return opset_; }
  SubgraphInferrer* subgraphs() const { return subgraphs_; }

  // --- Inputs: absent (omitted or past the end) and unknown read as null ---
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const;
  const Type* input_type(int i) const;
  int32_t input_elem(int i) const;  // 0 unknown
  const Dims* input_shape(int i) const;  // null unless a tensor of known rank
  std::optional<int64_t> input_rank(int i) const;
  const Dims* input_data(int i) const;  // known contents (possibly symbolic)
  // Contents when every element is a known integer.
  std::optional<std::vector<int64_t>> input_ints(int i) const;
  // A scalar or one-element known integer input.
  std::optional<int64_t> input_scalar(int i) const;
  const std::vector<double>* input_floats(int i) const;

  // --- Outputs (indexes past the end are ignored) ---
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  ValueState* output(int i);
  std::vector<ValueState>& outputs() { return outputs_; }
  void set_type(int i, Type type);
  void set_elem(int i, int32_t elem);  // makes it a tensor
  // Sets the shape; a rank above limits::kMaxRank fails and stays unknown.
  void set_shape(int i, Dims dims);
  // The shape and type of input `in` (when known) to output `out`.
  void PropagateShape(int in, int out);
  void PropagateElem(int in, int out);
  void set_data(int i, Dims data);

  // --- Attributes ---
  const ir::Attribute* attr(std::string_view name) const { return node_.FindAttribute(name); }
  bool has_attr(std::string_view name) const { return attr(name) != nullptr; }
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  float attr_float(std::string_view name, float fallback) const;
  std::string attr_string(std::string_view name, std::string fallback = "") const;
  std::optional<std::vector<int64_t>> attr_ints(std::string_view name) const;
  std::optional<std::vector<float>> attr_floats(std::string_view name) const;

  // --- Failures (E0601) ---
  void Fail(std::string message);
  const std::vector<std::string>& failures() const { return failures_; }
  bool failed() const { return !failures_.empty(); }

  // --- Checked helpers (a failure names the op) ---
  // Normalizes `axis` for `rank` (range [-rank, rank-1]); fails naming `what`.
  std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what = "axis");
  // A rank computed from data (Reshape's shape length...): fails above kMaxRank.
  bool CheckRank(int64_t rank, std::string_view what);
  Dim Mul(const Dim& a, const Dim& b);
  Dim Add(const Dim& a, const Dim& b);
  // Product of dims (a single symbol times ones stays that symbol).
  Dim Product(std::span<const Dim> dims);
  // Multidirectional (numpy) broadcasting of the known shapes; fails on
  // incompatible dims. nullopt when some rank is unknown or on failure.
  std::optional<Dims> Broadcast(std::span<const Dims* const> shapes);

 private:
  const ir::Node& node_;
  int64_t opset_;
  std::vector<const ValueState*> inputs_;
  SubgraphInferrer* subgraphs_;
  std::vector<ValueState> outputs_;
  std::vector<std::string> failures_;
};

// Signed arithmetic on shape data (which may be negative), nullopt on
// overflow; division truncates toward zero, nullopt for x/0 and INT64_MIN/-1.
std::optional<int64_t> SignedAdd(int64_t a, int64_t b);
std::optional<int64_t> SignedSub(int64_t a, int64_t b);
std::optional<int64_t> SignedMul(int64_t a, int64_t b);
std::optional<int64_t> SignedDiv(int64_t a, int64_t b);

// Known dims as ints; nullopt if some dim is not known.
std::optional<std::vector<int64_t>> KnownValues(const Dims& dims);
Dims DimsOf(std::span<const int64_t> values);
std::string IntsToString(std::span<const int64_t> values);

}  // namespace onnxkit::infer

#endif  // ONNXKIT_LIB_INFER_CONTEXT_H_
