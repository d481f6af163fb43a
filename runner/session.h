// Session: executes a model. Create plans once (topological order of every
// graph, value lifetimes, one kernel per node, constants converted once);
// Run binds inputs, executes node by node freeing each intermediate after
// its last use, and returns the graph outputs.
#ifndef ONNXKIT_RUNNER_SESSION_H_
#define ONNXKIT_RUNNER_SESSION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "lib/io/external_data.h"
#include "lib/io/model_io.h"
#include "lib/ir/ir.h"
#include "lib/ops/contrib_lowering.h"
#include "runner/fusion.h"
#include "runner/kernel.h"
#include "runner/kernel_registry.h"
#include "runner/placement.h"
#include "runner/value.h"

namespace onnxkit::runner {

namespace cuda {
class Context;
class CudaKernel;
}  // namespace cuda

// Copies between host and device memory (cuda sessions).
struct CopyStats {
  int count = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

// Where a main-graph node ran, for how long, and the copies made for it
// just before (its inputs crossing a partition boundary).
struct NodeRun {
  Backend backend = Backend::kReference;
  double seconds = 0;
  CopyStats copies;
};

struct SessionOptions {
  Backend backend = Backend::kReference;
  int threads = 1;
  // Wall-clock budget of one Run in seconds (0: none): DeadlineExceeded.
  double timeout_seconds = 0;
  // Bytes all live tensors may take together (0: no limit): ResourceExhausted.
  int64_t memory_limit_bytes = 0;
  // Called for every value of the main graph as soon as it is computed (in
  // execution order), before it may be freed. An error stops the run.
  std::function<absl::Status(const ir::Value& value, const RtValue& v)> observer;
  // With an observer: also call it inside If/Loop/Scan bodies, for each
  // value a body node computes and each value bound to a body input, on
  // every run of the body (a Loop's body once per iteration). Not inside
  // function bodies (their names are the function's own), nor on cuda.
  bool observe_subgraphs = false;
  // Called after every node (subgraph and function body nodes included)
  // with its own run time: that of the nodes it ran inside its bodies is
  // theirs. (A fused chain of nodes reports its time once, under its first
  // node.)
  std::function<void(const ir::Node& node, double seconds)> on_node_done;
  // Called after every main-graph node of a cuda session: where it ran
  // (cuda, or cpu where the CUDA backend has no kernel for it or declined
  // its input types) and the copies made for it.
  std::function<void(const ir::Node& node, const NodeRun& run)> on_node_run;
  // The cuda backend: the device, and whether fp32 matrix products and
  // convolutions may use TF32 tensor cores.
  int device = 0;
  bool allow_tf32 = false;
  // cuda sessions: a run whose device work needs nothing from the host in
  // between is recorded as a CUDA graph (the second run with the same input
  // types and shapes) and replayed with one launch from then on (see Run).
  bool cuda_graphs = true;
  // cuda sessions: also what is written but not yet run on a GPU (off until
  // checked on one): linear layers (MatMul, bias Add, residual Add) as one
  // cuBLASLt product, MatMuls reading and writing through the Transposes
  // around them, element-wise runs with the Softmax after them as one
  // kernel (PlanDeviceChains), Gemm's bias and C on cuBLASLt, Resize
  // (cuda::ContextOptions::experimental).
  bool cuda_experimental = false;
  // The cpu backend runs Conv chains (runner/fusion.h) as one kernel, and
  // the cuda backend Conv -> BatchNormalization -> element-wise chains and
  // runs of element-wise nodes (PlanDeviceChains; more with
  // cuda_experimental); their intermediate values are never computed. Off while an observer is set.
  bool fuse = true;
  // The cpu backend computes the products of float32 Conv and
  // ConvTranspose nodes, and of MatMul and Gemm nodes whose B is constant,
  // in bfloat16 (8 significant bits; float32 accumulation, and every tensor
  // stays float32), where the CPU has bfloat16 instructions
  // (cpu::Bf16Supported); elsewhere the flag has no effect. Off for the
  // other backends.
  bool bf16 = false;
  // Rewrites the model once it is read, before anything is planned, keeping
  // the value of every graph output (the app passes the transpose-cancelling
  // passes here, which the runner cannot call itself). Not called while an
  // observer is set: observed values are those of the model as written.
  std::function<absl::Status(std::unique_ptr<ir::Model>& model)> rewrite;
};

class Session {
 public:
  // Takes the loaded model (its mapping keeps raw data alive).
  static absl::StatusOr<std::unique_ptr<Session>> Create(io::LoadedModel loaded, SessionOptions options = {});
  ~Session();

  const ir::Model& model() const { return *model_; }
  // Graph inputs that must be fed (those without an initializer), in order.
  std::vector<const ir::Value*> FeedInputs() const;
  // Graph inputs with an initializer (IR >= 4): a run may feed them.
  std::vector<const ir::Value*> OverridableInputs() const;
  // Graph outputs, in order.
  std::vector<const ir::Value*> Outputs() const;

  // Runs the model. Every feed input must be given (by name); initializer-
  // backed inputs may be overridden. Returns the outputs in graph order.
  //
  // cuda sessions with cuda_graphs: the first run with given input types
  // and shapes is watched; when all it did on the host was shape
  // arithmetic that does not depend on the input values, its only
  // device-to-host copies were the outputs, and it had no callbacks
  // (observer, on_node_done, on_node_run), the next run with the same
  // types and shapes is recorded as a CUDA graph, and later ones replay it:
  // the inputs are uploaded, the graph launched, the outputs brought back.
  // A run that cannot be recorded runs node by node as before.
  absl::StatusOr<std::vector<RtValue>> Run(std::vector<std::pair<std::string, RtValue>> feeds);
  // Whether the last Run replayed a recorded CUDA graph.
  bool last_run_replayed() const { return last_run_replayed_; }
  // cpu sessions: the main-graph nodes the last Run skipped because their
  // values were kept from an earlier run with the same input types and
  // shapes (shape computations, see AnalyzeShapeComputations).
  int64_t last_run_memoized_nodes() const { return last_run_memoized_nodes_; }
  // cpu sessions: the Concat inputs the last Run's nodes wrote where the
  // Concat's result holds them, in every graph it ran (GraphPlan::joins).
  int64_t last_run_joined_inputs() const { return last_run_joined_inputs_; }
  // The values computed at creation (outputs of folded nodes) the session
  // holds: those a run may read; a folded chain's intermediates are dropped
  // (all of them kept for an observer).
  int64_t held_folded_values() const;

  // The copies between host and device of the last Run (graph outputs
  // brought back included); zero for other backends.
  const CopyStats& last_run_copies() const { return last_copies_; }
  // The main graph's planned placement (cuda sessions; empty otherwise):
  // the steps of its topological order and the copies the plan needs.
  const PlacementPlan& placement() const { return placement_; }
  // Replaces (or, with null, removes) the on_node_run callback for later
  // runs. While one is set, a cuda session waits for every device kernel
  // to finish (to time it); benchmarks remove it after the first run.
  void set_on_node_run(std::function<void(const ir::Node& node, const NodeRun& run)> callback) {
    options_.on_node_run = std::move(callback);
  }

 private:
  class Executor;
  friend class Executor;
  Session() = default;

  struct GraphPlan {
    // One node per step, or the last node of a fused chain.
    std::vector<ir::Node*> order;
    // For each step, the chain it runs (null: the node alone).
    std::vector<const FusionChain*> chain;
    // For each step, the values whose last use is that step.
    std::vector<std::vector<const ir::Value*>> release_after;
    // For each step, the values it reads that a Conv of a later step reads
    // as its X too (KernelContext::InputReadLater).
    std::vector<std::vector<const ir::Value*>> conv_reads_later;
    // Concats whose inputs are written in place (cpu sessions): the steps
    // making them allocate each where the Concat's result holds it, in one
    // buffer the Concat then takes as its result, copying only what is not
    // there already. Possible when the result's dimensions before the axis
    // are all 1 (a batch-1 join along the channels): each input is then a
    // contiguous range of it. The types and shapes are those of the Concat's
    // last run (learned: a session runs one run at a time); the first run,
    // and any whose shapes differ, allocate and copy as usual.
    struct Join {
      size_t step = 0;                                        // the Concat's step
      int64_t axis = 0;                                       // the Concat's attribute
      mutable int32_t dtype = 0;                              // 0: nothing learned (or not joinable)
      mutable std::vector<int64_t> shape;                     // the result's
      mutable size_t bytes = 0;                               // the result's
      mutable std::vector<std::vector<int64_t>> part_shapes;  // per Concat input
      mutable std::vector<size_t> offsets;                    // per Concat input, in bytes
      // A Concat whose result is an input of a later join's Concat (nested
      // joins, as DenseNet's growing features): that join and the input.
      // Its buffer is then the view of its place there, so the later Concat
      // finds it in place too.
      int parent = -1;
      int parent_part = -1;
    };
    std::vector<Join> joins;
    struct PlacedOutput {
      int output = 0;  // of the step's node (a chain's last node)
      int join = 0;    // index into joins
      int part = -1;   // the Concat's input; -1: the Concat's result
    };
    // For each step, its outputs placed in a join (empty for most).
    std::vector<std::vector<PlacedOutput>> placed;
  };

  absl::StatusOr<const GraphPlan*> PlanFor(const ir::Graph& graph);
  // The plan of `graph` in topological order `order`, running each chain of
  // `chains` (keyed by its last node) as one step, leaving out `skipped`.
  // PlanFusion: the chains of packed_weights_'s MatMuls in `graph` that are
  // not folded or in `fused`.
  std::vector<FusionChain> PackedWeightChains(const ir::Graph& graph,
                                              const std::function<bool(const ir::Value*)>& is_constant,
                                              const absl::flat_hash_set<const ir::Node*>& fused) const;
  static std::unique_ptr<GraphPlan> BuildPlan(
      const ir::Graph& graph, const std::vector<ir::Node*>& order,
      const absl::flat_hash_map<const ir::Node*, const FusionChain*>& chains,
      const absl::flat_hash_set<const ir::Node*>& skipped = {}, bool join_in_place = false);
  // The joins of `plan` (GraphPlan::joins): every Concat step with its
  // inputs made by steps of the plan, each input in one join at most.
  static void PlanJoins(const ir::Graph& graph, GraphPlan& plan);
  // Kernels of runs that feed no initializer (`strict` false: initializers
  // listed as graph inputs and every folded value count as constant) and of
  // runs that feed one (only values that cannot change count).
  absl::StatusOr<Kernel*> KernelFor(const ir::Node& node, bool strict);
  absl::StatusOr<Kernel*> ChainKernelFor(const FusionChain& chain);
  // Finds the cpu backend's chains of every graph (If/Loop/Scan bodies
  // included) and plans each graph that has some with them.
  void PlanFusion();
  absl::StatusOr<int64_t> OpsetOf(const ir::Node& node) const;
  // Attributes the node's schema does not have, or of another type: the
  // model is refused (kernels would ignore them, silently computing
  // something else).
  absl::Status CheckAttributes(const ir::Graph& graph) const;
  // The backend of the kernels that run on the host.
  Backend HostBackend() const;
  // What the kernel factories of this session are told.
  KernelInfo InfoFor(int64_t opset) const;
  // cuda sessions: opens the device and makes the CUDA kernel of every
  // main-graph node that has one; plans the placement.
  absl::Status PlanDevice();
  // cuda sessions: Conv chains, linear layers (MatMul and its bias and
  // residual Adds) and runs of element-wise nodes with device kernels, each
  // of whose values but the last is read only by the next ones, as one
  // kernel (FusionKind::kDevice chains in the main graph's fused plan).
  void PlanDeviceChains(const std::vector<ir::Node*>& order);
  absl::Status PrepareConstants(const ir::Graph& graph);
  // The CUDA graph of cuda sessions (see Run).
  struct DeviceReplay;
  bool ReplayAllowed() const;
  // Records a run of the host feeds in `fed` as a CUDA graph and runs it;
  // nullopt when it cannot be recorded (the run is then made node by node).
  std::optional<absl::StatusOr<std::vector<RtValue>>> RecordRun(
      const absl::flat_hash_map<const ir::Value*, RtValue>& fed);
  absl::StatusOr<std::vector<RtValue>> Replayed(const absl::flat_hash_map<const ir::Value*, RtValue>& fed);
  // Runs once the nodes whose inputs are all constant (weights made by
  // ConstantOfShape, transposed or reshaped initializers...), in the main
  // graph and in every If/Loop/Scan body (where initializers of enclosing
  // graphs and values folded there are constants too), and keeps their
  // outputs as constants; Run skips those nodes.
  // `only`: those nodes alone (see FoldGraph).
  void FoldConstants(const absl::flat_hash_set<const ir::Node*>* only = nullptr);
  // `only`: fold these nodes alone (PlanFusion: deferred weights no packed
  // chain took); else every foldable node but the deferred ones.
  void FoldGraph(const ir::Graph& graph, Executor& executor,
                 const absl::flat_hash_set<const ir::Node*>* only = nullptr);
  // The nodes computing the float weights of a MatMul or Gather of
  // packed_weights_ (its codes unpacked and dequantized) are not folded but
  // deferred, so that the float weights (8 times the bytes of 4-bit codes)
  // are never all held. In cpu sessions that fuse, its packed kernel reads
  // the codes: PlanFusion skips those nodes, or folds them when the node
  // becomes no packed chain. Elsewhere (the reference backend) they run in
  // every run, each weight released once read (runs of a large model fit
  // in memory; a run computes its weights again). Not for cuda sessions or
  // observed runs (which see every weight as a folded value).
  void DeferPackedWeights();
  // Releases `v` when it is an initializer of the main graph that only
  // folded nodes read (runs that fold never read it again): its copy, and
  // the pages of the mapped model file that hold it. A run that recomputes
  // folded nodes converts it anew. FoldGraph calls it for the inputs of
  // each node it folds.
  void ReleaseFoldedSource(const ir::Value* v);
  // Drops folded value `v` (a node output) from constants_ once every node
  // reading it is folded: the intermediates of a folded chain (a 4-bit
  // weight's unpacked codes, their float copies...) are not held with its
  // result.
  void ReleaseFoldedValue(const ir::Value* v);
  // Shape computations of the main graph (cpu sessions, runs that feed no
  // initializer): the nodes whose outputs follow from the feeds' element
  // types and shapes and from constants alone (Shape of a value whose shape
  // follows from the feeds' shapes, and the arithmetic, Gather, Concat,
  // ConstantOfShape, Range ... on such values), found once. The first run
  // with given feed types and shapes keeps the values of theirs that other
  // nodes read (the frontier, at most kMaxShapeMemoBytes); later runs with
  // the same types and shapes start from those values and skip the nodes.
  struct ShapeMemo {
    bool analyzed = false;
    absl::flat_hash_set<const ir::Node*> nodes;
    absl::flat_hash_set<const ir::Value*> frontier;
    std::vector<std::pair<int32_t, std::vector<int64_t>>> signature;
    bool has_signature = false;
    bool complete = false;  // `values` holds the frontier for `signature`
    absl::flat_hash_map<const ir::Value*, RtValue> values;
  };
  void AnalyzeShapeComputations();

  // The cuda backend's device context (first: destroyed last).
  std::shared_ptr<cuda::Context> cuda_;
  io::LoadedModel loaded_;
  std::unique_ptr<ir::Model> model_;
  // ONNX Runtime contrib ops left as they are, with why (ops::ContribLowering::left).
  std::vector<std::string> contrib_left_;
  // MatMuls and Gathers the contrib lowering wrote for MatMulNBits and
  // GatherBlockQuantized (DeferPackedWeights, PlanFusion).
  std::vector<ops::ContribLowering::PackedWeights> packed_weights_;
  SessionOptions options_;
  std::unique_ptr<io::ExternalDataResolver> resolver_;
  absl::flat_hash_map<const ir::Value*, RtValue> constants_;
  // FoldConstants keeps the values it computes in constants_ (node outputs
  // there are folded values) and the nodes that computed them. Values
  // derived from initializers that are also graph inputs (IR < 4 models list
  // every initializer as an input) are folded too, but kernels do not treat
  // them as constant (only stable_folded_values_ are), and a Run that feeds
  // such an input runs every node (uses_feedable_folded_).
  absl::flat_hash_set<const ir::Value*> stable_folded_values_;
  absl::flat_hash_set<const ir::Node*> folded_nodes_;
  bool uses_feedable_folded_ = false;
  // DeferPackedWeights: each deferred MatMul with the nodes computing its
  // weights, and all those nodes.
  absl::flat_hash_map<const ir::Node*, std::vector<const ir::Node*>> deferred_weights_;
  absl::flat_hash_set<const ir::Node*> deferred_nodes_;
  // Initializers ReleaseFoldedSource dropped from constants_.
  absl::flat_hash_set<const ir::Value*> released_;
  // Every value of constants_: what kernels of non-strict runs treat as constant.
  absl::flat_hash_set<const ir::Value*> run_constants_;
  absl::flat_hash_map<const ir::Graph*, std::unique_ptr<GraphPlan>> plans_;
  // The plans with fused chains (non-strict runs) of the graphs that have any.
  std::vector<std::unique_ptr<FusionChain>> chains_;
  absl::flat_hash_map<const ir::Graph*, std::unique_ptr<GraphPlan>> fused_plans_;
  // DequantizeLinear nodes the fused plan skips: fused kernels read their
  // quantized inputs instead (FusionChain::bypass) and nothing else reads them.
  absl::flat_hash_set<const ir::Node*> elided_;
  absl::flat_hash_map<const ir::Node*, std::unique_ptr<Kernel>> kernels_[2];
  absl::flat_hash_map<const FusionChain*, std::unique_ptr<Kernel>> chain_kernels_;
  // Opset imports of graphs that are not part of the model (function bodies).
  absl::flat_hash_map<const ir::Graph*, std::vector<pb::OperatorSetIdProto>> body_opsets_;
  std::vector<std::unique_ptr<ir::Graph>> function_bodies_;
  // cuda sessions: the kernels of the main-graph nodes placed on the
  // device, constants copied there once (node-based map: pointers stay
  // valid while others are added), the plan, and the last run's copies.
  absl::flat_hash_map<const ir::Node*, std::unique_ptr<cuda::CudaKernel>> cuda_kernels_;
  std::unordered_map<const ir::Value*, RtValue> device_constants_;
  PlacementPlan placement_;
  absl::flat_hash_map<const FusionChain*, std::unique_ptr<cuda::CudaKernel>> device_chain_kernels_;
  std::unique_ptr<DeviceReplay> replay_;
  bool last_run_replayed_ = false;
  ShapeMemo shape_memo_;
  int64_t last_run_memoized_nodes_ = 0;
  int64_t last_run_joined_inputs_ = 0;
  CopyStats last_copies_;
};

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_SESSION_H_
