// Reference kernels: Cast and CastLike between every type ONNX allows
// (and BitCast, which keeps the bits):
// bool, all integers (int4/uint4/int2/uint2 packed), float, double,
// float16, bfloat16, the float8 types (saturate attribute), float8e8m0
// (round_mode attribute), float4e2m1, and string.
//
// Each element goes through a Scalar (a double, an int64 or a uint64), so
// every pair of types uses one reader and one writer:
//   floats -> integers   truncate toward zero, then keep the low bits
//                        (NaN gives 0; values beyond int64 saturate first)
//   integers -> integers keep the low bits (two's complement)
//   any -> bool          nonzero (NaN too) is true
//   floats -> floats     round to nearest even; float8 per `saturate`
// Numbers become strings as numpy prints them (shortest round-trip digits,
// scientific notation outside [1e-4, 1e16)); strings are parsed as decimal
// or scientific numbers, "inf"/"+inf"/"-inf"/"nan" in any case.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "lib/base/status_macros.h"
#include "runner/reference/dispatch.h"
#include "runner/reference/elementwise.h"

namespace onnxkit::runner::reference {
namespace {

struct Scalar {
  enum Kind { kFloat, kSigned, kUnsigned };
  Kind kind = kSigned;
  double f = 0;
  int64_t i = 0;
  uint64_t u = 0;

  static Scalar Float(double v) { return {kFloat, v, 0, 0}; }
  static Scalar Signed(int64_t v) { return {kSigned, 0, v, 0}; }
  static Scalar Unsigned(uint64_t v) { return {kUnsigned, 0, 0, v}; }

  double AsDouble() const {
    return kind == kFloat ? f : kind == kSigned ? static_cast<double>(i) : static_cast<double>(u);
  }
  bool NonZero() const { return kind == kFloat ? f != 0 : kind == kSigned ? i != 0 : u != 0; }
  // The value as a two's complement integer: floats truncated toward zero,
  // NaN as 0, beyond the int64/uint64 range saturated.
  uint64_t AsBits() const {
    if (kind == kSigned) return static_cast<uint64_t>(i);
    if (kind == kUnsigned) return u;
    if (std::isnan(f)) return 0;
    double t = std::trunc(f);
    if (t >= 0x1p64) return std::numeric_limits<uint64_t>::max();
    if (t >= 0x1p63) return static_cast<uint64_t>(t);
    if (t < -0x1p63) return static_cast<uint64_t>(std::numeric_limits<int64_t>::min());
    return static_cast<uint64_t>(static_cast<int64_t>(t));
  }
};

struct CastOptions {
  bool saturate = true;
  E8M0Rounding round = E8M0Rounding::kUp;
};

const MiniFloatFormat* Float8Format(int32_t dtype) {
  switch (dtype) {
    case pb::kFloat8E4M3FN: return &kFloat8E4M3FN;
    case pb::kFloat8E4M3FNUZ: return &kFloat8E4M3FNUZ;
    case pb::kFloat8E5M2: return &kFloat8E5M2;
    case pb::kFloat8E5M2FNUZ: return &kFloat8E5M2FNUZ;
    default: return nullptr;
  }
}

int SubByteBits(int32_t dtype) {
  switch (dtype) {
    case pb::kInt4: case pb::kUint4: case pb::kFloat4E2M1: return 4;
    case pb::kInt2: case pb::kUint2: return 2;
    default: return 0;
  }
}

bool IsFloatingType(int32_t dtype) {
  return dtype == pb::kFloat || dtype == pb::kDouble || dtype == pb::kFloat16 || dtype == pb::kBfloat16 ||
         Float8Format(dtype) != nullptr || dtype == pb::kFloat8E8M0 || dtype == pb::kFloat4E2M1;
}

bool Castable(int32_t dtype) {
  return IsKnownDataType(dtype) && dtype != pb::kComplex64 && dtype != pb::kComplex128;
}

// Element i of a numeric tensor as a Scalar.
Scalar Read(const Tensor& t, int64_t i) {
  const void* raw = t.raw();
  switch (t.dtype()) {
    case pb::kFloat: return Scalar::Float(t.data<float>()[i]);
    case pb::kDouble: return Scalar::Float(t.data<double>()[i]);
    case pb::kFloat16: return Scalar::Float(static_cast<float>(t.data<Float16>()[i]));
    case pb::kBfloat16: return Scalar::Float(static_cast<float>(t.data<BFloat16>()[i]));
    case pb::kFloat8E8M0: return Scalar::Float(Float8E8M0ToFloat(t.data<uint8_t>()[i]));
    case pb::kFloat4E2M1: return Scalar::Float(MiniFloatToDouble(kFloat4E2M1, GetPackedBits(raw, 4, i)));
    case pb::kBool: return Scalar::Signed(t.data<uint8_t>()[i] != 0);
    case pb::kInt8: return Scalar::Signed(t.data<int8_t>()[i]);
    case pb::kInt16: return Scalar::Signed(t.data<int16_t>()[i]);
    case pb::kInt32: return Scalar::Signed(t.data<int32_t>()[i]);
    case pb::kInt64: return Scalar::Signed(t.data<int64_t>()[i]);
    case pb::kUint8: return Scalar::Unsigned(t.data<uint8_t>()[i]);
    case pb::kUint16: return Scalar::Unsigned(t.data<uint16_t>()[i]);
    case pb::kUint32: return Scalar::Unsigned(t.data<uint32_t>()[i]);
    case pb::kUint64: return Scalar::Unsigned(t.data<uint64_t>()[i]);
    case pb::kInt4: return Scalar::Signed(SubByteValue(GetPackedBits(raw, 4, i), 4, true));
    case pb::kUint4: return Scalar::Unsigned(GetPackedBits(raw, 4, i));
    case pb::kInt2: return Scalar::Signed(SubByteValue(GetPackedBits(raw, 2, i), 2, true));
    case pb::kUint2: return Scalar::Unsigned(GetPackedBits(raw, 2, i));
    default: break;
  }
  return Scalar::Float(MiniFloatToDouble(*Float8Format(t.dtype()), t.data<uint8_t>()[i]));  // the float8 types
}

template <typename T>
void Store(Tensor* t, int64_t i, T v) {
  t->mutable_data<T>()[i] = v;
}

float ToFloat(const Scalar& s) {
  return s.kind == Scalar::kFloat ? DoubleToFloat(s.f)
         : s.kind == Scalar::kSigned ? static_cast<float>(s.i)
                                     : static_cast<float>(s.u);
}

// Writes s as element i of t (a numeric tensor this kernel allocated).
void Write(Tensor* t, int64_t i, const Scalar& s, const CastOptions& options) {
  void* raw = t->mutable_raw();
  switch (t->dtype()) {
    case pb::kFloat: return Store<float>(t, i, ToFloat(s));
    case pb::kDouble: return Store<double>(t, i, s.AsDouble());
    case pb::kFloat16: return Store<Float16>(t, i, Float16FromDouble(s.AsDouble()));
    case pb::kBfloat16: return Store<BFloat16>(t, i, BFloat16FromDouble(s.AsDouble()));
    case pb::kFloat8E8M0:
      return Store<uint8_t>(t, i, FloatToFloat8E8M0(s.AsDouble(), options.saturate, options.round));
    case pb::kFloat4E2M1:
      return SetPackedBits(raw, 4, i, static_cast<uint8_t>(DoubleToMiniFloat(kFloat4E2M1, s.AsDouble(), true)));
    case pb::kBool: return Store<bool>(t, i, s.NonZero());
    case pb::kInt8: return Store<int8_t>(t, i, static_cast<int8_t>(s.AsBits()));
    case pb::kInt16: return Store<int16_t>(t, i, static_cast<int16_t>(s.AsBits()));
    case pb::kInt32: return Store<int32_t>(t, i, static_cast<int32_t>(s.AsBits()));
    case pb::kInt64: return Store<int64_t>(t, i, static_cast<int64_t>(s.AsBits()));
    case pb::kUint8: return Store<uint8_t>(t, i, static_cast<uint8_t>(s.AsBits()));
    case pb::kUint16: return Store<uint16_t>(t, i, static_cast<uint16_t>(s.AsBits()));
    case pb::kUint32: return Store<uint32_t>(t, i, static_cast<uint32_t>(s.AsBits()));
    case pb::kUint64: return Store<uint64_t>(t, i, s.AsBits());
    case pb::kInt4:
    case pb::kUint4:
    case pb::kInt2:
    case pb::kUint2: {
      int bits = SubByteBits(t->dtype());
      return SetPackedBits(raw, bits, i, TruncateToBits(static_cast<int64_t>(s.AsBits()), bits));
    }
    default: break;
  }
  const MiniFloatFormat* f8 = Float8Format(t->dtype());  // the float8 types
  Store<uint8_t>(t, i, FloatToFloat8(*f8, s.AsDouble(), options.saturate));
}

// --- Numbers to strings ---

// Lays out a decimal significand (digits d0 d1 ..., value d0.d1... x 10^exp)
// as numpy prints floats: positional within [1e-4, 1e16), else scientific
// with at least two exponent digits ("1e-05", "1.5e+16").
std::string NumpyLayout(bool negative, std::string digits, int exp, double magnitude) {
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e16)) {
    if (magnitude == 0) return out + "0.0";
    if (exp >= 0) {
      size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() < int_len) digits.append(int_len - digits.size(), '0');
      std::string frac = digits.substr(int_len);
      return out + digits.substr(0, int_len) + "." + (frac.empty() ? "0" : frac);
    }
    return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  std::string e = std::to_string(std::abs(exp));
  if (e.size() < 2) e = "0" + e;
  return out + "e" + (exp < 0 ? "-" : "+") + e;
}

// Splits "d.ddde[+-]XX" (std::to_chars scientific output) into digits and
// exponent.
void SplitScientific(std::string_view s, std::string* digits, int* exp) {
  size_t e = s.find('e');
  for (char c : s.substr(0, e)) {
    if (c >= '0' && c <= '9') digits->push_back(c);
  }
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+' ? 1 : 0), s.data() + s.size(), *exp);
}

// The shortest decimal form of v that `encode` maps back to `bits` (the
// value's own encoding in its source type).
template <typename Encode>
std::string ShortestScientific(double v, uint32_t bits, Encode encode) {
  char buf[64];
  for (int precision = 0; precision < 17; ++precision) {
    auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific, precision);
    double back = 0;
    std::from_chars(buf, r.ptr, back);
    if (encode(back) == bits) return std::string(buf, r.ptr);
  }
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  return std::string(buf, r.ptr);
}

std::string FormatFloating(const Tensor& t, int64_t i) {
  double v = Read(t, i).f;
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::string sci;
  const int32_t dtype = t.dtype();
  if (dtype == pb::kFloat) {
    auto r = std::to_chars(buf, buf + sizeof(buf), t.data<float>()[i], std::chars_format::scientific);
    sci.assign(buf, r.ptr);
  } else if (dtype == pb::kDouble) {
    auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
    sci.assign(buf, r.ptr);
  } else if (dtype == pb::kFloat16) {
    sci = ShortestScientific(v, t.data<Float16>()[i].bits, [](double d) -> uint32_t { return Float16FromDouble(d).bits; });
  } else if (dtype == pb::kBfloat16) {
    sci = ShortestScientific(v, t.data<BFloat16>()[i].bits, [](double d) -> uint32_t { return BFloat16FromDouble(d).bits; });
  } else if (dtype == pb::kFloat8E8M0) {
    sci = ShortestScientific(v, t.data<uint8_t>()[i],
                             [](double d) -> uint32_t { return FloatToFloat8E8M0(d, false, E8M0Rounding::kNearest); });
  } else if (dtype == pb::kFloat4E2M1) {
    sci = ShortestScientific(v, GetPackedBits(t.raw(), 4, i),
                             [](double d) -> uint32_t { return DoubleToMiniFloat(kFloat4E2M1, d, true); });
  } else {
    const MiniFloatFormat* f = Float8Format(dtype);
    sci = ShortestScientific(v, t.data<uint8_t>()[i], [f](double d) { return DoubleToMiniFloat(*f, d, false); });
  }
  std::string digits;
  int exp = 0;
  SplitScientific(sci, &digits, &exp);
  return NumpyLayout(std::signbit(v), digits, exp, std::fabs(v));
}

std::string Format(const Tensor& t, int64_t i) {
  if (t.dtype() == pb::kBool) return t.data<uint8_t>()[i] != 0 ? "True" : "False";
  if (IsFloatingType(t.dtype())) return FormatFloating(t, i);
  Scalar s = Read(t, i);
  return s.kind == Scalar::kSigned ? std::to_string(s.i) : std::to_string(s.u);
}

// --- Strings to numbers ---

absl::StatusOr<Scalar> Parse(std::string_view text, bool to_bool) {
  std::string_view s = StdSv(absl::StripAsciiWhitespace(Sv(text)));
  if (to_bool) {
    if (absl::EqualsIgnoreCase(Sv(s), "true")) return Scalar::Signed(1);
    if (absl::EqualsIgnoreCase(Sv(s), "false")) return Scalar::Signed(0);
  }
  std::string_view body = !s.empty() && s[0] == '+' ? s.substr(1) : s;
  const char* end = body.data() + body.size();
  int64_t i = 0;
  auto ri = std::from_chars(body.data(), end, i);
  if (ri.ec == std::errc() && ri.ptr == end && !body.empty()) return Scalar::Signed(i);
  uint64_t u = 0;
  auto ru = std::from_chars(body.data(), end, u);
  if (ru.ec == std::errc() && ru.ptr == end && !body.empty()) return Scalar::Unsigned(u);
  // strtod: decimal, scientific, "inf"/"infinity"/"nan" in any case; out of
  // range values become +-inf or +-0.
  std::string copy(body);
  char* parsed_end = nullptr;
  double d = std::strtod(copy.c_str(), &parsed_end);
  if (!copy.empty() && !absl::ascii_isspace(static_cast<unsigned char>(copy[0])) &&
      parsed_end == copy.c_str() + copy.size()) {
    return Scalar::Float(d);
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot parse \"", absl::CEscape(Sv(text)), "\" as a number"));
}

// --- The kernels ---

absl::Status CastInto(KernelContext& ctx, const Tensor& x, int32_t to, const CastOptions& options) {
  if (!Castable(x.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cast from ", Sv(DataTypeName(x.dtype()))));
  }
  if (x.dtype() == to) return ctx.SetOutput(0, RtValue::FromTensor(x));  // tensors are immutable: share
  ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to, x.shape()));
  if (to == pb::kString) {
    std::vector<std::string>& out = y->mutable_strings();
    for (int64_t i = 0; i < x.size(); ++i) out[static_cast<size_t>(i)] = Format(x, i);
    return absl::OkStatus();
  }
  if (x.dtype() == pb::kString) {
    const std::vector<std::string>& in = x.strings();
    for (int64_t i = 0; i < x.size(); ++i) {
      absl::StatusOr<Scalar> s = Parse(in[static_cast<size_t>(i)], to == pb::kBool);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(s.status().message(), " (element ", i, ")"));
      Write(y, i, *s, options);
    }
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < x.size(); ++i) Write(y, i, Read(x, i), options);
  return absl::OkStatus();
}

absl::StatusOr<CastOptions> ParseCastOptions(const ir::Node& node) {
  CastOptions options;
  int64_t saturate = AttrInt(node, "saturate", 1);
  if (saturate != 0 && saturate != 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute saturate must be 0 or 1, got ", saturate));
  }
  options.saturate = saturate == 1;
  std::string mode = AttrString(node, "round_mode", "up");
  if (mode == "up") {
    options.round = E8M0Rounding::kUp;
  } else if (mode == "down") {
    options.round = E8M0Rounding::kDown;
  } else if (mode == "nearest") {
    options.round = E8M0Rounding::kNearest;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute round_mode must be \"up\", \"down\" or \"nearest\", got \"", mode, "\""));
  }
  return options;
}

class CastKernel : public Kernel {
 public:
  CastKernel(int32_t to, CastOptions options) : to_(to), options_(options) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    return CastInto(ctx, *x, to_, options_);
  }

 private:
  int32_t to_;
  CastOptions options_;
};

class CastLikeKernel : public Kernel {
 public:
  explicit CastLikeKernel(CastOptions options) : options_(options) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* target, ctx.Input(1));
    if (!Castable(target->dtype())) {
      return absl::InvalidArgumentError(absl::StrCat("cannot cast to ", Sv(DataTypeName(target->dtype()))));
    }
    return CastInto(ctx, *x, target->dtype(), options_);
  }

 private:
  CastOptions options_;
};

// BitCast: the same bits read as another type of the same width. The
// output shares the input's buffer, except that bytes becoming bool are
// normalized to 0/1 (any other byte is no valid bool).
class BitCastKernel : public Kernel {
 public:
  explicit BitCastKernel(int32_t to) : to_(to) {}
  absl::Status Run(KernelContext& ctx) override {
    ONNXKIT_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    if (!Castable(x->dtype()) || x->is_string() || DataTypeBits(x->dtype()) != DataTypeBits(to_)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot bitcast ", DescribeTensor(*x), " to ",
                                                     Sv(DataTypeName(to_)), ": the widths differ"));
    }
    if (to_ != pb::kBool) {
      ONNXKIT_ASSIGN_OR_RETURN(Tensor y, Tensor::Wrap(to_, x->shape(), x->buffer()));
      return ctx.SetOutput(0, RtValue::FromTensor(std::move(y)));
    }
    ONNXKIT_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to_, x->shape()));
    const uint8_t* px = x->data<uint8_t>();
    bool* py = y->mutable_data<bool>();
    for (int64_t i = 0; i < x->size(); ++i) py[i] = px[i] != 0;
    return absl::OkStatus();
  }

 private:
  int32_t to_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> MakeBitCast(const ir::Node& node, const KernelInfo&) {
  std::optional<int64_t> to = node.GetInt("to");
  if (!to) return absl::InvalidArgumentError("attribute 'to' (an int) is missing");
  if (*to < 0 || *to > std::numeric_limits<int32_t>::max() || !Castable(static_cast<int32_t>(*to)) ||
      *to == pb::kString) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'to' is not a type BitCast supports: ", *to));
  }
  return std::unique_ptr<Kernel>(new BitCastKernel(static_cast<int32_t>(*to)));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeCast(const ir::Node& node, const KernelInfo&) {
  const ir::Attribute* attr = node.FindAttribute("to");
  if (attr == nullptr) return absl::InvalidArgumentError("attribute 'to' is missing");
  int64_t to = 0;
  if (attr->type() == pb::kAttrString) {  // opset 1 names the type: "FLOAT"
    std::optional<int32_t> named = DataTypeFromName(absl::AsciiStrToLower(attr->proto.s));
    if (!named) return absl::InvalidArgumentError(absl::StrCat("attribute 'to' names no type: \"", attr->proto.s, "\""));
    to = *named;
  } else if (attr->type() == pb::kAttrInt) {
    to = attr->proto.i;
  } else {
    return absl::InvalidArgumentError("attribute 'to' must be an int");
  }
  if (to < 0 || to > std::numeric_limits<int32_t>::max() || !Castable(static_cast<int32_t>(to))) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'to' is not a type Cast supports: ", to));
  }
  ONNXKIT_ASSIGN_OR_RETURN(CastOptions options, ParseCastOptions(node));
  return std::unique_ptr<Kernel>(new CastKernel(static_cast<int32_t>(to), options));
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeCastLike(const ir::Node& node, const KernelInfo&) {
  ONNXKIT_ASSIGN_OR_RETURN(CastOptions options, ParseCastOptions(node));
  return std::unique_ptr<Kernel>(new CastLikeKernel(options));
}

}  // namespace onnxkit::runner::reference
