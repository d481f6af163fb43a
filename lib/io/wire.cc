// Bounds-checked protobuf field reader.
#include "lib/io/wire.h"

#include "lib/base/limits.h"

namespace onnxkit::io::wire {

bool Reader::Next(Field* f, const char** error) {
  const char* start = p_;
  uint64_t tag;
  if (!ReadVarint(&p_, end_, &tag)) {
    *error = "truncated or overlong field tag";
    return false;
  }
  if (tag > 0xffffffffu || (tag >> 3) == 0) {
    *error = "invalid field number 0 or above 2^29";
    return false;
  }
  f->number = static_cast<uint32_t>(tag >> 3);
  f->wire_type = static_cast<int>(tag & 7);
  switch (f->wire_type) {
    case kVarint:
      if (!ReadVarint(&p_, end_, &f->varint)) {
        *error = "truncated or overlong varint";
        return false;
      }
      break;
    case kFixed64:
      if (end_ - p_ < 8) {
        *error = "truncated fixed64 field";
        return false;
      }
      std::memcpy(&f->varint, p_, 8);
      p_ += 8;
      break;
    case kFixed32: {
      if (end_ - p_ < 4) {
        *error = "truncated fixed32 field";
        return false;
      }
      uint32_t v;
      std::memcpy(&v, p_, 4);
      f->varint = v;
      p_ += 4;
      break;
    }
    case kLengthDelimited: {
      uint64_t len;
      if (!ReadVarint(&p_, end_, &len)) {
        *error = "truncated length prefix";
        return false;
      }
      if (len > static_cast<uint64_t>(end_ - p_)) {
        *error = "length-delimited field runs past the end of its message (truncated file?)";
        return false;
      }
      f->data = std::string_view(p_, len);
      p_ += len;
      break;
    }
    case kStartGroup:
      if (!SkipGroup(f->number, 1, error)) return false;
      break;
    default:
      *error = f->wire_type == kEndGroup ? "unmatched end-group tag" : "invalid wire type 6 or 7";
      return false;
  }
  f->raw = std::string_view(start, p_ - start);
  return true;
}

bool Reader::SkipGroup(uint32_t number, int depth, const char** error) {
  if (depth > limits::kMaxMessageDepth) {
    *error = "groups nested deeper than the message depth limit";
    return false;
  }
  while (true) {
    if (p_ >= end_) {
      *error = "unterminated group";
      return false;
    }
    uint64_t tag;
    if (!ReadVarint(&p_, end_, &tag) || tag > 0xffffffffu || (tag >> 3) == 0) {
      *error = "malformed tag inside a group";
      return false;
    }
    uint32_t inner = static_cast<uint32_t>(tag >> 3);
    int wt = static_cast<int>(tag & 7);
    uint64_t v;
    switch (wt) {
      case kVarint:
        if (!ReadVarint(&p_, end_, &v)) {
          *error = "truncated varint inside a group";
          return false;
        }
        break;
      case kFixed64:
        if (end_ - p_ < 8) {
          *error = "truncated fixed64 inside a group";
          return false;
        }
        p_ += 8;
        break;
      case kFixed32:
        if (end_ - p_ < 4) {
          *error = "truncated fixed32 inside a group";
          return false;
        }
        p_ += 4;
        break;
      case kLengthDelimited:
        if (!ReadVarint(&p_, end_, &v) || v > static_cast<uint64_t>(end_ - p_)) {
          *error = "truncated length-delimited field inside a group";
          return false;
        }
        p_ += v;
        break;
      case kStartGroup:
        if (!SkipGroup(inner, depth + 1, error)) return false;
        break;
      case kEndGroup:
        if (inner != number) {
          *error = "mismatched end-group tag";
          return false;
        }
        return true;
      default:
        *error = "invalid wire type inside a group";
        return false;
    }
  }
}

}  // namespace onnxkit::io::wire
