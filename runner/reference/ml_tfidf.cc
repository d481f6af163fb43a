// Reference kernel: TfIdfVectorizer (opset 9).
//
// The pool lists n-grams grouped by length (ngram_counts[i]: where the
// (i+1)-grams start); n-gram j of the pool (counted across all lengths)
// lands in output column ngram_indexes[j]; a repeated n-gram keeps its last
// position. For each row of X ([C] or [B, C]), every n-gram of length
// [min_gram_length, max_gram_length] whose items are `skip + 1` apart
// (skip in [0, max_skip_count]; unigrams counted once) that is in the pool is
// counted. Mode TF: counts; IDF: weight (or 1) where the count is > 0;
// TFIDF: count * weight (or count).
#include <map>

#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"

namespace onnxkit::runner::reference {
namespace {

class TfIdfKernel : public Kernel {
 public:
  struct Config {
    int64_t min_n = 1, max_n = 1, max_skip = 0;
    std::string mode;
    std::vector<int64_t> ngram_indexes;
    std::vector<float> weights;
    bool strings = false;
    std::map<std::string, int64_t> string_ids;              // pool string -> token id
    std::map<std::vector<int64_t>, int64_t> ngram_column;  // token ids -> output column
    int64_t columns = 0;
  };

  explicit TfIdfKernel(Config c) : c_(std::move(c)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    bool ok = c_.strings ? x->is_string() : (x->dtype() == 6 || x->dtype() == 7);
    if (!ok || x->rank() > 2 || x->rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("X must be a [C] or [B, C] ", c_.strings ? "string" : "int32/int64",
                                                     " tensor (the pool's type), got ", DescribeTensor(*x)));
    }
    const int64_t rows = x->rank() == 2 ? x->dim(0) : 1, width = x->dim(x->rank() - 1);
    std::vector<int64_t> tokens(static_cast<size_t>(x->size()));
    for (int64_t i = 0; i < x->size(); ++i) {
      if (c_.strings) {
        auto it = c_.string_ids.find(x->strings()[static_cast<size_t>(i)]);
        tokens[static_cast<size_t>(i)] = it == c_.string_ids.end() ? -1 : it->second;
      } else {
        tokens[static_cast<size_t>(i)] = x->dtype() == 7 ? x->data<int64_t>()[i] : x->data<int32_t>()[i];
      }
    }
    std::vector<int64_t> shape = {c_.columns};
    if (x->rank() == 2) shape.insert(shape.begin(), rows);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 1, shape));
    std::vector<int64_t> counts(static_cast<size_t>(c_.columns));
    std::vector<int64_t> gram;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(counts.begin(), counts.end(), 0);
      const int64_t* row = tokens.data() + r * width;
      for (int64_t skip = 0; skip <= c_.max_skip; ++skip) {
        for (int64_t n = std::max<int64_t>(c_.min_n, skip > 0 ? 2 : 1); n <= c_.max_n; ++n) {
          for (int64_t start = 0; start + (n - 1) * (skip + 1) < width; ++start) {
            gram.clear();
            for (int64_t k = 0; k < n; ++k) gram.push_back(row[start + k * (skip + 1)]);
            auto it = c_.ngram_column.find(gram);
            if (it != c_.ngram_column.end()) ++counts[static_cast<size_t>(it->second)];
          }
        }
      }
      float* out = y->mutable_data<float>() + r * c_.columns;
      for (int64_t j = 0; j < c_.columns; ++j) {
        int64_t f = counts[static_cast<size_t>(j)];
        float w = c_.weights.empty() ? 1.0f : c_.weights[static_cast<size_t>(j)];
        out[j] = c_.mode == "TF" ? static_cast<float>(f) : c_.mode == "IDF" ? (f > 0 ? w : 0.0f) : static_cast<float>(f) * w;
      }
    }
    return absl::OkStatus();
  }

 private:
  Config c_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeTfIdfVectorizer(const ir::Node& node, const KernelInfo&) {
  TfIdfKernel::Config c;
  c.min_n = AttrInt(node, "min_gram_length", 0);
  c.max_n = AttrInt(node, "max_gram_length", 0);
  c.max_skip = AttrInt(node, "max_skip_count", 0);
  c.mode = AttrString(node, "mode", "");
  if (c.min_n < 1 || c.max_n < c.min_n || c.max_n > 64 || c.max_skip < 0 || c.max_skip > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("need 1 <= min_gram_length (", c.min_n, ") <= max_gram_length (",
                                                   c.max_n, ") <= 64 and max_skip_count (", c.max_skip, ") >= 0"));
  }
  if (c.mode != "TF" && c.mode != "IDF" && c.mode != "TFIDF") {
    return absl::InvalidArgumentError(absl::StrCat("mode must be TF, IDF or TFIDF, got '", c.mode, "'"));
  }
  std::vector<int64_t> counts = AttrInts(node, "ngram_counts");
  c.ngram_indexes = AttrInts(node, "ngram_indexes");
  c.weights = AttrFloats(node, "weights");
  std::vector<int64_t> pool = AttrInts(node, "pool_int64s");
  std::vector<std::string> pool_strings;
  if (const ir::Attribute* a = node.FindAttribute("pool_strings")) pool_strings = a->proto.strings;
  c.strings = !pool_strings.empty();
  if (c.strings == !pool.empty()) return absl::InvalidArgumentError("exactly one of pool_int64s and pool_strings is needed");
  if (c.strings) {
    for (const std::string& s : pool_strings) {
      auto [it, inserted] = c.string_ids.emplace(s, static_cast<int64_t>(c.string_ids.size()));
      pool.push_back(it->second);
    }
  }
  for (int64_t i : c.ngram_indexes) {
    if (i < 0) return absl::InvalidArgumentError(absl::StrCat("ngram_indexes holds a negative index ", i));
    c.columns = std::max(c.columns, i + 1);
  }
  if (!c.weights.empty() && static_cast<int64_t>(c.weights.size()) < c.columns) {
    return absl::InvalidArgumentError(absl::StrCat("weights has ", c.weights.size(), " values for ", c.columns, " columns"));
  }
  const int64_t total = static_cast<int64_t>(pool.size());
  int64_t ngram_id = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i], end = i + 1 < counts.size() ? counts[i + 1] : total;
    if (begin < 0 || end < begin || end > total || (end - begin) % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("ngram_counts ", i, " (", begin, ") does not split the pool of ",
                                                     total, " items into ", n, "-grams"));
    }
    for (int64_t at = begin; at < end; at += n, ++ngram_id) {
      if (n < c.min_n || n > c.max_n) continue;
      if (ngram_id >= static_cast<int64_t>(c.ngram_indexes.size())) {
        return absl::InvalidArgumentError(absl::StrCat("ngram_indexes has no entry for pool n-gram ", ngram_id));
      }
      c.ngram_column[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)] =
          c.ngram_indexes[static_cast<size_t>(ngram_id)];
    }
  }
  return std::unique_ptr<Kernel>(new TfIdfKernel(std::move(c)));
}

}  // namespace onnxkit::runner::reference
