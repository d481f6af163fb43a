// Shape functions of matrix products: MatMul (numpy semantics, rank-1
// promotion, batch broadcasting), MatMulInteger, QLinearMatMul, Gemm, and
// Einsum (explicit and implicit outputs, ellipsis).
//
//   MatMul([2, 5, 3, 4], [4, 6]) -> [2, 5, 3, 6]
//   MatMul([3, 4], [5, 6])       -> E0601 inner dimensions differ (4 vs 5)
//   Gemm(A [3, 4], B [5, 4], transB=1) -> [3, 5]
//   Einsum("bij,bjk->bik", [2, 3, 4], [2, 4, 5]) -> [2, 3, 5]
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/infer/context.h"
#include "lib/infer/shape_fns.h"
#include "lib/base/strings.h"

namespace onnxkit::infer {
namespace {

void MatMulShape(NodeContext& ctx, int a_in, int b_in) {
  const Dims* a_shape = ctx.input_shape(a_in);
  const Dims* b_shape = ctx.input_shape(b_in);
  if (a_shape == nullptr || b_shape == nullptr) return;
  if (a_shape->empty() || b_shape->empty()) {
    ctx.Fail(absl::StrCat("input ", a_shape->empty() ? "A" : "B", " must have rank at least 1, got a scalar"));
    return;
  }
  Dims a = *a_shape;
  Dims b = *b_shape;
  if (a.size() == 1) a.insert(a.begin(), Dim::Of(1));
  if (b.size() == 1) b.push_back(Dim::Of(1));
  const Dim& k_a = a[a.size() - 1];
  const Dim& k_b = b[b.size() - 2];
  if (k_a.value && k_b.value && *k_a.value != *k_b.value) {
    ctx.Fail(absl::StrCat("inner dimensions differ: A ", DimsToString(*a_shape), " and B ", DimsToString(*b_shape),
                          " (", *k_a.value, " vs ", *k_b.value, ")"));
    return;
  }
  Dims batch_a(a.begin(), a.end() - 2);
  Dims batch_b(b.begin(), b.end() - 2);
  const Dims* batches[] = {&batch_a, &batch_b};
  std::optional<Dims> out = ctx.Broadcast(batches);
  if (!out) return;
  if (a_shape->size() != 1) out->push_back(a[a.size() - 2]);
  if (b_shape->size() != 1) out->push_back(b[b.size() - 1]);
  ctx.set_shape(0, std::move(*out));
}

}  // namespace

void ShapeMatMul(NodeContext& ctx) { MatMulShape(ctx, 0, 1); }

void ShapeQLinearMatMul(NodeContext& ctx) { MatMulShape(ctx, 0, 3); }

void ShapeGemm(NodeContext& ctx) {
  const Dims* a = ctx.input_shape(0);
  const Dims* b = ctx.input_shape(1);
  if (a == nullptr || b == nullptr) return;
  if (a->size() != 2 || b->size() != 2) {
    ctx.Fail(absl::StrCat("input ", a->size() != 2 ? "A" : "B", " must have rank 2, got rank ",
                          a->size() != 2 ? a->size() : b->size()));
    return;
  }
  const bool trans_a = ctx.attr_int("transA", 0) != 0;
  const bool trans_b = ctx.attr_int("transB", 0) != 0;
  const Dim& m = (*a)[trans_a ? 1 : 0];
  const Dim& k_a = (*a)[trans_a ? 0 : 1];
  const Dim& k_b = (*b)[trans_b ? 1 : 0];
  const Dim& n = (*b)[trans_b ? 0 : 1];
  if (k_a.value && k_b.value && *k_a.value != *k_b.value) {
    ctx.Fail(absl::StrCat("inner dimensions differ: A ", DimsToString(*a), (trans_a ? " (transposed)" : ""),
                          " and B ", DimsToString(*b), (trans_b ? " (transposed)" : ""), " (", *k_a.value,
                          " vs ", *k_b.value, ")"));
    return;
  }
  Dims out = {m, n};
  // C broadcasts unidirectionally to [M, N] (opset 7 on).
  if (const Dims* c = ctx.input_shape(2); c != nullptr && ctx.opset() >= 7) {
    bool ok = c->size() <= 2;
    for (size_t i = 0; ok && i < c->size(); ++i) {
      const Dim& cd = (*c)[i];
      const Dim& od = out[2 - c->size() + i];
      if (cd.value && od.value && *cd.value != 1 && *cd.value != *od.value) ok = false;
    }
    if (!ok) {
      ctx.Fail(absl::StrCat("input C ", DimsToString(*c), " does not broadcast to the output ", DimsToString(out)));
      return;
    }
  }
  ctx.set_shape(0, std::move(out));
}

namespace {

struct EinsumTerm {
  std::string letters;    // in order, without the ellipsis
  int ellipsis_at = -1;   // index in `letters` where "..." stands; -1 none
};

// Parses "ab...c" into letters and ellipsis position; false when malformed.
bool ParseTerm(std::string_view text, EinsumTerm* term) {
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      term->letters += c;
    } else if (c == '.' && text.substr(i, 3) == "..." && term->ellipsis_at < 0) {
      term->ellipsis_at = static_cast<int>(term->letters.size());
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

void ShapeEinsum(NodeContext& ctx) {
  if (!ctx.has_attr("equation")) return;  // a missing attribute is a node rule's finding
  std::string eq;
  for (char c : ctx.attr_string("equation")) {
    if (c != ' ') eq += c;
  }
  std::string_view lhs = eq;
  std::optional<std::string_view> rhs;
  if (size_t arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = std::string_view(eq).substr(0, arrow);
    rhs = std::string_view(eq).substr(arrow + 2);
  }
  std::vector<EinsumTerm> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    EinsumTerm t;
    if (!ParseTerm(lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start), &t)) {
      ctx.Fail(absl::StrCat("malformed equation '", Sv(eq), "'"));
      return;
    }
    terms.push_back(std::move(t));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  EinsumTerm out_term;
  if (rhs && !ParseTerm(*rhs, &out_term)) {
    ctx.Fail(absl::StrCat("malformed equation '", Sv(eq), "'"));
    return;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    ctx.Fail(absl::StrCat("equation '", Sv(eq), "' has ", terms.size(), " input terms for ", ctx.num_inputs(),
                          " inputs"));
    return;
  }
  std::map<char, Dim> dims;
  std::map<char, int> counts;
  std::vector<Dims> ellipses;
  bool ellipsis_unknown = false;
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const EinsumTerm& t = terms[i];
    any_ellipsis = any_ellipsis || t.ellipsis_at >= 0;
    for (char c : t.letters) ++counts[c];
    const Dims* shape = ctx.input_shape(static_cast<int>(i));
    if (shape == nullptr) {
      ellipsis_unknown = ellipsis_unknown || t.ellipsis_at >= 0;
      for (char c : t.letters) dims.try_emplace(c, Dim::Unknown());
      continue;
    }
    size_t n = t.letters.size();
    if (shape->size() < n || (t.ellipsis_at < 0 && shape->size() != n)) {
      ctx.Fail(absl::StrCat("term ", i, " '", Sv(t.letters), "' does not match input ", i, " of rank ",
                            shape->size()));
      return;
    }
    size_t extra = shape->size() - n;
    size_t at = t.ellipsis_at < 0 ? n : static_cast<size_t>(t.ellipsis_at);
    if (t.ellipsis_at >= 0) ellipses.emplace_back(shape->begin() + at, shape->begin() + at + extra);
    for (size_t k = 0; k < n; ++k) {
      const Dim& d = (*shape)[k < at ? k : k + extra];
      auto [it, inserted] = dims.try_emplace(t.letters[k], d);
      Dim& e = it->second;
      if (inserted || e == d || d.Is(1)) continue;
      if (e.Is(1) || (!e.known() && d.known())) {
        e = d;  // a dim of 1 broadcasts; a known dim is better than a symbol
      } else if (!e.known() || !d.known() || *e.value != *d.value) {
        if (!(e.known() && !d.known())) e = Dim::Unknown();
      }
    }
  }
  if (!rhs) {  // implicit output: ellipsis, then the letters used once, sorted
    if (any_ellipsis) out_term.ellipsis_at = 0;
    for (const auto& [c, count] : counts) {
      if (count == 1) out_term.letters += c;
    }
  }
  Dims out;
  std::optional<Dims> ellipsis;
  if (out_term.ellipsis_at >= 0) {
    if (ellipsis_unknown) return;
    std::vector<const Dims*> parts;
    for (const Dims& e : ellipses) parts.push_back(&e);
    ellipsis = ctx.Broadcast(parts);
    if (!ellipsis) return;
  }
  for (size_t k = 0; k <= out_term.letters.size(); ++k) {
    if (ellipsis && static_cast<int>(k) == out_term.ellipsis_at) out.insert(out.end(), ellipsis->begin(), ellipsis->end());
    if (k == out_term.letters.size()) break;
    auto it = dims.find(out_term.letters[k]);
    if (it == dims.end()) {
      ctx.Fail(absl::StrCat("output label '", std::string(1, out_term.letters[k]), "' of equation '", Sv(eq),
                            "' appears in no input"));
      return;
    }
    out.push_back(it->second);
  }
  ctx.set_shape(0, std::move(out));
}

}  // namespace onnxkit::infer
