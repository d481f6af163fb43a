// merge-cast: merges Cast(A->B) -> Cast(B->C) into Cast(A->C) when B holds
// every value of A exactly; when C is A too, both go.
// Before: %h = Cast[to=float](%x: float16); %y = Cast[to=double](%h)
// After:  %y = Cast[to=double](%x)
// Before: %h = Cast[to=int32](%x: int8); %y = Cast[to=int8](%h)
// After:  %y is %x
//
// Exact widenings (B represents every A): bool to any number; integers to
// wider integers that hold their range; integers of up to 8 (16) bits to
// float16 / bfloat16 (float); up to 16 bits to float, up to 32 bits to
// double; float16 / bfloat16 to float and double; float to double. Not
// float->int->float, not float->float16->float.
// When A and C are both integers, B must be an integer too: an integer
// narrowing wraps (the low bits), while a float out of an integer type's
// range casts to anything.
// A comes from the input's known type, or from the Cast producing it.
// Anchored at the second Cast; the first must feed nothing else.
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "lib/base/status_macros.h"
#include "passes/eliminate_util.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool IsInteger(int32_t t) {
  return t == pb::kInt8 || t == pb::kUint8 || t == pb::kInt16 || t == pb::kUint16 || t == pb::kInt32 ||
         t == pb::kUint32 || t == pb::kInt64 || t == pb::kUint64;
}

bool IsNumber(int32_t t) {
  return IsInteger(t) || t == pb::kFloat || t == pb::kDouble || t == pb::kFloat16 || t == pb::kBfloat16;
}

// Value bits of an integer type, and whether it is signed.
int IntBits(int32_t t) {
  switch (t) {
    case pb::kInt8: case pb::kUint8: return 8;
    case pb::kInt16: case pb::kUint16: return 16;
    case pb::kInt32: case pb::kUint32: return 32;
    default: return 64;
  }
}
bool IsSigned(int32_t t) { return t == pb::kInt8 || t == pb::kInt16 || t == pb::kInt32 || t == pb::kInt64; }

// Mantissa bits (with the implicit one) of a float type: the widest
// integer range it holds exactly is 2^bits.
int MantissaBits(int32_t t) {
  switch (t) {
    case pb::kBfloat16: return 8;
    case pb::kFloat16: return 11;
    case pb::kFloat: return 24;
    default: return 53;
  }
}

// True when every value of type `a` is exactly a value of type `b`.
bool HoldsExactly(int32_t a, int32_t b) {
  if (a == b) return true;
  if (a == pb::kBool) return IsNumber(b);
  if (IsInteger(a) && IsInteger(b)) {
    if (IsSigned(a) && !IsSigned(b)) return false;
    // Unsigned into signed needs one more bit.
    return IntBits(b) > IntBits(a) || (IsSigned(a) == IsSigned(b) && IntBits(b) == IntBits(a));
  }
  if (IsInteger(a) && IsNumber(b)) return IntBits(a) - (IsSigned(a) ? 1 : 0) <= MantissaBits(b);
  if (a == pb::kFloat16 || a == pb::kBfloat16) return b == pb::kFloat || b == pb::kDouble;
  if (a == pb::kFloat) return b == pb::kDouble;
  return false;
}

struct Match {
  ir::Node* first;
  bool round_trip;  // C == A: both go
};

std::optional<int32_t> InputType(const ir::Value& v, const PassContext& ctx) {
  if (std::optional<int32_t> t = ElemType(v, ctx)) return t;
  const ir::Node* p = v.producer();
  if (p != nullptr && IsOp(*p, "Cast")) {
    if (std::optional<int64_t> to = p->GetInt("to")) return static_cast<int32_t>(*to);
  }
  return std::nullopt;
}

std::optional<Match> MatchPair(const ir::Node& second, const PassContext& ctx) {
  if (!IsOp(second, "Cast") || second.num_inputs() != 1 || second.input(0) == nullptr) return std::nullopt;
  const ir::Value& mid = *second.input(0);
  ir::Node* first = mid.producer();
  if (first == nullptr || first->graph() != second.graph() || !IsOp(*first, "Cast") || first->num_inputs() != 1 ||
      first->input(0) == nullptr || SoleConsumer(mid) != &second) {
    return std::nullopt;
  }
  std::optional<int32_t> a = InputType(*first->input(0), ctx);
  std::optional<int64_t> b = first->GetInt("to");
  std::optional<int64_t> c = second.GetInt("to");
  if (!a || !b || !c || !(IsNumber(*a) || *a == pb::kBool)) return std::nullopt;
  int32_t b32 = static_cast<int32_t>(*b), c32 = static_cast<int32_t>(*c);
  if (*b != b32 || *c != c32 || !HoldsExactly(*a, b32)) return std::nullopt;
  if (!(IsNumber(c32) || c32 == pb::kBool)) return std::nullopt;  // strings print per type
  if (IsInteger(*a) && IsInteger(c32) && !IsInteger(b32)) return std::nullopt;
  bool round_trip = c32 == *a;
  if (round_trip && !CanReplace(*second.output(0), *first->input(0))) return std::nullopt;
  return Match{first, round_trip};
}

absl::Status Rewrite(ir::Graph& graph, ir::Node* second, const Match& m) {
  ir::Value* x = m.first->input(0);
  if (m.round_trip) {
    ONNXKIT_RETURN_IF_ERROR(ReplaceValue(graph, second->output(0), x));  // removes `second`
  } else {
    ONNXKIT_RETURN_IF_ERROR(graph.SetInput(second, 0, x));
  }
  return RemoveIfDead(graph, m.first).status();
}

class MergeCast : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    bool changed = false;
    // Each rewrite removes the node it is at and an earlier one.
    for (ir::Node* node : SnapshotNodes(graph)) {
      std::optional<Match> m = MatchPair(*node, ctx);
      if (!m) continue;
      if (!ctx.Allow(*node, m->round_trip ? "Cast round trip" : "Cast + Cast")) continue;
      ONNXKIT_RETURN_IF_ERROR(Rewrite(graph, node, *m));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateMergeCast() { return std::make_unique<MergeCast>(); }

}  // namespace onnxkit::passes
