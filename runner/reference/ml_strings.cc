// Reference kernels: the string ops of ai.onnx.
//
// StringNormalizer (10): drops stopwords (case-insensitively unless
//   is_case_sensitive) from a [C] or [1, C] tensor, then lower/upper-cases.
//   Case mapping is per code point of UTF-8 text (the C.UTF-8 locale's
//   simple mappings, as towlower/towupper; bytes that are not UTF-8 pass
//   through); the locale attribute is not consulted.
// StringConcat (20): elementwise concatenation with broadcasting.
// StringSplit (20): Python str.split semantics: an empty delimiter splits on
//   runs of whitespace; maxsplit limits the splits. Output [..., max pieces]
//   padded with "", and the piece count of each string.
// RegexFullMatch (20): std::regex (ECMAScript grammar, close to RE2 for
//   common patterns) run by libstdc++'s polynomial-time executor; patterns
//   and inputs are length-capped and regex errors become statuses.
#include <locale.h>
#include <wctype.h>

#include <cstdint>
#include <regex>

#include "lib/base/status_macros.h"
#include "lib/base/utf8.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/ml.h"

namespace onnxkit::runner::reference {
namespace {

// Limits on RegexFullMatch inputs: a longer pattern or string is refused
// (ResourceExhausted) so a hostile model cannot make matching run away.
constexpr size_t kMaxRegexPatternBytes = 4096;
constexpr size_t kMaxRegexInputBytes = size_t{1} << 20;

// The C.UTF-8 locale for wide-character case mapping (null when the C
// library lacks it: then only ASCII letters change case).
locale_t Utf8Locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

// `s` lower- or upper-cased code point by code point; a byte that does not
// start a well-formed UTF-8 sequence is kept as it is.
std::string ChangeCase(const std::string& s, bool upper) {
  const locale_t loc = Utf8Locale();
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    size_t len = 0;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c >> 5) == 0x6) {
      cp = c & 0x1F, len = 2;
    } else if ((c >> 4) == 0xE) {
      cp = c & 0x0F, len = 3;
    } else if ((c >> 3) == 0x1E) {
      cp = c & 0x07, len = 4;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    ok = ok && !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
         cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      out.push_back(s[i]);
      ++i;
      continue;
    }
    uint32_t mapped = cp;
    if (cp < 0x80) {
      if (upper && cp >= 'a' && cp <= 'z') mapped = cp - 'a' + 'A';
      if (!upper && cp >= 'A' && cp <= 'Z') mapped = cp - 'A' + 'a';
    } else if (loc != static_cast<locale_t>(nullptr)) {
      const wint_t w =
          upper ? towupper_l(static_cast<wint_t>(cp), loc) : towlower_l(static_cast<wint_t>(cp), loc);
      if (w <= 0x10FFFF && !(w >= 0xD800 && w <= 0xDFFF)) mapped = static_cast<uint32_t>(w);
    }
    AppendUtf8(mapped, &out);
    i += len;
  }
  return out;
}

std::string Lower(const std::string& s) { return ChangeCase(s, false); }
std::string Upper(const std::string& s) { return ChangeCase(s, true); }

absl::StatusOr<const Tensor*> StringInput(KernelContext& ctx, int i) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (!t->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be a string tensor, got ", DescribeTensor(*t)));
  }
  return t;
}

class StringNormalizerKernel : public Kernel {
 public:
  StringNormalizerKernel(std::string action, bool case_sensitive, std::vector<std::string> stopwords)
      : action_(std::move(action)), case_sensitive_(case_sensitive) {
    for (std::string& w : stopwords) stopwords_.push_back(case_sensitive_ ? std::move(w) : Lower(w));
  }

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, StringInput(ctx, 0));
    if (!(x->rank() == 1 || (x->rank() == 2 && x->dim(0) == 1))) {
      return absl::InvalidArgumentError(absl::StrCat("input must be [C] or [1, C], got ", DescribeTensor(*x)));
    }
    std::vector<std::string> kept;
    for (const std::string& s : x->strings()) {
      std::string key = case_sensitive_ ? s : Lower(s);
      if (std::find(stopwords_.begin(), stopwords_.end(), key) != stopwords_.end()) continue;
      kept.push_back(action_ == "LOWER" ? Lower(s) : action_ == "UPPER" ? Upper(s) : s);
    }
    if (kept.empty()) kept.push_back("");  // all dropped: one empty string
    std::vector<int64_t> shape = {static_cast<int64_t>(kept.size())};
    if (x->rank() == 2) shape.insert(shape.begin(), 1);
    ONNXKIT_ASSIGN_OR_RETURN(Tensor y, Tensor::Strings(std::move(shape), std::move(kept)));
    return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
  }

 private:
  std::string action_;
  bool case_sensitive_;
  std::vector<std::string> stopwords_;
};

class RegexFullMatchKernel : public Kernel {
 public:
  explicit RegexFullMatchKernel(std::regex re) : re_(std::move(re)) {}

  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, StringInput(ctx, 0));
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 9, x->shape()));
    for (int64_t i = 0; i < x->size(); ++i) {
      const std::string& s = x->strings()[static_cast<size_t>(i)];
      if (s.size() > kMaxRegexInputBytes) {
        return absl::ResourceExhaustedError(absl::StrCat("string ", i, " has ", s.size(),
                                                         " bytes, more than the regex input limit ",
                                                         kMaxRegexInputBytes));
      }
      bool match = false;
      try {
        match = std::regex_match(s, re_);
      } catch (const std::exception& e) {  // regex_error (complexity) or bad_alloc
        return absl::ResourceExhaustedError(absl::StrCat("matching string ", i, " failed: ", e.what()));
      }
      y->mutable_data<uint8_t>()[i] = match ? 1 : 0;
    }
    return absl::OkStatus();
  }

 private:
  std::regex re_;
};

// Python str.split(sep, maxsplit); sep empty: split on whitespace runs.
std::vector<std::string> PySplit(const std::string& s, const std::string& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  int64_t splits = 0;
  if (!sep.empty()) {
    size_t start = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      size_t at = s.find(sep, start);
      if (at == std::string::npos) break;
      out.push_back(s.substr(start, at - start));
      start = at + sep.size();
      ++splits;
    }
    out.push_back(s.substr(start));
    return out;
  }
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  while (i < s.size()) {
    if (maxsplit >= 0 && splits == maxsplit) {
      out.push_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    out.push_back(s.substr(i, j - i));
    ++splits;
    i = j;
    while (i < s.size() && is_space(s[i])) ++i;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeStringNormalizer(const ir::Node& node, const KernelInfo&) {
  std::string action = AttrString(node, "case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    return absl::InvalidArgumentError(
        absl::StrCat("case_change_action must be NONE, LOWER or UPPER, got '", action, "'"));
  }
  std::vector<std::string> stopwords;
  if (const ir::Attribute* a = node.FindAttribute("stopwords")) stopwords = a->proto.strings;
  return std::unique_ptr<Kernel>(
      new StringNormalizerKernel(action, AttrInt(node, "is_case_sensitive", 0) != 0, std::move(stopwords)));
}

absl::Status StringConcat(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* a, StringInput(ctx, 0));
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* b, StringInput(ctx, 1));
  std::vector<int64_t> shapes[] = {a->shape(), b->shape()};
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, BroadcastShapes(shapes));
  std::vector<int64_t> ia = BroadcastIndices(a->shape(), shape), ib = BroadcastIndices(b->shape(), shape);
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 8, shape));
  for (size_t i = 0; i < ia.size(); ++i) {
    y->mutable_strings()[i] = a->strings()[static_cast<size_t>(ia[i])] + b->strings()[static_cast<size_t>(ib[i])];
  }
  return absl::OkStatus();
}

absl::Status StringSplit(KernelContext& ctx) {
  ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, StringInput(ctx, 0));
  std::string sep = AttrString(ctx.node(), "delimiter", "");
  int64_t maxsplit = AttrInt(ctx.node(), "maxsplit", -1);
  std::vector<std::vector<std::string>> pieces;
  size_t widest = 0;
  for (const std::string& s : x->strings()) {
    pieces.push_back(PySplit(s, sep, maxsplit));
    widest = std::max(widest, pieces.back().size());
  }
  std::vector<int64_t> shape = x->shape();
  shape.push_back(static_cast<int64_t>(widest));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, 8, shape));
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * counts, ctx.AllocateOutput(1, 7, x->shape()));
  for (size_t i = 0; i < pieces.size(); ++i) {
    counts->mutable_data<int64_t>()[i] = static_cast<int64_t>(pieces[i].size());
    for (size_t k = 0; k < pieces[i].size(); ++k) y->mutable_strings()[i * widest + k] = std::move(pieces[i][k]);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeRegexFullMatch(const ir::Node& node, const KernelInfo&) {
  std::optional<std::string> pattern = node.GetString("pattern");
  if (!pattern) return absl::InvalidArgumentError("attribute 'pattern' is required");
  if (pattern->size() > kMaxRegexPatternBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("pattern has ", pattern->size(), " bytes, more than the limit ",
                                                     kMaxRegexPatternBytes));
  }
  try {
    // __polynomial (libstdc++): the breadth-first executor, no exponential
    // backtracking; patterns with back-references are refused.
    std::regex re(*pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
    return std::unique_ptr<Kernel>(new RegexFullMatchKernel(std::move(re)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid pattern '", *pattern, "': ", e.what()));
  }
}

}  // namespace onnxkit::runner::reference
