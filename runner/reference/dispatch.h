// Helpers shared by reference kernels: element-type dispatch, attribute
// access with defaults, broadcasting, axis normalization.
#ifndef ONNXKIT_RUNNER_REFERENCE_DISPATCH_H_
#define ONNXKIT_RUNNER_REFERENCE_DISPATCH_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/strings.h"
#include "runner/kernel.h"
#include "runner/reference/float_types.h"

namespace onnxkit::runner::reference {

// Calls fn(T{}) with the C++ type of `dtype` among the numeric types
// (float, double, Float16, BFloat16, int8..int64, uint8..uint64, bool).
// Unimplemented for other types (strings, float8, int4...).
template <typename F>
absl::Status VisitNumeric(int32_t dtype, F&& fn) {
  switch (dtype) {
    case 1: return fn(float{});
    case 2: return fn(uint8_t{});
    case 3: return fn(int8_t{});
    case 4: return fn(uint16_t{});
    case 5: return fn(int16_t{});
    case 6: return fn(int32_t{});
    case 7: return fn(int64_t{});
    case 9: return fn(bool{});
    case 10: return fn(Float16{});
    case 11: return fn(double{});
    case 12: return fn(uint32_t{});
    case 13: return fn(uint64_t{});
    case 16: return fn(BFloat16{});
    default:
      return absl::UnimplementedError(absl::StrCat("element type ", Sv(DataTypeName(dtype)), " is not supported"));
  }
}

// Float types only (float, double, Float16, BFloat16).
template <typename F>
absl::Status VisitFloat(int32_t dtype, F&& fn) {
  switch (dtype) {
    case 1: return fn(float{});
    case 10: return fn(Float16{});
    case 11: return fn(double{});
    case 16: return fn(BFloat16{});
    default:
      return absl::UnimplementedError(absl::StrCat("element type ", Sv(DataTypeName(dtype)), " is not supported"));
  }
}

// The C++ accumulation type of an element type: float for 16-bit floats.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<Float16> { using type = float; };
template <> struct Compute<BFloat16> { using type = float; };
template <typename T> using ComputeT = typename Compute<T>::type;

// Attribute values with defaults.
int64_t AttrInt(const ir::Node& node, std::string_view name, int64_t def);
float AttrFloat(const ir::Node& node, std::string_view name, float def);
std::string AttrString(const ir::Node& node, std::string_view name, std::string def);
std::vector<int64_t> AttrInts(const ir::Node& node, std::string_view name, std::vector<int64_t> def = {});
std::vector<float> AttrFloats(const ir::Node& node, std::string_view name, std::vector<float> def = {});

// An axis in [-rank, rank-1] normalized to [0, rank-1]; OutOfRange otherwise.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what = "axis");

// Multidirectional (numpy) broadcasting of shapes; InvalidArgument naming
// both shapes when a dim pair is incompatible.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(std::span<const std::vector<int64_t>> shapes);

// For each element of `out_shape` in row-major order, the linear index of the
// broadcast source element of `in_shape` (right-aligned, size-1 dims repeat).
std::vector<int64_t> BroadcastIndices(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape);

// Row-major strides of a shape.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape);

// A tensor input read as int64 values (int32 or int64 element types), for
// shape-like inputs (Reshape shape, Slice starts...).
absl::StatusOr<std::vector<int64_t>> ReadInt64s(const Tensor& t);

// --- Type-generic element access, for data-movement kernels ---

// Element i of a numeric tensor of any ONNX numeric type (integers exactly
// up to 2^53, bool as 0/1, float16/bfloat16/float8/float4/int4/int2 decoded)
// as a double; nullopt for strings and unknown types.
std::optional<double> ElementAsDouble(const Tensor& t, int64_t i);
// The numeric types stored as plain C++ values (integers, bool, float16,
// float, double, bfloat16): those summaries and comparisons read.
inline bool IsStandardNumeric(int32_t dtype) {
  return (dtype >= 1 && dtype <= 7) || (dtype >= 9 && dtype <= 13) || dtype == 16;
}

// Bits of element i of a packed sub-byte buffer (`bits` 2 or 4 per element,
// low bits first, as ONNX raw data packs int4/uint4/float4e2m1/int2/uint2).
inline uint8_t GetPackedBits(const void* data, int bits, int64_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  int64_t bit = i * bits;
  return static_cast<uint8_t>((p[bit / 8] >> (bit % 8)) & ((1u << bits) - 1));
}
inline void SetPackedBits(void* data, int bits, int64_t i, uint8_t v) {
  uint8_t* p = static_cast<uint8_t*>(data);
  int64_t bit = i * bits;
  uint8_t mask = static_cast<uint8_t>(((1u << bits) - 1) << (bit % 8));
  p[bit / 8] = static_cast<uint8_t>((p[bit / 8] & ~mask) | ((v << (bit % 8)) & mask));
}

// Copies elements from `src` into `dst`, two tensors of one element type,
// whatever the type: bytes for fixed-size types, bits for packed sub-byte
// types, std::strings for strings. Indices are row-major element indices;
// the caller keeps them in range and `dst` must be a tensor it allocated.
class ElementCopier {
 public:
  ElementCopier(const Tensor& src, Tensor& dst)
      : src_(src), dst_(dst), bits_(src.is_string() ? 0 : DataTypeBits(src.dtype())) {}
  // dst[to] = src[from]
  void Copy(int64_t from, int64_t to) const { CopyRun(from, to, 1); }
  // dst[to + k] = src[from + k] for k in [0, n)
  void CopyRun(int64_t from, int64_t to, int64_t n) const {
    if (n <= 0) return;
    if (bits_ == 0) {
      const std::string* s = src_.strings().data() + from;
      std::copy(s, s + n, dst_.mutable_strings().data() + to);
    } else if (bits_ < 8) {
      for (int64_t k = 0; k < n; ++k) {
        SetPackedBits(dst_.mutable_raw(), bits_, to + k, GetPackedBits(src_.raw(), bits_, from + k));
      }
    } else {
      size_t w = static_cast<size_t>(bits_ / 8);
      std::memcpy(static_cast<char*>(dst_.mutable_raw()) + static_cast<size_t>(to) * w,
                  static_cast<const char*>(src_.raw()) + static_cast<size_t>(from) * w, static_cast<size_t>(n) * w);
    }
  }
  // dst[to + k] = src[from + k * stride] for k in [0, n) (stride may be
  // negative; every index read is in range).
  void CopyStrided(int64_t from, int64_t stride, int64_t to, int64_t n) const {
    switch (bits_) {
      case 8:
        Strided<uint8_t>(from, stride, to, n);
        break;
      case 16:
        Strided<uint16_t>(from, stride, to, n);
        break;
      case 32:
        Strided<uint32_t>(from, stride, to, n);
        break;
      case 64:
        Strided<uint64_t>(from, stride, to, n);
        break;
      default:
        for (int64_t k = 0; k < n; ++k) CopyRun(from + k * stride, to + k, 1);
    }
  }
  // dst[to + k] = src[from] for k in [0, n)
  void Fill(int64_t from, int64_t to, int64_t n) const {
    switch (bits_) {
      case 8:
        FillAs<uint8_t>(from, to, n);
        break;
      case 16:
        FillAs<uint16_t>(from, to, n);
        break;
      case 32:
        FillAs<uint32_t>(from, to, n);
        break;
      case 64:
        FillAs<uint64_t>(from, to, n);
        break;
      default:
        for (int64_t k = 0; k < n; ++k) CopyRun(from, to + k, 1);
    }
  }

 private:
  template <typename T>
  void FillAs(int64_t from, int64_t to, int64_t n) const {
    if (n > 0)
      std::fill_n(static_cast<T*>(dst_.mutable_raw()) + to, n, static_cast<const T*>(src_.raw())[from]);
  }
  template <typename T>
  void Strided(int64_t from, int64_t stride, int64_t to, int64_t n) const {
    const T* s = static_cast<const T*>(src_.raw()) + from;
    T* d = static_cast<T*>(dst_.mutable_raw()) + to;
    for (int64_t k = 0; k < n; ++k) d[k] = s[k * stride];
  }

  const Tensor& src_;
  Tensor& dst_;
  int bits_;
};

// Calls fn(coords) for every index tuple of `shape` in row-major order
// (coords is a const std::vector<int64_t>&): once for a scalar shape, never
// when a dim is 0.
template <typename F>
void ForEachIndex(const std::vector<int64_t>& shape, F&& fn) {
  for (int64_t d : shape) {
    if (d <= 0) return;
  }
  std::vector<int64_t> coords(shape.size(), 0);
  while (true) {
    fn(static_cast<const std::vector<int64_t>&>(coords));
    size_t d = shape.size();
    while (d > 0) {
      --d;
      if (++coords[d] < shape[d]) break;
      coords[d] = 0;
      if (d == 0) return;
    }
    if (shape.empty()) return;
  }
}

}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_DISPATCH_H_
