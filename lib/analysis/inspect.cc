// Model summary: computation and rendering (text, JSON, node list, dot).
#include "lib/analysis/inspect.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/json_writer.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/io/external_data.h"
#include "lib/ops/type_string.h"

namespace onnxkit::analysis {
namespace {

using Histogram = std::map<std::string, int64_t>;

std::string TypeOf(const pb::ValueInfoProto& vi) {
  if (!vi.type) return "?";
  std::string s = ops::TypeToString(*vi.type);
  return s.empty() ? "?" : s;
}

std::string OpKey(const pb::NodeProto& n) {
  if (n.domain.empty() || n.domain == "ai.onnx") return n.op_type;
  return absl::StrCat(Sv(n.domain), "::", Sv(n.op_type));
}

IoInfo DescribeIo(const pb::ValueInfoProto& vi, const std::set<std::string>& initializers) {
  IoInfo io;
  io.name = vi.name;
  io.type = TypeOf(vi);
  io.is_initializer = initializers.count(vi.name) > 0;
  const pb::TensorShapeProto* shape = nullptr;
  if (vi.type && vi.type->tensor_type && vi.type->tensor_type->shape) {
    shape = vi.type->tensor_type->shape.get();
  } else if (vi.type && vi.type->sparse_tensor_type && vi.type->sparse_tensor_type->shape) {
    shape = vi.type->sparse_tensor_type->shape.get();
  }
  if (shape != nullptr) {
    io.has_shape = true;
    for (const auto& d : shape->dim) {
      using D = pb::TensorShapeProto::Dimension;
      io.dims.push_back(d.kind == D::kValue   ? std::to_string(d.dim_value)
                        : d.kind == D::kParam ? d.dim_param
                                              : "?");
    }
  }
  return io;
}

std::vector<std::pair<std::string, int64_t>> Sorted(const Histogram& h) {
  return {h.begin(), h.end()};
}

void AddParameters(const std::vector<int64_t>& dims, ModelSummary* s) {
  auto count = CheckedElementCount(dims);
  if (!count) {
    s->parameter_count_overflow = true;
  } else {
    s->parameter_count += static_cast<uint64_t>(*count);
  }
}

// The bytes of `t` (inline or external); `parameters`: its elements count
// as parameters too.
void AddTensor(const pb::TensorProto& t, ModelSummary* s, std::set<std::string>* files,
               bool parameters = true) {
  auto count = CheckedElementCount(t.dims);
  if (parameters) AddParameters(t.dims, s);
  if (io::HasExternalData(t)) {
    auto info = io::ParseExternalData(t);
    if (info.ok()) {
      files->insert(info->location);
      if (info->length) {
        s->external_bytes += static_cast<uint64_t>(*info->length);
      } else if (count) {
        auto bytes = RawByteSize(t.data_type, *count);
        if (bytes) s->external_bytes += static_cast<uint64_t>(*bytes);
      }
    }
    return;
  }
  uint64_t bytes = t.raw_data.size() + t.float_data.size() * 4 + t.int32_data.size() * 4 +
                   t.int64_data.size() * 8 + t.double_data.size() * 8 + t.uint64_data.size() * 8;
  for (const auto& str : t.string_data) bytes += str.size();
  s->inline_bytes += bytes;
}

// A sparse initializer: the dense tensor's elements are its parameters;
// its values and indices are what the file stores.
void AddSparse(const pb::SparseTensorProto& sp, ModelSummary* s, std::set<std::string>* files) {
  AddParameters(sp.dims, s);
  if (sp.values) AddTensor(*sp.values, s, files, /*parameters=*/false);
  if (sp.indices) AddTensor(*sp.indices, s, files, /*parameters=*/false);
}

// Walks nodes of a graph and, recursively, of subgraphs in attributes
// (whose initializers count with the main graph's).
class Walker {
 public:
  explicit Walker(ModelSummary* s) : s_(s) {}

  void Graph(const pb::GraphProto& g, const std::string& path, int depth, Histogram* hist) {
    for (const auto& node : g.node) {
      ++s_->total_node_count;
      ++(*hist)[OpKey(node)];
      if (depth >= limits::kMaxGraphDepth) continue;
      for (const auto& attr : node.attribute) {
        std::string owner = absl::StrCat(path, " › node '", Sv(node.name), "' (", Sv(node.op_type), ") › ",
                                         Sv(attr.name));
        if (attr.g) Sub(*attr.g, owner, depth + 1);
        for (size_t i = 0; i < attr.graphs.size(); ++i) {
          Sub(attr.graphs[i], absl::StrCat(owner, "[", i, "]"), depth + 1);
        }
      }
    }
  }

  void Sub(const pb::GraphProto& g, const std::string& path, int depth) {
    Histogram local;
    size_t index = s_->subgraphs.size();
    s_->subgraphs.push_back({path, depth, static_cast<int64_t>(g.node.size()), {}});
    for (const auto& t : g.initializer) AddTensor(t, s_, &files_);
    for (const auto& sp : g.sparse_initializer) AddSparse(sp, s_, &files_);
    s_->initializer_count += static_cast<int64_t>(g.initializer.size());
    s_->sparse_initializer_count += static_cast<int64_t>(g.sparse_initializer.size());
    Graph(g, path, depth, &local);
    for (const auto& [op, n] : local) sub_hist_[op] += n;
    s_->subgraphs[index].op_histogram = Sorted(local);
  }

  Histogram sub_hist_;
  std::set<std::string> files_;  // external data files of subgraph initializers

 private:
  ModelSummary* s_;
};

}  // namespace

ModelSummary Summarize(const pb::ModelProto& model, std::string path, uint64_t file_bytes) {
  ModelSummary s;
  s.path = std::move(path);
  s.file_bytes = file_bytes;
  s.ir_version = model.ir_version;
  s.producer_name = model.producer_name;
  s.producer_version = model.producer_version;
  s.domain = model.domain;
  s.doc_string = model.doc_string;
  s.model_version = model.model_version;
  for (const auto& op : model.opset_import) {
    s.opset_imports.emplace_back(op.domain.empty() ? "ai.onnx" : op.domain, op.version);
  }
  for (const auto& kv : model.metadata_props) s.metadata.emplace_back(kv.key, kv.value);
  s.training_info_count = static_cast<int64_t>(model.training_info.size());
  Walker walker(&s);
  if (model.graph) {
    const pb::GraphProto& g = *model.graph;
    s.graph_name = g.name;
    std::set<std::string> init_names;
    std::set<std::string> files;
    for (const auto& t : g.initializer) {
      init_names.insert(t.name);
      AddTensor(t, &s, &files);
    }
    for (const auto& sp : g.sparse_initializer) {
      if (sp.values) init_names.insert(sp.values->name);
      AddSparse(sp, &s, &files);
    }
    s.initializer_count = static_cast<int64_t>(g.initializer.size());
    s.sparse_initializer_count = static_cast<int64_t>(g.sparse_initializer.size());
    for (const auto& vi : g.input) s.inputs.push_back(DescribeIo(vi, init_names));
    for (const auto& vi : g.output) s.outputs.push_back(DescribeIo(vi, {}));
    s.value_info_count = static_cast<int64_t>(g.value_info.size());
    s.node_count = static_cast<int64_t>(g.node.size());
    Histogram main;
    walker.Graph(g, g.name.empty() ? "main" : g.name, 0, &main);
    s.op_histogram = Sorted(main);
    files.insert(walker.files_.begin(), walker.files_.end());
    s.external_files.assign(files.begin(), files.end());
  }
  for (const auto& f : model.functions) {
    FunctionInfo info{f.domain, f.name, f.overload,
                      static_cast<int64_t>(f.input.size()),
                      static_cast<int64_t>(f.output.size()),
                      static_cast<int64_t>(f.attribute.size() + f.attribute_proto.size()),
                      static_cast<int64_t>(f.node.size())};
    s.functions.push_back(info);
    s.total_node_count += info.node_count;
  }
  s.subgraph_op_histogram = Sorted(walker.sub_hist_);
  return s;
}

namespace {

std::string HumanBytes(uint64_t b) {
  if (b < 1024) return absl::StrCat(b, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

std::string ShapeText(const IoInfo& io) {
  if (!io.has_shape) return "shape ?";
  std::string s = "[";
  for (size_t i = 0; i < io.dims.size(); ++i) absl::StrAppend(&s, i ? ", " : "", io.dims[i]);
  return s + "]";
}

void AppendHistogram(std::string* out, const std::vector<std::pair<std::string, int64_t>>& h) {
  std::vector<std::pair<std::string, int64_t>> by_count = h;
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [op, n] : by_count) absl::StrAppendFormat(out, "    %-28s %lld\n", op, n);
}

}  // namespace

std::string RenderText(const ModelSummary& s) {
  std::string out;
  absl::StrAppend(&out, "model:        ", s.path, " (", HumanBytes(s.file_bytes), ")\n");
  absl::StrAppend(&out, "ir version:   ", s.ir_version, "\n");
  absl::StrAppend(&out, "producer:     ", s.producer_name.empty() ? "-" : s.producer_name,
                  s.producer_version.empty() ? "" : " " + s.producer_version, "\n");
  if (!s.domain.empty()) absl::StrAppend(&out, "domain:       ", s.domain, "\n");
  if (s.model_version != 0) absl::StrAppend(&out, "model version: ", s.model_version, "\n");
  out += "opsets:       ";
  for (size_t i = 0; i < s.opset_imports.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", s.opset_imports[i].first, " ", s.opset_imports[i].second);
  }
  if (s.opset_imports.empty()) out += "(none)";
  out += "\n";
  if (!s.graph_name.empty()) absl::StrAppend(&out, "graph:        ", s.graph_name, "\n");
  size_t backed = std::count_if(s.inputs.begin(), s.inputs.end(), [](const IoInfo& io) { return io.is_initializer; });
  absl::StrAppend(&out, "inputs (", s.inputs.size() - backed, "):\n");
  for (const auto& io : s.inputs) {
    if (!io.is_initializer) absl::StrAppend(&out, "    ", io.name, ": ", io.type, " ", ShapeText(io), "\n");
  }
  if (backed > 0) absl::StrAppend(&out, "    (+", backed, " more listed as inputs that have initializers)\n");
  absl::StrAppend(&out, "outputs (", s.outputs.size(), "):\n");
  for (const auto& io : s.outputs) absl::StrAppend(&out, "    ", io.name, ": ", io.type, " ", ShapeText(io), "\n");
  absl::StrAppend(&out, "nodes:        ", s.node_count, " in the main graph, ", s.total_node_count,
                  " in all (", s.subgraphs.size(), " subgraphs, ", s.functions.size(), " functions)\n");
  out += "ops (main graph):\n";
  AppendHistogram(&out, s.op_histogram);
  if (!s.subgraph_op_histogram.empty()) {
    out += "ops (subgraphs):\n";
    AppendHistogram(&out, s.subgraph_op_histogram);
  }
  absl::StrAppend(&out, "initializers: ", s.initializer_count,
                  s.sparse_initializer_count ? absl::StrCat(" (+", s.sparse_initializer_count, " sparse)") : "",
                  ", ", HumanBytes(s.inline_bytes), " inline, ", HumanBytes(s.external_bytes), " external\n");
  absl::StrAppend(&out, "parameters:   ", s.parameter_count, s.parameter_count_overflow ? " (overflowed)" : "", "\n");
  for (const auto& f : s.external_files) absl::StrAppend(&out, "external data: ", f, "\n");
  for (const auto& sg : s.subgraphs) {
    absl::StrAppend(&out, "subgraph:     ", sg.path, " (", sg.node_count, " nodes)\n");
  }
  for (const auto& f : s.functions) {
    absl::StrAppend(&out, "function:     ", f.domain, "::", f.name, f.overload.empty() ? "" : ":" + f.overload,
                    " (", f.inputs, " inputs, ", f.outputs, " outputs, ", f.node_count, " nodes)\n");
  }
  for (const auto& [k, v] : s.metadata) absl::StrAppend(&out, "metadata:     ", k, " = ", v, "\n");
  if (s.training_info_count) absl::StrAppend(&out, "training info: ", s.training_info_count, "\n");
  return out;
}

namespace {

void WriteIo(JsonWriter& w, const std::vector<IoInfo>& list) {
  w.BeginArray();
  for (const auto& io : list) {
    w.BeginObject();
    w.KeyString("name", io.name);
    w.KeyString("type", io.type);
    w.Key("shape");
    if (!io.has_shape) {
      w.Null();
    } else {
      w.BeginArray();
      for (const auto& d : io.dims) {
        bool numeric = !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (numeric && d.size() < 19) {
          w.Int(std::stoll(d));
        } else if (d == "?") {
          w.Null();
        } else {
          w.String(d);
        }
      }
      w.EndArray();
    }
    w.KeyBool("initializer", io.is_initializer);
    w.EndObject();
  }
  w.EndArray();
}

void WriteHistogram(JsonWriter& w, const std::vector<std::pair<std::string, int64_t>>& h) {
  w.BeginObject();
  for (const auto& [op, n] : h) w.KeyInt(op, n);
  w.EndObject();
}

}  // namespace

std::string RenderJson(const ModelSummary& s) {
  JsonWriter w;
  w.BeginObject();
  w.KeyString("path", s.path);
  w.KeyInt("file_bytes", static_cast<int64_t>(s.file_bytes));
  w.KeyInt("ir_version", s.ir_version);
  w.KeyString("producer_name", s.producer_name);
  w.KeyString("producer_version", s.producer_version);
  w.KeyString("domain", s.domain);
  w.KeyInt("model_version", s.model_version);
  w.KeyString("doc_string", s.doc_string);
  w.Key("opset_import");
  w.BeginArray();
  for (const auto& [d, v] : s.opset_imports) {
    w.BeginObject();
    w.KeyString("domain", d);
    w.KeyInt("version", v);
    w.EndObject();
  }
  w.EndArray();
  w.KeyString("graph_name", s.graph_name);
  w.Key("inputs");
  WriteIo(w, s.inputs);
  w.Key("outputs");
  WriteIo(w, s.outputs);
  w.KeyInt("node_count", s.node_count);
  w.KeyInt("total_node_count", s.total_node_count);
  w.Key("op_histogram");
  WriteHistogram(w, s.op_histogram);
  w.Key("subgraph_op_histogram");
  WriteHistogram(w, s.subgraph_op_histogram);
  w.Key("subgraphs");
  w.BeginArray();
  for (const auto& sg : s.subgraphs) {
    w.BeginObject();
    w.KeyString("path", sg.path);
    w.KeyInt("depth", sg.depth);
    w.KeyInt("node_count", sg.node_count);
    w.Key("op_histogram");
    WriteHistogram(w, sg.op_histogram);
    w.EndObject();
  }
  w.EndArray();
  w.Key("initializers");
  w.BeginObject();
  w.KeyInt("count", s.initializer_count);
  w.KeyInt("sparse_count", s.sparse_initializer_count);
  w.KeyInt("inline_bytes", static_cast<int64_t>(s.inline_bytes));
  w.KeyInt("external_bytes", static_cast<int64_t>(s.external_bytes));
  w.Key("external_files");
  w.BeginArray();
  for (const auto& f : s.external_files) w.String(f);
  w.EndArray();
  w.EndObject();
  w.Key("parameter_count");
  if (s.parameter_count_overflow) {
    w.Null();
  } else {
    w.Uint(s.parameter_count);
  }
  w.KeyInt("value_info_count", s.value_info_count);
  w.Key("functions");
  w.BeginArray();
  for (const auto& f : s.functions) {
    w.BeginObject();
    w.KeyString("domain", f.domain);
    w.KeyString("name", f.name);
    w.KeyString("overload", f.overload);
    w.KeyInt("inputs", f.inputs);
    w.KeyInt("outputs", f.outputs);
    w.KeyInt("attributes", f.attributes);
    w.KeyInt("node_count", f.node_count);
    w.EndObject();
  }
  w.EndArray();
  w.Key("metadata");
  w.BeginArray();
  for (const auto& [k, v] : s.metadata) {
    w.BeginObject();
    w.KeyString("key", k);
    w.KeyString("value", v);
    w.EndObject();
  }
  w.EndArray();
  w.KeyInt("training_info_count", s.training_info_count);
  w.EndObject();
  return w.Take();
}

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) absl::StrAppend(&out, i ? ", " : "", names[i].empty() ? "<none>" : names[i]);
  return out;
}

void ListNodes(const pb::GraphProto& g, int depth, std::string* out) {
  std::string indent(depth * 4, ' ');
  for (size_t i = 0; i < g.node.size(); ++i) {
    const auto& n = g.node[i];
    absl::StrAppend(out, indent, "[", i, "] ", OpKey(n), n.name.empty() ? "" : absl::StrCat(" '", Sv(n.name), "'"),
                    ": (", JoinNames(n.input), ") -> (", JoinNames(n.output), ")\n");
    if (depth >= limits::kMaxGraphDepth) continue;
    for (const auto& attr : n.attribute) {
      if (attr.g) {
        absl::StrAppend(out, indent, "  ", attr.name, ":\n");
        ListNodes(*attr.g, depth + 1, out);
      }
      for (size_t k = 0; k < attr.graphs.size(); ++k) {
        absl::StrAppend(out, indent, "  ", attr.name, "[", k, "]:\n");
        ListNodes(attr.graphs[k], depth + 1, out);
      }
    }
  }
}

std::string DotId(std::string_view prefix, std::string_view name) {
  return JsonWriter::Quote(absl::StrCat(Sv(prefix), Sv(name)));
}

void DotGraph(const pb::GraphProto& g, const std::string& scope, int depth, int* cluster, std::string* out) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer) inits.insert(t.name);
  std::map<std::string, std::string> producer;  // value -> node id
  for (const auto& vi : g.input) {
    if (inits.count(vi.name)) continue;
    std::string id = DotId(scope + "in:", vi.name);
    producer[vi.name] = id;
    absl::StrAppend(out, "  ", id, " [shape=ellipse, style=filled, fillcolor=\"#d9ead3\", label=",
                    JsonWriter::Quote(absl::StrCat(vi.name, "\n", TypeOf(vi))), "];\n");
  }
  for (size_t i = 0; i < g.node.size(); ++i) {
    const auto& n = g.node[i];
    std::string id = DotId(scope + "node:", std::to_string(i));
    absl::StrAppend(out, "  ", id, " [shape=box, style=\"rounded,filled\", fillcolor=\"#cfe2f3\", label=",
                    JsonWriter::Quote(n.name.empty() ? OpKey(n) : absl::StrCat(OpKey(n), "\n", Sv(n.name))), "];\n");
    for (const auto& in : n.input) {
      auto it = producer.find(in);
      if (it != producer.end()) {
        absl::StrAppend(out, "  ", it->second, " -> ", id, " [label=", JsonWriter::Quote(in), "];\n");
      }
    }
    for (const auto& o : n.output) {
      if (!o.empty()) producer[o] = id;
    }
    if (depth >= limits::kMaxGraphDepth) continue;
    for (const auto& attr : n.attribute) {
      std::vector<const pb::GraphProto*> subs;
      if (attr.g) subs.push_back(attr.g.get());
      for (const auto& sg : attr.graphs) subs.push_back(&sg);
      for (const auto* sg : subs) {
        int c = (*cluster)++;
        absl::StrAppend(out, "  subgraph cluster_", c, " {\n  label=",
                        JsonWriter::Quote(absl::StrCat(OpKey(n), " › ", Sv(attr.name))),
                        "; style=dashed;\n");
        DotGraph(*sg, absl::StrCat(scope, "g", c, ":"), depth + 1, cluster, out);
        absl::StrAppend(out, "  }\n");
      }
    }
  }
  for (const auto& vi : g.output) {
    std::string id = DotId(scope + "out:", vi.name);
    absl::StrAppend(out, "  ", id, " [shape=ellipse, style=filled, fillcolor=\"#fce5cd\", label=",
                    JsonWriter::Quote(absl::StrCat(vi.name, "\n", TypeOf(vi))), "];\n");
    auto it = producer.find(vi.name);
    if (it != producer.end()) absl::StrAppend(out, "  ", it->second, " -> ", id, ";\n");
  }
}

}  // namespace

std::string RenderNodeList(const pb::ModelProto& model) {
  std::string out;
  if (model.graph) ListNodes(*model.graph, 0, &out);
  return out;
}

std::string RenderDot(const pb::ModelProto& model) {
  std::string out = "digraph onnx {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
                    "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  int cluster = 0;
  if (model.graph) DotGraph(*model.graph, "", 0, &cluster, &out);
  out += "}\n";
  return out;
}

}  // namespace onnxkit::analysis
