// Protobuf wire-format primitives: a bounds-checked reader over a byte range
// and writers (byte appender and size counter) sharing one interface, so each
// message's encoder is written once and used for both sizing and writing.
#ifndef ONNXKIT_LIB_IO_WIRE_H_
#define ONNXKIT_LIB_IO_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace onnxkit::io::wire {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// One decoded field: number, wire type, payload and the raw bytes it spans.
struct Field {
  uint32_t number = 0;
  int wire_type = 0;
  uint64_t varint = 0;    // kVarint; kFixed32/kFixed64 bits too
  std::string_view data;  // kLengthDelimited payload
  std::string_view raw;   // tag through end of payload, for unknown fields
};

// Reads fields from a byte range; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ >= end_; }
  const char* position() const { return p_; }

  // Reads the next field into `f`. Returns false on malformed input; `error`
  // then says why. Groups (wire types 3/4) are read whole into f->raw.
  bool Next(Field* f, const char** error);

  // Reads one varint at `*p` (< end); false if truncated or over 10 bytes.
  static bool ReadVarint(const char** p, const char* end, uint64_t* value);

 private:
  bool SkipGroup(uint32_t number, int depth, const char** error);

  const char* p_;
  const char* end_;
};

inline bool Reader::ReadVarint(const char** p, const char* end, uint64_t* value) {
  const char* q = *p;
  uint64_t result = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (q >= end) return false;
    uint8_t byte = static_cast<uint8_t>(*q++);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      *p = q;
      return true;
    }
  }
  return false;
}

inline int VarintSize(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline uint64_t Tag(uint32_t field, int wire_type) { return (uint64_t{field} << 3) | wire_type; }

// Appends wire bytes to a string.
class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}
  void Varint(uint64_t v) {
    char buf[10];
    int n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out_->append(buf, n);
  }
  void Fixed32(uint32_t v) {
    char buf[4];
    std::memcpy(buf, &v, 4);  // little-endian hosts only (x86-64, aarch64)
    out_->append(buf, 4);
  }
  void Fixed64(uint64_t v) {
    char buf[8];
    std::memcpy(buf, &v, 8);
    out_->append(buf, 8);
  }
  void Bytes(std::string_view b) { out_->append(b.data(), b.size()); }
  void Reserve(uint64_t n) { out_->reserve(out_->size() + n); }

 private:
  std::string* out_;
};

// Counts the bytes a ByteWriter would append.
class SizeCounter {
 public:
  void Varint(uint64_t v) { size_ += VarintSize(v); }
  void Fixed32(uint32_t) { size_ += 4; }
  void Fixed64(uint64_t) { size_ += 8; }
  void Bytes(std::string_view b) { size_ += b.size(); }
  void Skip(uint64_t n) { size_ += n; }
  void Reserve(uint64_t) {}
  uint64_t size() const { return size_; }

 private:
  uint64_t size_ = 0;
};

}  // namespace onnxkit::io::wire

#endif  // ONNXKIT_LIB_IO_WIRE_H_
