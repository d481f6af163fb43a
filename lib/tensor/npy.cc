// NumPy .npy reading and writing (format described in npy.h).
#include "lib/tensor/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/base/utf8.h"
#include "lib/tensor/tensor_data.h"

namespace onnxkit::tensor {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr int64_t kPreambleBytes = 8;     // magic + major + minor
constexpr int64_t kArrayAlign = 64;       // numpy's ARRAY_ALIGN
constexpr int kGrowthAxisMaxDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS
// Bound on the bytes a padded '<U'/'|S' array may take when written.
constexpr int64_t kMaxNpyStringArrayBytes = int64_t{1} << 32;

// ---------------------------------------------------------------------------
// Header dict parsing.

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("header is not a dict (expected '{')");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      ONNXKIT_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      SkipSpace();
      bool* seen = nullptr;
      absl::Status st;
      if (key == "descr") {
        seen = &seen_descr;
        if (Peek() == '[') {
          return absl::UnimplementedError("structured dtypes (descr is a list) are not supported");
        }
        auto descr = ParseString();
        st = descr.status();
        if (descr.ok()) h.descr = *std::move(descr);
      } else if (key == "fortran_order") {
        seen = &seen_fortran;
        st = ParseBool(&h.fortran_order);
      } else if (key == "shape") {
        seen = &seen_shape;
        st = ParseShape(&h.shape);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("unexpected key '", key, "' in the header (expected descr, fortran_order, shape)"));
      }
      ONNXKIT_RETURN_IF_ERROR(st);
      if (*seen) return absl::InvalidArgumentError(absl::StrCat("duplicate key '", key, "'"));
      *seen = true;
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the header dict");
    if (!seen_descr || !seen_fortran || !seen_shape) {
      return absl::InvalidArgumentError("header must have the keys descr, fortran_order and shape");
    }
    return h;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("malformed header: ", Sv(what), " at offset ", pos_));
  }

  absl::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') return Error("escape sequences are not supported");
      if (s_[pos_] == '\n') return Error("unterminated string");
      out.push_back(s_[pos_++]);
    }
    if (!Consume(quote)) return Error("unterminated string");
    return out;
  }

  absl::Status ParseBool(bool* out) {
    if (s_.substr(pos_, 4) == "True") {
      *out = true;
      pos_ += 4;
    } else if (s_.substr(pos_, 5) == "False") {
      *out = false;
      pos_ += 5;
    } else {
      return Error("fortran_order must be True or False");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> ParseDim() {
    if (Peek() == '-') return absl::InvalidArgumentError("shape has a negative dimension");
    if (Peek() < '0' || Peek() > '9') return Error("shape must be a tuple of integers");
    int64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      auto r = CheckedMul(v, 10);
      if (r) r = CheckedAdd(*r, Peek() - '0');
      if (!r) return absl::InvalidArgumentError("shape dimension overflows int64");
      v = *r;
      ++pos_;
    }
    Consume('L');  // Python 2 long suffix
    return v;
  }

  absl::Status ParseShape(std::vector<int64_t>* shape) {
    if (!Consume('(')) return Error("shape must be a tuple");
    bool trailing_comma = false;
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (shape->size() >= static_cast<size_t>(limits::kMaxRank)) {
        return absl::ResourceExhaustedError(
            absl::StrCat("shape rank exceeds the limit of ", limits::kMaxRank, " (limits::kMaxRank)"));
      }
      ONNXKIT_ASSIGN_OR_RETURN(int64_t dim, ParseDim());
      shape->push_back(dim);
      SkipSpace();
      trailing_comma = Consume(',');
      if (!trailing_comma) {
        SkipSpace();
        if (!Consume(')')) return Error("expected ',' or ')' in shape");
        break;
      }
    }
    // "(3)" is the integer 3 in Python, not a tuple.
    if (shape->size() == 1 && !trailing_comma) return Error("shape must be a tuple, not an int");
    return absl::OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// dtype descriptors.

enum class Kind { kNumeric, kUnicode, kBytes };

struct NpyType {
  Kind kind = Kind::kNumeric;
  int32_t data_type = pb::kUndefined;
  int64_t itemsize = 0;
  bool big_endian = false;  // data must be byte-swapped to little-endian
};

struct NumericDescr {
  char kind;
  int itemsize;
  int32_t data_type;
};

constexpr NumericDescr kNumeric[] = {
    {'b', 1, pb::kBool},      {'i', 1, pb::kInt8},        {'i', 2, pb::kInt16},  {'i', 4, pb::kInt32},
    {'i', 8, pb::kInt64},     {'u', 1, pb::kUint8},       {'u', 2, pb::kUint16}, {'u', 4, pb::kUint32},
    {'u', 8, pb::kUint64},    {'f', 2, pb::kFloat16},     {'f', 4, pb::kFloat},  {'f', 8, pb::kDouble},
    {'c', 8, pb::kComplex64}, {'c', 16, pb::kComplex128},
};

absl::StatusOr<NpyType> ParseDescr(std::string_view descr) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("descr '", Sv(descr), "': ", Sv(why)));
  };
  NpyType t;
  std::string_view rest = descr;
  char order = '=';
  if (!rest.empty() && (rest[0] == '<' || rest[0] == '>' || rest[0] == '|' || rest[0] == '=')) {
    order = rest[0];
    rest.remove_prefix(1);
  }
  t.big_endian = order == '>' || (order == '=' && std::endian::native == std::endian::big);
  if (rest.empty()) return bad("missing type code");
  const char kind = rest[0];
  rest.remove_prefix(1);
  if (kind == 'O') {
    return bad(
        "object arrays hold pickled Python objects, which onnxkit never unpickles; "
        "save strings with a str dtype ('<U')");
  }
  if (kind == 'M' || kind == 'm')
    return absl::UnimplementedError(
        absl::StrCat("descr '", Sv(descr), "': datetime and timedelta arrays are not supported"));
  if (kind == 'V')
    return absl::UnimplementedError(
        absl::StrCat("descr '", Sv(descr), "': void (raw record) arrays are not supported"));
  int64_t size = 0;
  if (rest.empty()) return bad("missing item size");
  for (char c : rest) {
    if (c < '0' || c > '9') return bad("item size is not a decimal number");
    auto r = CheckedMul(size, 10);
    if (r) r = CheckedAdd(*r, c - '0');
    if (!r || *r > (int64_t{1} << 31)) return bad("item size too large");
    size = *r;
  }
  if (kind == 'U') {
    t.kind = Kind::kUnicode;
    t.data_type = pb::kString;
    t.itemsize = size * 4;
    return t;
  }
  if (kind == 'S' || kind == 'a') {
    t.kind = Kind::kBytes;
    t.data_type = pb::kString;
    t.itemsize = size;
    return t;
  }
  for (const NumericDescr& d : kNumeric) {
    if (d.kind == kind && d.itemsize == size) {
      t.data_type = d.data_type;
      t.itemsize = size;
      return t;
    }
  }
  return absl::UnimplementedError(absl::StrCat("descr '", Sv(descr),
                                               "' has no ONNX element type; supported: b1, i1/i2/i4/i8, "
                                               "u1/u2/u4/u8, f2/f4/f8, c8/c16, U<n>, S<n>"));
}

// ---------------------------------------------------------------------------
// Helpers for element data.

// Calls visit(src) for each element in C order, where src is the element's
// index in Fortran-ordered storage. `count` is the (checked) product of dims.
template <typename F>
void VisitFortranOrder(const std::vector<int64_t>& dims, int64_t count, F&& visit) {
  if (count == 0) return;
  const size_t rank = dims.size();
  std::vector<int64_t> stride(rank), idx(rank, 0);
  int64_t s = 1;
  for (size_t k = 0; k < rank; ++k) {
    stride[k] = s;
    s *= dims[k];  // a prefix of a non-zero product that did not overflow
  }
  int64_t src = 0;
  for (int64_t i = 0; i < count; ++i) {
    visit(src);
    for (size_t k = rank; k-- > 0;) {
      ++idx[k];
      src += stride[k];
      if (idx[k] < dims[k]) break;
      src -= dims[k] * stride[k];
      idx[k] = 0;
    }
  }
}

void ByteSwapUnits(std::string* data, int64_t unit) {
  if (unit <= 1) return;
  for (size_t i = 0; i + unit <= data->size(); i += unit) {
    std::reverse(data->begin() + i, data->begin() + i + unit);
  }
}

bool IsScalarValue(uint32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

// Strict UTF-8 decoding (no overlong forms, surrogates or values past
// U+10FFFF); nullopt when `s` is not valid UTF-8.
std::optional<std::vector<uint32_t>> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return std::nullopt;
    uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || !IsScalarValue(cp)) return std::nullopt;
    out.push_back(cp);
    i += len;
  }
  return out;
}

// One element of a '<U'/'|S' array as a string.
absl::StatusOr<std::string> DecodeStringItem(std::string_view item, const NpyType& t) {
  std::string out;
  if (t.kind == Kind::kBytes) {
    size_t n = item.size();
    while (n > 0 && item[n - 1] == '\0') --n;
    return std::string(item.substr(0, n));
  }
  size_t units = item.size() / 4;
  auto unit = [&](size_t k) {
    const auto* p = reinterpret_cast<const unsigned char*>(item.data() + 4 * k);
    return t.big_endian ? (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]
                        : (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
  };
  while (units > 0 && unit(units - 1) == 0) --units;
  for (size_t k = 0; k < units; ++k) {
    const uint32_t cp = unit(k);
    if (!IsScalarValue(cp)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid UTF-32 code point 0x", absl::Hex(cp), " in a '<U' string"));
    }
    AppendUtf8(cp, &out);
  }
  return out;
}

absl::StatusOr<pb::TensorProto> ReadStrings(std::string_view data, const NpyType& t, const NpyHeader& h,
                                            int64_t count, std::string name) {
  if (count > kMaxNpyStringElements) {
    return absl::ResourceExhaustedError(absl::StrCat("string array of ", count,
                                                     " elements exceeds the limit of ", kMaxNpyStringElements,
                                                     " (kMaxNpyStringElements)"));
  }
  std::vector<std::string> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    ONNXKIT_ASSIGN_OR_RETURN(std::string s, DecodeStringItem(data.substr(i * t.itemsize, t.itemsize), t));
    items.push_back(std::move(s));
  }
  if (h.fortran_order && h.shape.size() > 1) {
    std::vector<std::string> c_order;
    c_order.reserve(items.size());
    VisitFortranOrder(h.shape, count, [&](int64_t src) { c_order.push_back(std::move(items[src])); });
    items = std::move(c_order);
  }
  return FromStrings(std::move(name), h.shape, std::move(items));
}

pb::TensorProto ReadNumeric(std::string_view data, const NpyType& t, const NpyHeader& h, int64_t count,
                            std::string name) {
  std::string raw(data);
  if (t.big_endian) {
    const bool complex = t.data_type == pb::kComplex64 || t.data_type == pb::kComplex128;
    ByteSwapUnits(&raw, complex ? t.itemsize / 2 : t.itemsize);
  }
  if (t.data_type == pb::kBool) {
    for (char& c : raw) c = c != 0 ? 1 : 0;
  }
  if (h.fortran_order && h.shape.size() > 1) {
    std::string c_order(raw.size(), '\0');
    char* dst = c_order.data();
    const size_t w = static_cast<size_t>(t.itemsize);
    VisitFortranOrder(h.shape, count, [&](int64_t src) {
      std::memcpy(dst, raw.data() + src * w, w);
      dst += w;
    });
    raw = std::move(c_order);
  }
  return FromRawBytes(std::move(name), t.data_type, h.shape, std::move(raw));
}

uint32_t LoadLE(std::string_view b, size_t at, int width) {
  uint32_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

absl::StatusOr<pb::TensorProto> ReadNpyImpl(std::string_view bytes, std::string name) {
  const size_t magic_check = std::min(bytes.size(), kMagic.size());
  if (bytes.substr(0, magic_check) != kMagic.substr(0, magic_check) || bytes.empty()) {
    return absl::InvalidArgumentError("not a .npy file (missing the \\x93NUMPY magic)");
  }
  if (bytes.size() < static_cast<size_t>(kPreambleBytes)) {
    return absl::DataLossError(
        absl::StrCat("file is truncated: ", bytes.size(), " bytes, shorter than the .npy preamble"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported .npy format version ", major, ".", minor, "; supported: 1.0, 2.0, 3.0"));
  }
  const int len_width = major == 1 ? 2 : 4;
  if (bytes.size() < static_cast<size_t>(kPreambleBytes + len_width)) {
    return absl::DataLossError("file is truncated inside the header length");
  }
  const uint64_t header_len = LoadLE(bytes, kPreambleBytes, len_width);
  if (header_len > static_cast<uint64_t>(kMaxNpyHeaderBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat("header of ", header_len, " bytes exceeds the limit of ",
                                                     kMaxNpyHeaderBytes, " (kMaxNpyHeaderBytes)"));
  }
  const uint64_t data_start = kPreambleBytes + len_width + header_len;
  if (data_start > bytes.size()) {
    return absl::DataLossError(absl::StrCat("header length ", header_len, " runs past the end of the file (",
                                            bytes.size(), " bytes)"));
  }
  HeaderParser parser(bytes.substr(kPreambleBytes + len_width, header_len));
  ONNXKIT_ASSIGN_OR_RETURN(NpyHeader h, parser.Parse());
  ONNXKIT_ASSIGN_OR_RETURN(NpyType t, ParseDescr(h.descr));
  auto count = CheckedElementCount(h.shape);
  std::optional<int64_t> need = count ? CheckedMul(*count, t.itemsize) : std::nullopt;
  if (!need) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", DimsToString(h.shape), " x item size ", t.itemsize, " overflows int64"));
  }
  const uint64_t have = bytes.size() - data_start;
  if (static_cast<uint64_t>(*need) > have) {
    return absl::DataLossError(absl::StrCat("array data is truncated: shape ", DimsToString(h.shape), " x ",
                                            t.itemsize, " bytes needs ", *need, " bytes, ", have,
                                            " present"));
  }
  if (static_cast<uint64_t>(*need) < have) {
    return absl::InvalidArgumentError(
        absl::StrCat(have - *need, " trailing bytes after the ", *need, " bytes of array data"));
  }
  std::string_view data = bytes.substr(data_start);
  if (t.kind != Kind::kNumeric) return ReadStrings(data, t, h, *count, std::move(name));
  return ReadNumeric(data, t, h, *count, std::move(name));
}

// ---------------------------------------------------------------------------
// Writing.

struct TypeDescr {
  int32_t data_type;
  std::string_view descr;
};

constexpr TypeDescr kDescrs[] = {
    {pb::kFloat, "<f4"},          {pb::kUint8, "|u1"},          {pb::kInt8, "|i1"},
    {pb::kUint16, "<u2"},         {pb::kInt16, "<i2"},          {pb::kInt32, "<i4"},
    {pb::kInt64, "<i8"},          {pb::kBool, "|b1"},           {pb::kFloat16, "<f2"},
    {pb::kDouble, "<f8"},         {pb::kUint32, "<u4"},         {pb::kUint64, "<u8"},
    {pb::kComplex64, "<c8"},      {pb::kComplex128, "<c16"},    {pb::kBfloat16, "<u2"},
    {pb::kFloat8E4M3FN, "|u1"},   {pb::kFloat8E4M3FNUZ, "|u1"}, {pb::kFloat8E5M2, "|u1"},
    {pb::kFloat8E5M2FNUZ, "|u1"}, {pb::kUint4, "|u1"},          {pb::kInt4, "|i1"},
    {pb::kFloat4E2M1, "|u1"},     {pb::kFloat8E8M0, "|u1"},     {pb::kUint2, "|u1"},
    {pb::kInt2, "|i1"},
};

bool IsSignedSubByte(int32_t dt) { return dt == pb::kInt4 || dt == pb::kInt2; }

// Python's repr of a tuple of ints.
std::string ShapeRepr(const std::vector<int64_t>& dims) {
  if (dims.size() == 1) return absl::StrCat("(", dims[0], ",)");
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

// Magic, version, length and the padded header, as numpy's _wrap_header.
std::string BuildHeader(std::string_view descr, const std::vector<int64_t>& dims) {
  std::string dict =
      absl::StrCat("{'descr': '", Sv(descr), "', 'fortran_order': False, 'shape': ", ShapeRepr(dims), ", }");
  if (!dims.empty()) {
    const int digits = static_cast<int>(absl::StrCat(dims[0]).size());
    dict.append(static_cast<size_t>(kGrowthAxisMaxDigits - digits), ' ');
  }
  const int64_t hlen = static_cast<int64_t>(dict.size()) + 1;
  int major = 1;
  int64_t pad = kArrayAlign - ((kPreambleBytes + 2 + hlen) % kArrayAlign);
  if (hlen + pad > 0xFFFF) {
    major = 2;
    pad = kArrayAlign - ((kPreambleBytes + 4 + hlen) % kArrayAlign);
  }
  const uint64_t total = static_cast<uint64_t>(hlen + pad);
  std::string out(kMagic);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(static_cast<char>((total >> (8 * i)) & 0xff));
  out += dict;
  out.append(static_cast<size_t>(pad), ' ');
  out.push_back('\n');
  return out;
}

absl::StatusOr<std::string> WriteStrings(const pb::TensorProto& t) {
  std::vector<std::vector<uint32_t>> decoded;
  decoded.reserve(t.string_data.size());
  bool utf8 = true;
  size_t max_len = 1;
  for (const std::string& s : t.string_data) {
    auto cps = DecodeUtf8(s);
    if (!cps) {
      utf8 = false;
      break;
    }
    max_len = std::max(max_len, cps->size());
    decoded.push_back(*std::move(cps));
  }
  if (!utf8) {
    max_len = 1;
    for (const std::string& s : t.string_data) max_len = std::max(max_len, s.size());
  }
  const int64_t itemsize = static_cast<int64_t>(max_len) * (utf8 ? 4 : 1);
  auto total = CheckedMul(static_cast<int64_t>(t.string_data.size()), itemsize);
  if (!total || *total > kMaxNpyStringArrayBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor '", t.name, "': padded string array would exceed ", kMaxNpyStringArrayBytes, " bytes"));
  }
  std::string out = BuildHeader(absl::StrCat(utf8 ? "<U" : "|S", max_len), t.dims);
  const size_t start = out.size();
  out.resize(start + static_cast<size_t>(*total), '\0');
  for (size_t i = 0; i < t.string_data.size(); ++i) {
    char* item = out.data() + start + i * itemsize;
    if (!utf8) {
      std::memcpy(item, t.string_data[i].data(), t.string_data[i].size());
      continue;
    }
    for (size_t k = 0; k < decoded[i].size(); ++k) {
      for (int b = 0; b < 4; ++b) item[4 * k + b] = static_cast<char>((decoded[i][k] >> (8 * b)) & 0xff);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<pb::TensorProto> ReadNpy(std::string_view bytes, std::string name) {
  std::string label = name.empty() ? std::string("npy") : absl::StrCat("npy array '", name, "'");
  auto result = ReadNpyImpl(bytes, std::move(name));
  if (!result.ok()) return AnnotateStatus(result.status(), label);
  return result;
}

std::string_view NpyDescrFor(int32_t data_type) {
  for (const TypeDescr& d : kDescrs) {
    if (d.data_type == data_type) return d.descr;
  }
  return "";
}

absl::StatusOr<std::string> WriteNpy(const pb::TensorProto& t) {
  ONNXKIT_RETURN_IF_ERROR(ValidateTensorData(t));
  if (t.data_type == pb::kString) return WriteStrings(t);
  ONNXKIT_ASSIGN_OR_RETURN(const int64_t count, ElementCount(t));
  ONNXKIT_ASSIGN_OR_RETURN(std::string raw, ToRawBytes(t));
  std::string out = BuildHeader(NpyDescrFor(t.data_type), t.dims);
  const int bits = DataTypeBits(t.data_type);
  if (bits >= 8) return out + raw;
  // Sub-byte types: one element per byte.
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  const size_t start = out.size();
  out.resize(start + static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto byte = static_cast<unsigned char>(raw[i / per_byte]);
    int v = static_cast<int>((byte >> ((i % per_byte) * bits)) & mask);
    if (IsSignedSubByte(t.data_type) && (v & (1 << (bits - 1)))) v -= 1 << bits;
    out[start + i] = static_cast<char>(v);
  }
  return out;
}

absl::StatusOr<pb::TensorProto> FromNpyContainer(const pb::TensorProto& tensor, int32_t data_type) {
  if (tensor.data_type == data_type) return tensor;
  const std::string_view descr = NpyDescrFor(data_type);
  std::optional<int32_t> container;
  if (descr == "<u2") container = pb::kUint16;
  if (descr == "|u1") container = pb::kUint8;
  if (descr == "|i1") container = pb::kInt8;
  if (!container || *container == data_type) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", tensor.name, "': cannot reinterpret ", Sv(DataTypeName(tensor.data_type)),
                     " as ", Sv(DataTypeName(data_type)), ", which .npy files store as itself"));
  }
  if (tensor.data_type != *container) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor.name, "': ", Sv(DataTypeName(data_type)), " is stored as ",
        Sv(DataTypeName(*container)), " in .npy files, got ", Sv(DataTypeName(tensor.data_type))));
  }
  ONNXKIT_ASSIGN_OR_RETURN(const int64_t count, ElementCount(tensor));
  ONNXKIT_ASSIGN_OR_RETURN(std::string raw, ToRawBytes(tensor));
  const int bits = DataTypeBits(data_type);
  if (bits >= 8) return FromRawBytes(tensor.name, data_type, tensor.dims, std::move(raw));
  const int per_byte = 8 / bits;
  const bool is_signed = IsSignedSubByte(data_type);
  const int lo = is_signed ? -(1 << (bits - 1)) : 0;
  const int hi = (1 << bits) - 1;  // signed: also the masked form of negatives
  std::string packed(static_cast<size_t>(*RawByteSize(data_type, count)), '\0');
  for (int64_t i = 0; i < count; ++i) {
    const int v = is_signed ? static_cast<int>(static_cast<int8_t>(raw[i]))
                            : static_cast<int>(static_cast<uint8_t>(raw[i]));
    if (v < lo || v > hi) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "': element ", i, " = ", v,
                                                     " does not fit ", Sv(DataTypeName(data_type)), " [", lo,
                                                     ", ", hi, "]"));
    }
    const unsigned bitsv = static_cast<unsigned>(v) & ((1u << bits) - 1);
    packed[i / per_byte] = static_cast<char>(static_cast<unsigned char>(packed[i / per_byte]) |
                                             (bitsv << ((i % per_byte) * bits)));
  }
  return FromRawBytes(tensor.name, data_type, tensor.dims, std::move(packed));
}

}  // namespace onnxkit::tensor
