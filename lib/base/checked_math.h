// Checked integer arithmetic for sizes computed from untrusted input.
//
// Every size derived from a file (dims, lengths, counts) goes through these
// helpers before anything is allocated from it. They return std::nullopt on
// overflow or on a negative operand where a size is expected.
#ifndef ONNXKIT_LIB_BASE_CHECKED_MATH_H_
#define ONNXKIT_LIB_BASE_CHECKED_MATH_H_

#include <cstdint>
#include <optional>
#include <span>

namespace onnxkit {

// a + b for non-negative int64 values; nullopt on overflow or negative input.
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a * b for non-negative int64 values; nullopt on overflow or negative input.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Product of dims; nullopt when a dim is negative or the product overflows.
// The product of no dims is 1 (a scalar).
inline std::optional<int64_t> CheckedElementCount(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    auto r = CheckedMul(n, d);
    if (!r) return std::nullopt;
    n = *r;
  }
  return n;
}

// Unsigned variants for byte offsets.
inline std::optional<uint64_t> CheckedAddU(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_BASE_CHECKED_MATH_H_
