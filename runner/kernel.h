// The kernel interface of the runner.
//
// A kernel is created once per node (Create: validate and parse attributes;
// the only place attribute errors arise) and run many times (Run: read the
// inputs, allocate and fill the outputs). Shapes are resolved at run time.
// Errors are Statuses naming what is wrong; the session adds the node.
//
//   class ReluKernel : public Kernel {
//    public:
//     absl::Status Run(KernelContext& ctx) override {
//       ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
//       ONNXKIT_ASSIGN_OR_RETURN(Tensor* y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
//       ...
//     }
//   };
#ifndef ONNXKIT_RUNNER_KERNEL_H_
#define ONNXKIT_RUNNER_KERNEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/ir/ir.h"
#include "runner/value.h"

namespace onnxkit::runner {

class KernelContext;

// Runs a subgraph (If/Loop/Scan body) with the given values bound to its
// graph inputs, in the scope of the running node (outer-scope values
// resolve to the enclosing graphs' values). Returns the graph outputs.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual absl::StatusOr<std::vector<RtValue>> RunSubgraph(const ir::Graph& graph,
                                                           std::vector<RtValue> inputs) = 0;
  // Runs a function body in a fresh scope: it sees no value of the caller's
  // graphs. Omitted optional inputs are passed as undefined values.
  virtual absl::StatusOr<std::vector<RtValue>> RunIsolated(const ir::Graph& graph,
                                                           std::vector<RtValue> inputs) = 0;
};

class KernelContext {
 public:
  KernelContext(const ir::Node& node, int64_t opset, std::vector<const RtValue*> inputs,
                std::vector<RtValue>* outputs, SubgraphRunner* subgraphs)
      : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(outputs), subgraphs_(subgraphs) {}

  const ir::Node& node() const { return node_; }
  // The opset version the model imports for the node's domain.
  int64_t opset() const { return opset_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // Input i as a value; null when omitted ("" name) or beyond the inputs.
  const RtValue* Value(int i) const {
    return i >= 0 && i < num_inputs() ? inputs_[static_cast<size_t>(i)] : nullptr;
  }
  // Input i as a tensor; InvalidArgument when missing or not a tensor.
  absl::StatusOr<const Tensor*> Input(int i) const;
  // Input i as a tensor, or null when omitted. InvalidArgument when present
  // but not a tensor.
  absl::StatusOr<const Tensor*> OptionalInput(int i) const;

  int num_outputs() const { return static_cast<int>(outputs_->size()); }
  // False for an omitted optional output ("" name): kernels may skip it.
  bool OutputRequested(int i) const;
  // Allocates output i (zero-filled) and returns it for writing.
  absl::StatusOr<Tensor*> AllocateOutput(int i, int32_t dtype, std::vector<int64_t> shape);
  // The same without zero-filling: for kernels that write every element.
  absl::StatusOr<Tensor*> AllocateOutputUninitialized(int i, int32_t dtype, std::vector<int64_t> shape);
  // Like AllocateOutputUninitialized, but output `out` takes over the buffer
  // of input `in` (computing in place) when the session marked that input
  // reusable (this is its last use and nothing else holds its buffer) and it
  // has `dtype` and `shape`. A kernel calling this must read each input
  // element no later than it writes the output element at the same index.
  absl::StatusOr<Tensor*> AllocateOutputReusing(int out, int in, int32_t dtype, std::vector<int64_t> shape);
  // Set by the session before Run: which inputs a kernel may compute in place.
  void set_reusable_inputs(std::vector<bool> reusable) { reusable_ = std::move(reusable); }
  // True when a Conv of a later step of the run reads input i again as its
  // X (and the input is a value of the running graph's own frame): a kernel
  // may then keep what it derived from the input with it for that Conv's
  // kernel (RtValue::AddDerived). False when unknown.
  bool InputReadLater(int i) const {
    return read_later_ != nullptr && i >= 0 && i < num_inputs() && read_later_(read_later_state_, i);
  }
  // Set by the session: answers InputReadLater from `state` (asked only by
  // the kernels that would keep something).
  using ReadLaterFn = bool (*)(const void* state, int i);
  void set_read_later(ReadLaterFn fn, const void* state) {
    read_later_ = fn;
    read_later_state_ = state;
  }
  // Set by the session for steps whose outputs it placed in a joined
  // buffer (a Concat's inputs written where the Concat's result holds them,
  // and that result): asked by every allocation of an output, it returns
  // the buffer output i of `dtype` and `shape` goes in, or null where the
  // output is not placed (or has another type or shape than planned).
  using PlaceOutputFn = std::shared_ptr<Buffer> (*)(const void* state, int i, int32_t dtype,
                                                    const std::vector<int64_t>& shape);
  void set_place_output(PlaceOutputFn fn, const void* state) {
    place_output_ = fn;
    place_output_state_ = state;
  }
  // Sets output i to a value (a tensor view of an input, a sequence...).
  absl::Status SetOutput(int i, RtValue value);

  SubgraphRunner* subgraphs() const { return subgraphs_; }

 private:
  absl::StatusOr<Tensor*> AllocateOutputImpl(int i, int32_t dtype, std::vector<int64_t> shape, bool zero_fill,
                                             bool ask_place = true);
  // Output i in the buffer the session placed it in; null when not placed.
  absl::StatusOr<Tensor*> Placed(int i, int32_t dtype, const std::vector<int64_t>& shape, bool zero_fill);

  const ir::Node& node_;
  int64_t opset_;
  std::vector<const RtValue*> inputs_;
  std::vector<RtValue>* outputs_;
  SubgraphRunner* subgraphs_;
  std::vector<bool> reusable_;
  ReadLaterFn read_later_ = nullptr;
  const void* read_later_state_ = nullptr;
  PlaceOutputFn place_output_ = nullptr;
  const void* place_output_state_ = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual absl::Status Run(KernelContext& ctx) = 0;
};

// What a factory knows at creation.
struct KernelInfo {
  int64_t opset = 0;  // imported opset of the node's domain
  int threads = 1;    // threads the backend may use
  // cpu: float32 Conv and ConvTranspose, and MatMul and Gemm with a
  // constant B, compute their products in bfloat16 (inputs rounded to bfloat16,
  // float32 accumulation and results).
  bool bf16 = false;
};

using KernelFactory = absl::StatusOr<std::unique_ptr<Kernel>> (*)(const ir::Node& node,
                                                                  const KernelInfo& info);

// True when input i of `node` has the same value in every run of the
// session: an initializer that is not also a graph input, a Constant node's
// output, or a value the scope below names (values the session computed
// once when it was created, and initializers listed as graph inputs, which
// the session treats as constant in runs that do not feed them). Meant for kernel factories and constructors,
// which run while the session sets the folded values (SessionConstantsScope).
bool IsSessionConstantInput(const ir::Node& node, int i);

// While alive, IsSessionConstantInput on this thread also counts the values
// of `folded`.
class SessionConstantsScope {
 public:
  explicit SessionConstantsScope(const absl::flat_hash_set<const ir::Value*>* folded);
  ~SessionConstantsScope();
  SessionConstantsScope(const SessionConstantsScope&) = delete;
  SessionConstantsScope& operator=(const SessionConstantsScope&) = delete;

 private:
  const absl::flat_hash_set<const ir::Value*>* saved_;
};

// A kernel that is one function (no state beyond the node).
using KernelFn = absl::Status (*)(KernelContext& ctx);
class FnKernel : public Kernel {
 public:
  explicit FnKernel(KernelFn fn) : fn_(fn) {}
  absl::Status Run(KernelContext& ctx) override { return fn_(ctx); }

 private:
  KernelFn fn_;
};

// Factory adaptor for a KernelFn: ONNXKIT_KERNEL("", "Relu", 6, kLatest, MakeFn<Relu>).
template <KernelFn kFn>
absl::StatusOr<std::unique_ptr<Kernel>> MakeFn(const ir::Node&, const KernelInfo&) {
  return std::unique_ptr<Kernel>(new FnKernel(kFn));
}

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_KERNEL_H_
