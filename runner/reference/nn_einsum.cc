// Reference kernel: Einsum. The equation is checked once; each run labels
// every axis (letters, and the broadcast "..." dims), checks the sizes, and
// sums the product of the inputs over every label combination, the output
// labels outermost. Repeated labels in one term read diagonals; labels
// missing from the output are summed. Implicit mode ("ij,jk") outputs the
// "..." dims then the labels used once, in alphabetical order.
#include <algorithm>
#include <map>
#include <type_traits>

#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/einsum_labels.h"
#include "runner/reference/nn.h"

namespace onnxkit::runner::reference {
namespace {

// A term as written: its letters in order, and where "..." sits (-1: none).
struct Term {
  std::string letters;
  int ellipsis_at = -1;  // index into letters before which "..." stands
};

absl::StatusOr<Term> ParseTerm(std::string_view s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (t.ellipsis_at >= 0 || s.substr(i, 3) != "...") {
        return absl::InvalidArgumentError(absl::StrCat("bad ellipsis in einsum term '", Sv(s), "'"));
      }
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t.letters.push_back(c);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("bad character '", std::string(1, c), "' in einsum term '",
                                                     Sv(s), "'"));
    }
  }
  return t;
}

struct Equation {
  std::vector<Term> inputs;
  std::optional<Term> output;  // absent in implicit mode
};

absl::StatusOr<Equation> ParseEquation(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  Equation e;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    ONNXKIT_ASSIGN_OR_RETURN(Term t, ParseTerm(std::string_view(lhs).substr(start, comma - start)));
    e.inputs.push_back(t);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    ONNXKIT_ASSIGN_OR_RETURN(Term t, ParseTerm(std::string_view(eq).substr(arrow + 2)));
    e.output = t;
  }
  return e;
}

// Labels: letters are their char codes; "..." dim k (of the broadcast
// ellipsis, left to right) is 256 + k.
constexpr int kEllipsisLabel = 256;

}  // namespace

absl::StatusOr<EinsumLabels> LabelEinsum(std::string_view equation,
                                         const std::vector<std::vector<int64_t>>& shapes) {
  ONNXKIT_ASSIGN_OR_RETURN(Equation parsed, ParseEquation(std::string(equation)));
  size_t n_in = parsed.inputs.size();
  if (shapes.size() != n_in) {
    return absl::InvalidArgumentError(
        absl::StrCat("einsum equation has ", n_in, " terms but the node has ", shapes.size(), " inputs"));
  }
  // Label every axis of every input.
  int ell_rank = 0;
  std::vector<std::vector<int>> labels(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const Term& t = parsed.inputs[i];
    int extra = static_cast<int>(shapes[i].size()) - static_cast<int>(t.letters.size());
    if (extra < 0 || (extra > 0 && t.ellipsis_at < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("einsum term ", i, " does not match input ", ShapeString(shapes[i])));
    }
    ell_rank = std::max(ell_rank, extra);
  }
  std::map<int, int64_t> size;
  for (size_t i = 0; i < n_in; ++i) {
    const Term& t = parsed.inputs[i];
    int extra = static_cast<int>(shapes[i].size()) - static_cast<int>(t.letters.size());
    for (int a = 0, li = 0; a < static_cast<int>(shapes[i].size());) {
      if (li == t.ellipsis_at && extra > 0) {
        for (int k = 0; k < extra; ++k, ++a) labels[i].push_back(kEllipsisLabel + ell_rank - extra + k);
        extra = 0;
        continue;
      }
      labels[i].push_back(static_cast<unsigned char>(t.letters[static_cast<size_t>(li++)]));
      ++a;
    }
    for (int a = 0; a < static_cast<int>(shapes[i].size()); ++a) {
      int l = labels[i][static_cast<size_t>(a)];
      int64_t d = shapes[i][static_cast<size_t>(a)];
      auto [it, fresh] = size.emplace(l, d);
      if (fresh || it->second == d) continue;
      // Broadcast dims of "..." may be 1; letters must agree exactly.
      if (l >= kEllipsisLabel && (d == 1 || it->second == 1)) {
        it->second = std::max(it->second, d);
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat("einsum label sizes disagree: ", it->second, " and ", d,
                                                     " in input ", ShapeString(shapes[i])));
    }
  }
  std::vector<int> out_labels;
  for (int k = 0; k < ell_rank; ++k) out_labels.push_back(kEllipsisLabel + k);
  if (parsed.output) {
    if (ell_rank > 0 && parsed.output->ellipsis_at < 0) {
      return absl::InvalidArgumentError("einsum output must keep the \"...\" dims of the inputs");
    }
    out_labels.clear();
    const Term& t = *parsed.output;
    for (int li = 0; li <= static_cast<int>(t.letters.size()); ++li) {
      if (li == t.ellipsis_at) {
        for (int k = 0; k < ell_rank; ++k) out_labels.push_back(kEllipsisLabel + k);
      }
      if (li < static_cast<int>(t.letters.size())) {
        int l = static_cast<unsigned char>(t.letters[static_cast<size_t>(li)]);
        if (!size.count(l) || std::count(out_labels.begin(), out_labels.end(), l) > 0) {
          return absl::InvalidArgumentError(absl::StrCat("einsum output label '",
                                                         std::string(1, t.letters[static_cast<size_t>(li)]),
                                                         "' is unknown or repeated"));
        }
        out_labels.push_back(l);
      }
    }
  } else {
    std::map<int, int> count;
    for (const auto& ls : labels) {
      for (int l : ls) count[l] += l < kEllipsisLabel;
    }
    for (auto [l, c] : count) {
      if (c == 1) out_labels.push_back(l);
    }
  }
  EinsumLabels result;
  result.inputs = std::move(labels);
  result.output = std::move(out_labels);
  result.size = std::move(size);
  return result;
}

namespace {

class EinsumKernel : public Kernel {
 public:
  explicit EinsumKernel(std::string equation) : equation_(std::move(equation)) {}

  absl::Status Run(KernelContext& ctx) override {
    size_t n_in = static_cast<size_t>(ctx.num_inputs());
    std::vector<const Tensor*> in(n_in);
    std::vector<std::vector<int64_t>> shapes(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      ONNXKIT_ASSIGN_OR_RETURN(in[i], ctx.Input(static_cast<int>(i)));
      if (in[i]->dtype() != in[0]->dtype())
        return absl::InvalidArgumentError("Einsum inputs must have one element type");
      shapes[i] = in[i]->shape();
    }
    ONNXKIT_ASSIGN_OR_RETURN(EinsumLabels labeled, LabelEinsum(equation_, shapes));
    std::vector<std::vector<int>>& labels = labeled.inputs;
    std::vector<int>& out_labels = labeled.output;
    std::map<int, int64_t>& size = labeled.size;
    // Every label: the output's first, then the summed ones.
    std::vector<int> all = out_labels;
    for (auto [l, d] : size) {
      if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
    }
    std::vector<int64_t> out_shape, dims;
    for (int l : out_labels) out_shape.push_back(size[l]);
    for (int l : all) dims.push_back(size[l]);
    if (!CheckedElementCount(dims)) return absl::InvalidArgumentError("einsum iteration space overflows");
    // stride[i][k]: how far input i moves when label all[k] steps.
    std::vector<std::vector<int64_t>> stride(n_in, std::vector<int64_t>(all.size(), 0));
    for (size_t i = 0; i < n_in; ++i) {
      std::vector<int64_t> st = Strides(in[i]->shape());
      for (int a = 0; a < in[i]->rank(); ++a) {
        if (in[i]->dim(a) == 1 && size[labels[i][static_cast<size_t>(a)]] != 1) continue;  // broadcast
        size_t k = static_cast<size_t>(std::find(all.begin(), all.end(), labels[i][static_cast<size_t>(a)]) - all.begin());
        stride[i][k] += st[static_cast<size_t>(a)];
      }
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, in[0]->dtype(), out_shape));
    return VisitNumeric(in[0]->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return absl::UnimplementedError("Einsum on bool");
      } else {
        using C = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
        auto load = [&](size_t i, int64_t off) -> C {
          T v = in[i]->data<T>()[off];
          if constexpr (std::is_integral_v<T>) {
            return static_cast<C>(static_cast<int64_t>(v));
          } else {
            return static_cast<C>(static_cast<ComputeT<T>>(v));
          }
        };
        int64_t out_size = y->size(), inner = 1;
        for (size_t k = out_labels.size(); k < all.size(); ++k) inner *= dims[k];
        if (inner == 0) return absl::OkStatus();  // empty sums: the zero-filled output
        std::vector<int64_t> pos(all.size(), 0), off(n_in, 0);
        T* py = y->mutable_data<T>();
        for (int64_t o = 0; o < out_size; ++o) {
          C acc{};
          for (int64_t s = 0; s < inner; ++s) {
            C prod = C{1};
            for (size_t i = 0; i < n_in; ++i) prod *= load(i, off[i]);
            acc += prod;
            // Advance the odometer (last label fastest).
            for (size_t k = all.size(); k-- > 0;) {
              for (size_t i = 0; i < n_in; ++i) off[i] += stride[i][k];
              if (++pos[k] < dims[k]) break;
              for (size_t i = 0; i < n_in; ++i) off[i] -= stride[i][k] * dims[k];
              pos[k] = 0;
            }
          }
          py[o] = static_cast<T>(acc);
        }
        return absl::OkStatus();
      }
    });
  }

 private:
  std::string equation_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeEinsum(const ir::Node& node, const KernelInfo&) {
  auto eq = node.GetString("equation");
  if (!eq) return absl::InvalidArgumentError("equation is required");
  ONNXKIT_RETURN_IF_ERROR(ParseEquation(*eq).status());  // a malformed equation fails at load
  return std::unique_ptr<Kernel>(new EinsumKernel(std::string(*eq)));
}

}  // namespace onnxkit::runner::reference
