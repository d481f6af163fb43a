// 16-bit and 8-bit floating-point element types of ONNX as small value
// types with exact conversions to and from float (round to nearest even;
// NaN preserved; saturation rules of the float8 types as ONNX defines them
// for Cast with saturate=1).
#ifndef ONNXKIT_RUNNER_REFERENCE_FLOAT_TYPES_H_
#define ONNXKIT_RUNNER_REFERENCE_FLOAT_TYPES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace onnxkit::runner {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE 754 binary16.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(FromFloat(f)) {}
  operator float() const { return ToFloat(bits); }

  static uint16_t FromFloat(float f) {
    uint32_t x = FloatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
    if (abs < 0x38800000u) {                                               // subnormal or zero
      if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
      uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
      int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
      uint32_t half = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
      return static_cast<uint16_t>(sign | half);
    }
    uint32_t r = abs - 0x38000000u;  // rebias exponent
    uint32_t half = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  static float ToFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      if (mant == 0) return BitsFloat(sign);
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
    if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
    return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

// bfloat16: the high 16 bits of a float, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(FromFloat(f)) {}
  operator float() const { return BitsFloat(static_cast<uint32_t>(bits) << 16); }

  static uint16_t FromFloat(float f) {
    uint32_t x = FloatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2);

// --- Small floating-point formats (float8, float4) and sub-byte integers ---
//
// A small float format is described by its field widths, exponent bias and
// how it spends the top exponent code:
//   kIeee  inf and NaN in the top exponent (float8e5m2, also float16/bfloat16)
//   kFn    no inf; only all-ones exponent and mantissa is NaN (float8e4m3fn)
//   kFnuz  no inf, no -0; 0x80 (sign bit alone) is the only NaN (*fnuz)
//   kNone  no inf, no NaN (float4e2m1)
struct MiniFloatFormat {
  enum Special { kIeee, kFn, kFnuz, kNone };
  int exp_bits;
  int mant_bits;
  int bias;
  Special special;
};

inline constexpr MiniFloatFormat kFloat8E4M3FN{4, 3, 7, MiniFloatFormat::kFn};
inline constexpr MiniFloatFormat kFloat8E4M3FNUZ{4, 3, 8, MiniFloatFormat::kFnuz};
inline constexpr MiniFloatFormat kFloat8E5M2{5, 2, 15, MiniFloatFormat::kIeee};
inline constexpr MiniFloatFormat kFloat8E5M2FNUZ{5, 2, 16, MiniFloatFormat::kFnuz};
inline constexpr MiniFloatFormat kFloat4E2M1{2, 1, 1, MiniFloatFormat::kNone};
inline constexpr MiniFloatFormat kFloat16Format{5, 10, 15, MiniFloatFormat::kIeee};
inline constexpr MiniFloatFormat kBFloat16Format{8, 7, 127, MiniFloatFormat::kIeee};

// The value of the bit pattern `bits` of format `f` (exact; NaN for NaN codes).
inline double MiniFloatToDouble(const MiniFloatFormat& f, uint32_t bits) {
  const int m = f.mant_bits;
  const uint32_t mant_mask = (1u << m) - 1;
  const uint32_t exp_max = (1u << f.exp_bits) - 1;
  const uint32_t sign_bit = 1u << (f.exp_bits + m);
  const bool negative = (bits & sign_bit) != 0;
  const uint32_t exp = (bits >> m) & exp_max;
  const uint32_t mant = bits & mant_mask;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (f.special) {
    case MiniFloatFormat::kIeee:
      if (exp == exp_max) return mant != 0 ? nan : (negative ? -HUGE_VAL : HUGE_VAL);
      break;
    case MiniFloatFormat::kFn:
      if (exp == exp_max && mant == mant_mask) return nan;
      break;
    case MiniFloatFormat::kFnuz:
      if (bits == sign_bit) return nan;
      break;
    case MiniFloatFormat::kNone:
      break;
  }
  double v = exp == 0 ? std::ldexp(static_cast<double>(mant), 1 - f.bias - m)
                      : std::ldexp(static_cast<double>(mant | (1u << m)), static_cast<int>(exp) - f.bias - m);
  return negative ? -v : v;
}

// The largest finite magnitude's bit pattern of format `f` (sign clear).
inline uint32_t MiniFloatMaxBits(const MiniFloatFormat& f) {
  const uint32_t all = (1u << (f.exp_bits + f.mant_bits)) - 1;
  switch (f.special) {
    case MiniFloatFormat::kIeee: return all - (1u << f.mant_bits);  // top exponent, mantissa all ones
    case MiniFloatFormat::kFn: return all - 1;
    default: return all;
  }
}

// `x` rounded to nearest even in format `f`. Out of range values (and
// infinities) become the largest finite value when `saturate`, else
// infinity (kIeee) or NaN (other formats; kNone always saturates). NaN stays
// NaN with its sign where the format has signed NaNs; kNone has no NaN and
// gives 0x8 for it (-0, as the onnx reference implementation does).
inline uint32_t DoubleToMiniFloat(const MiniFloatFormat& f, double x, bool saturate) {
  const int m = f.mant_bits;
  const uint32_t sign_bit = 1u << (f.exp_bits + m);
  const uint32_t max_bits = MiniFloatMaxBits(f);
  const uint32_t sign = std::signbit(x) ? sign_bit : 0;
  const uint32_t inf_bits = ((1u << f.exp_bits) - 1) << m;  // kIeee only
  uint32_t nan_bits = 0;
  switch (f.special) {
    case MiniFloatFormat::kIeee: nan_bits = sign | inf_bits | (1u << (m - 1)); break;
    case MiniFloatFormat::kFn: nan_bits = sign | (sign_bit - 1); break;
    case MiniFloatFormat::kFnuz: nan_bits = sign_bit; break;
    case MiniFloatFormat::kNone: nan_bits = sign_bit; break;
  }
  if (std::isnan(x)) return nan_bits;
  const uint32_t overflow_bits = saturate || f.special == MiniFloatFormat::kNone ? sign | max_bits
                                 : f.special == MiniFloatFormat::kIeee          ? sign | inf_bits
                                                                                : nan_bits | sign;
  const double a = std::fabs(x);
  if (std::isinf(a)) return overflow_bits;
  if (a == 0) return f.special == MiniFloatFormat::kFnuz ? 0 : sign;
  const int emin = 1 - f.bias;
  int e = std::ilogb(a);
  if (e < emin) e = emin;
  // q: the magnitude in units of the last mantissa bit of binade e, rounded
  // to nearest even (the default rounding mode); a / 2^(e-m) is exact.
  const double q = std::nearbyint(std::ldexp(a, m - e));
  if (q == 0) return f.special == MiniFloatFormat::kFnuz ? 0 : sign;
  if (std::ldexp(q, e - m) > MiniFloatToDouble(f, max_bits)) return overflow_bits;
  // Subnormals (e == emin, q < 2^m) and normals share this layout; q == 2^(m+1)
  // carries into the next binade.
  return sign | ((static_cast<uint32_t>(e - emin) << m) + static_cast<uint32_t>(q));
}

inline float Float8ToFloat(const MiniFloatFormat& f, uint8_t bits) {
  return static_cast<float>(MiniFloatToDouble(f, bits));
}
inline uint8_t FloatToFloat8(const MiniFloatFormat& f, double x, bool saturate) {
  return static_cast<uint8_t>(DoubleToMiniFloat(f, x, saturate));
}

// float16 and bfloat16 rounded directly from a double (no double rounding
// through float).
inline Float16 Float16FromDouble(double x) {
  Float16 h;
  h.bits = static_cast<uint16_t>(DoubleToMiniFloat(kFloat16Format, x, false));
  return h;
}
inline BFloat16 BFloat16FromDouble(double x) {
  BFloat16 b;
  b.bits = static_cast<uint16_t>(DoubleToMiniFloat(kBFloat16Format, x, false));
  return b;
}

// float8e8m0: an unsigned power of two 2^(bits - 127); 0xff is NaN.
enum class E8M0Rounding { kUp, kDown, kNearest };

inline float Float8E8M0ToFloat(uint8_t bits) {
  if (bits == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

// The power of two nearest |x| in direction `mode` (kNearest: ties up).
// Zero, infinities and exponents outside [-127, 127] give the nearest end of
// the range when `saturate`, else NaN; NaN gives NaN. The sign is ignored
// (casting negative values is unspecified by ONNX).
inline uint8_t FloatToFloat8E8M0(double x, bool saturate, E8M0Rounding mode) {
  if (std::isnan(x)) return 0xff;
  const double a = std::fabs(x);
  if (a == 0) return saturate ? 0x00 : 0xff;
  if (std::isinf(a)) return saturate ? 0xfe : 0xff;
  int e = std::ilogb(a);
  const double frac = std::ldexp(a, -e);  // [1, 2)
  if (frac > 1 && (mode == E8M0Rounding::kUp || (mode == E8M0Rounding::kNearest && frac >= 1.5))) ++e;
  if (e > 127) return saturate ? 0xfe : 0xff;
  if (e < -127) return saturate ? 0x00 : 0xff;
  return static_cast<uint8_t>(e + 127);
}

// A double rounded to float (nearest even), overflowing to infinity without
// the undefined behavior of an out-of-range static_cast.
inline float DoubleToFloat(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr double kHalfUlp = 0x1p103;  // half the spacing of floats in the top binade
  if (v > kMax) return v >= kMax + kHalfUlp ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::max();
  if (v < -kMax) return v <= -kMax - kHalfUlp ? -std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::max();
  return static_cast<float>(v);  // NaN stays NaN
}

// A double rounded to nearest even in floating-point type T (float, double,
// Float16 or BFloat16): the last step of a computation done in double.
template <typename T>
T RoundFromDouble(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else if constexpr (std::is_same_v<T, float>) {
    return DoubleToFloat(v);
  } else if constexpr (std::is_same_v<T, Float16>) {
    return Float16FromDouble(v);
  } else {
    static_assert(std::is_same_v<T, BFloat16>, "RoundFromDouble: not a floating-point type");
    return BFloat16FromDouble(v);
  }
}

// `v` rounded to the float type of TensorProto element type `dtype` (1
// float, 10 float16, 16 bfloat16; through float32, as a Cast chain would;
// any other type, double included, passes unchanged).
inline double RoundToFloatType(int32_t dtype, double v) {
  switch (dtype) {
    case 1:
      return static_cast<float>(v);
    case 10:
      return static_cast<float>(Float16(static_cast<float>(v)));
    case 16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    default:
      return v;
  }
}

// Sub-byte integers (int4/uint4/int2/uint2): the low `bits` bits of v, and
// the value of such a field (sign-extended when `is_signed`).
inline uint8_t TruncateToBits(int64_t v, int bits) {
  return static_cast<uint8_t>(static_cast<uint64_t>(v) & ((1u << bits) - 1));
}
inline int64_t SubByteValue(uint8_t field, int bits, bool is_signed) {
  int64_t v = field & ((1u << bits) - 1);
  if (is_signed && v >= (int64_t{1} << (bits - 1))) v -= int64_t{1} << bits;
  return v;
}

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_REFERENCE_FLOAT_TYPES_H_
