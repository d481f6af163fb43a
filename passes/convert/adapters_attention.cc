// Attention (23), RotaryEmbedding (23) and TensorScatter (24) going down:
// expanded into older ops as the spec's function bodies compute them.
//
// Attention, with Q [B, Hq, Sq, E], K [B, Hkv, Skv, E], V [B, Hkv, Skv, Ev]
// (3-D inputs [B, S, H * E] are reshaped to these and Y back):
//   K' = Concat(past_key, K), V' = Concat(past_value, V) along the sequence
//        (present_key / present_value); T = their length
//   K', V' repeated per query head group when Hq != Hkv
//   s  = (Q * sqrt(scale)) x (K'^T * sqrt(scale))         qk mode 0
//   s  = softcap * Tanh(s / softcap) when softcap > 0      qk mode 1
//   s += bias: attn_mask (bool as 0 / -inf, padded with -inf up to T) and
//        -inf where is_causal, the local windows or nonpad_kv_seqlen mask a
//        key; query i sits at position i + past length (or, with
//        nonpad_kv_seqlen and no cache, nonpad_kv_seqlen[b] - Sq)  qk mode 2
//   p  = Softmax(s) over T (in softmax_precision), 0 on rows the bias masks
//        whole                                               qk mode 3
//   Y  = p x V'
//
// RotaryEmbedding, on X [B, H, S, D] or [B, S, H * D] with num_heads: the
// first rotary_embedding_dim (r, default D) of each head's D values are
// rotated, in halves or interleaved pairs (x1, x2) -> (c x1 - s x2,
// s x1 + c x2), with c and s the caches' rows at position_ids (or the
// caches themselves, [B, S, *]) cut to r / 2; the rest pass unchanged.
//
// TensorScatter (24), the KV cache update: ScatterElements along its axis
// at write_indices[b] + i (modulo the cache length when circular).
//
// Dims are read at run time through Shape where they may vary; the head
// size must be known for RotaryEmbedding, and the rank for all.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "passes/convert/adapter_list.h"
#include "passes/util.h"

namespace onnxkit::passes::convert {
namespace {

ir::Value* Input(const Step& step, int i) {
  return i < step.node->num_inputs() ? step.node->input(i) : nullptr;
}

absl::StatusOr<ir::Value*> SliceLast(Step& step, ir::Value* x, int64_t start, int64_t end, int64_t axis,
                                     int64_t stride = 1) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, AddInts(step, "starts", {start}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, AddInts(step, "ends", {end}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, AddInts(step, "axes", {axis}));
  if (stride == 1) return Op(step, "Slice", {x, s, e, a});
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * st, AddInts(step, "steps", {stride}));
  return Op(step, "Slice", {x, s, e, a, st});
}

absl::StatusOr<ir::Value*> Unsqueeze(Step& step, ir::Value* x, int64_t axis) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * a, AddInts(step, "axes", {axis}));
  return Op(step, "Unsqueeze", {x, a});
}

absl::StatusOr<ir::Value*> ReshapeTo(Step& step, ir::Value* x, const std::vector<int64_t>& shape) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, AddInts(step, "shape", shape));
  return Op(step, "Reshape", {x, s});
}

absl::StatusOr<ir::Value*> Transpose0213(Step& step, ir::Value* x) {
  return Op(step, "Transpose", {x}, {IntsAttr("perm", {0, 2, 1, 3})});
}

// Types `v` as a tensor of `elem` with `rank` dims of unknown size.
void TypeRank(ir::Value* v, int32_t elem, int64_t rank) {
  pb::TypeProto type;
  auto& tensor = type.tensor_type.mutable_value();
  tensor.elem_type = elem;
  auto& shape = tensor.shape.mutable_value();
  for (int64_t i = 0; i < rank; ++i) shape.dim.emplace_back();
  v->set_type(std::move(type));
}

struct AttentionPlan {
  int64_t rank = 4;
  int32_t t1 = 0, t2 = 0;  // Q/K and V element types
  int64_t q_heads = 0, kv_heads = 0;
  bool causal = false;
  int64_t mode = 0;
  std::optional<float> scale;
  float softcap = 0;
  std::optional<int64_t> softmax_precision;
  int64_t left = -1, right = -1;
};

absl::StatusOr<AttentionPlan> PlanAttention(Step& step) {
  const ir::Node& n = *step.node;
  AttentionPlan p;
  std::optional<int32_t> t1 = ElemType(*n.input(0), *step.ctx), tk = ElemType(*n.input(1), *step.ctx);
  std::optional<int32_t> t2 = ElemType(*n.input(2), *step.ctx);
  if (!IsFloatElem(t1) || !IsFloatElem(t2) || tk != t1) {
    return Block("the expansion needs Q, K and V of known float types (Q and K alike)");
  }
  p.t1 = *t1;
  p.t2 = *t2;
  std::optional<int64_t> rq = RankOf(step, n.input(0)), rk = RankOf(step, n.input(1)),
                         rv = RankOf(step, n.input(2));
  if (!rq || (*rq != 3 && *rq != 4) || rk != rq || rv != rq) {
    return Block("the expansion needs Q, K and V of one known rank, 3 or 4");
  }
  p.rank = *rq;
  p.q_heads = n.GetInt("q_num_heads").value_or(0);
  p.kv_heads = n.GetInt("kv_num_heads").value_or(0);
  if (p.rank == 3 && (p.q_heads < 1 || p.kv_heads < 1))
    return Block("3-D inputs need q_num_heads and kv_num_heads");
  if ((Input(step, 4) == nullptr) != (Input(step, 5) == nullptr)) {
    return Block("past_key and past_value must be given together");
  }
  p.causal = n.GetInt("is_causal").value_or(0) != 0;
  p.mode = n.GetInt("qk_matmul_output_mode").value_or(0);
  if (p.mode < 0 || p.mode > 3) return Block(absl::StrCat("qk_matmul_output_mode ", p.mode, " is unknown"));
  p.scale = n.GetFloat("scale");
  p.softcap = n.GetFloat("softcap").value_or(0.0f);
  p.softmax_precision = n.GetInt("softmax_precision");
  if (p.softmax_precision && !IsFloatElem(static_cast<int32_t>(*p.softmax_precision))) {
    return Block(absl::StrCat("softmax_precision ", *p.softmax_precision, " is not a float type"));
  }
  p.left = n.GetInt("left_window_size").value_or(-1);
  p.right = n.GetInt("right_window_size").value_or(-1);
  return p;
}

// [B, H, S, E] from a 3-D [B, S, H * E] input; 4-D inputs as they are.
absl::StatusOr<ir::Value*> ToHeads(Step& step, const AttentionPlan& p, ir::Value* x, int64_t heads) {
  if (p.rank == 4) return x;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r, ReshapeTo(step, x, {0, 0, heads, -1}));
  return Transpose0213(step, r);
}

// [B, Hkv, T, E] repeated to [B, Hkv * reps, T, E], each kv head `reps`
// times in a row (query head h reads kv head h / reps).
absl::StatusOr<ir::Value*> RepeatHeads(Step& step, ir::Value* x, ir::Value* reps) {
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * u, Unsqueeze(step, x, 2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * lead, Dims(step, x, 0, 2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * tail, Dims(step, x, 2, 4));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * wide, Op(step, "Concat", {lead, reps, tail}, {IntAttr("axis", 0)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * e, Op(step, "Expand", {u, wide}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * batch, Dims(step, x, 0, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * minus1, AddInts(step, "heads", {-1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape,
                           Op(step, "Concat", {batch, minus1, tail}, {IntAttr("axis", 0)}));
  return Op(step, "Reshape", {e, shape});
}

// 1 / sqrt(sqrt(E)) or sqrt(scale), in Q's type: Q and K are each scaled
// by it before their product, as the spec's function body does.
absl::StatusOr<ir::Value*> RootScale(Step& step, const AttentionPlan& p, ir::Value* q4) {
  std::optional<int64_t> e =
      p.rank == 4 ? KnownDim(step, Input(step, 0), 3)
                  : (KnownDim(step, Input(step, 0), 2).has_value() &&
                             *KnownDim(step, Input(step, 0), 2) % p.q_heads == 0
                         ? std::optional<int64_t>(*KnownDim(step, Input(step, 0), 2) / p.q_heads)
                         : std::nullopt);
  if (p.scale || (e && *e > 0)) {
    const double scale = p.scale ? static_cast<double>(*p.scale) : 1.0 / std::sqrt(static_cast<double>(*e));
    if (!(scale >= 0)) return Block("a negative scale has no square root to split between Q and K");
    return AddFloatScalar(step, "scale_root", p.t1, std::sqrt(scale));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * dim, DimScalar(step, q4, 3));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * f, Op(step, "Cast", {dim}, {IntAttr("to", p.t1)}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r1, Op(step, "Sqrt", {f}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r2, Op(step, "Sqrt", {r1}));
  return Op(step, "Reciprocal", {r2});
}

// The additive bias on the [.., Sq, T] scores, or null when nothing masks.
// `rank` is set to the bias's rank.
absl::StatusOr<ir::Value*> Bias(Step& step, const AttentionPlan& p, ir::Value* q4, ir::Value* kp,
                                ir::Value* neg_inf, ir::Value* zero, int64_t* rank) {
  ir::Value* mask = Input(step, 3);
  ir::Value* past = Input(step, 4);
  ir::Value* nonpad = Input(step, 6);
  ir::Value* bias = nullptr;
  if (mask != nullptr) {
    std::optional<int32_t> me = ElemType(*mask, *step.ctx);
    std::optional<int64_t> mrank = RankOf(step, mask);
    if (!me || !mrank || *mrank < 1 || *mrank > 4)
      return Block("attn_mask needs a known type and rank 1 to 4");
    *rank = *mrank;
    if (*me == pb::kBool) {
      ONNXKIT_ASSIGN_OR_RETURN(bias, Op(step, "Where", {mask, zero, neg_inf}));
    } else if (*me != p.t1) {
      ONNXKIT_ASSIGN_OR_RETURN(bias, Op(step, "Cast", {mask}, {IntAttr("to", p.t1)}));
    } else {
      bias = mask;
    }
    // Keys past the mask's last dim are masked: pad it with -inf up to T,
    // unless both lengths are known and equal.
    std::optional<int64_t> mlen = KnownDim(step, mask, static_cast<size_t>(*mrank - 1));
    std::optional<int64_t> klen = KnownDim(step, Input(step, 1), p.rank == 4 ? 2 : 1);
    std::optional<int64_t> plen = past != nullptr ? KnownDim(step, past, 2) : std::optional<int64_t>(0);
    if (mlen && klen && plen) {
      const int64_t missing = *klen + *plen - *mlen;
      if (missing < 0) return Block("attn_mask's last dim is longer than the keys");
      if (missing > 0) {
        std::vector<int64_t> pads(static_cast<size_t>(2 * *mrank), 0);
        pads.back() = missing;
        ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pads_v, AddInts(step, "pads", pads));
        ONNXKIT_ASSIGN_OR_RETURN(bias, Op(step, "Pad", {bias, pads_v, neg_inf}));
      }
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * total, Dims(step, kp, 2, 3));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * have, Dims(step, mask, *mrank - 1, *mrank));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * missing, Op(step, "Sub", {total, have}));
      ONNXKIT_ASSIGN_OR_RETURN(
          ir::Value * zeros,
          AddInts(step, "pads", std::vector<int64_t>(static_cast<size_t>(2 * *mrank - 1), 0)));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pads, Op(step, "Concat", {zeros, missing}, {IntAttr("axis", 0)}));
      ONNXKIT_ASSIGN_OR_RETURN(bias, Op(step, "Pad", {bias, pads, neg_inf}));
    }
  }
  if (!p.causal && p.left < 0 && p.right < 0 && nonpad == nullptr) return bias;
  // Query i's position against key j.
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero_i, AddScalar(step, "zero", pb::kInt64, 0));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one_i, AddScalar(step, "one", pb::kInt64, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sq, DimScalar(step, q4, 2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * total, DimScalar(step, kp, 2));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rows, Op(step, "Range", {zero_i, sq, one_i}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pos, Unsqueeze(step, rows, 1));                    // [Sq, 1]
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cols, Op(step, "Range", {zero_i, total, one_i}));  // [T]
  ir::Value* nonpad4 = nullptr;
  if (nonpad != nullptr) {
    std::optional<int32_t> ne = ElemType(*nonpad, *step.ctx);
    if (ne != pb::kInt64) return Block("nonpad_kv_seqlen needs int64 values");
    ONNXKIT_ASSIGN_OR_RETURN(nonpad4, ReshapeTo(step, nonpad, {-1, 1, 1, 1}));
  }
  if (past != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * offset, DimScalar(step, past, 2));
    ONNXKIT_ASSIGN_OR_RETURN(pos, Op(step, "Add", {pos, offset}));
  } else if (nonpad4 != nullptr) {
    // An external cache: the queries are the last Sq of the valid keys.
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * offset, Op(step, "Sub", {nonpad4, sq}));
    ONNXKIT_ASSIGN_OR_RETURN(pos, Op(step, "Add", {pos, offset}));  // [B, 1, Sq, 1]
  }
  ir::Value* masked = nullptr;
  auto either = [&](ir::Value* m) -> absl::Status {
    if (masked == nullptr) {
      masked = m;
      return absl::OkStatus();
    }
    ONNXKIT_ASSIGN_OR_RETURN(masked, Op(step, "Or", {masked, m}));
    return absl::OkStatus();
  };
  if (p.causal) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * later, Op(step, "Greater", {cols, pos}));
    ONNXKIT_RETURN_IF_ERROR(either(later));
  }
  if (p.left >= 0) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * back, Op(step, "Sub", {pos, cols}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w, AddIntScalar(step, "left_window", pb::kInt64, p.left));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out, Op(step, "Greater", {back, w}));
    ONNXKIT_RETURN_IF_ERROR(either(out));
  }
  if (p.right >= 0) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ahead, Op(step, "Sub", {cols, pos}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * w, AddIntScalar(step, "right_window", pb::kInt64, p.right));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * out, Op(step, "Greater", {ahead, w}));
    ONNXKIT_RETURN_IF_ERROR(either(out));
  }
  if (nonpad4 != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * valid, Op(step, "Less", {cols, nonpad4}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pad, Op(step, "Not", {valid}));
    ONNXKIT_RETURN_IF_ERROR(either(pad));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pos_bias, Op(step, "Where", {masked, neg_inf, zero}));
  *rank = std::max<int64_t>(*rank, nonpad4 != nullptr ? 4 : 2);
  if (bias == nullptr) return pos_bias;
  return Op(step, "Add", {bias, pos_bias});
}

absl::Status ExpandAttentionNode(Step& step) {
  ONNXKIT_ASSIGN_OR_RETURN(AttentionPlan p, PlanAttention(step));
  ir::Value* past_k = Input(step, 4);
  ir::Value* past_v = Input(step, 5);
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * q4, ToHeads(step, p, step.node->input(0), p.q_heads));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * k4, ToHeads(step, p, step.node->input(1), p.kv_heads));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * v4, ToHeads(step, p, step.node->input(2), p.kv_heads));
  ir::Value* kp = k4;
  ir::Value* vp = v4;
  if (past_k != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(kp, Op(step, "Concat", {past_k, k4}, {IntAttr("axis", 2)}));
    ONNXKIT_ASSIGN_OR_RETURN(vp, Op(step, "Concat", {past_v, v4}, {IntAttr("axis", 2)}));
  }
  // Grouped-query heads: repeat K' and V' unless the head counts are known
  // to be equal.
  std::optional<int64_t> hq =
      p.rank == 3 ? std::optional<int64_t>(p.q_heads) : KnownDim(step, Input(step, 0), 1);
  std::optional<int64_t> hkv =
      p.rank == 3 ? std::optional<int64_t>(p.kv_heads) : KnownDim(step, Input(step, 1), 1);
  ir::Value* kx = kp;
  ir::Value* vx = vp;
  if (!(hq && hkv && *hq == *hkv)) {
    ir::Value* reps = nullptr;
    if (hq && hkv) {
      if (*hkv < 1 || *hq % *hkv != 0) return Block("the query heads are not a multiple of the kv heads");
      ONNXKIT_ASSIGN_OR_RETURN(reps, AddInts(step, "head_repeats", {*hq / *hkv}));
    } else {
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * qh, Dims(step, q4, 1, 2));
      ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kh, Dims(step, kp, 1, 2));
      ONNXKIT_ASSIGN_OR_RETURN(reps, Op(step, "Div", {qh, kh}));
    }
    ONNXKIT_ASSIGN_OR_RETURN(kx, RepeatHeads(step, kp, reps));
    ONNXKIT_ASSIGN_OR_RETURN(vx, RepeatHeads(step, vp, reps));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * root, RootScale(step, p, q4));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * qs, Op(step, "Mul", {q4, root}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * kt, Op(step, "Transpose", {kx}, {IntsAttr("perm", {0, 1, 3, 2})}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * ks, Op(step, "Mul", {kt, root}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * scores, Op(step, "MatMul", {qs, ks}));
  ir::Value* qk_out[4] = {scores, scores, scores, scores};
  if (p.softcap > 0) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cap, AddFloatScalar(step, "softcap", p.t1, p.softcap));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * d, Op(step, "Div", {scores, cap}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * th, Op(step, "Tanh", {d}));
    ONNXKIT_ASSIGN_OR_RETURN(scores, Op(step, "Mul", {th, cap}));
  }
  qk_out[1] = qk_out[2] = qk_out[3] = scores;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * neg_inf,
                           AddFloatScalar(step, "neg_inf", p.t1, -std::numeric_limits<double>::infinity()));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, AddFloatScalar(step, "zero", p.t1, 0.0));
  int64_t bias_rank = 0;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * bias, Bias(step, p, q4, kp, neg_inf, zero, &bias_rank));
  if (bias != nullptr) {
    ONNXKIT_ASSIGN_OR_RETURN(scores, Op(step, "Add", {scores, bias}));
  }
  qk_out[2] = qk_out[3] = scores;
  const bool recast = p.softmax_precision && *p.softmax_precision != p.t1;
  ir::Value* probs = scores;
  if (recast) {
    ONNXKIT_ASSIGN_OR_RETURN(probs, Op(step, "Cast", {probs}, {IntAttr("to", *p.softmax_precision)}));
  }
  // Typed as 4-D: Softmax below 13 converts only over the last axis.
  TypeRank(probs, recast ? static_cast<int32_t>(*p.softmax_precision) : p.t1, 4);
  ONNXKIT_ASSIGN_OR_RETURN(probs, Op(step, "Softmax", {probs}, {IntAttr("axis", 3)}));
  if (recast) {
    ONNXKIT_ASSIGN_OR_RETURN(probs, Op(step, "Cast", {probs}, {IntAttr("to", p.t1)}));
  }
  if (bias != nullptr) {
    // A row whose bias masks every key attends to nothing (Softmax alone
    // would give NaN there).
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * last, AddInts(step, "axes", {bias_rank - 1}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * row_max, Op(step, "ReduceMax", {bias, last}));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * none, Op(step, "Equal", {row_max, neg_inf}));
    ONNXKIT_ASSIGN_OR_RETURN(probs, Op(step, "Where", {none, zero, probs}));
  }
  qk_out[3] = probs;
  if (p.t2 != p.t1) {
    ONNXKIT_ASSIGN_OR_RETURN(probs, Op(step, "Cast", {probs}, {IntAttr("to", p.t2)}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y, Op(step, "MatMul", {probs, vx}));
  if (p.t2 != p.t1) {
    ONNXKIT_ASSIGN_OR_RETURN(y, Op(step, "Cast", {y}, {IntAttr("to", p.t1)}));
  }
  if (p.rank == 3) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * t, Transpose0213(step, y));
    ONNXKIT_ASSIGN_OR_RETURN(y, ReshapeTo(step, t, {0, 0, -1}));
  }
  return ReplaceNodeOutputs(step, y, {{1, kp}, {2, vp}, {3, qk_out[p.mode]}});
}

}  // namespace

absl::Status ExpandAttention(Step& step) { return ExpandAttentionNode(step); }

// 25 -> 24: Attention-24 has no local windows; a node using them expands.
absl::Status AttentionDown25(Step& step) {
  if (step.node->GetInt("left_window_size").value_or(-1) >= 0 ||
      step.node->GetInt("right_window_size").value_or(-1) >= 0) {
    return ExpandAttentionNode(step);
  }
  for (const char* name : {"left_window_size", "right_window_size"}) step.node->RemoveAttribute(name);
  return GenericStep(step);
}

// 24 -> 23: Attention-23 has no nonpad_kv_seqlen; a node given it expands.
absl::Status AttentionDown24(Step& step) {
  if (Input(step, 6) != nullptr) return ExpandAttentionNode(step);
  ONNXKIT_RETURN_IF_ERROR(TrimInputs(step));
  return GenericStep(step);
}

// Written for opset 22.
absl::Status ExpandRotaryEmbedding(Step& step) {
  ir::Value* x = step.node->input(0);
  ir::Value* cos_cache = step.node->input(1);
  ir::Value* sin_cache = step.node->input(2);
  ir::Value* positions = Input(step, 3);
  std::optional<int32_t> t = ElemType(*x, *step.ctx);
  if (!IsFloatElem(t)) return Block("the expansion needs a float input of known type");
  std::optional<int64_t> rank = RankOf(step, x);
  const int64_t heads = step.node->GetInt("num_heads").value_or(0);
  if (!rank || (*rank != 4 && !(*rank == 3 && heads > 0))) {
    return Block("the expansion needs a 4-D input, or a 3-D one with num_heads");
  }
  std::optional<int64_t> d = KnownDim(step, x, static_cast<size_t>(*rank - 1));
  if (d && *rank == 3) d = *d % heads == 0 ? std::optional<int64_t>(*d / heads) : std::nullopt;
  if (!d) return Block("the expansion needs the head size");
  const int64_t attr_rot = step.node->GetInt("rotary_embedding_dim").value_or(0);
  const int64_t rot = attr_rot > 0 ? attr_rot : *d;
  if (rot % 2 != 0 || rot > *d)
    return Block(absl::StrCat("rotary_embedding_dim ", rot, " must be even and at most ", *d));
  const int64_t half = rot / 2;
  // Work on [B, H, S, D] (4-D) or [B, S, H, D] (3-D); the caches' rows
  // [B, S, half] get a unit head axis.
  ir::Value* xw = x;
  if (*rank == 3) {
    ONNXKIT_ASSIGN_OR_RETURN(xw, ReshapeTo(step, x, {0, 0, heads, -1}));
  }
  const int64_t head_axis = *rank == 4 ? 1 : 2;
  ir::Value* cs[2] = {cos_cache, sin_cache};
  for (ir::Value*& c : cs) {
    // Rows wider than half are cut to their first half values.
    const bool cut = KnownDim(step, c, positions != nullptr ? 1 : 2) != half;
    if (positions != nullptr) {
      ONNXKIT_ASSIGN_OR_RETURN(c, Op(step, "Gather", {c, positions}));
    }
    if (cut) {
      ONNXKIT_ASSIGN_OR_RETURN(c, SliceLast(step, c, 0, half, 2));
    }
    ONNXKIT_ASSIGN_OR_RETURN(c, Unsqueeze(step, c, head_axis));
  }
  ir::Value* xr = xw;
  if (rot < *d) {
    ONNXKIT_ASSIGN_OR_RETURN(xr, SliceLast(step, xw, 0, rot, 3));
  }
  const bool interleaved = step.node->GetInt("interleaved").value_or(0) != 0;
  ir::Value *x1, *x2;
  if (interleaved) {
    ONNXKIT_ASSIGN_OR_RETURN(x1, SliceLast(step, xr, 0, rot, 3, 2));
    ONNXKIT_ASSIGN_OR_RETURN(x2, SliceLast(step, xr, 1, rot, 3, 2));
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(x1, SliceLast(step, xr, 0, half, 3));
    ONNXKIT_ASSIGN_OR_RETURN(x2, SliceLast(step, xr, half, rot, 3));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cx1, Op(step, "Mul", {cs[0], x1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sx2, Op(step, "Mul", {cs[1], x2}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * real, Op(step, "Sub", {cx1, sx2}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * sx1, Op(step, "Mul", {cs[1], x1}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * cx2, Op(step, "Mul", {cs[0], x2}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * imag, Op(step, "Add", {sx1, cx2}));
  ir::Value* y;
  if (interleaved) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * r5, Unsqueeze(step, real, 4));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * i5, Unsqueeze(step, imag, 4));
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pairs, Op(step, "Concat", {r5, i5}, {IntAttr("axis", 4)}));
    ONNXKIT_ASSIGN_OR_RETURN(y, ReshapeTo(step, pairs, {0, 0, 0, rot}));
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(y, Op(step, "Concat", {real, imag}, {IntAttr("axis", 3)}));
  }
  if (rot < *d) {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * rest, SliceLast(step, xw, rot, *d, 3));
    ONNXKIT_ASSIGN_OR_RETURN(y, Op(step, "Concat", {y, rest}, {IntAttr("axis", 3)}));
  }
  if (*rank == 3) {
    ONNXKIT_ASSIGN_OR_RETURN(y, ReshapeTo(step, y, {0, 0, -1}));
  }
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

// TensorScatter (24), written for opset 23: ScatterElements of the update
// into the cache along the axis, at positions write_indices[b] + i (modulo
// the cache length when circular), spread over the update's shape.
absl::Status ExpandTensorScatter(Step& step) {
  ir::Value* cache = step.node->input(0);
  ir::Value* update = step.node->input(1);
  ir::Value* starts = Input(step, 2);
  std::optional<int64_t> rank = RankOf(step, cache);
  if (!rank || *rank < 2) return Block("the expansion needs the cache's rank (2 or more)");
  int64_t axis = step.node->GetInt("axis").value_or(-2);
  if (axis < 0) axis += *rank;
  if (axis <= 0 || axis >= *rank) return Block("axis must name a dim other than the batch");
  const std::string mode = step.node->GetString("mode").value_or("linear");
  if (mode != "linear" && mode != "circular") return Block(absl::StrCat("mode '", mode, "' is unknown"));
  if (starts != nullptr && ElemType(*starts, *step.ctx) != pb::kInt64) {
    return Block("write_indices needs int64 values");
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * zero, AddScalar(step, "zero", pb::kInt64, 0));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * one, AddScalar(step, "one", pb::kInt64, 1));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * len, DimScalar(step, update, axis));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * offsets, Op(step, "Range", {zero, len, one}));
  // The offsets along the axis, 1 elsewhere.
  std::vector<int64_t> along(static_cast<size_t>(*rank), 1);
  along[static_cast<size_t>(axis)] = -1;
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * pos, ReshapeTo(step, offsets, along));
  if (starts != nullptr) {
    std::vector<int64_t> per_batch(static_cast<size_t>(*rank), 1);
    per_batch[0] = -1;
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * s, ReshapeTo(step, starts, per_batch));
    ONNXKIT_ASSIGN_OR_RETURN(pos, Op(step, "Add", {s, pos}));
  }
  if (mode == "circular") {
    ONNXKIT_ASSIGN_OR_RETURN(ir::Value * max_len, DimScalar(step, cache, axis));
    ONNXKIT_ASSIGN_OR_RETURN(pos, Op(step, "Mod", {pos, max_len}));
  }
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * shape, Op(step, "Shape", {update}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * indices, Op(step, "Expand", {pos, shape}));
  ONNXKIT_ASSIGN_OR_RETURN(ir::Value * y,
                           Op(step, "ScatterElements", {cache, indices, update}, {IntAttr("axis", axis)}));
  ONNXKIT_RETURN_IF_ERROR(ReplaceNodeOutput(step, y));
  step.replaced = true;
  return absl::OkStatus();
}

}  // namespace onnxkit::passes::convert
