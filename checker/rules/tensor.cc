// Tensor rules (E05xx), for every tensor of the model: initializers and
// sparse initializers of every graph, tensors in node attributes (Constant
// values, attribute defaults of functions), recursively in subgraphs and
// function bodies:
//   - data_type known; dims non-negative, count within int64 (checked math);
//   - inline data: one field, the field the type uses (never raw_data for
//     strings), exactly the entries or bytes the dims require — sizes are
//     compared, nothing is allocated from dims (lib/tensor's validation);
//   - sparse tensors: values of rank 1, int64 indices of rank 1 (linearized)
//     or 2 (coordinates), in range, strictly ascending, as many as values;
//   - external data: well-formed entries, a safe location inside the model
//     folder (else the file is refused), an existing regular file, offset and
//     length within its real size and matching dims; nothing is read.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checker/rules/rules.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/strings.h"
#include "lib/io/external_data.h"
#include "lib/tensor/tensor_data.h"

namespace onnxkit::checker::internal {
namespace {

std::string TensorName(const pb::TensorProto& t) {
  return t.name.empty() ? std::string("tensor") : absl::StrCat("tensor ", Quote(t.name));
}

rules::RuleId RuleForLocationError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return rules::kE0508;
    case absl::StatusCode::kInvalidArgument:
      return rules::kE0505;
    default:
      return rules::kE0506;  // PermissionDenied, FailedPrecondition, I/O errors
  }
}

rules::RuleId RuleForRangeError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return rules::kE0508;
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      return rules::kE0507;
    default:
      return rules::kE0506;
  }
}

class TensorRules {
 public:
  TensorRules(const std::filesystem::path& base_dir, Sink* sink) : resolver_(base_dir), sink_(sink) {}

  void Graph(const pb::GraphProto& g, const std::string& location, int depth);
  void Nodes(const std::vector<pb::NodeProto>& nodes, const std::string& location, int depth);
  void Attribute(const pb::AttributeProto& a, const std::string& location);

 private:
  // Checks one dense tensor; true when it is sound (its data may be read).
  bool Dense(const pb::TensorProto& t, const std::string& location);
  bool External(const pb::TensorProto& t, const std::string& location);
  void Sparse(const pb::SparseTensorProto& s, const std::string& location);
  void SparseIndices(const pb::SparseTensorProto& s, const std::string& location, int64_t dense_count);

  io::ExternalDataResolver resolver_;
  Sink* sink_;
};

bool TensorRules::Dense(const pb::TensorProto& t, const std::string& location) {
  const std::string name = TensorName(t);
  if (!IsKnownDataType(t.data_type)) {
    sink_->Report(rules::kE0500, location,
                  t.data_type == pb::kUndefined ? absl::StrCat(name, ": data_type is undefined (0)")
                                                : absl::StrCat(name, ": data_type ", t.data_type,
                                                               " is not a known element type (1 to 26)"));
    return false;
  }
  absl::StatusOr<int64_t> count = tensor::ElementCount(t);
  if (!count.ok()) {
    sink_->Report(rules::kE0501, location, std::string(count.status().message()));
    return false;
  }
  if (t.data_location != 0 && t.data_location != 1) {
    sink_->Report(
        rules::kE0505, location,
        absl::StrCat(name, ": data_location ", t.data_location, " is neither DEFAULT (0) nor EXTERNAL (1)"));
    return false;
  }
  if (tensor::IsExternal(t)) return External(t, location);
  if (!t.external_data.empty()) {
    sink_->Report(
        rules::kE0505, location,
        absl::StrCat(name, " has external_data entries but data_location is DEFAULT"),
        "set data_location to EXTERNAL (1), or remove the entries; readers disagree on such tensors");
    return false;
  }
  if (t.segment) return true;  // segmented tensors: data spans several protos, not checked
  absl::StatusOr<tensor::DataField> field = tensor::DataFieldInUse(t);
  if (!field.ok()) {
    sink_->Report(rules::kE0503, location, std::string(field.status().message()));
    return false;
  }
  const tensor::DataField typed = tensor::TypedFieldFor(t.data_type);
  if (*field == tensor::DataField::kRaw && t.data_type == pb::kString) {
    sink_->Report(rules::kE0503, location,
                  absl::StrCat(name, ": string data must be in string_data, not raw_data"));
    return false;
  }
  if (*field != tensor::DataField::kNone && *field != tensor::DataField::kRaw && *field != typed) {
    sink_->Report(
        rules::kE0503, location,
        absl::StrCat(name, ": data is in ", Sv(tensor::DataFieldName(*field)), ", but ",
                     Sv(DataTypeName(t.data_type)), " tensors use ", Sv(tensor::DataFieldName(typed)),
                     t.data_type == pb::kString ? "" : " or raw_data"));
    return false;
  }
  absl::Status valid = tensor::ValidateTensorData(t);
  if (!valid.ok()) {
    sink_->Report(rules::kE0502, location, std::string(valid.message()));
    return false;
  }
  return true;
}

bool TensorRules::External(const pb::TensorProto& t, const std::string& location) {
  const std::string name = TensorName(t);
  absl::StatusOr<tensor::DataField> field = tensor::DataFieldInUse(t);
  if (!field.ok() || *field != tensor::DataField::kNone) {
    sink_->Report(rules::kE0503, location,
                  absl::StrCat(name, " stores its data externally (data_location EXTERNAL) but also holds ",
                               field.ok() ? Sv(tensor::DataFieldName(*field)) : "inline data"));
    return false;
  }
  if (t.data_type == pb::kString) {
    sink_->Report(rules::kE0503, location,
                  absl::StrCat(name, ": string tensors cannot store data externally"));
    return false;
  }
  absl::StatusOr<io::ExternalDataInfo> info = io::ParseExternalData(t);
  if (!info.ok()) {
    sink_->Report(rules::kE0505, location, std::string(info.status().message()));
    return false;
  }
  absl::StatusOr<std::filesystem::path> resolved = resolver_.ResolveLocation(info->location);
  if (!resolved.ok()) {
    sink_->Report(RuleForLocationError(resolved.status()), location,
                  absl::StrCat(name, ": ", resolved.status().message()));
    return false;
  }
  absl::Status valid = resolver_.Validate(t);
  if (!valid.ok()) {
    sink_->Report(RuleForRangeError(valid), location, std::string(valid.message()));
    return false;
  }
  return true;
}

// Reads the int64 at `index` of a tensor whose data was validated: from
// int64_data, raw_data or the external bytes.
int64_t Int64At(const pb::TensorProto& t, const Bytes& raw, int64_t index) {
  if (!t.int64_data.empty()) return t.int64_data[static_cast<size_t>(index)];
  uint64_t bits = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + index * 8;
  for (int b = 7; b >= 0; --b) bits = (bits << 8) | p[b];
  return static_cast<int64_t>(bits);
}

void TensorRules::Sparse(const pb::SparseTensorProto& s, const std::string& location) {
  if (!s.values) {
    sink_->Report(rules::kE0504, location, "the sparse tensor has no values");
    return;
  }
  const std::string name = absl::StrCat("sparse tensor ", Quote(s.values->name));
  const bool values_ok = Dense(*s.values, Join(location, "values"));
  if (s.dims.empty()) {
    sink_->Report(rules::kE0504, location, absl::StrCat(name, " has no dims (the dense shape)"));
    return;
  }
  if (s.dims.size() > static_cast<size_t>(limits::kMaxRank)) {
    sink_->Report(rules::kE0501, location,
                  absl::StrCat(name, ": rank ", s.dims.size(), " exceeds the limit of ", limits::kMaxRank));
    return;
  }
  const std::optional<int64_t> dense_count = CheckedElementCount(s.dims);
  if (!dense_count) {
    sink_->Report(rules::kE0501, location,
                  absl::StrCat(name, ": dims ", tensor::DimsToString(s.dims),
                               " have a negative dim or an element count that overflows int64"));
    return;
  }
  if (!values_ok) return;
  if (s.values->dims.size() != 1) {
    sink_->Report(rules::kE0504, location,
                  absl::StrCat(name, ": values must have rank 1 ([NNZ]), got dims ",
                               tensor::DimsToString(s.values->dims)));
    return;
  }
  const int64_t nnz = s.values->dims[0];
  if (nnz > *dense_count) {
    sink_->Report(rules::kE0504, location,
                  absl::StrCat(name, " has ", nnz, " values for ", *dense_count, " dense elements"));
    return;
  }
  if (!s.indices) {
    if (nnz != 0) {
      sink_->Report(rules::kE0504, location, absl::StrCat(name, " has ", nnz, " values but no indices"));
    }
    return;
  }
  if (!Dense(*s.indices, Join(location, "indices"))) return;
  SparseIndices(s, location, *dense_count);
}

void TensorRules::SparseIndices(const pb::SparseTensorProto& s, const std::string& location,
                                int64_t dense_count) {
  const std::string name = absl::StrCat("sparse tensor ", Quote(s.values->name));
  const pb::TensorProto& idx = *s.indices;
  const int64_t nnz = s.values->dims[0];
  const int64_t rank = static_cast<int64_t>(s.dims.size());
  if (idx.data_type != pb::kInt64) {
    sink_->Report(rules::kE0504, location,
                  absl::StrCat(name, ": indices are ", ElemTypeLabel(idx.data_type), ", expected int64"));
    return;
  }
  const bool linear = idx.dims.size() == 1;
  if (!(linear && idx.dims[0] == nnz) &&
      !(idx.dims.size() == 2 && idx.dims[0] == nnz && idx.dims[1] == rank)) {
    sink_->Report(
        rules::kE0504, location,
        absl::StrCat(name, ": indices have dims ", tensor::DimsToString(idx.dims), ", expected [", nnz,
                     "] (linearized) or [", nnz, ", ", rank, "] (coordinates) for ", nnz, " values"));
    return;
  }
  Bytes raw;
  if (tensor::IsExternal(idx)) {
    absl::StatusOr<Bytes> bytes = resolver_.Read(idx);
    if (!bytes.ok()) return;  // reported by Dense
    raw = *bytes;
  } else if (idx.int64_data.empty()) {
    raw = idx.raw_data;
  }
  int64_t previous = -1;
  for (int64_t i = 0; i < nnz && !sink_->stopped(); ++i) {
    int64_t linear_index = 0;
    if (linear) {
      linear_index = Int64At(idx, raw, i);
      if (linear_index < 0 || linear_index >= dense_count) {
        sink_->Report(
            rules::kE0504, location,
            absl::StrCat(name, ": index #", i, " is ", linear_index, ", outside [0, ", dense_count, ")"));
        return;
      }
    } else {
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t c = Int64At(idx, raw, i * rank + d);
        if (c < 0 || c >= s.dims[d]) {
          sink_->Report(rules::kE0504, location,
                        absl::StrCat(name, ": coordinate ", d, " of index #", i, " is ", c, ", outside [0, ",
                                     s.dims[d], ")"));
          return;
        }
        linear_index = linear_index * s.dims[d] + c;  // < dense_count: cannot overflow
      }
    }
    if (linear_index <= previous) {
      sink_->Report(
          rules::kE0504, location,
          absl::StrCat(name, ": indices are not strictly ascending: index #", i,
                       linear_index == previous ? " repeats the previous one" : " is below the previous one"),
          "sort the indices (row-major order of coordinates) and remove duplicates");
      return;
    }
    previous = linear_index;
  }
}

void TensorRules::Attribute(const pb::AttributeProto& a, const std::string& location) {
  const std::string where = Join(location, absl::StrCat("attribute ", Quote(a.name)));
  if (a.t) Dense(*a.t, where);
  for (size_t i = 0; i < a.tensors.size() && !sink_->stopped(); ++i) {
    Dense(a.tensors[i], absl::StrCat(where, "[", i, "]"));
  }
  if (a.sparse_tensor) Sparse(*a.sparse_tensor, where);
  for (size_t i = 0; i < a.sparse_tensors.size() && !sink_->stopped(); ++i) {
    Sparse(a.sparse_tensors[i], absl::StrCat(where, "[", i, "]"));
  }
}

void TensorRules::Nodes(const std::vector<pb::NodeProto>& nodes, const std::string& location, int depth) {
  for (size_t j = 0; j < nodes.size() && !sink_->stopped(); ++j) {
    const NodeWhere where(location, nodes[j], j);
    for (const pb::AttributeProto& a : nodes[j].attribute) {
      const bool holds_tensors = a.t || !a.tensors.empty() || a.sparse_tensor || !a.sparse_tensors.empty();
      if (holds_tensors) Attribute(a, where);
    }
    if (depth + 1 > limits::kMaxGraphDepth) continue;  // reported by the graph rules
    for (const SubgraphRef& sub : Subgraphs(nodes[j])) {
      Graph(*sub.graph, Join(std::string(where), sub.label), depth + 1);
    }
  }
}

void TensorRules::Graph(const pb::GraphProto& g, const std::string& location, int depth) {
  for (size_t i = 0; i < g.initializer.size() && !sink_->stopped(); ++i) {
    Dense(g.initializer[i], Join(location, absl::StrCat("initializer ", Quote(g.initializer[i].name))));
  }
  for (size_t i = 0; i < g.sparse_initializer.size() && !sink_->stopped(); ++i) {
    const pb::SparseTensorProto& s = g.sparse_initializer[i];
    Sparse(s, Join(location, absl::StrCat("sparse initializer ",
                                          s.values ? Quote(s.values->name) : absl::StrCat("#", i))));
  }
  Nodes(g.node, location, depth);
}

}  // namespace

void CheckTensorRules(const pb::ModelProto& model, const std::filesystem::path& base_dir, Sink* sink) {
  TensorRules rules(base_dir, sink);
  if (model.graph) rules.Graph(*model.graph, GraphLabel(*model.graph), 0);
  for (const pb::FunctionProto& f : model.functions) {
    if (sink->stopped()) break;
    const std::string location = FunctionLabel(f);
    for (const pb::AttributeProto& a : f.attribute_proto) rules.Attribute(a, Join(location, "default"));
    rules.Nodes(f.node, location, 0);
  }
}

}  // namespace onnxkit::checker::internal
