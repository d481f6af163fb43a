// The pass manager (see manager.h): graph traversal, rewrite numbering and
// the bisect limit, transactions (snapshot at a pass's first rewrite,
// restore and retry on failure), fixed-point iteration and statistics.
#include "passes/manager.h"

#include <chrono>
#include <optional>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/infer/engine.h"
#include "lib/io/external_data.h"
#include "lib/ir/training.h"

namespace onnxkit::passes {
namespace {

// Attempts of one pass run after failed rewrites, each skipping one more.
constexpr int kMaxAttempts = 16;

class Context : public PassContext {
 public:
  Context(const ManagerOptions& options, io::ExternalDataResolver* resolver) : options_(options), resolver_(resolver) {}

  int64_t Opset(std::string_view domain) const override {
    if (domain == "ai.onnx") domain = "";
    for (const pb::OperatorSetIdProto& o : *opsets_) {
      std::string_view d = o.domain == "ai.onnx" ? std::string_view() : std::string_view(o.domain);
      if (d == domain) return o.version;
    }
    return 0;
  }
  const infer::ValueState* State(const ir::Value& value) const override {
    if (states_ == nullptr) return nullptr;
    auto it = states_->find(value.name());
    return it == states_->end() ? nullptr : &it->second;
  }
  io::ExternalDataResolver* resolver() override { return resolver_; }
  const PassOptions& options() const override { return options_.pass; }

  void ReleaseData(const pb::TensorProto& tensor) override {
    if (options_.mapping != nullptr) options_.mapping->ReleasePages(tensor.raw_data.data(), tensor.raw_data.size());
  }

  bool Allow(const ir::Node& node, std::string_view what) override {
    if (options_.bisect_limit >= 0 && *counter_ >= options_.bisect_limit) {
      *limit_reached_ = true;
      return false;
    }
    if (!snapshot_taken_) {
      snapshot_taken_ = true;
      take_snapshot_();
    }
    int64_t number = ++*counter_;
    last_granted_ = number;
    last_node_ = ir::NodeLabel(node);
    last_graph_ = graph_path_;
    if (skip_->count(number)) return false;
    records_->push_back(
        RewriteRecord{number, std::string(pass_name_), graph_path_, last_node_, std::string(what)});
    return true;
  }

  // Set by the manager.
  const std::vector<pb::OperatorSetIdProto>* opsets_ = nullptr;
  const std::map<std::string, infer::ValueState>* states_ = nullptr;
  int64_t* counter_ = nullptr;
  const std::set<int64_t>* skip_ = nullptr;
  bool* limit_reached_ = nullptr;
  std::vector<RewriteRecord>* records_ = nullptr;
  std::string_view pass_name_;
  std::string graph_path_;
  std::function<void()> take_snapshot_;
  bool snapshot_taken_ = false;
  int64_t last_granted_ = 0;
  std::string last_node_, last_graph_;

 private:
  const ManagerOptions& options_;
  io::ExternalDataResolver* resolver_;
};

// Runs `pass` on `graph` after its subgraphs (bottom-up).
absl::StatusOr<bool> Visit(ir::Graph& graph, const std::string& path, Pass& pass, Context& ctx) {
  bool changed = false;
  for (ir::Node* node : graph.nodes()) {
    for (ir::Attribute& a : node->mutable_attributes()) {
      if (!a.g && a.graphs.empty()) continue;  // (an unnamed node's label walks the graph)
      std::string base = absl::StrCat(path, "/", ir::NodeLabel(*node), "/", a.name());
      if (a.g) {
        ONNXKIT_ASSIGN_OR_RETURN(bool c, Visit(*a.g, base, pass, ctx));
        changed |= c;
      }
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        ONNXKIT_ASSIGN_OR_RETURN(bool c, Visit(*a.graphs[i], absl::StrCat(base, "[", i, "]"), pass, ctx));
        changed |= c;
      }
    }
  }
  // A graph a Gradient differentiates is left as it is (lib/ir/training.h).
  if (ir::DifferentiatedByGradient(graph)) return changed;
  ctx.graph_path_ = path;
  ONNXKIT_ASSIGN_OR_RETURN(bool c, pass.Run(graph, ctx));
  return changed || c;
}

void CollectSerials(const ir::Graph& graph, absl::flat_hash_set<uint64_t>* out) {
  ir::ForEachGraph(graph, [&](const ir::Graph& g) {
    for (const ir::Node* n : g.nodes()) out->insert(n->serial());
  });
}

int64_t FunctionNodes(const ir::Model& model) {
  int64_t n = 0;
  for (const pb::FunctionProto& f : model.functions()) n += static_cast<int64_t>(f.node.size());
  return n;
}

class Manager {
 public:
  Manager(std::unique_ptr<ir::Model>& model, const ManagerOptions& options)
      : model_(model), options_(options) {
    if (!options.base_dir.empty()) resolver_ = std::make_unique<io::ExternalDataResolver>(options.base_dir);
  }

  absl::StatusOr<ManagerReport> Run(const std::vector<const PassInfo*>& pipeline) {
    for (const PassInfo* p : pipeline) {
      if (!stats_index_.count(p->name)) {
        stats_index_[p->name] = report_.passes.size();
        report_.passes.push_back(PassStats{std::string(p->name)});
      }
    }
    for (int iter = 0; iter < std::max(1, options_.max_iterations); ++iter) {
      report_.iterations = iter + 1;
      bool changed = false;
      for (const PassInfo* p : pipeline) {
        ONNXKIT_ASSIGN_OR_RETURN(bool c, RunPass(*p));
        changed |= c;
      }
      if (!changed) {
        report_.fixed_point = true;
        break;
      }
    }
    report_.limit_reached = limit_reached_;
    return std::move(report_);
  }

 private:
  // The model's states, inferred anew when the main graph changed.
  const std::map<std::string, infer::ValueState>* States() {
    uint64_t version = model_->graph().version();
    if (!states_ || states_version_ != version) {
      infer::Engine engine(*model_);
      engine.Run();
      states_ = engine.States();
      states_version_ = version;
    }
    return &*states_;
  }

  absl::StatusOr<bool> RunPass(const PassInfo& info) {
    PassStats& stats = report_.passes[stats_index_[info.name]];
    auto start = std::chrono::steady_clock::now();
    std::set<int64_t> skip;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      int64_t counter_start = counter_;
      size_t records_mark = report_.rewrites.size();
      absl::flat_hash_set<uint64_t> before;
      CollectSerials(model_->graph(), &before);
      int64_t function_nodes_before = FunctionNodes(*model_);
      std::optional<pb::ModelProto> snapshot;
      Context ctx(options_, resolver_.get());
      ctx.counter_ = &counter_;
      ctx.skip_ = &skip;
      ctx.limit_reached_ = &limit_reached_;
      ctx.records_ = &report_.rewrites;
      ctx.pass_name_ = info.name;
      ctx.take_snapshot_ = [&] { snapshot = ir::ToProto(*model_); };
      std::unique_ptr<Pass> pass = info.create();
      absl::StatusOr<bool> result = RunOnModel(*pass, info, ctx);
      if (result.ok()) {
        stats.runs += 1;
        stats.rewrites += counter_ - counter_start - static_cast<int64_t>(CountSkipped(skip, counter_start));
        absl::flat_hash_set<uint64_t> after;
        CollectSerials(model_->graph(), &after);
        for (uint64_t s : before) stats.nodes_removed += after.count(s) ? 0 : 1;
        for (uint64_t s : after) stats.nodes_added += before.count(s) ? 0 : 1;
        int64_t fdelta = FunctionNodes(*model_) - function_nodes_before;
        (fdelta < 0 ? stats.nodes_removed : stats.nodes_added) += fdelta < 0 ? -fdelta : fdelta;
        stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (*result && options_.after_pass && counter_ > counter_start) {
          ONNXKIT_RETURN_IF_ERROR(options_.after_pass(info, counter_start + 1, counter_));
        }
        return *result;
      }
      // The pass failed: undo it, then skip the rewrite that failed.
      bool in_rewrite = ctx.last_granted_ > counter_start;
      report_.failures.push_back(RewriteFailure{in_rewrite ? ctx.last_granted_ : 0, std::string(info.name),
                                                in_rewrite ? ctx.last_graph_ : "", in_rewrite ? ctx.last_node_ : "",
                                                std::string(result.status().message())});
      if (snapshot) {
        auto restored = ir::FromProto(std::move(*snapshot));
        if (!restored.ok()) {
          return absl::InternalError(absl::StrCat("pass '", Sv(info.name),
                                                  "' failed and the model could not be restored: ",
                                                  restored.status().message()));
        }
        model_ = std::move(*restored);
        states_.reset();
      }
      counter_ = counter_start;
      report_.rewrites.resize(records_mark);
      if (!in_rewrite) break;
      skip.insert(ctx.last_granted_);
    }
    stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return false;
  }

  static size_t CountSkipped(const std::set<int64_t>& skip, int64_t after) {
    size_t n = 0;
    for (int64_t s : skip) n += s > after ? 1 : 0;
    return n;
  }

  absl::StatusOr<bool> RunOnModel(Pass& pass, const PassInfo& info, Context& ctx) {
    ctx.opsets_ = &model_->opset_import();
    ctx.states_ = info.needs_shapes ? States() : nullptr;
    ONNXKIT_ASSIGN_OR_RETURN(bool changed, Visit(model_->graph(), "main", pass, ctx));
    for (size_t i = 0; i < model_->functions().size(); ++i) {
      pb::FunctionProto& f = model_->functions()[i];
      auto body = ir::FunctionBodyFromProto(f);
      if (!body.ok()) continue;  // a malformed function is left as it is
      ctx.opsets_ = &f.opset_import;
      ctx.states_ = nullptr;
      int64_t counter_before = counter_;
      ONNXKIT_ASSIGN_OR_RETURN(bool c, Visit(**body, absl::StrCat("function '", f.name, "'"), pass, ctx));
      if (c && counter_ > counter_before) {
        ir::FunctionBodyToProto(**body, &f);
        changed = true;
      }
    }
    return changed;
  }

  std::unique_ptr<ir::Model>& model_;
  const ManagerOptions& options_;
  std::unique_ptr<io::ExternalDataResolver> resolver_;
  ManagerReport report_;
  std::map<std::string_view, size_t> stats_index_;
  int64_t counter_ = 0;
  bool limit_reached_ = false;
  std::optional<std::map<std::string, infer::ValueState>> states_;
  uint64_t states_version_ = 0;
};

}  // namespace

absl::StatusOr<ManagerReport> RunPipeline(std::unique_ptr<ir::Model>& model,
                                          const std::vector<const PassInfo*>& pipeline,
                                          const ManagerOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  Manager manager(model, options);
  return manager.Run(pipeline);
}

int64_t CountAllNodes(const ir::Model& model) {
  int64_t n = FunctionNodes(model);
  ir::ForEachGraph(model, [&](const ir::Graph& g) { n += g.num_nodes(); });
  return n;
}

}  // namespace onnxkit::passes
