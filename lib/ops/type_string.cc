// ONNX type strings: printing, parsing, and matching against allowed types.
#include "lib/ops/type_string.h"

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"

namespace onnxkit::ops {
namespace {

// Element type codes a type string may name: every known type but undefined.
std::optional<int32_t> ElemTypeFromName(std::string_view name) {
  std::optional<int32_t> code = DataTypeFromName(name);
  if (!code.has_value() || *code == pb::kUndefined) return std::nullopt;
  return code;
}

void AppendElemType(int32_t code, std::string& out) {
  const std::string_view name = DataTypeName(code);  // "undefined" for 0
  if (name.empty()) {
    absl::StrAppend(&out, "data_type_", code);
  } else {
    out += name;
  }
}

// Appends `type` as ONNX spells it; "undefined" for a missing or empty type.
void AppendType(const pb::TypeProto* type, std::string& out) {
  if (type == nullptr) {
    out += "undefined";
  } else if (type->tensor_type) {
    out += "tensor(";
    AppendElemType(type->tensor_type->elem_type, out);
    out += ')';
  } else if (type->sparse_tensor_type) {
    out += "sparse_tensor(";
    AppendElemType(type->sparse_tensor_type->elem_type, out);
    out += ')';
  } else if (type->sequence_type) {
    out += "seq(";
    AppendType(type->sequence_type->elem_type.get(), out);
    out += ')';
  } else if (type->optional_type) {
    out += "optional(";
    AppendType(type->optional_type->elem_type.get(), out);
    out += ')';
  } else if (type->map_type) {
    out += "map(";
    AppendElemType(type->map_type->key_type, out);
    out += ',';
    AppendType(type->map_type->value_type.get(), out);
    out += ')';
  } else if (type->opaque_type) {
    out += "opaque(";
    if (!type->opaque_type->domain.empty()) absl::StrAppend(&out, type->opaque_type->domain, ",");
    out += type->opaque_type->name;
    out += ')';
  } else {
    out += "undefined";
  }
}

// Reads the tokens of a type string, skipping whitespace around them.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}

  size_t offset() const { return pos_; }

  // Consumes `c` if it comes next.
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Consumes the longest run of [A-Za-z0-9_.] that comes next (maybe empty).
  std::string_view Word() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && IsWordChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  static bool IsWordChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// The inside of "opaque(" [domain ","] [name] ")", up to the parenthesis.
struct OpaqueParts {
  std::string_view domain;
  std::string_view name;
};
OpaqueParts ReadOpaque(Cursor& cursor) {
  const std::string_view first = cursor.Word();
  if (!cursor.Consume(',')) return {{}, first};
  return {first, cursor.Word()};
}

// Recursive-descent parser for the grammar in type_string.h.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), cursor_(text) {}

  absl::StatusOr<pb::TypeProto> ParseAll() {
    pb::TypeProto type;
    ONNXKIT_RETURN_IF_ERROR(ParseType(type, 1));
    if (!cursor_.AtEnd()) return Error("unexpected text after the type");
    return type;
  }

 private:
  absl::Status ParseType(pb::TypeProto& out, int depth) {
    if (depth > limits::kMaxMessageDepth) {
      return Error(absl::StrCat("types nested deeper than ", limits::kMaxMessageDepth));
    }
    const size_t word_offset = cursor_.offset();
    const std::string_view word = cursor_.Word();
    if (!cursor_.Consume('(')) {  // a bare element type: a scalar tensor
      ONNXKIT_ASSIGN_OR_RETURN(int32_t elem, ElemType(word, word_offset));
      pb::TypeProto::Tensor& tensor = out.tensor_type.mutable_value();
      SetElemType(tensor, elem);
      tensor.shape.mutable_value();
      return Close(false);
    }
    if (word == "tensor" || word == "sparse_tensor") {
      ONNXKIT_ASSIGN_OR_RETURN(int32_t elem, ParseElemType());
      if (word == "tensor") {
        SetElemType(out.tensor_type.mutable_value(), elem);
      } else {
        SetElemType(out.sparse_tensor_type.mutable_value(), elem);
      }
    } else if (word == "seq") {
      ONNXKIT_RETURN_IF_ERROR(
          ParseType(out.sequence_type.mutable_value().elem_type.mutable_value(), depth + 1));
    } else if (word == "optional") {
      ONNXKIT_RETURN_IF_ERROR(
          ParseType(out.optional_type.mutable_value().elem_type.mutable_value(), depth + 1));
    } else if (word == "map") {
      pb::TypeProto::Map& map = out.map_type.mutable_value();
      ONNXKIT_ASSIGN_OR_RETURN(map.key_type, ParseElemType());
      map.MarkPresent(1);
      if (!cursor_.Consume(',')) return Error("expected ',' after the map key type");
      ONNXKIT_RETURN_IF_ERROR(ParseType(map.value_type.mutable_value(), depth + 1));
    } else if (word == "opaque") {
      ParseOpaque(out.opaque_type.mutable_value());
    } else {
      return Error(absl::StrCat("unknown type constructor '", absl::CHexEscape(Sv(word)),
                                "'; expected tensor, sparse_tensor, seq, optional, map or opaque"),
                   word_offset);
    }
    return Close(true);
  }

  void ParseOpaque(pb::TypeProto::Opaque& opaque) {
    const OpaqueParts parts = ReadOpaque(cursor_);
    if (!parts.domain.empty()) {
      opaque.domain = std::string(parts.domain);
      opaque.MarkPresent(1);
    }
    if (!parts.name.empty()) {
      opaque.name = std::string(parts.name);
      opaque.MarkPresent(2);
    }
  }

  absl::StatusOr<int32_t> ParseElemType() {
    const size_t offset = cursor_.offset();
    return ElemType(cursor_.Word(), offset);
  }

  absl::StatusOr<int32_t> ElemType(std::string_view word, size_t offset) const {
    if (word.empty()) return Error("expected a type", offset);
    std::optional<int32_t> elem = ElemTypeFromName(word);
    if (!elem.has_value()) {
      return Error(absl::StrCat("unknown element type '", absl::CHexEscape(Sv(word)), "'"), offset);
    }
    return *elem;
  }

  template <typename T>
  static void SetElemType(T& tensor, int32_t elem) {
    tensor.elem_type = elem;
    tensor.MarkPresent(1);
  }

  absl::Status Close(bool opened) {
    if (opened && !cursor_.Consume(')')) return Error("expected ')'");
    return absl::OkStatus();
  }

  absl::Status Error(std::string_view what) const { return Error(what, cursor_.offset()); }
  absl::Status Error(std::string_view what, size_t offset) const {
    return absl::InvalidArgumentError(absl::StrCat("invalid type string '", absl::CHexEscape(Sv(text_)),
                                                   "' at offset ", offset, ": ", Sv(what)));
  }

  std::string_view text_;
  Cursor cursor_;
};

// True when the type at `cursor` (grammar of type_string.h) describes `type`.
bool Matches(Cursor& cursor, const pb::TypeProto& type, int depth) {
  if (depth > limits::kMaxMessageDepth) return false;
  const std::string_view word = cursor.Word();
  if (!cursor.Consume('(')) {  // a bare element type: a scalar tensor
    std::optional<int32_t> elem = ElemTypeFromName(word);
    return elem.has_value() && type.tensor_type && type.tensor_type->elem_type == *elem;
  }
  bool ok = false;
  if (word == "tensor" || word == "sparse_tensor") {
    std::optional<int32_t> elem = ElemTypeFromName(cursor.Word());
    const int32_t* actual = nullptr;
    if (word == "tensor" && type.tensor_type) actual = &type.tensor_type->elem_type;
    if (word == "sparse_tensor" && type.sparse_tensor_type) {
      actual = &type.sparse_tensor_type->elem_type;
    }
    ok = elem.has_value() && actual != nullptr && *actual == *elem;
  } else if (word == "seq" || word == "optional") {
    const Box<pb::TypeProto>* elem = nullptr;
    if (word == "seq" && type.sequence_type) elem = &type.sequence_type->elem_type;
    if (word == "optional" && type.optional_type) elem = &type.optional_type->elem_type;
    ok = elem != nullptr && *elem && Matches(cursor, **elem, depth + 1);
  } else if (word == "map") {
    std::optional<int32_t> key = ElemTypeFromName(cursor.Word());
    ok = key.has_value() && cursor.Consume(',') && type.map_type && type.map_type->key_type == *key &&
         type.map_type->value_type && Matches(cursor, *type.map_type->value_type, depth + 1);
  } else if (word == "opaque") {
    const OpaqueParts parts = ReadOpaque(cursor);
    ok = type.opaque_type && type.opaque_type->domain == parts.domain && type.opaque_type->name == parts.name;
  }
  return ok && cursor.Consume(')');
}

}  // namespace

std::string TypeToString(const pb::TypeProto& type) {
  std::string out;
  AppendType(&type, out);
  return out;
}

absl::StatusOr<pb::TypeProto> ParseTypeString(std::string_view text) { return Parser(text).ParseAll(); }

bool TypeStringMatches(std::string_view allowed, const pb::TypeProto& type) {
  Cursor cursor(allowed);
  return Matches(cursor, type, 1) && cursor.AtEnd();
}

}  // namespace onnxkit::ops
