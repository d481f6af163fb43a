// Reference kernels: ai.onnx.ml ops over categories and maps.
//
// CategoryMapper: strings to int64 (cats_strings[i] -> cats_int64s[i],
//   else default_int64) or int64 to strings (else default_string); the
//   first of repeated categories wins.
// FeatureVectorizer: the inputs ([N, C_i], or [C_i] for one row) side by
//   side as float [N, sum(inputdimensions)]; input i fills
//   inputdimensions[i] columns, cut or padded with 0.
// DictVectorizer: a map (string or int64 keys) as [1, V] in the vocabulary's
//   order, in the values' type; keys outside the vocabulary are dropped,
//   absent entries are 0 (or "").
// CastMap: a map<int64, string|float> as [1, n] in key order (DENSE) or
//   [1, max_map] (max_map <= 2^26) with the value of key k at column k
//   (SPARSE; other columns hold 0, or "0.f" as ONNX Runtime writes for
//   strings), cast to float
//   (strings parsed), int64 (floats truncated, strings parsed) or string
//   (floats written as printf's %f).
// A map is a keys tensor plus a sequence of one-element value tensors
// (runner/value.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"
#include "runner/reference/shape_ops.h"

namespace onnxkit::runner::reference {
namespace {

std::vector<std::string> AttrStringList(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  return a == nullptr ? std::vector<std::string>() : a->proto.strings;
}

class CategoryMapperKernel : public Kernel {
 public:
  absl::Status Init(const ir::Node& node) {
    ints_ = AttrInts(node, "cats_int64s");
    strs_ = AttrStringList(node, "cats_strings");
    if (ints_.size() != strs_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cats_int64s has ", ints_.size(), " values, cats_strings ", strs_.size()));
    }
    for (size_t i = 0; i < ints_.size(); ++i) {
      to_int_.emplace(strs_[i], ints_[i]);
      to_str_.emplace(ints_[i], strs_[i]);
    }
    default_int_ = AttrInt(node, "default_int64", -1);
    default_str_ = AttrString(node, "default_string", "_Unused");
    return absl::OkStatus();
  }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (x->is_string()) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kInt64, x->shape()));
      for (int64_t i = 0; i < x->size(); ++i) {
        auto it = to_int_.find(x->strings()[static_cast<size_t>(i)]);
        y->mutable_data<int64_t>()[i] = it == to_int_.end() ? default_int_ : it->second;
      }
      return absl::OkStatus();
    }
    if (x->dtype() != pb::kInt64) {
      return absl::InvalidArgumentError(
          absl::StrCat("X must be a string or int64 tensor, got ", DescribeTensor(*x)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kString, x->shape()));
    for (int64_t i = 0; i < x->size(); ++i) {
      auto it = to_str_.find(x->data<int64_t>()[i]);
      y->mutable_strings()[static_cast<size_t>(i)] = it == to_str_.end() ? default_str_ : it->second;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> ints_;
  std::vector<std::string> strs_;
  absl::flat_hash_map<std::string, int64_t> to_int_;
  absl::flat_hash_map<int64_t, std::string> to_str_;
  int64_t default_int_ = -1;
  std::string default_str_;
};

class FeatureVectorizerKernel : public Kernel {
 public:
  absl::Status Init(const ir::Node& node) {
    dims_ = AttrInts(node, "inputdimensions");
    for (int64_t d : dims_) {
      if (d < 0 || d > (int64_t{1} << 31) || total_ > (int64_t{1} << 40)) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputdimensions holds ", d, ", which is negative or too large"));
      }
      total_ += d;
    }
    return absl::OkStatus();
  }

  absl::Status Run(KernelContext& ctx) override {
    if (ctx.num_inputs() != static_cast<int>(dims_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx.num_inputs(), " inputs for ", dims_.size(), " inputdimensions"));
    }
    int64_t rows = -1;
    std::vector<const Tensor*> xs;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(i));
      const int32_t t = x->dtype();
      if (x->rank() == 0 || (t != pb::kFloat && t != pb::kDouble && t != pb::kInt64 && t != pb::kInt32)) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", i, " must be a float/double/int64/int32 tensor of rank >= 1, got ",
                         DescribeTensor(*x)));
      }
      const int64_t n = x->rank() == 1 ? 1 : x->dim(0);
      if (rows >= 0 && n != rows) {
        return absl::InvalidArgumentError(absl::StrCat("input ", i, " has ", n, " rows, input 0 ", rows));
      }
      rows = n;
      xs.push_back(x);
    }
    if (rows < 0) rows = 1;
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, pb::kFloat, {rows, total_}));
    float* out = y->mutable_data<float>();
    int64_t offset = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t cols = rows == 0 ? 0 : xs[i]->size() / rows;
      const int64_t take = std::min(cols, dims_[i]);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < take; ++c) {
          out[r * total_ + offset + c] = static_cast<float>(shape_ops::LoadDouble(*xs[i], r * cols + c));
        }
      }
      offset += dims_[i];
    }
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> dims_;
  int64_t total_ = 0;
};

// The entries of a map value: keys tensor and one value tensor per key.
absl::Status MapEntries(const KernelContext& ctx, const Tensor** keys, std::vector<const Tensor*>* values) {
  const RtValue* v = ctx.Value(0);
  if (v == nullptr || !v->is_map()) return absl::InvalidArgumentError("X must be a map");
  *keys = &v->map_keys();
  const RtValue& seq = v->map_values();
  if (!seq.is_sequence() || static_cast<int64_t>(seq.elements().size()) != (*keys)->size()) {
    return absl::InvalidArgumentError("the map's values do not match its keys");
  }
  if ((*keys)->rank() != 1 || (!(*keys)->is_string() && (*keys)->dtype() != pb::kInt64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the map's keys must be a string or int64 list, got ", DescribeTensor(**keys)));
  }
  for (const RtValue& e : seq.elements()) {
    if (!e.is_tensor() || e.tensor().size() != 1)
      return absl::InvalidArgumentError("each map value must be a one-element tensor");
    if (!values->empty() && e.tensor().dtype() != values->front()->dtype()) {
      return absl::InvalidArgumentError("the map's values differ in type");
    }
    values->push_back(&e.tensor());
  }
  return absl::OkStatus();
}

class DictVectorizerKernel : public Kernel {
 public:
  absl::Status Init(const ir::Node& node) {
    std::vector<int64_t> ints = AttrInts(node, "int64_vocabulary");
    std::vector<std::string> strs = AttrStringList(node, "string_vocabulary");
    if (ints.empty() == strs.empty()) {
      return absl::InvalidArgumentError(
          "exactly one of int64_vocabulary and string_vocabulary must be given");
    }
    strings_ = !strs.empty();
    size_ = static_cast<int64_t>(strings_ ? strs.size() : ints.size());
    for (int64_t i = 0; i < size_; ++i) {
      if (strings_) {
        str_index_.emplace(strs[static_cast<size_t>(i)], i);
      } else {
        int_index_.emplace(ints[static_cast<size_t>(i)], i);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* keys = nullptr;
    std::vector<const Tensor*> values;
    ONNXKIT_RETURN_IF_ERROR(MapEntries(ctx, &keys, &values));
    if (keys->is_string() != strings_) {
      return absl::InvalidArgumentError(absl::StrCat("the map has ", keys->is_string() ? "string" : "int64",
                                                     " keys, the vocabulary ",
                                                     strings_ ? "strings" : "int64s"));
    }
    const int32_t dtype = values.empty() ? pb::kFloat : values[0]->dtype();
    if (dtype != pb::kFloat && dtype != pb::kDouble && dtype != pb::kInt64 && dtype != pb::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat("map values of type ", Sv(DataTypeName(dtype)), " are not supported"));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dtype, {1, size_}));
    for (int64_t k = 0; k < keys->size(); ++k) {
      int64_t at = -1;
      if (strings_) {
        auto it = str_index_.find(keys->strings()[static_cast<size_t>(k)]);
        if (it != str_index_.end()) at = it->second;
      } else {
        auto it = int_index_.find(keys->data<int64_t>()[k]);
        if (it != int_index_.end()) at = it->second;
      }
      if (at < 0) continue;
      const Tensor& v = *values[static_cast<size_t>(k)];
      switch (dtype) {
        case pb::kFloat:
          y->mutable_data<float>()[at] = v.data<float>()[0];
          break;
        case pb::kDouble:
          y->mutable_data<double>()[at] = v.data<double>()[0];
          break;
        case pb::kInt64:
          y->mutable_data<int64_t>()[at] = v.data<int64_t>()[0];
          break;
        default:
          y->mutable_strings()[static_cast<size_t>(at)] = v.strings()[0];
          break;
      }
    }
    return absl::OkStatus();
  }

 private:
  bool strings_ = false;
  int64_t size_ = 0;
  absl::flat_hash_map<std::string, int64_t> str_index_;
  absl::flat_hash_map<int64_t, int64_t> int_index_;
};

class CastMapKernel : public Kernel {
 public:
  absl::Status Init(const ir::Node& node) {
    const std::string to = AttrString(node, "cast_to", "TO_FLOAT");
    const std::string form = AttrString(node, "map_form", "DENSE");
    if (to == "TO_FLOAT") {
      to_ = pb::kFloat;
    } else if (to == "TO_INT64") {
      to_ = pb::kInt64;
    } else if (to == "TO_STRING") {
      to_ = pb::kString;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("cast_to '", to, "' is not TO_FLOAT, TO_INT64 or TO_STRING"));
    }
    if (form != "DENSE" && form != "SPARSE") {
      return absl::InvalidArgumentError(absl::StrCat("map_form '", form, "' is not DENSE or SPARSE"));
    }
    sparse_ = form == "SPARSE";
    max_map_ = AttrInt(node, "max_map", 1);
    if (sparse_ && (max_map_ < 0 || max_map_ > (int64_t{1} << 26))) {
      return absl::InvalidArgumentError(absl::StrCat("max_map ", max_map_, " is negative or too large"));
    }
    return absl::OkStatus();
  }

  absl::Status Run(KernelContext& ctx) override {
    const Tensor* keys = nullptr;
    std::vector<const Tensor*> values;
    ONNXKIT_RETURN_IF_ERROR(MapEntries(ctx, &keys, &values));
    if (keys->is_string()) return absl::InvalidArgumentError("CastMap takes a map with int64 keys");
    if (!values.empty() && !values[0]->is_string() && values[0]->dtype() != pb::kFloat) {
      return absl::InvalidArgumentError("CastMap takes a map with string or float values");
    }
    std::vector<int64_t> order(static_cast<size_t>(keys->size()));
    std::iota(order.begin(), order.end(), 0);
    const int64_t* k = keys->data<int64_t>();
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return k[a] < k[b]; });
    for (size_t i = 1; i < order.size(); ++i) {
      if (k[order[i]] == k[order[i - 1]])
        return absl::InvalidArgumentError(absl::StrCat("key ", k[order[i]], " is repeated"));
    }
    if (sparse_ && !order.empty() && k[order[0]] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("key ", k[order[0]], " is negative"));
    }
    const int64_t width = sparse_ ? max_map_ : keys->size();
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to_, {1, width}));
    if (to_ == pb::kString) {
      for (int64_t c = 0; c < width && sparse_; ++c) y->mutable_strings()[static_cast<size_t>(c)] = "0.f";
    }
    for (size_t i = 0; i < order.size(); ++i) {
      const int64_t col = sparse_ ? k[order[i]] : static_cast<int64_t>(i);
      if (col >= width) break;
      ONNXKIT_RETURN_IF_ERROR(Store(*values[static_cast<size_t>(order[i])], *y, col));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Store(const Tensor& v, Tensor& y, int64_t col) const {
    if (v.is_string()) {
      const std::string& s = v.strings()[0];
      if (to_ == pb::kString) {
        y.mutable_strings()[static_cast<size_t>(col)] = s;
        return absl::OkStatus();
      }
      errno = 0;
      char* end = nullptr;
      if (to_ == pb::kFloat) {
        float f = std::strtof(s.c_str(), &end);
        if (end == s.c_str() || errno == ERANGE)
          return absl::InvalidArgumentError(absl::StrCat("'", s, "' is not a float"));
        y.mutable_data<float>()[col] = f;
      } else {
        long long i = std::strtoll(s.c_str(), &end, 10);
        if (end == s.c_str() || errno == ERANGE)
          return absl::InvalidArgumentError(absl::StrCat("'", s, "' is not an integer"));
        y.mutable_data<int64_t>()[col] = static_cast<int64_t>(i);
      }
      return absl::OkStatus();
    }
    const float f = v.data<float>()[0];
    if (to_ == pb::kFloat) {
      y.mutable_data<float>()[col] = f;
    } else if (to_ == pb::kInt64) {
      if (!(std::fabs(f) < 9.2e18f))
        return absl::InvalidArgumentError(absl::StrCat(f, " does not fit int64"));
      y.mutable_data<int64_t>()[col] = static_cast<int64_t>(f);
    } else {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%f", static_cast<double>(f));
      if (std::fabs(f) >= 1e30f || std::isnan(f)) {
        y.mutable_strings()[static_cast<size_t>(col)] = absl::StrCat(f);
      } else {
        y.mutable_strings()[static_cast<size_t>(col)] = buf;
      }
    }
    return absl::OkStatus();
  }

  int32_t to_ = pb::kFloat;
  bool sparse_ = false;
  int64_t max_map_ = 1;
};

template <typename K>
absl::StatusOr<std::unique_ptr<Kernel>> Make(const ir::Node& node) {
  auto k = std::make_unique<K>();
  ONNXKIT_RETURN_IF_ERROR(k->Init(node));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeCategoryMapper(const ir::Node& node, const KernelInfo&) {
  return Make<CategoryMapperKernel>(node);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeFeatureVectorizer(const ir::Node& node, const KernelInfo&) {
  return Make<FeatureVectorizerKernel>(node);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeDictVectorizer(const ir::Node& node, const KernelInfo&) {
  return Make<DictVectorizerKernel>(node);
}
absl::StatusOr<std::unique_ptr<Kernel>> MakeCastMap(const ir::Node& node, const KernelInfo&) {
  return Make<CastMapKernel>(node);
}

}  // namespace onnxkit::runner::reference
