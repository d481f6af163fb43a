// Session: planning and execution.
#include "runner/session.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/ops/contrib_lowering.h"
#include "lib/ops/registry.h"
#include "lib/ops/type_string.h"
#include "runner/convert.h"
#include "runner/cpu/conv.h"
#include "runner/cpu/threads.h"
#include "runner/cpu/transformer.h"
#include "runner/cuda/cuda_backend.h"
#include "runner/device_plan.h"
#include "runner/float16_compute.h"
#include "runner/function_kernel.h"

namespace onnxkit::runner {

namespace {

using Clock = std::chrono::steady_clock;

// Values of `graph`'s scope used by `node` directly or inside its subgraphs.
void CollectUses(const ir::Node& node, const ir::Graph& graph, std::vector<const ir::Value*>* out) {
  for (const ir::Value* v : node.inputs()) {
    if (v != nullptr && v->graph() == &graph) out->push_back(v);
  }
  node.ForEachSubgraph([&](ir::Graph* sub) {
    for (const ir::Node* inner : sub->nodes()) CollectUses(*inner, graph, out);
    for (const ir::Value* o : sub->outputs()) {
      if (o->graph() == &graph) out->push_back(o);
    }
  });
}

}  // namespace

// The most bytes of shape computations' values a session keeps (ShapeMemo).
constexpr int64_t kMaxShapeMemoBytes = int64_t{64} << 20;

// One Run: frames of values per executing graph, outer scopes by parent.
class Session::Executor : public SubgraphRunner {
 public:
  struct Frame {
    const Frame* parent = nullptr;
    absl::flat_hash_map<const ir::Value*, RtValue> values;
    // Per join of the frame's plan (GraphPlan::joins): the buffer its
    // inputs are being written in, until the Concat takes it.
    std::vector<std::shared_ptr<Buffer>> joined;
  };

  Executor(Session* session, Clock::time_point deadline, bool has_deadline)
      : session_(session), deadline_(deadline), has_deadline_(has_deadline) {}

  const RtValue* Lookup(const Frame& frame, const ir::Value* v) const {
    for (const Frame* f = &frame; f != nullptr; f = f->parent) {
      auto it = f->values.find(v);
      if (it != f->values.end()) return &it->second;
    }
    auto c = session_->constants_.find(v);
    if (c != session_->constants_.end()) return &c->second;
    if (!session_->released_.contains(v)) return nullptr;
    // An initializer released after folding, read by a run that recomputes
    // folded nodes: converted again for this run.
    auto m = materialized_.find(v);
    if (m != materialized_.end()) return &m->second;
    absl::StatusOr<Tensor> t = TensorFromProto(*v->initializer(), session_->resolver_.get());
    if (!t.ok()) return nullptr;
    return &materialized_.emplace(v, RtValue::FromTensor(*std::move(t))).first->second;
  }

  absl::Status RunGraph(const ir::Graph& graph, Frame& frame, bool is_main) {
    const GraphPlan* plan = nullptr;
    if (!strict_) {
      auto fused = session_->fused_plans_.find(&graph);
      if (fused != session_->fused_plans_.end()) plan = fused->second.get();
    }
    if (plan == nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(plan, session_->PlanFor(graph));
    }
    for (size_t step = 0; step < plan->order.size(); ++step) {
      const ir::Node& node = *plan->order[step];
      const bool folded = use_folding_ && session_->folded_nodes_.contains(&node);
      const Place place{plan, &plan->placed[step], &frame, &joined_inputs_};
      const Place* placing = plan->placed[step].empty() ? nullptr : &place;
      if (is_main && skip_memoized_ && session_->shape_memo_.nodes.contains(&node)) {
        ++memoized_nodes_;  // its values read later are in the frame already
      } else if (const FusionChain* chain = plan->chain[step]; chain != nullptr) {
        ONNXKIT_RETURN_IF_ERROR_CTX(
            chain->kind == FusionKind::kDevice
                ? RunDeviceChain(*chain, frame)
                : RunChain(*chain, frame, &plan->conv_reads_later[step], placing),
            absl::StrCat("node ", ir::NodeLabel(chain->head()), " (run fused with the ",
                         chain->nodes.size() - 1, " nodes after it)"));
      } else if (!folded) {
        absl::Status status = is_main && device_ ? RunPlaced(node, frame, &plan->release_after[step])
                                                 : RunNode(node, frame, &plan->release_after[step],
                                                           &plan->conv_reads_later[step], placing);
        // Past the nesting limit only the outermost node is named (the path
        // through every level would repeat the same nodes over and over).
        if (!status.ok() && nesting_exceeded_ && !is_main) return status;
        ONNXKIT_RETURN_IF_ERROR_CTX(status, absl::StrCat("node ", ir::NodeLabel(node)));
      }
      if (placing != nullptr) {
        for (const GraphPlan::PlacedOutput& p : plan->placed[step]) {
          if (p.part >= 0) continue;
          const GraphPlan::Join& join = plan->joins[static_cast<size_t>(p.join)];
          LearnJoin(join, node, frame);
          if (static_cast<size_t>(p.join) < frame.joined.size())
            frame.joined[static_cast<size_t>(p.join)].reset();
        }
      }
      if (is_main && keeping_memo_ && session_->shape_memo_.nodes.contains(&node)) KeepForMemo(node, frame);
      if ((is_main || ObservesBodies()) && session_->options_.observer) {
        for (const ir::Value* out : node.outputs()) {
          if (out == nullptr || out->name().empty()) continue;
          if (device_ && is_main) ONNXKIT_RETURN_IF_ERROR(OnHost(frame, out));
          const RtValue* value = Lookup(frame, out);
          if (value != nullptr) ONNXKIT_RETURN_IF_ERROR(session_->options_.observer(*out, *value));
        }
      }
      for (const ir::Value* v : plan->release_after[step]) {
        frame.values.erase(v);
        if (is_main) mirror_.erase(v);
      }
    }
    return absl::OkStatus();
  }

  // Where a step's outputs placed in joins go (KernelContext::set_place_output).
  struct Place {
    const GraphPlan* plan;
    const std::vector<GraphPlan::PlacedOutput>* placed;
    Frame* frame;
    int64_t* handed;  // counts the inputs placed

    static std::shared_ptr<Buffer> Ask(const void* state, int i, int32_t dtype,
                                       const std::vector<int64_t>& shape) {
      const Place& p = *static_cast<const Place*>(state);
      for (const GraphPlan::PlacedOutput& po : *p.placed) {
        if (po.output != i) continue;
        const size_t j = static_cast<size_t>(po.join);
        const GraphPlan::Join& join = p.plan->joins[j];
        if (join.dtype == 0 || dtype != join.dtype) return nullptr;
        std::vector<std::shared_ptr<Buffer>>& joined = p.frame->joined;
        if (joined.size() <= j) joined.resize(p.plan->joins.size());
        if (po.part < 0) {  // the Concat's result: the buffer its inputs were written in
          if (shape != join.shape) return nullptr;
          if (joined[j] == nullptr && join.parent >= 0) JoinBuffer(p, j);
          return std::move(joined[j]);
        }
        const size_t part = static_cast<size_t>(po.part);
        if (shape != join.part_shapes[part]) return nullptr;
        if (JoinBuffer(p, j) == nullptr) return nullptr;
        ++*p.handed;
        const size_t end = part + 1 < join.offsets.size() ? join.offsets[part + 1] : join.bytes;
        return Buffer::View(joined[j], static_cast<char*>(joined[j]->data()) + join.offsets[part],
                            end - join.offsets[part]);
      }
      return nullptr;
    }

    // Whether join `j`'s result fits its place in the join that takes it as
    // an input (GraphPlan::Join::parent), as both last ran.
    static bool FitsParent(const GraphPlan& plan, size_t j) {
      const GraphPlan::Join& join = plan.joins[j];
      if (join.parent < 0 || join.dtype == 0) return false;
      const GraphPlan::Join& outer = plan.joins[static_cast<size_t>(join.parent)];
      const size_t part = static_cast<size_t>(join.parent_part);
      if (outer.dtype != join.dtype || part >= outer.part_shapes.size() ||
          outer.part_shapes[part] != join.shape)
        return false;
      const size_t end = part + 1 < outer.offsets.size() ? outer.offsets[part + 1] : outer.bytes;
      return end - outer.offsets[part] == join.bytes;
    }

    // The buffer join `j`'s inputs are written in (made on first use): a
    // view of its place in the enclosing joins where it fits them, else a
    // buffer of its own. Null when it cannot be allocated.
    static const std::shared_ptr<Buffer>& JoinBuffer(const Place& p, size_t j) {
      std::vector<std::shared_ptr<Buffer>>& joined = p.frame->joined;
      if (joined[j] != nullptr) return joined[j];
      // Up the enclosing joins to the first that has its buffer or has none
      // enclosing it (iterative: a chain of nested Concats may be long).
      std::vector<size_t> path = {j};
      while (joined[path.back()] == nullptr && FitsParent(*p.plan, path.back()))
        path.push_back(static_cast<size_t>(p.plan->joins[path.back()].parent));
      const size_t top = path.back();
      if (joined[top] == nullptr)
        joined[top] = Buffer::Allocate(p.plan->joins[top].bytes, /*zero_fill=*/false);
      if (joined[top] == nullptr) return joined[top];
      for (size_t k = path.size() - 1; k > 0; --k) {
        const GraphPlan::Join& inner = p.plan->joins[path[k - 1]];
        const GraphPlan::Join& outer = p.plan->joins[path[k]];
        char* base = static_cast<char*>(joined[path[k]]->data());
        joined[path[k - 1]] = Buffer::View(
            joined[path[k]], base + outer.offsets[static_cast<size_t>(inner.parent_part)], inner.bytes);
      }
      return joined[j];
    }
  };

  // Learns the types and shapes of a join from its Concat's run: joinable
  // when the inputs and the result are tensors of one fixed-size type of
  // whole bytes, the result's dimensions before the axis are all 1 (each
  // input a contiguous range of it), and it holds kMinJoinBytes or more.
  void LearnJoin(const GraphPlan::Join& join, const ir::Node& concat, const Frame& frame) {
    constexpr size_t kMinJoinBytes = 16384;  // smaller joins copy in less time than views cost
    join.dtype = 0;
    const RtValue* out = Lookup(frame, concat.output(0));
    auto opset = session_->OpsetOf(concat);
    if (out == nullptr || !out->is_tensor() || !opset.ok() || *opset < 4) return;
    const Tensor& y = out->tensor();
    const int bits = y.is_string() ? 0 : DataTypeBits(y.dtype());
    if (bits <= 0 || bits % 8 != 0 || y.rank() < 1 || y.nbytes() < kMinJoinBytes) return;
    const int64_t axis = join.axis < 0 ? join.axis + y.rank() : join.axis;
    if (axis < 0 || axis >= y.rank()) return;
    for (int d = 0; d < axis; ++d) {
      if (y.dim(d) != 1) return;
    }
    join.part_shapes.resize(static_cast<size_t>(concat.num_inputs()));
    join.offsets.resize(static_cast<size_t>(concat.num_inputs()));
    size_t at = 0;
    for (int k = 0; k < concat.num_inputs(); ++k) {
      const RtValue* in = concat.input(k) != nullptr ? Lookup(frame, concat.input(k)) : nullptr;
      if (in == nullptr || !in->is_tensor() || in->tensor().dtype() != y.dtype()) return;
      join.part_shapes[static_cast<size_t>(k)] = in->tensor().shape();
      join.offsets[static_cast<size_t>(k)] = at;
      at += in->tensor().nbytes();
    }
    if (at != y.nbytes()) return;
    join.shape = y.shape();
    join.bytes = y.nbytes();
    join.dtype = y.dtype();
  }

  // Keeps the frontier values of shape-computation node `node`
  // (Session::ShapeMemo). A value that is not a tensor, or one past
  // kMaxShapeMemoBytes in all, ends the keeping at once (nothing held
  // longer than the run would hold it); the signature is then never kept.
  void KeepForMemo(const ir::Node& node, Frame& frame) {
    ShapeMemo& memo = session_->shape_memo_;
    for (const ir::Value* out : node.outputs()) {
      if (out == nullptr || !memo.frontier.contains(out)) continue;
      const RtValue* value = Lookup(frame, out);
      if (value == nullptr) continue;
      if (value->is_tensor()) kept_bytes_ += static_cast<int64_t>(value->tensor().nbytes());
      if (!value->is_tensor() || kept_bytes_ > kMaxShapeMemoBytes) {
        keeping_memo_ = false;
        memo_abandoned_ = true;
        memo.values.clear();
        return;
      }
      memo.values[out] = *value;
    }
  }

  // Brings value `v` of the main frame to the host: the frame then holds
  // the host copy and mirror_ the device one. Constants are host already.
  absl::Status OnHost(Frame& frame, const ir::Value* v) {
    auto it = frame.values.find(v);
    if (it == frame.values.end() || !OnDevice(it->second)) return absl::OkStatus();
    auto m = mirror_.find(v);
    if (m != mirror_.end() && !OnDevice(m->second)) {
      std::swap(it->second, m->second);
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(RtValue host, Copy(it->second, /*to_device=*/false));
    mirror_[v] = std::move(it->second);
    it->second = std::move(host);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<RtValue>> RunSubgraph(const ir::Graph& graph,
                                                   std::vector<RtValue> inputs) override {
    // Also checked here, not only before each node: a Loop whose body has no
    // nodes would otherwise spin past the timeout.
    ONNXKIT_RETURN_IF_ERROR(CheckDeadline());
    // Subgraphs and function calls nest at most kMaxNesting deep (a function
    // that calls itself would otherwise exhaust the stack).
    if (nesting_ >= kMaxNesting) {
      nesting_exceeded_ = true;
      return absl::InvalidArgumentError(absl::StrCat("subgraphs and function calls nest deeper than ",
                                                     kMaxNesting, " (a function that calls itself?)"));
    }
    ++nesting_;
    absl::StatusOr<std::vector<RtValue>> result = RunSubgraphAtDepth(graph, std::move(inputs));
    --nesting_;
    return result;
  }

  absl::StatusOr<std::vector<RtValue>> RunSubgraphAtDepth(const ir::Graph& graph,
                                                          std::vector<RtValue> inputs) {
    if (inputs.size() != graph.inputs().size()) {
      return absl::InvalidArgumentError(absl::StrCat("subgraph '", graph.name(), "' takes ",
                                                     graph.inputs().size(), " inputs, got ", inputs.size()));
    }
    Frame child;
    child.parent = current_;
    for (size_t i = 0; i < inputs.size(); ++i) child.values[graph.inputs()[i]] = std::move(inputs[i]);
    if (ObservesBodies() && session_->options_.observer) {
      for (const ir::Value* in : graph.inputs()) {
        if (in == nullptr || in->name().empty()) continue;
        const RtValue& bound = child.values[in];
        if (bound.kind() == RtValue::Kind::kEmpty) continue;  // nothing bound
        ONNXKIT_RETURN_IF_ERROR(session_->options_.observer(*in, bound));
      }
    }
    const Frame* saved = current_;
    absl::Status status = RunGraph(graph, child, /*is_main=*/false);
    current_ = saved;
    ONNXKIT_RETURN_IF_ERROR(status);
    std::vector<RtValue> outputs;
    for (const ir::Value* o : graph.outputs()) {
      const RtValue* v = Lookup(child, o);
      if (v == nullptr) {
        return absl::InternalError(absl::StrCat("subgraph output '", o->name(), "' was not computed"));
      }
      outputs.push_back(*v);
    }
    return outputs;
  }

  // Whether values inside the body now running go to the observer:
  // If/Loop/Scan bodies on the host, not function bodies.
  bool ObservesBodies() const { return session_->options_.observe_subgraphs && !device_ && isolated_ == 0; }

  absl::StatusOr<std::vector<RtValue>> RunIsolated(const ir::Graph& graph,
                                                   std::vector<RtValue> inputs) override {
    const Frame* saved = current_;
    current_ = nullptr;
    ++isolated_;
    auto result = RunSubgraph(graph, std::move(inputs));
    --isolated_;
    current_ = saved;
    return result;
  }

 private:
  friend class Session;
  absl::Status CheckDeadline() const {
    if (has_deadline_ && Clock::now() > deadline_) {
      return absl::DeadlineExceededError(
          absl::StrCat("timeout: the run took longer than ", session_->options_.timeout_seconds, " s"));
    }
    return absl::OkStatus();
  }

  static bool OnDevice(const RtValue& value) { return value.is_tensor() && value.tensor().on_device(); }

  // Copies a tensor value to the device or the host, counting the copy for
  // the running node and the run.
  // `replayed`: an upload a recorded run would make again (not a feed or
  // a constant, which a recorded run finds on the device).
  absl::StatusOr<RtValue> Copy(const RtValue& value, bool to_device, bool replayed = true) {
    if (!value.is_tensor() || value.tensor().is_string()) {
      return absl::InternalError(absl::StrCat("only numeric tensors can move ", to_device ? "to" : "from",
                                              " the device, got ", SummarizeKind(value)));
    }
    if (tracking_ && !to_device && !reading_outputs_) replayable_ = false;
    if (tracking_ && to_device && !replayed)
      excluded_upload_bytes_ += static_cast<int64_t>(value.tensor().nbytes() + 64);
    Clock::time_point start = Clock::now();
    cuda::Context& context = *session_->cuda_;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor t, to_device ? cuda::ToDevice(context, value.tensor())
                                                 : cuda::ToHost(context, value.tensor()));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (CopyStats* stats : {&node_copies_, &session_->last_copies_}) {
      stats->count += 1;
      stats->bytes += static_cast<int64_t>(t.nbytes());
      stats->seconds += seconds;
    }
    return RtValue::FromTensor(std::move(t));
  }

  static std::string SummarizeKind(const RtValue& value) {
    return value.is_tensor() ? "a string tensor" : "a non-tensor value";
  }

  // Value `v` on the device: the frame's value, its device copy, or a new
  // copy (of a constant: kept by the session for every later run).
  absl::StatusOr<const RtValue*> DeviceValue(Frame& frame, const ir::Value* v) {
    auto it = frame.values.find(v);
    if (it != frame.values.end()) {
      if (OnDevice(it->second)) return &it->second;
      auto m = mirror_.find(v);
      if (m != mirror_.end() && OnDevice(m->second)) return &m->second;
      ONNXKIT_ASSIGN_OR_RETURN(RtValue device,
                               Copy(it->second, /*to_device=*/true, v->kind() != ir::ValueKind::kGraphInput));
      return &(mirror_[v] = std::move(device));
    }
    auto c = session_->device_constants_.find(v);
    if (c != session_->device_constants_.end()) return &c->second;
    const RtValue* host = Lookup(frame, v);
    if (host == nullptr) return absl::InternalError(absl::StrCat("input '", v->name(), "' has no value"));
    // A constant copied up while recording would live in the graph's memory.
    if (cuda::Capturing(*session_->cuda_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("constant '", v->name(), "' first copied up while recording"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(RtValue device, Copy(*host, /*to_device=*/true, /*replayed=*/false));
    return &(session_->device_constants_[v] = std::move(device));
  }

  // Runs a main-graph node of a cuda session where the plan put it: on the
  // device when it has a CUDA kernel that accepts its inputs, else on the
  // host with every value it reads (its bodies' included) brought there.
  absl::Status RunPlaced(const ir::Node& node, Frame& frame, const std::vector<const ir::Value*>* releasing) {
    node_copies_ = {};
    Clock::time_point start = Clock::now();
    Backend backend = session_->HostBackend();
    auto it = session_->cuda_kernels_.find(&node);
    bool ran = false;
    if (it != session_->cuda_kernels_.end() && !IsHostShapeMath(node, frame)) {
      std::vector<const RtValue*> inputs;
      for (const ir::Value* v : node.inputs()) inputs.push_back(v == nullptr ? nullptr : Lookup(frame, v));
      std::vector<RtValue> unused(node.outputs().size());
      ONNXKIT_ASSIGN_OR_RETURN(int64_t opset, session_->OpsetOf(node));
      KernelContext probe(node, opset, inputs, &unused, this);
      if (it->second->Accepts(probe)) {
        ONNXKIT_RETURN_IF_ERROR(CheckDeadline());
        for (int i = 0; i < node.num_inputs(); ++i) {
          const ir::Value* v = node.input(i);
          if (v == nullptr) continue;
          const cuda::CudaKernel::Side side = it->second->InputSide(i);
          if (side == cuda::CudaKernel::Side::kDevice) {
            ONNXKIT_ASSIGN_OR_RETURN(inputs[static_cast<size_t>(i)], DeviceValue(frame, v));
          } else if (side == cuda::CudaKernel::Side::kHost) {
            if (tracking_ && dependent_.contains(v)) replayable_ = false;
            ONNXKIT_RETURN_IF_ERROR(OnHost(frame, v));
            inputs[static_cast<size_t>(i)] = Lookup(frame, v);
            if (inputs[static_cast<size_t>(i)] == nullptr) {
              return absl::InternalError(absl::StrCat("input '", v->name(), "' has no value"));
            }
          }
        }
        ONNXKIT_RETURN_IF_ERROR(RunKernel(*it->second, node, node, std::move(inputs), frame, {}, /*device=*/true));
        backend = Backend::kCuda;
        ran = true;
      }
    }
    std::vector<const ir::Value*> uses;
    if (!ran || tracking_) CollectUses(node, *node.graph(), &uses);
    bool depends = false;
    if (tracking_) {
      for (const ir::Value* v : uses) depends = depends || dependent_.contains(v);
    }
    // Shape and Size read only the shape, which a replay keeps.
    const bool shape_only = node.op_type() == "Shape" || node.op_type() == "Size";
    if (!ran) {
      // Host code reading values computed from the inputs' contents: a
      // replay would not read them again.
      if (depends && !shape_only) replayable_ = false;
      for (const ir::Value* v : uses) ONNXKIT_RETURN_IF_ERROR(OnHost(frame, v));
      ONNXKIT_RETURN_IF_ERROR(RunNode(node, frame, releasing));
    }
    if (depends && !shape_only) {
      for (const ir::Value* out : node.outputs()) {
        if (out != nullptr) dependent_.insert(out);
      }
    }
    if (session_->options_.on_node_run) {
      NodeRun run;
      run.backend = backend;
      run.copies = node_copies_;
      run.seconds = std::chrono::duration<double>(Clock::now() - start).count() - node_copies_.seconds;
      session_->options_.on_node_run(node, run);
    }
    return absl::OkStatus();
  }

  // Runs a chain of element-wise nodes of a cuda session as one device
  // kernel, or, when the kernel declines its inputs, node by node.
  absl::Status RunDeviceChain(const FusionChain& chain, Frame& frame) {
    cuda::CudaKernel& kernel = *session_->device_chain_kernels_.at(&chain);
    std::vector<const RtValue*> inputs;
    for (const ir::Value* v : chain.extra_inputs) {
      const RtValue* value = v != nullptr ? Lookup(frame, v) : nullptr;
      if (v != nullptr && value == nullptr) {
        return absl::InternalError(absl::StrCat("input '", v->name(), "' has no value"));
      }
      inputs.push_back(value);
    }
    ONNXKIT_ASSIGN_OR_RETURN(int64_t opset, session_->OpsetOf(chain.tail()));
    std::vector<RtValue> unused(1);
    KernelContext probe(chain.tail(), opset, inputs, &unused, this);
    if (!kernel.Accepts(probe)) {
      for (const ir::Node* node : chain.nodes) {
        ONNXKIT_RETURN_IF_ERROR_CTX(RunPlaced(*node, frame, nullptr),
                                    absl::StrCat("node ", ir::NodeLabel(*node)));
      }
      return absl::OkStatus();
    }
    ONNXKIT_RETURN_IF_ERROR(CheckDeadline());
    node_copies_ = {};
    Clock::time_point start = Clock::now();
    bool depends = false;
    for (size_t j = 0; j < chain.extra_inputs.size(); ++j) {
      const ir::Value* v = chain.extra_inputs[j];
      if (v == nullptr) continue;
      const bool dependent = tracking_ && dependent_.contains(v);
      depends = depends || dependent;
      if (kernel.InputSide(static_cast<int>(j)) == cuda::CudaKernel::Side::kHost) {
        if (dependent) replayable_ = false;
        ONNXKIT_RETURN_IF_ERROR(OnHost(frame, v));
        inputs[j] = Lookup(frame, v);
      } else {
        ONNXKIT_ASSIGN_OR_RETURN(inputs[j], DeviceValue(frame, v));
      }
    }
    ONNXKIT_RETURN_IF_ERROR(
        RunKernel(kernel, chain.tail(), chain.head(), std::move(inputs), frame, {}, /*device=*/true));
    if (depends) dependent_.insert(chain.tail().output(0));
    if (session_->options_.on_node_run) {
      const double seconds =
          std::chrono::duration<double>(Clock::now() - start).count() - node_copies_.seconds;
      for (const ir::Node* node : chain.nodes) {
        NodeRun run;
        run.backend = Backend::kCuda;
        if (node == &chain.tail()) {
          run.copies = node_copies_;
          run.seconds = seconds;
        }
        session_->options_.on_node_run(*node, run);
      }
    }
    return absl::OkStatus();
  }

  // Shape arithmetic of a cuda session stays on the host: a node whose
  // inputs are all small integer (or bool) tensors already on the host runs
  // there (its result is read by host code, Reshape's shape or Slice's
  // bounds, far more often than by a device kernel), with no copies.
  bool IsHostShapeMath(const ir::Node& node, Frame& frame) {
    constexpr int64_t kMaxElements = 64;
    bool any = false;
    for (const ir::Value* v : node.inputs()) {
      if (v == nullptr) continue;
      const RtValue* value = Lookup(frame, v);
      if (value == nullptr || !value->is_tensor() || OnDevice(*value)) return false;
      const Tensor& t = value->tensor();
      const int32_t dtype = t.dtype();
      const bool integer = dtype == 2 || dtype == 3 || dtype == 4 || dtype == 5 || dtype == 6 || dtype == 7 ||
                           dtype == 9 || dtype == 12 || dtype == 13;
      if (!integer || t.size() > kMaxElements) return false;
      any = true;
    }
    return any;
  }

  // Runs one node in `frame` (its outputs are added to it). `releasing`:
  // the values this step uses for the last time, if known; `conv_later`:
  // those a Conv of a later step reads (GraphPlan::conv_reads_later).
  absl::Status RunNode(const ir::Node& node, Frame& frame,
                       const std::vector<const ir::Value*>* releasing = nullptr,
                       const std::vector<const ir::Value*>* conv_later = nullptr,
                       const Place* place = nullptr) {
    ONNXKIT_RETURN_IF_ERROR(CheckDeadline());
    std::vector<const RtValue*> inputs;
    inputs.reserve(node.inputs().size());
    for (const ir::Value* v : node.inputs()) {
      if (v == nullptr) {
        inputs.push_back(nullptr);
        continue;
      }
      const RtValue* value = Lookup(frame, v);
      if (value == nullptr) {
        return absl::InternalError(absl::StrCat("input '", v->name(), "' has no value"));
      }
      inputs.push_back(value);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Kernel * kernel, session_->KernelFor(node, strict_));
    const ReadLater read_later{node.inputs().data(), node.inputs().size(), nullptr, &frame, conv_later};
    return RunKernel(*kernel, node, node, std::move(inputs), frame, ReusableInputs(node, frame, releasing),
                     /*device=*/false, conv_later != nullptr ? &read_later : nullptr, place);
  }

  // Which of a step's inputs (the graph values `of` them, null where
  // omitted; or those of the fused kernel of `chain`) a Conv of a later
  // step reads again (KernelContext::InputReadLater): values of `frame`
  // itself in `conv_later` (GraphPlan::conv_reads_later).
  struct ReadLater {
    ir::Value* const* of;
    size_t n;
    const FusionChain* chain;
    const Frame* frame;
    const std::vector<const ir::Value*>* conv_later;

    static bool Ask(const void* state, int i) {
      const ReadLater& r = *static_cast<const ReadLater*>(state);
      const ir::Value* v = r.chain != nullptr                       ? ChainInput(*r.chain, i)
                           : i >= 0 && static_cast<size_t>(i) < r.n ? r.of[i]
                                                                    : nullptr;
      return v != nullptr &&
             std::find(r.conv_later->begin(), r.conv_later->end(), v) != r.conv_later->end() &&
             r.frame->values.contains(v);
    }
  };

  // Which inputs of `node` a kernel may compute in place: tensors of this
  // frame used once by the node, for the last time, whose buffer nothing
  // else holds (not a view of the model file, a fed value the caller kept,
  // or a value another value shares). Empty when none.
  static std::vector<bool> ReusableInputs(const ir::Node& node, const Frame& frame,
                                          const std::vector<const ir::Value*>* releasing) {
    std::vector<bool> reusable;
    if (releasing == nullptr || releasing->empty()) return reusable;
    bool has_subgraph = false;
    node.ForEachSubgraph([&](ir::Graph*) { has_subgraph = true; });
    if (has_subgraph) return reusable;
    for (int i = 0; i < node.num_inputs(); ++i) {
      const ir::Value* v = node.input(i);
      if (v == nullptr || std::count(node.inputs().begin(), node.inputs().end(), v) != 1) continue;
      if (std::find(releasing->begin(), releasing->end(), v) == releasing->end()) continue;
      auto it = frame.values.find(v);
      if (it == frame.values.end() || !it->second.is_tensor()) continue;
      const std::shared_ptr<Buffer>& buffer = it->second.tensor().buffer();
      if (buffer == nullptr || !buffer->owned() || buffer.use_count() != 1) continue;
      if (reusable.empty()) reusable.assign(static_cast<size_t>(node.num_inputs()), false);
      reusable[static_cast<size_t>(i)] = true;
    }
    return reusable;
  }

  // The graph value input `i` of the fused kernel of `chain` reads (null:
  // none, or omitted).
  static const ir::Value* ChainInput(const FusionChain& chain, int i) {
    if (i < 0) return nullptr;
    if (i >= chain.num_inputs) {
      const size_t e = static_cast<size_t>(i - chain.num_inputs);
      return e < chain.extra_inputs.size() ? chain.extra_inputs[e] : nullptr;
    }
    for (size_t k = 0; k < chain.nodes.size(); ++k) {
      const int j = i - chain.input_offset[k];
      if (j >= 0 && j < chain.nodes[k]->num_inputs() && j != chain.chained_input[k] &&
          j != chain.InnerInput(k))
        return chain.nodes[k]->input(j);
    }
    return nullptr;
  }

  // Runs a fused chain: its kernel takes the inputs of every node of the
  // chain and produces the last node's outputs.
  absl::Status RunChain(const FusionChain& chain, Frame& frame,
                        const std::vector<const ir::Value*>* conv_later = nullptr,
                        const Place* place = nullptr) {
    ONNXKIT_RETURN_IF_ERROR(CheckDeadline());
    std::vector<const RtValue*> inputs(static_cast<size_t>(chain.num_inputs), nullptr);
    for (size_t k = 0; k < chain.nodes.size(); ++k) {
      const ir::Node& node = *chain.nodes[k];
      for (int j = 0; j < node.num_inputs(); ++j) {
        const ir::Value* v = node.input(j);
        if (v == nullptr || j == chain.chained_input[k] || j == chain.InnerInput(k)) continue;
        const RtValue* value = Lookup(frame, v);
        if (value == nullptr && v->producer() != nullptr && session_->elided_.contains(v->producer())) continue;
        if (value == nullptr)
          return absl::InternalError(absl::StrCat("input '", v->name(), "' has no value"));
        inputs[static_cast<size_t>(chain.input_offset[k] + j)] = value;
      }
    }
    for (const ir::Value* v : chain.extra_inputs) {
      const RtValue* value = v != nullptr ? Lookup(frame, v) : nullptr;
      if (v != nullptr && value == nullptr)
        return absl::InternalError(absl::StrCat("input '", v->name(), "' has no value"));
      inputs.push_back(value);
    }
    ONNXKIT_ASSIGN_OR_RETURN(Kernel * kernel, session_->ChainKernelFor(chain));
    const ReadLater read_later{nullptr, 0, &chain, &frame, conv_later};
    return RunKernel(*kernel, chain.tail(), chain.head(), std::move(inputs), frame, {}, /*device=*/false,
                     conv_later != nullptr ? &read_later : nullptr, place);
  }

  // True when every input of the node is a tensor and together they hold
  // fewer than 16384 elements (64 KiB of floats): element-wise work on them
  // takes a few microseconds, about what a fork and join of the OpenMP pool
  // costs. Inputs include weights, so small convolutions and products with
  // large weights count as large.
  static bool SmallWork(const KernelContext& ctx) {
    constexpr int64_t kSmallElements = 16384;
    int64_t total = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const RtValue* v = ctx.Value(i);
      if (v == nullptr) continue;
      if (!v->is_tensor()) return false;
      total += v->tensor().size();
      if (total >= kSmallElements) return false;
    }
    return true;
  }

  // Runs `kernel` as `node` (whose outputs it produces into `frame`),
  // reporting its time under `timed`.
  // `device`: a CUDA kernel, waited for when its time is measured.
  absl::Status RunKernel(Kernel& kernel, const ir::Node& node, const ir::Node& timed,
                         std::vector<const RtValue*> inputs, Frame& frame, std::vector<bool> reusable = {},
                         bool device = false, const ReadLater* read_later = nullptr,
                         const Place* place = nullptr) {
    std::vector<RtValue> outputs(node.outputs().size());
    ONNXKIT_ASSIGN_OR_RETURN(int64_t opset, session_->OpsetOf(node));
    KernelContext ctx(node, opset, std::move(inputs), &outputs, this);
    ctx.set_reusable_inputs(std::move(reusable));
    if (read_later != nullptr) ctx.set_read_later(&ReadLater::Ask, read_later);
    if (place != nullptr) ctx.set_place_output(&Place::Ask, place);
    current_ = &frame;
    const bool timing = static_cast<bool>(session_->options_.on_node_done);
    Clock::time_point start = timing ? Clock::now() : Clock::time_point();
    // The time of nodes this kernel runs inside (subgraph and function
    // bodies) is theirs, not its own.
    if (timing) inner_seconds_.push_back(0);
    // Small nodes run on one thread: waking the others costs more than
    // their work (each node sets its own width, so the nodes of a subgraph
    // or function run by a small node decide for themselves).
    std::optional<cpu::ThreadsScope> width;
    if (!device && session_->options_.threads > 1 && session_->HostBackend() == Backend::kCpu) {
      width.emplace(SmallWork(ctx) ? 1 : session_->options_.threads);
    }
    absl::Status status = kernel.Run(ctx);
    if (status.ok() && device && (timing || session_->options_.on_node_run)) {
      status = cuda::Synchronize(*session_->cuda_);
    }
    if (timing) {
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      double inner = inner_seconds_.back();
      inner_seconds_.pop_back();
      if (!inner_seconds_.empty()) inner_seconds_.back() += seconds;
      if (status.ok()) session_->options_.on_node_done(timed, std::max(0.0, seconds - inner));
    }
    ONNXKIT_RETURN_IF_ERROR(status);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const ir::Value* out = node.output(static_cast<int>(i));
      if (out == nullptr || out->name().empty()) continue;
      if (!outputs[i].defined()) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", i, " ('", out->name(), "') is not produced by this op or by its kernel"));
      }
      frame.values[out] = std::move(outputs[i]);
    }
    return absl::OkStatus();
  }

  static constexpr int kMaxNesting = 128;
  int nesting_ = 0;
  // Function bodies being run (their names are local to the function:
  // observe_subgraphs does not reach them).
  int isolated_ = 0;
  // Per running kernel (outermost first), the seconds of the nodes run
  // inside it so far (profiling only).
  std::vector<double> inner_seconds_;
  bool nesting_exceeded_ = false;
  // Released initializers converted again in this run (node-based: the
  // pointers Lookup returns stay valid).
  mutable std::unordered_map<const ir::Value*, RtValue> materialized_;
  Session* session_;
  // Strict runs feed an initializer: they use the plain plan and kernels
  // that treat only unchangeable values as constant.
  bool strict_ = false;
  bool use_folding_ = true;
  // The main graph runs placed (cuda sessions): mirror_ holds the copy on
  // the other side of main-frame values that crossed a boundary.
  bool device_ = false;
  std::unordered_map<const ir::Value*, RtValue> mirror_;
  // Watching a cuda run for recording (Session::Run): whether it stays
  // replayable, the values computed from the inputs' contents, the bytes of
  // feeds and constants it copied up, and whether the copies made now bring
  // the outputs back.
  // Shape computations (Session::ShapeMemo): this run keeps their frontier
  // values, or skips them (the values are in the main frame from the start).
  bool keeping_memo_ = false;
  bool memo_abandoned_ = false;
  int64_t kept_bytes_ = 0;
  bool skip_memoized_ = false;
  int64_t memoized_nodes_ = 0;
  // Concat inputs written in place in this run (GraphPlan::joins).
  int64_t joined_inputs_ = 0;
  bool tracking_ = false;
  bool replayable_ = true;
  bool reading_outputs_ = false;
  absl::flat_hash_set<const ir::Value*> dependent_;
  int64_t excluded_upload_bytes_ = 0;
  CopyStats node_copies_;
  Clock::time_point deadline_;
  bool has_deadline_;
  const Frame* current_ = nullptr;
};

Session::~Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Create(io::LoadedModel loaded, SessionOptions options) {
  auto session = std::unique_ptr<Session>(new Session());
  session->options_ = std::move(options);
  if (session->options_.backend == Backend::kCuda) {
    // Before anything else: without a device nothing else happens.
    ONNXKIT_RETURN_IF_ERROR(cuda::CheckDevice(session->options_.device));
  }
  if (session->HostBackend() == Backend::kCpu) cpu::SetThreads(session->options_.threads);
  session->resolver_ = std::make_unique<io::ExternalDataResolver>(loaded.base_dir);
  pb::ModelProto proto = std::move(loaded.proto);
  // Tensors of node attributes (a Constant's value, ...) stored as external
  // data: read now, kernels take attribute tensors as they are.
  ONNXKIT_RETURN_IF_ERROR(io::InlineExternalTensors(proto, session->resolver_.get(), false).status());
  session->loaded_ = std::move(loaded);
  ONNXKIT_ASSIGN_OR_RETURN(session->model_, ir::FromProto(std::move(proto)));
  if (ops::HasContribNodes(*session->model_)) {
    // ONNX Runtime's contrib ops run as the standard ops they stand for.
    ONNXKIT_ASSIGN_OR_RETURN(ops::ContribLowering lowering, ops::LowerContribOps(*session->model_));
    session->contrib_left_ = std::move(lowering.left);
    session->packed_weights_ = std::move(lowering.packed);
  }
  if (session->options_.backend == Backend::kCpu && session->options_.fuse && !session->options_.observer &&
      MayHoldFloat16(*session->model_)) {
    // float16 Conv, MatMul, arithmetic... on the float32 kernels, rounded
    // to float16 after each node, instead of the reference kernels.
    ONNXKIT_RETURN_IF_ERROR(ComputeFloat16InFloat32(*session->model_).status());
  }
  if (session->options_.backend == Backend::kCpu && session->options_.fuse && !session->options_.observer &&
      cpu::QuantizedChainsRunInt8()) {
    // QOperator QLinearConv / QLinearMatMul as the QDQ pattern the int8
    // chains take (they then run channels-last with their neighbours).
    const int64_t opset = session->model_->OpsetVersion("").value_or(0);
    absl::Status status = absl::OkStatus();
    ir::ForEachGraph(*session->model_, [&](ir::Graph& g) {
      if (status.ok()) status = ExpandQLinearOps(g, opset).status();
    });
    ONNXKIT_RETURN_IF_ERROR(status);
  }
  if (session->options_.rewrite && !session->options_.observer) {
    ONNXKIT_RETURN_IF_ERROR(session->options_.rewrite(session->model_));
  }
  absl::Status status = absl::OkStatus();
  ir::ForEachGraph(*session->model_, [&](ir::Graph& g) {
    if (status.ok()) status = session->CheckAttributes(g);
  });
  ONNXKIT_RETURN_IF_ERROR(status);
  ir::ForEachGraph(*session->model_, [&](ir::Graph& g) {
    if (status.ok()) status = session->PrepareConstants(g);
  });
  ONNXKIT_RETURN_IF_ERROR(status);
  ONNXKIT_RETURN_IF_ERROR(session->PlanFor(session->model_->graph()).status());
  session->DeferPackedWeights();
  session->FoldConstants();
  for (const auto& [value, v] : session->constants_) session->run_constants_.insert(value);
  session->PlanFusion();
  if (session->options_.backend == Backend::kCuda) ONNXKIT_RETURN_IF_ERROR(session->PlanDevice());
  return session;
}

Backend Session::HostBackend() const {
  return options_.backend == Backend::kCuda ? Backend::kCpu : options_.backend;
}

KernelInfo Session::InfoFor(int64_t opset) const {
  KernelInfo info{opset, options_.threads};
  info.bf16 = options_.bf16 && options_.backend == Backend::kCpu && cpu::Bf16Supported();
  return info;
}

absl::Status Session::PlanDevice() {
  ONNXKIT_ASSIGN_OR_RETURN(
      cuda_, cuda::CreateContext({options_.device, options_.allow_tf32, options_.cuda_experimental}));
  ONNXKIT_ASSIGN_OR_RETURN(const GraphPlan* plan, PlanFor(model_->graph()));
  for (const ir::Node* node : plan->order) {
    if (folded_nodes_.contains(node)) continue;
    ONNXKIT_ASSIGN_OR_RETURN(int64_t opset, OpsetOf(*node));
    auto kernel = cuda::MakeKernel(cuda_, *node, KernelInfo{opset, options_.threads});
    if (!kernel.ok()) return AnnotateStatus(kernel.status(), absl::StrCat("node ", ir::NodeLabel(*node)));
    if (*kernel != nullptr) cuda_kernels_[node] = *std::move(kernel);
  }
  placement_ = PlanPlacement(model_->graph(), plan->order,
                             [&](const ir::Node& node) { return cuda_kernels_.contains(&node); });
  if (options_.fuse && !options_.observer) PlanDeviceChains(plan->order);
  return absl::OkStatus();
}

void Session::PlanDeviceChains(const std::vector<ir::Node*>& order) {
  DevicePlanHooks hooks;
  hooks.on_device = [&](const ir::Node& n) {
    return !folded_nodes_.contains(&n) && cuda_kernels_.contains(&n);
  };
  hooks.constant = [&](const ir::Value& v) -> const Tensor* {
    if (!v.IsConstant() && !run_constants_.contains(&v)) return nullptr;
    auto it = constants_.find(&v);
    return it != constants_.end() && it->second.is_tensor() ? &it->second.tensor() : nullptr;
  };
  hooks.chainable = [](const ir::Node& n) { return cuda::ChainableOp(n); };
  std::vector<std::unique_ptr<cuda::CudaKernel>> kernels;
  hooks.make = [&](const DeviceGroup& g) {
    absl::StatusOr<std::unique_ptr<cuda::CudaKernel>> kernel = std::unique_ptr<cuda::CudaKernel>();
    switch (g.kind) {
      case DeviceGroupKind::kConv:
        kernel = cuda::MakeConvChain(cuda_, *g.head, g.norm, g.elementwise, g.extra);
        break;
      case DeviceGroupKind::kMatMulBias:
        kernel = cuda::MakeMatMulBias(cuda_, *g.head, *g.bias_add, g.residual_add);
        break;
      case DeviceGroupKind::kStridedMatMul:
        kernel = cuda::MakeStridedMatMul(cuda_, g.transpose_a, g.transpose_b, *g.head, g.transpose_y);
        break;
      case DeviceGroupKind::kSoftmax: {
        absl::StatusOr<int64_t> opset = OpsetOf(*g.softmax);
        if (opset.ok()) kernel = cuda::MakeSoftmaxChain(cuda_, g.elementwise, *g.softmax, *opset, g.inputs);
        break;
      }
      case DeviceGroupKind::kElementwise:
        kernel = cuda::MakeElementwiseChain(cuda_, g.elementwise, g.inputs);
        break;
    }
    if (!kernel.ok() || *kernel == nullptr) return false;
    kernels.push_back(*std::move(kernel));
    return true;
  };
  // cuda::kMaxChainOps and kMaxChainInputs.
  std::vector<DeviceGroup> groups = PlanDeviceGroups(order, hooks, options_.cuda_experimental, 8, 8);
  absl::flat_hash_map<const ir::Node*, const FusionChain*> by_tail;
  for (size_t i = 0; i < groups.size(); ++i) {
    auto chain = std::make_unique<FusionChain>();
    chain->kind = FusionKind::kDevice;
    chain->nodes = std::move(groups[i].nodes);
    chain->extra_inputs = std::move(groups[i].inputs);
    device_chain_kernels_[chain.get()] = std::move(kernels[i]);
    by_tail[chain->nodes.back()] = chain.get();
    chains_.push_back(std::move(chain));
  }
  if (!by_tail.empty()) fused_plans_[&model_->graph()] = BuildPlan(model_->graph(), order, by_tail, elided_);
}

namespace {

// Ops whose result may differ between runs (random) or that need more than
// their inputs (subgraphs): never folded.
bool Foldable(const ir::Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx" && node.domain() != "ai.onnx.ml") return false;
  static constexpr std::string_view kRandom[] = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Multinomial",  "Bernoulli",     "Dropout"};
  for (std::string_view op : kRandom) {
    if (node.op_type() == op) return false;
  }
  for (const ir::Attribute& a : node.attributes()) {
    if (a.g != nullptr || !a.graphs.empty()) return false;
  }
  return true;
}

// For an op whose outputs' shapes follow from its inputs' shapes and its
// attributes, the inputs whose contents count too (Reshape's shape, Slice's
// starts ...); nullopt for other ops (NonZero, Unique, Compress, ops with
// bodies ...: their shapes may follow from contents).
std::optional<std::vector<int>> ShapeFromShapes(const ir::Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return std::nullopt;
  static const absl::flat_hash_set<std::string_view> kShapesOnly = {
      // Element-wise, broadcasting: the shapes of their operands.
      "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift", "BitwiseAnd",
      "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh",
      "Div", "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid",
      "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean",
      "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu",
      "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh",
      "ThresholdedRelu", "Where", "Xor",
      // Shapes from the operands' shapes and attributes.
      "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "Concat", "Conv", "ConvTranspose", "CumSum",
      "DepthToSpace", "Dropout", "Einsum", "Flatten", "Gather", "GatherElements", "GatherND", "Gemm",
      "GlobalAveragePool", "GlobalMaxPool", "GroupNormalization", "Hardmax", "InstanceNormalization",
      "LayerNormalization", "LogSoftmax", "LRN", "MatMul", "MaxPool", "ScatterElements", "ScatterND",
      "Softmax", "SpaceToDepth", "Transpose", "Trilu"};
  const std::string& op = node.op_type();
  if (kShapesOnly.contains(op)) return std::vector<int>{};
  if (op == "Reshape" || op == "Expand" || op == "Tile" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Split" || op == "TopK" || op == "OneHot" || op == "Upsample" || absl::StartsWith(op, "Reduce")) {
    return std::vector<int>{1};
  }
  if (op == "Slice") return std::vector<int>{1, 2, 3, 4};
  if (op == "Pad") return std::vector<int>{1, 3};
  if (op == "Resize") return std::vector<int>{1, 2, 3};
  if (op == "ConstantOfShape") return std::vector<int>{0};
  if (op == "Range") return std::vector<int>{0, 1, 2};
  return std::nullopt;
}

}  // namespace

void Session::AnalyzeShapeComputations() {
  ShapeMemo& memo = shape_memo_;
  if (memo.analyzed) return;
  memo.analyzed = true;
  const ir::Graph& main = model_->graph();
  const GraphPlan* plan = nullptr;
  if (auto fused = fused_plans_.find(&main); fused != fused_plans_.end()) plan = fused->second.get();
  if (plan == nullptr) {
    absl::StatusOr<const GraphPlan*> plain = PlanFor(main);
    if (!plain.ok()) return;
    plan = *plain;
  }
  // Values whose contents, and values whose shapes, follow from the feeds'
  // types and shapes and from constants.
  absl::flat_hash_set<const ir::Value*> known, shaped;
  for (const ir::Value* v : FeedInputs()) shaped.insert(v);
  auto is_known = [&](const ir::Value* v) {
    return v == nullptr || known.contains(v) || constants_.contains(v);
  };
  auto is_shaped = [&](const ir::Value* v) { return is_known(v) || shaped.contains(v); };
  // Whether the shapes of `node`'s outputs follow (its inputs but the
  // chained ones `skip` and `inner`, of a fused chain, among the shaped).
  auto shape_follows = [&](const ir::Node& node, int skip, int inner) {
    std::optional<std::vector<int>> by_contents = ShapeFromShapes(node);
    if (!by_contents) return false;
    for (int i = 0; i < node.num_inputs(); ++i) {
      if (i == skip || i == inner) continue;
      const bool contents = std::find(by_contents->begin(), by_contents->end(), i) != by_contents->end();
      if (!(contents ? is_known(node.input(i)) : is_shaped(node.input(i)))) return false;
    }
    return true;
  };
  for (size_t step = 0; step < plan->order.size(); ++step) {
    const ir::Node* node = plan->order[step];
    if (const FusionChain* chain = plan->chain[step]; chain != nullptr) {
      bool follows = true;
      for (size_t k = 0; k < chain->nodes.size() && follows; ++k) {
        follows = shape_follows(*chain->nodes[k], chain->chained_input[k], chain->InnerInput(k));
      }
      for (const ir::Value* v : chain->extra_inputs) follows = follows && is_shaped(v);
      if (follows) shaped.insert(chain->tail().output(0));
      continue;
    }
    if (folded_nodes_.contains(node) || elided_.contains(node)) continue;
    bool value = Foldable(*node) && node->num_outputs() > 0;
    if (value && (node->op_type() == "Shape" || node->op_type() == "Size") && node->domain().empty()) {
      value = node->num_inputs() == 1 && node->input(0) != nullptr && is_shaped(node->input(0));
    } else {
      for (int i = 0; i < node->num_inputs() && value; ++i) value = is_known(node->input(i));
    }
    if (value) {
      memo.nodes.insert(node);
      for (const ir::Value* out : node->outputs()) {
        if (out != nullptr) known.insert(out);
      }
      continue;
    }
    if (!shape_follows(*node, -1, -1)) continue;
    for (const ir::Value* out : node->outputs()) {
      if (out != nullptr) shaped.insert(out);
    }
  }
  // The values other nodes (in bodies too) or the caller read.
  for (const ir::Node* node : memo.nodes) {
    for (const ir::Value* out : node->outputs()) {
      if (out == nullptr || out->name().empty()) continue;
      bool read = out->IsGraphOutput();
      for (const ir::Use& use : out->uses()) read = read || !memo.nodes.contains(use.node);
      if (read) memo.frontier.insert(out);
    }
  }
}

void Session::FoldConstants(const absl::flat_hash_set<const ir::Node*>* only) {
  // Folding gets the budget of one run: past it, the remaining nodes run in
  // Run as usual (where the timeout then applies to them).
  const bool has_deadline = options_.timeout_seconds > 0;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(has_deadline ? options_.timeout_seconds : 0));
  Executor executor(this, deadline, has_deadline);
  executor.strict_ = true;  // the kernels of folded nodes only run again in strict runs
  // Enclosing graphs first: a body's nodes may read values folded outside.
  ir::ForEachGraph(*model_, [&](ir::Graph& graph) { FoldGraph(graph, executor, only); });
}

namespace {

// The MatMul (A, B) or Gather (data, indices; axis 0) of packed weights
// `p`, of the default domain with two inputs and one output.
bool PlainPackedNode(const ir::Node& n, const ops::ContribLowering::PackedWeights& p) {
  if (n.op_type() != (p.gather ? "Gather" : "MatMul") || !(n.domain().empty() || n.domain() == "ai.onnx") ||
      n.num_inputs() != 2 || n.num_outputs() != 1 || n.input(0) == nullptr || n.input(1) == nullptr) {
    return false;
  }
  const ir::Attribute* axis = p.gather ? n.FindAttribute("axis") : nullptr;
  return axis == nullptr || axis->proto.i == 0;
}

// The input of that node the float weights are (B; the Gather's data).
int WeightInput(const ops::ContribLowering::PackedWeights& p) { return p.gather ? 0 : 1; }

// Whether the packed weights' codes, scales and uint8 zero points (N rows
// of ceil(blocks / 2) bytes for 4 bits, blocks for 8; or none) agree with
// each other and K: a MatMul's codes [N, blocks, bytes of a block] and
// scales of N * blocks floats, a Gather's codes [N, bytes of a row of K]
// and scales [N, blocks] dividing K. A MatMul's blocks span at most
// 2K + 64 (the packed kernel's scratch holds A's rows at that length).
bool PackedShapesAgree(const ops::ContribLowering::PackedWeights& p, const pb::TensorProto& codes,
                       const pb::TensorProto& scales, const pb::TensorProto* zeros) {
  if ((p.bits != 4 && p.bits != 8) || codes.data_type != pb::kUint8 ||
      codes.dims.size() != (p.gather ? 2 : 3) || scales.data_type != pb::kFloat ||
      (zeros != nullptr && zeros->data_type != pb::kUint8) || p.k < 1) {
    return false;
  }
  const int64_t n = codes.dims[0];
  int64_t blocks = 0;
  if (p.gather) {
    if (scales.dims.size() != 2 || scales.dims[0] != n || scales.dims[1] < 1 || p.k % scales.dims[1] != 0 ||
        codes.dims[1] != p.k * p.bits / 8) {
      return false;
    }
    blocks = scales.dims[1];
  } else {
    if (n != p.n) return false;
    blocks = codes.dims[1];
    const int64_t width = codes.dims[2];
    if (blocks < 1 || width < 1 || width > (int64_t{1} << 20)) return false;
    const int64_t block = width * 8 / p.bits;
    if ((p.k + block - 1) / block != blocks || blocks * block > 2 * p.k + 64) return false;
  }
  if (n < 1) return false;
  const std::optional<int64_t> scale_count = CheckedMul(n, blocks);
  if (!scale_count || CheckedElementCount(scales.dims) != scale_count) return false;
  const std::optional<int64_t> zero_count = CheckedMul(n, p.bits == 8 ? blocks : (blocks + 1) / 2);
  return zeros == nullptr || (zero_count && CheckedElementCount(zeros->dims) == zero_count);
}

}  // namespace

void Session::DeferPackedWeights() {
  // Observed runs report the weights as folded values.
  if (options_.backend == Backend::kCuda || options_.observer) return;
  absl::flat_hash_map<const ir::Graph*, absl::flat_hash_map<std::string_view, const ir::Node*>> by_name;
  for (const ops::ContribLowering::PackedWeights& p : packed_weights_) {
    absl::flat_hash_map<std::string_view, const ir::Node*>& names = by_name[p.graph];
    if (names.empty()) {
      for (const ir::Node* n : p.graph->nodes()) {
        if (!n->name().empty()) names[n->name()] = n;
      }
    }
    auto it = names.find(p.node);
    if (it == names.end() || !PlainPackedNode(*it->second, p) || deferred_weights_.contains(it->second))
      continue;
    const ir::Node* mm = it->second;
    // The nodes the weights are computed by, back to constant initializers.
    absl::flat_hash_set<const ir::Node*> nodes;
    std::vector<const ir::Value*> pending = {mm->input(WeightInput(p))};
    bool constant = true;
    while (!pending.empty() && constant) {
      const ir::Value* v = pending.back();
      pending.pop_back();
      if (v == nullptr || (v->kind() == ir::ValueKind::kInitializer && v->IsConstant())) continue;
      const ir::Node* producer = v->producer();
      constant = v->kind() == ir::ValueKind::kNodeOutput && v->graph() == p.graph && Foldable(*producer);
      if (!constant || !nodes.insert(producer).second) continue;
      for (const ir::Value* in : producer->inputs()) pending.push_back(in);
    }
    if (!constant) continue;
    // Less those another node reads (a value shared with other weights),
    // until none is left that is.
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (auto n = nodes.begin(); n != nodes.end();) {
        bool inside = true;
        for (const ir::Value* out : (*n)->outputs()) {
          if (out == nullptr) continue;
          inside = inside && !out->IsGraphOutput();
          for (const ir::Use& use : out->uses())
            inside = inside && (use.node == mm || nodes.contains(use.node));
        }
        if (inside) {
          ++n;
        } else {
          nodes.erase(n++);
          dropped = true;
        }
      }
    }
    if (!nodes.contains(mm->input(WeightInput(p))->producer())) continue;
    std::vector<const ir::Node*>& deferred = deferred_weights_[mm];
    deferred.assign(nodes.begin(), nodes.end());
    deferred_nodes_.insert(nodes.begin(), nodes.end());
  }
}

void Session::FoldGraph(const ir::Graph& graph, Executor& executor,
                        const absl::flat_hash_set<const ir::Node*>* only) {
  auto plan = PlanFor(graph);
  if (!plan.ok()) return;
  for (const ir::Node* node : (*plan)->order) {
    if (only != nullptr ? !only->contains(node) : deferred_nodes_.contains(node)) continue;
    if (!Foldable(*node)) continue;
    bool constant = true;
    bool stable = true;
    for (int i = 0; i < node->num_inputs() && constant; ++i) {
      const ir::Value* v = node->input(i);
      if (v == nullptr) continue;
      // Initializers of this graph or of an enclosing one (outer scope).
      if (v->kind() == ir::ValueKind::kInitializer) {
        constant = constants_.contains(v);
        stable = stable && v->IsConstant();
      } else if (v->kind() == ir::ValueKind::kNodeOutput && constants_.contains(v)) {  // folded
        stable = stable && stable_folded_values_.contains(v);
      } else {
        constant = false;
      }
    }
    if (!constant) continue;
    // A node that fails here (bad input, memory) is left to fail in Run,
    // where the error is reported with the run's context.
    Executor::Frame frame;
    if (!executor.RunNode(*node, frame).ok()) continue;
    for (const ir::Value* out : node->outputs()) {
      if (out == nullptr || out->name().empty()) continue;
      auto it = frame.values.find(out);
      if (it == frame.values.end()) continue;
      constants_[out] = std::move(it->second);
      if (stable) stable_folded_values_.insert(out);
    }
    folded_nodes_.insert(node);
    uses_feedable_folded_ = uses_feedable_folded_ || !stable;
    // Sources all of whose readers are now folded go at once, so that the
    // folded copies (transposed weights) and their sources are never all
    // held together.
    for (const ir::Value* v : node->inputs()) {
      ReleaseFoldedSource(v);
      ReleaseFoldedValue(v);
    }
  }
}

int64_t Session::held_folded_values() const {
  return std::count_if(constants_.begin(), constants_.end(),
                       [](const auto& entry) { return entry.first->kind() == ir::ValueKind::kNodeOutput; });
}

void Session::ReleaseFoldedValue(const ir::Value* v) {
  // An observed run reports folded values too (they stay).
  if (v == nullptr || v->kind() != ir::ValueKind::kNodeOutput || options_.observer || v->IsGraphOutput() ||
      !v->has_uses())
    return;
  auto it = constants_.find(v);
  if (it == constants_.end()) return;
  // Every reader folded, and none a DequantizeLinear: quantized chains read
  // a DequantizeLinear's inputs in place of its output (the int8 weights a
  // folded QuantizeLinear computed, PlanFusion).
  for (const ir::Use& use : v->uses()) {
    if (!folded_nodes_.contains(use.node) || use.node->op_type() == "DequantizeLinear") return;
  }
  constants_.erase(it);
  stable_folded_values_.erase(v);
}

void Session::ReleaseFoldedSource(const ir::Value* v) {
  if (v == nullptr || v->kind() != ir::ValueKind::kInitializer || v->graph() != &model_->graph() ||
      !v->has_uses() || v->IsGraphOutput() || v->initializer() == nullptr)
    return;
  bool only_folded = std::all_of(v->uses().begin(), v->uses().end(),
                                 [&](const ir::Use& use) { return folded_nodes_.contains(use.node); });
  auto it = constants_.find(v);
  if (!only_folded || it == constants_.end()) return;
  const pb::TensorProto& proto = *v->initializer();
  if (loaded_.mapping != nullptr) loaded_.mapping->ReleasePages(proto.raw_data.data(), proto.raw_data.size());
  if (it->second.is_tensor() && it->second.tensor().buffer() != nullptr &&
      it->second.tensor().buffer()->owned()) {
    constants_.erase(it);  // a copy (unaligned raw data): converted again when needed
    released_.insert(v);
  }
}

absl::Status Session::PrepareConstants(const ir::Graph& graph) {
  for (const ir::Value* v : graph.initializers()) {
    const pb::TensorProto& proto = *v->initializer();
    auto t = TensorFromProto(proto, resolver_.get());
    if (!t.ok()) return AnnotateStatus(t.status(), absl::StrCat("initializer '", v->name(), "'"));
    // Raw data the tensor copied (not aligned for its type) is not read from
    // the model file's mapping again: its pages go back to the OS (they
    // would otherwise stay resident beside the copy: twice the weights).
    if (loaded_.mapping != nullptr && t->buffer() != nullptr && t->buffer()->owned() &&
        !proto.raw_data.empty())
      loaded_.mapping->ReleasePages(proto.raw_data.data(), proto.raw_data.size());
    constants_[v] = RtValue::FromTensor(std::move(*t));
  }
  if (!graph.sparse_initializers().empty()) {
    return absl::UnimplementedError(absl::StrCat("graph '", graph.name(), "' has sparse initializers"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const Session::GraphPlan*> Session::PlanFor(const ir::Graph& graph) {
  auto it = plans_.find(&graph);
  if (it != plans_.end()) return it->second.get();
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, ir::TopologicalOrder(graph));
  std::unique_ptr<GraphPlan> plan = BuildPlan(graph, order, {}, {}, options_.backend == Backend::kCpu);
  const GraphPlan* result = plan.get();
  plans_[&graph] = std::move(plan);
  return result;
}

void Session::PlanFusion() {
  if (options_.backend != Backend::kCpu || !options_.fuse || options_.observer) return;
  auto is_constant = [&](const ir::Value* v) { return v->IsConstant() || run_constants_.contains(v); };
  // A constant of one element.
  auto is_scalar = [&](const ir::Value* v) {
    if (v == nullptr || v->name().empty() || !is_constant(v)) return false;
    auto c = constants_.find(v);
    if (c != constants_.end()) return c->second.is_tensor() && c->second.tensor().size() == 1;
    if (v->initializer() == nullptr) return false;
    for (int64_t d : v->initializer()->dims) {
      if (d != 1) return false;
    }
    return true;
  };
  ir::ForEachGraph(*model_, [&](ir::Graph& graph) {
    auto plan = PlanFor(graph);
    if (!plan.ok()) return;
    // Quantized, Conv and transformer chains in every graph (If/Loop/Scan
    // bodies too).
    std::vector<FusionChain> found =
        FindQuantizedChains((*plan)->order, graph, is_constant, is_scalar,
                            [&](const ir::Node* n) { return folded_nodes_.contains(n); });
    absl::flat_hash_set<const ir::Node*> quantized;
    // The quantized weights and parameters a chain reads directly: bring
    // back those released after folding (once, not in every run).
    auto restore = [&](const FusionChain& chain) {
      for (const ir::Value* v : chain.extra_inputs) {
        if (v == nullptr || !released_.contains(v) || v->initializer() == nullptr) continue;
        absl::StatusOr<Tensor> t = TensorFromProto(*v->initializer(), resolver_.get());
        if (!t.ok()) continue;  // Lookup converts it per run (and reports the error there)
        constants_[v] = RtValue::FromTensor(*std::move(t));
        released_.erase(v);
      }
    };
    for (const FusionChain& chain : found) {
      quantized.insert(chain.nodes.begin(), chain.nodes.end());
      restore(chain);
    }
    std::vector<FusionChain> conv = FindConvChains(
        (*plan)->order, graph, is_constant,
        [&](const ir::Node* n) { return folded_nodes_.contains(n) || quantized.contains(n); });
    // DequantizeLinear nodes all of whose uses are bypassed by fused kernels.
    absl::flat_hash_map<const ir::Value*, size_t> bypassed_uses;
    for (const FusionChain& chain : found) {
      for (const FusionChain::Bypass& by : chain.bypass) ++bypassed_uses[by.dequantize->output(0)];
    }
    for (const auto& [value, count] : bypassed_uses) {
      const ir::Node* dq = value->producer();
      if (count == value->uses().size() && !value->IsGraphOutput() && !quantized.contains(dq) &&
          !folded_nodes_.contains(dq) && dq->num_outputs() == 1) {
        elided_.insert(dq);
      }
    }
    // Channels-last 8-bit values between the quantized chains.
    PlanQuantizedLayouts(found, graph, elided_,
                         [&](const ir::Value* v) { return v == nullptr || v->name().empty() || is_scalar(v); });
    absl::flat_hash_set<const ir::Node*> fused = quantized;
    for (const FusionChain& chain : conv) fused.insert(chain.nodes.begin(), chain.nodes.end());
    // MatMuls by the dequantization of 4-bit weights (MatMulNBits) read the
    // codes when A has few rows.
    std::vector<FusionChain> packed = PackedWeightChains(graph, is_constant, fused);
    absl::flat_hash_set<const ir::Node*> chained;
    for (const FusionChain& chain : packed) {
      fused.insert(chain.nodes.begin(), chain.nodes.end());
      restore(chain);
      chained.insert(&chain.tail());
      // Its deferred weights are never computed.
      auto deferred = deferred_weights_.find(&chain.tail());
      if (deferred != deferred_weights_.end())
        elided_.insert(deferred->second.begin(), deferred->second.end());
    }
    // Deferred weights of a MatMul no packed chain took are folded now.
    absl::flat_hash_set<const ir::Node*> unchained;
    for (const auto& [mm, nodes] : deferred_weights_) {
      if (mm->graph() == &graph && !chained.contains(mm)) unchained.insert(nodes.begin(), nodes.end());
    }
    if (!unchained.empty()) {
      for (const ir::Node* n : unchained) deferred_nodes_.erase(n);
      FoldConstants(&unchained);
      for (const ir::Node* n : unchained) {
        for (const ir::Value* out : n->outputs()) {
          if (out != nullptr && constants_.contains(out)) run_constants_.insert(out);
        }
      }
    }
    std::vector<FusionChain> transformer = FindTransformerChains(
        (*plan)->order, graph, is_constant,
        [&](const ir::Node* n) { return folded_nodes_.contains(n) || fused.contains(n); });
    for (const FusionChain& chain : transformer) fused.insert(chain.nodes.begin(), chain.nodes.end());
    std::vector<FusionChain> elementwise = FindElementwiseChains(
        (*plan)->order, graph, is_constant,
        [&](const ir::Node* n) { return folded_nodes_.contains(n) || fused.contains(n); });
    for (FusionChain& chain : conv) found.push_back(std::move(chain));
    for (FusionChain& chain : packed) found.push_back(std::move(chain));
    for (FusionChain& chain : transformer) found.push_back(std::move(chain));
    for (FusionChain& chain : elementwise) found.push_back(std::move(chain));
    if (found.empty()) return;
    absl::flat_hash_map<const ir::Node*, const FusionChain*> by_tail;
    for (FusionChain& chain : found) {
      chains_.push_back(std::make_unique<FusionChain>(std::move(chain)));
      by_tail[&chains_.back()->tail()] = chains_.back().get();
    }
    fused_plans_[&graph] =
        BuildPlan(graph, (*plan)->order, by_tail, elided_, options_.backend == Backend::kCpu);
  });
}

std::vector<FusionChain> Session::PackedWeightChains(
    const ir::Graph& graph, const std::function<bool(const ir::Value*)>& is_constant,
    const absl::flat_hash_set<const ir::Node*>& fused) const {
  std::vector<FusionChain> chains;
  absl::flat_hash_map<std::string_view, const ir::Node*> by_name;
  for (const ops::ContribLowering::PackedWeights& p : packed_weights_) {
    if (p.graph != &graph) continue;
    if (by_name.empty()) {
      for (const ir::Node* n : graph.nodes()) {
        if (!n->name().empty()) by_name[n->name()] = n;
      }
    }
    auto it = by_name.find(p.node);
    if (it == by_name.end()) continue;
    const ir::Node* mm = it->second;
    // A Gather reads its computed table as well as the codes.
    if (p.gather && !deferred_weights_.contains(mm)) continue;
    if (!PlainPackedNode(*mm, p) || folded_nodes_.contains(mm) || fused.contains(mm) ||
        !(is_constant(mm->input(WeightInput(p))) || deferred_weights_.contains(mm))) {
      continue;
    }
    const ir::Value* codes = graph.FindValue(p.codes);
    const ir::Value* scales = graph.FindValue(p.scales);
    const ir::Value* zeros = p.zero_points.empty() ? nullptr : graph.FindValue(p.zero_points);
    auto constant = [&](const ir::Value* v) {
      return v != nullptr && v->initializer() != nullptr && is_constant(v);
    };
    if (!constant(codes) || !constant(scales) || (!p.zero_points.empty() && !constant(zeros))) continue;
    if (deferred_weights_.contains(mm) &&
        !PackedShapesAgree(p, *codes->initializer(), *scales->initializer(),
                           zeros != nullptr ? zeros->initializer() : nullptr)) {
      continue;  // the weights are folded from the lowering's nodes (which report what is wrong)
    }
    chains.push_back(PackedWeightsChain(*mm, {codes, scales, zeros}, p.bits, p.k));
  }
  return chains;
}

std::unique_ptr<Session::GraphPlan> Session::BuildPlan(
    const ir::Graph& graph, const std::vector<ir::Node*>& order,
    const absl::flat_hash_map<const ir::Node*, const FusionChain*>& chains,
    const absl::flat_hash_set<const ir::Node*>& skipped, bool join_in_place) {
  auto plan = std::make_unique<GraphPlan>();
  absl::flat_hash_set<const ir::Node*> absorbed;
  for (const auto& [tail, chain] : chains) {
    for (const ir::Node* n : chain->nodes) {
      if (n != tail) absorbed.insert(n);
    }
  }
  for (ir::Node* n : order) {
    if (absorbed.contains(n) || skipped.contains(n)) continue;
    plan->order.push_back(n);
    auto c = chains.find(n);
    plan->chain.push_back(c == chains.end() ? nullptr : c->second);
  }
  // The values a step reads: a chain's values between its nodes never exist.
  auto step_uses = [&](size_t step, std::vector<const ir::Value*>* uses) {
    uses->clear();
    const FusionChain* chain = plan->chain[step];
    if (chain == nullptr) {
      CollectUses(*plan->order[step], graph, uses);
      return;
    }
    std::vector<const ir::Value*> node_uses;
    for (size_t k = 0; k < chain->nodes.size(); ++k) {
      node_uses.clear();
      CollectUses(*chain->nodes[k], graph, &node_uses);
      for (const ir::Value* v : node_uses) {
        if (!chain->Internal(v)) uses->push_back(v);
      }
    }
    for (const ir::Value* v : chain->extra_inputs) {
      if (v != nullptr && v->graph() == &graph) uses->push_back(v);
    }
  };
  absl::flat_hash_map<const ir::Value*, size_t> last_use;
  std::vector<const ir::Value*> uses;
  for (size_t step = 0; step < plan->order.size(); ++step) {
    const ir::Node& node = *plan->order[step];
    step_uses(step, &uses);
    for (const ir::Value* v : uses) last_use[v] = step;
    for (const ir::Value* out : node.outputs()) {
      if (out != nullptr && !out->name().empty() && !last_use.contains(out)) last_use[out] = step;
    }
  }
  // The last step whose Conv (alone or in a chain) reads each value as X.
  absl::flat_hash_map<const ir::Value*, size_t> last_conv_read;
  for (size_t step = 0; step < plan->order.size(); ++step) {
    auto note = [&](const ir::Node& n) {
      if (n.op_type() == "Conv" && n.domain().empty() && n.num_inputs() > 0 && n.input(0) != nullptr)
        last_conv_read[n.input(0)] = step;
    };
    if (plan->chain[step] == nullptr) {
      note(*plan->order[step]);
    } else {
      for (const ir::Node* n : plan->chain[step]->nodes) note(*n);
    }
  }
  plan->conv_reads_later.resize(plan->order.size());
  for (size_t step = 0; step < plan->order.size(); ++step) {
    step_uses(step, &uses);
    for (const ir::Value* v : uses) {
      auto c = last_conv_read.find(v);
      if (c != last_conv_read.end() && c->second > step) plan->conv_reads_later[step].push_back(v);
    }
  }
  absl::flat_hash_set<const ir::Value*> keep(graph.outputs().begin(), graph.outputs().end());
  plan->release_after.resize(plan->order.size());
  // Release in a deterministic order: by step, then by node order of outputs/inputs.
  for (size_t step = 0; step < plan->order.size(); ++step) {
    const ir::Node& node = *plan->order[step];
    step_uses(step, &uses);
    for (const ir::Value* out : node.outputs()) {
      if (out != nullptr && !out->name().empty()) uses.push_back(out);
    }
    for (const ir::Value* v : uses) {
      if (keep.contains(v) || v->kind() == ir::ValueKind::kInitializer) continue;
      auto lu = last_use.find(v);
      if (lu != last_use.end() && lu->second == step) {
        plan->release_after[step].push_back(v);
        last_use.erase(lu);  // release once
      }
    }
  }
  plan->placed.resize(plan->order.size());
  if (join_in_place) PlanJoins(graph, *plan);
  return plan;
}

void Session::PlanJoins(const ir::Graph& graph, GraphPlan& plan) {
  absl::flat_hash_map<const ir::Node*, size_t> step_of;
  for (size_t step = 0; step < plan.order.size(); ++step) step_of[plan.order[step]] = step;
  const absl::flat_hash_set<const ir::Value*> outputs(graph.outputs().begin(), graph.outputs().end());
  absl::flat_hash_set<const ir::Value*> taken;
  absl::flat_hash_map<const ir::Node*, int> join_of;  // a join's Concat
  for (size_t step = 0; step < plan.order.size(); ++step) {
    const ir::Node& concat = *plan.order[step];
    // Concat-1 to -3 (an optional axis) run on the reference kernel.
    if (plan.chain[step] != nullptr || concat.op_type() != "Concat" || !concat.domain().empty() ||
        !concat.GetInt("axis").has_value() || concat.num_outputs() != 1 || concat.output(0) == nullptr)
      continue;
    std::vector<GraphPlan::PlacedOutput> parts;
    std::vector<size_t> part_steps;
    std::vector<std::pair<int, int>> nested;  // (the inner join, the input it is)
    const int join = static_cast<int>(plan.joins.size());
    for (int j = 0; j < concat.num_inputs(); ++j) {
      const ir::Value* v = concat.input(j);
      if (v == nullptr || v->graph() != &graph || v->kind() != ir::ValueKind::kNodeOutput ||
          v->producer() == nullptr || outputs.contains(v) || taken.contains(v) ||
          std::count(concat.inputs().begin(), concat.inputs().end(), v) != 1)
        continue;
      const ir::Node* producer = v->producer();
      auto at = step_of.find(producer);
      if (at == step_of.end() || at->second >= step) continue;
      // A Concat's result is a join's buffer of its own: when that Concat is
      // a join, the buffer becomes a view of its place in this one.
      if (producer->op_type() == "Concat") {
        auto inner = join_of.find(producer);
        if (inner != join_of.end() && v == producer->output(0)) nested.emplace_back(inner->second, j);
        continue;
      }
      for (int o = 0; o < producer->num_outputs(); ++o) {
        if (producer->output(o) != v) continue;
        parts.push_back({o, join, j});
        part_steps.push_back(at->second);
        break;
      }
    }
    if (parts.empty() && nested.empty()) continue;
    for (const auto& [inner, part] : nested) {
      taken.insert(concat.input(part));
      plan.joins[static_cast<size_t>(inner)].parent = join;
      plan.joins[static_cast<size_t>(inner)].parent_part = part;
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      taken.insert(concat.input(parts[k].part));
      plan.placed[part_steps[k]].push_back(parts[k]);
    }
    plan.placed[step].push_back({0, join, -1});
    GraphPlan::Join j;
    j.step = step;
    j.axis = *concat.GetInt("axis");
    plan.joins.push_back(std::move(j));
    join_of[&concat] = join;
  }
}

absl::Status Session::CheckAttributes(const ir::Graph& graph) const {
  for (const ir::Node* node : graph.nodes()) {
    absl::StatusOr<int64_t> opset = OpsetOf(*node);
    if (!opset.ok()) continue;  // said when the node runs
    const ops::OpSchema* schema = ops::FindSchema(node->domain(), node->op_type(), *opset);
    if (schema == nullptr) continue;
    for (const ir::Attribute& a : node->attributes()) {
      if (!a.proto.ref_attr_name.empty()) continue;
      const ops::AttributeSpec* spec = schema->FindAttribute(a.name());
      if (spec == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(ir::NodeLabel(*node), ": '", a.name(),
                                                       "' is not an attribute of ", node->op_type(), "-",
                                                       schema->since_version(), " (check reports E0404)"));
      }
      if (a.proto.type != pb::kAttrUndefined && spec->type != pb::kAttrUndefined &&
          a.proto.type != spec->type) {
        return absl::InvalidArgumentError(absl::StrCat(ir::NodeLabel(*node), ": attribute '", a.name(),
                                                       "' has the wrong type for ", node->op_type(), "-",
                                                       schema->since_version(), " (check reports E0405)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Session::OpsetOf(const ir::Node& node) const {
  const ir::Graph* root = node.graph();
  while (root->parent() != nullptr) root = root->parent();
  std::string_view domain = node.domain() == "ai.onnx" ? "" : std::string_view(node.domain());
  auto body = body_opsets_.find(root);
  if (body != body_opsets_.end()) {
    for (const auto& op : body->second) {
      if ((op.domain == "ai.onnx" ? "" : std::string_view(op.domain)) == domain) return op.version;
    }
  } else if (auto v = model_->OpsetVersion(domain)) {
    return *v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the model imports no opset for domain '", domain.empty() ? "ai.onnx" : Sv(domain), "'"));
}

absl::StatusOr<Kernel*> Session::ChainKernelFor(const FusionChain& chain) {
  auto it = chain_kernels_.find(&chain);
  if (it != chain_kernels_.end()) return it->second.get();
  ONNXKIT_ASSIGN_OR_RETURN(int64_t opset, OpsetOf(chain.head()));
  SessionConstantsScope scope(&run_constants_);
  ONNXKIT_ASSIGN_OR_RETURN(
      std::unique_ptr<Kernel> kernel,
      chain.kind == FusionKind::kQuantized     ? cpu::MakeQuantizedChain(chain, InfoFor(opset))
      : chain.kind == FusionKind::kTransformer ? cpu::MakeTransformerChain(chain, InfoFor(opset))
      : chain.kind == FusionKind::kElementwise ? cpu::MakeElementwiseChain(chain, InfoFor(opset))
                                               : cpu::MakeConvChain(chain, InfoFor(opset)));
  Kernel* raw = kernel.get();
  chain_kernels_[&chain] = std::move(kernel);
  return raw;
}

absl::StatusOr<Kernel*> Session::KernelFor(const ir::Node& node, bool strict) {
  auto& kernels = kernels_[strict ? 1 : 0];
  auto it = kernels.find(&node);
  if (it != kernels.end()) return it->second.get();
  ONNXKIT_ASSIGN_OR_RETURN(int64_t opset, OpsetOf(node));
  std::unique_ptr<Kernel> kernel;
  auto entry = FindKernel(HostBackend(), node.domain(), node.op_type(), opset);
  if (entry.ok()) {
    // More inputs or outputs than the op has: refused, not ignored.
    if (const ops::OpSchema* schema = ops::FindSchema(node.domain(), node.op_type(), opset)) {
      const bool inputs = node.num_inputs() > schema->max_input();
      if (inputs || node.num_outputs() > schema->max_output()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the node has ", inputs ? node.num_inputs() : node.num_outputs(), inputs ? " inputs" : " outputs",
            ", but ", node.op_type(), "-", schema->since_version(), " takes at most ",
            inputs ? schema->max_input() : schema->max_output()));
      }
    }
    SessionConstantsScope scope(strict ? &stable_folded_values_ : &run_constants_);
    ONNXKIT_ASSIGN_OR_RETURN(kernel, (*entry)->factory(node, InfoFor(opset)));
  } else {
    const pb::FunctionProto* function = nullptr;
    for (const auto& f : model_->functions()) {
      if (f.name == node.op_type() && f.domain == node.domain() && f.overload == node.overload())
        function = &f;
    }
    if (function == nullptr) {
      if (node.domain() == "com.microsoft.nchwc") {
        return absl::UnimplementedError(
            absl::StrCat("onnxkit does not run com.microsoft.nchwc::", node.op_type(),
                         ", a blocked-layout op of ONNX Runtime's 'all' optimization level (a model saved at "
                         "its 'extended' "
                         "level runs)"));
      }
      if (!ops::IsContribNode(*model_, node.domain(), node.op_type())) return entry.status();
      // Why the contrib op was not written as standard ops.
      const std::string key =
          absl::StrCat(node.domain().empty() ? "ai.onnx" : node.domain(), "::", node.op_type(), ":");
      for (const std::string& line : contrib_left_) {
        if (line.rfind(key, 0) == 0) {
          const std::string op = line.substr(0, key.size() - 1);
          const std::string why = line.substr(key.size() + 1);
          if (absl::StartsWith(why, "not supported (")) {
            return absl::UnimplementedError(absl::StrCat("onnxkit does not run the ONNX Runtime contrib op ",
                                                         op, " (README lists the contrib ops it runs)"));
          }
          return absl::UnimplementedError(absl::StrCat("the ONNX Runtime contrib op ", op,
                                                       " could not be written as standard ops: ", why));
        }
      }
      return entry.status();
    }
    ONNXKIT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> body, InstantiateFunction(*function, node));
    body_opsets_[body.get()] = function->opset_import;
    kernel = std::make_unique<FunctionKernel>(body.get());
    function_bodies_.push_back(std::move(body));
  }
  Kernel* raw = kernel.get();
  kernels[&node] = std::move(kernel);
  return raw;
}

std::vector<const ir::Value*> Session::FeedInputs() const {
  std::vector<const ir::Value*> out;
  for (const ir::Value* v : model_->graph().inputs()) {
    if (v->kind() != ir::ValueKind::kInitializer) out.push_back(v);
  }
  return out;
}

std::vector<const ir::Value*> Session::OverridableInputs() const {
  std::vector<const ir::Value*> out;
  for (const ir::Value* v : model_->graph().inputs()) {
    if (v->kind() == ir::ValueKind::kInitializer) out.push_back(v);
  }
  return out;
}

std::vector<const ir::Value*> Session::Outputs() const {
  return {model_->graph().outputs().begin(), model_->graph().outputs().end()};
}

namespace {

// Checks a fed value against the input's declared type (element type and
// fixed dims); symbolic and unknown dims accept anything.
absl::Status CheckFeed(const ir::Value& input, const RtValue& value) {
  const pb::TypeProto* type = input.type();
  if (type == nullptr || !type->tensor_type) return absl::OkStatus();
  if (!value.is_tensor())
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name(), "' must be a tensor"));
  const Tensor& t = value.tensor();
  int32_t want = type->tensor_type->elem_type;
  if (want != 0 && want != t.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name(), "' must be ",
                                                   ops::TypeToString(*type), ", got ", DescribeTensor(t)));
  }
  if (type->tensor_type->shape) {
    const auto& dims = type->tensor_type->shape->dim;
    bool ok = dims.size() == t.shape().size();
    for (size_t i = 0; ok && i < dims.size(); ++i) {
      if (dims[i].kind == pb::TensorShapeProto::Dimension::kValue && dims[i].dim_value != t.shape()[i])
        ok = false;
    }
    if (!ok) {
      std::vector<std::string> want_dims;
      for (const auto& d : dims) {
        want_dims.push_back(d.kind == pb::TensorShapeProto::Dimension::kValue   ? std::to_string(d.dim_value)
                            : d.kind == pb::TensorShapeProto::Dimension::kParam ? d.dim_param
                                                                                : "?");
      }
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name(), "' must have shape [",
                                                     absl::StrJoin(want_dims, ", "), "], got ",
                                                     DescribeTensor(t)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct Session::DeviceReplay {
  // The input types and shapes it is for (FeedInputs order).
  std::vector<std::pair<int32_t, std::vector<int64_t>>> signature;
  // Set by the watched run: whether the next run may be recorded, the bytes
  // it would copy up (besides feeds and constants), its outputs' types and
  // shapes.
  bool recordable = false;
  int64_t upload_bytes = 0;
  std::vector<std::pair<int32_t, std::vector<int64_t>>> outputs;
  // Once recorded: the graph, the device tensors it reads the inputs from
  // and writes the outputs to.
  std::shared_ptr<cuda::CapturedRun> run;
  std::vector<Tensor> device_inputs, device_outputs;
};

bool Session::ReplayAllowed() const {
  return cuda_ != nullptr && options_.cuda_graphs && !options_.observer && !options_.on_node_done &&
         !options_.on_node_run;
}

namespace {

// The element types and shapes of the feeds, in FeedInputs order; nullopt
// when one is not a numeric tensor on the host.
std::optional<std::vector<std::pair<int32_t, std::vector<int64_t>>>> FeedSignature(
    const std::vector<const ir::Value*>& inputs, const absl::flat_hash_map<const ir::Value*, RtValue>& fed) {
  std::vector<std::pair<int32_t, std::vector<int64_t>>> signature;
  for (const ir::Value* v : inputs) {
    auto it = fed.find(v);
    if (it == fed.end() || !it->second.is_tensor()) return std::nullopt;
    const Tensor& t = it->second.tensor();
    if (t.is_string() || t.on_device()) return std::nullopt;
    signature.emplace_back(t.dtype(), t.shape());
  }
  return signature;
}

}  // namespace

absl::StatusOr<std::vector<RtValue>> Session::Replayed(
    const absl::flat_hash_map<const ir::Value*, RtValue>& fed) {
  DeviceReplay& r = *replay_;
  std::vector<const Tensor*> feeds;
  for (const ir::Value* v : FeedInputs()) feeds.push_back(&fed.at(v).tensor());
  Clock::time_point start = Clock::now();
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<Tensor> host,
                           cuda::Replay(*cuda_, *r.run, feeds, r.device_inputs, r.device_outputs));
  last_copies_ = {};
  last_copies_.count = static_cast<int>(feeds.size() + host.size());
  for (const Tensor* t : feeds) last_copies_.bytes += static_cast<int64_t>(t->nbytes());
  for (const Tensor& t : host) last_copies_.bytes += static_cast<int64_t>(t.nbytes());
  last_copies_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  last_run_replayed_ = true;
  std::vector<RtValue> outputs;
  for (Tensor& t : host) outputs.push_back(RtValue::FromTensor(std::move(t)));
  return outputs;
}

std::optional<absl::StatusOr<std::vector<RtValue>>> Session::RecordRun(
    const absl::flat_hash_map<const ir::Value*, RtValue>& fed) {
  DeviceReplay& r = *replay_;
  r.recordable = false;  // until the recording succeeds
  const ir::Graph& main = model_->graph();
  Executor::Frame frame;
  std::vector<Tensor> inputs, outputs;
  for (const ir::Value* v : FeedInputs()) {
    const Tensor& host = fed.at(v).tensor();
    absl::StatusOr<Tensor> device = cuda::AllocateOnDevice(*cuda_, host.dtype(), host.shape());
    if (!device.ok() || !cuda::CopyInto(*cuda_, host, *device).ok()) return std::nullopt;
    frame.values[v] = RtValue::FromTensor(*device);
    inputs.push_back(*std::move(device));
  }
  for (const auto& [dtype, shape] : r.outputs) {
    absl::StatusOr<Tensor> device = cuda::AllocateOnDevice(*cuda_, dtype, shape);
    if (!device.ok()) return std::nullopt;
    outputs.push_back(*std::move(device));
  }
  if (!cuda::BeginCapture(*cuda_, r.upload_bytes).ok()) return std::nullopt;
  absl::Status status;
  {
    Executor executor(this, Clock::now(), /*has_deadline=*/false);
    executor.device_ = true;
    status = executor.RunGraph(main, frame, /*is_main=*/true);
    for (size_t i = 0; status.ok() && i < outputs.size(); ++i) {
      const RtValue* value = executor.Lookup(frame, main.outputs()[i]);
      if (value == nullptr || !value->is_tensor() || !value->tensor().on_device() ||
          value->tensor().dtype() != outputs[i].dtype() || value->tensor().shape() != outputs[i].shape()) {
        status = absl::FailedPreconditionError("an output is not where the watched run left it");
      } else {
        status = cuda::CopyOnDevice(*cuda_, value->tensor(), outputs[i]);
      }
    }
    // The run's device memory is freed inside the recording (the inputs,
    // held above, are not).
    frame.values.clear();
    executor.mirror_.clear();
  }
  absl::StatusOr<std::shared_ptr<cuda::CapturedRun>> run = cuda::EndCapture(*cuda_);
  if (!status.ok() || !run.ok()) return std::nullopt;
  r.run = *std::move(run);
  r.device_inputs = std::move(inputs);
  r.device_outputs = std::move(outputs);
  r.recordable = true;
  return Replayed(fed);
}

absl::StatusOr<std::vector<RtValue>> Session::Run(std::vector<std::pair<std::string, RtValue>> feeds) {
  const ir::Graph& main = model_->graph();
  Executor::Frame frame;
  for (auto& [name, value] : feeds) {
    const ir::Value* input = nullptr;
    for (const ir::Value* v : main.inputs()) {
      if (v->name() == name) input = v;
    }
    if (input == nullptr) {
      std::vector<std::string> names;
      for (const ir::Value* v : FeedInputs()) names.push_back(v->name());
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "' is not an input of the model; inputs: ", absl::StrJoin(names, ", ")));
    }
    ONNXKIT_RETURN_IF_ERROR(CheckFeed(*input, value));
    frame.values[input] = std::move(value);
  }
  for (const ir::Value* v : FeedInputs()) {
    if (!frame.values.contains(v)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", v->name(), "' was not given"));
    }
  }
  bool has_deadline = options_.timeout_seconds > 0;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                     has_deadline ? options_.timeout_seconds : 0));
  Executor executor(this, deadline, has_deadline);
  executor.device_ = cuda_ != nullptr;
  last_copies_ = {};
  last_run_replayed_ = false;
  // Feeding an initializer: kernels must not treat it as constant, and the
  // folded values that came from it are computed anew.
  for (const auto& [value, v] : frame.values) {
    if (value->kind() == ir::ValueKind::kInitializer) executor.strict_ = true;
  }
  executor.use_folding_ = !(executor.strict_ && uses_feedable_folded_);
  // CUDA graphs: replay, record, or watch this run.
  int64_t uploaded_before = 0;
  if (ReplayAllowed() && !executor.strict_) {
    auto signature = FeedSignature(FeedInputs(), frame.values);
    if (signature && replay_ != nullptr && replay_->signature == *signature) {
      if (replay_->run != nullptr) return Replayed(frame.values);
      if (replay_->recordable) {
        auto recorded = RecordRun(frame.values);
        if (recorded.has_value()) return *std::move(recorded);
      }
    } else if (signature) {
      replay_ = std::make_unique<DeviceReplay>();
      replay_->signature = *std::move(signature);
      executor.tracking_ = true;
      for (const ir::Value* v : FeedInputs()) executor.dependent_.insert(v);
      uploaded_before = cuda::UploadedBytes(*cuda_);
    } else {
      replay_.reset();
    }
  }
  // Shape computations: keep them from the first run of these feed types
  // and shapes, skip them in later ones.
  last_run_memoized_nodes_ = 0;
  if (!executor.strict_ && cuda_ == nullptr && !options_.observer && HostBackend() == Backend::kCpu) {
    AnalyzeShapeComputations();
    auto signature = shape_memo_.nodes.empty() ? std::nullopt : FeedSignature(FeedInputs(), frame.values);
    if (signature && shape_memo_.has_signature && shape_memo_.signature == *signature) {
      if (shape_memo_.complete) {
        for (const auto& [v, value] : shape_memo_.values) frame.values[v] = value;
        executor.skip_memoized_ = true;
      }
    } else if (signature) {
      shape_memo_.signature = *std::move(signature);
      shape_memo_.has_signature = true;
      shape_memo_.complete = false;
      shape_memo_.values.clear();
      executor.keeping_memo_ = true;
    }
  }
  absl::Status status = executor.RunGraph(main, frame, /*is_main=*/true);
  last_run_memoized_nodes_ = executor.memoized_nodes_;
  last_run_joined_inputs_ = executor.joined_inputs_;
  if (executor.keeping_memo_ || executor.memo_abandoned_) {
    // Kept only when the run computed every frontier value (tensors within
    // kMaxShapeMemoBytes, KeepForMemo); else this signature runs every node
    // (it is not kept again).
    shape_memo_.complete =
        status.ok() && !executor.memo_abandoned_ && shape_memo_.values.size() == shape_memo_.frontier.size();
    if (!shape_memo_.complete) shape_memo_.values.clear();
  }
  if (!status.ok()) {
    // Clears what device kernels flagged in this run (its error is the one reported).
    if (executor.device_) cuda::CheckDeviceErrors(*cuda_).IgnoreError();
    return status;
  }
  std::vector<RtValue> outputs;
  executor.reading_outputs_ = true;
  for (const ir::Value* o : main.outputs()) {
    if (executor.device_) {
      auto it = frame.values.find(o);
      if (executor.tracking_) {
        if (it == frame.values.end() || !Executor::OnDevice(it->second)) {
          executor.replayable_ = false;
        } else {
          replay_->outputs.emplace_back(it->second.tensor().dtype(), it->second.tensor().shape());
        }
      }
      ONNXKIT_RETURN_IF_ERROR(executor.OnHost(frame, o));
    }
    const RtValue* v = executor.Lookup(frame, o);
    if (v == nullptr) return absl::InternalError(absl::StrCat("output '", o->name(), "' was not computed"));
    outputs.push_back(*v);
  }
  if (executor.device_) ONNXKIT_RETURN_IF_ERROR(cuda::CheckDeviceErrors(*cuda_));
  if (executor.tracking_) {
    replay_->recordable = executor.replayable_;
    replay_->upload_bytes = std::max<int64_t>(0, cuda::UploadedBytes(*cuda_) - uploaded_before -
                                                     executor.excluded_upload_bytes_) +
                            4096;
  }
  return outputs;
}

}  // namespace onnxkit::runner
