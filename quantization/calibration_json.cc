// --save-calibration / --load-calibration: the calibration as JSON
//   {"format": "onnxkit-calibration", "version": 1, "bins": 2048, "samples": 30,
//    "tensors": [{"name": "x", "min": -1.5, "max": 2.0, "count": 4800, "hist": [..]}]}
//   ("nonfinite": N where calibration saw N NaN or infinite values)
// and a small reader for exactly that shape (objects, arrays, strings,
// numbers), bounded in depth, never trusting sizes from the file.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/base/json_writer.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "quantization/calibration.h"

namespace onnxkit::quant {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("calibration file, offset ", pos_, ": ", Sv(what)));
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::StatusOr<std::string> String() {
    if (!Eat('"')) return Error("expected a string");
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\' && pos_ < s_.size()) {
        char e = s_[pos_++];
        if (e == 'u' && pos_ + 4 <= s_.size()) {
          out.push_back(static_cast<char>(std::strtol(std::string(s_.substr(pos_, 4)).c_str(), nullptr, 16)));
          pos_ += 4;
          continue;
        }
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
      }
      out.push_back(c);
    }
    if (!Eat('"')) return Error("unterminated string");
    return out;
  }
  absl::StatusOr<double> Number() {
    Skip();
    size_t end = pos_;
    while (end < s_.size() && std::strchr("+-0123456789.eE", s_[end]) != nullptr) ++end;
    if (end == pos_) return Error("expected a number");
    std::string text(s_.substr(pos_, end - pos_));
    pos_ = end;
    return std::strtod(text.c_str(), nullptr);
  }
  // Skips any value (depth-limited).
  absl::Status SkipValue(int depth = 0) {
    if (depth > 32) return Error("nested too deep");
    Skip();
    if (pos_ >= s_.size()) return Error("unexpected end");
    char c = s_[pos_];
    if (c == '"') return String().status();
    if (c == '{' || c == '[') {
      ++pos_;
      char close = c == '{' ? '}' : ']';
      if (Eat(close)) return absl::OkStatus();
      do {
        if (c == '{') {
          ONNXKIT_RETURN_IF_ERROR(String().status());
          if (!Eat(':')) return Error("expected ':'");
        }
        ONNXKIT_RETURN_IF_ERROR(SkipValue(depth + 1));
      } while (Eat(','));
      return Eat(close) ? absl::OkStatus() : Error("unterminated object or array");
    }
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;  // true/false/null
    if (std::isalpha(static_cast<unsigned char>(c))) return absl::OkStatus();
    return Number().status();
  }
  // Calls fn(key) for each member of an object; fn reads the value.
  template <typename F>
  absl::Status Object(F fn) {
    if (!Eat('{')) return Error("expected an object");
    if (Eat('}')) return absl::OkStatus();
    do {
      ONNXKIT_ASSIGN_OR_RETURN(std::string key, String());
      if (!Eat(':')) return Error("expected ':'");
      ONNXKIT_RETURN_IF_ERROR(fn(key));
    } while (Eat(','));
    return Eat('}') ? absl::OkStatus() : Error("expected '}'");
  }
  template <typename F>
  absl::Status Array(F fn) {
    if (!Eat('[')) return Error("expected an array");
    if (Eat(']')) return absl::OkStatus();
    do {
      ONNXKIT_RETURN_IF_ERROR(fn());
    } while (Eat(','));
    return Eat(']') ? absl::OkStatus() : Error("expected ']'");
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

absl::StatusOr<TensorRange> ReadTensor(Reader& r, std::string* name) {
  TensorRange t;
  ONNXKIT_RETURN_IF_ERROR(r.Object([&](const std::string& key) -> absl::Status {
    if (key == "name") {
      ONNXKIT_ASSIGN_OR_RETURN(*name, r.String());
    } else if (key == "min") {
      ONNXKIT_ASSIGN_OR_RETURN(t.min, r.Number());
    } else if (key == "max") {
      ONNXKIT_ASSIGN_OR_RETURN(t.max, r.Number());
    } else if (key == "count" || key == "nonfinite") {
      ONNXKIT_ASSIGN_OR_RETURN(double c, r.Number());
      // A count must be a whole number an int64_t holds (the cast of any
      // other double is undefined).
      if (!(c >= 0 && c <= 9.0e18) || c != std::floor(c)) {
        return r.Error(absl::StrCat("tensor '", *name, "': ", key, " is not a count"));
      }
      (key == "count" ? t.count : t.nonfinite) = static_cast<int64_t>(c);
    } else if (key == "hist") {
      return r.Array([&]() -> absl::Status {
        ONNXKIT_ASSIGN_OR_RETURN(double v, r.Number());
        t.hist.push_back(v);
        return absl::OkStatus();
      });
    } else {
      return r.SkipValue();
    }
    return absl::OkStatus();
  }));
  if (!(t.min <= t.max)) return r.Error(absl::StrCat("tensor '", *name, "': min above max"));
  return t;
}

}  // namespace

std::string CalibrationToJson(const Calibration& c) {
  JsonWriter w;
  w.BeginObject();
  w.KeyString("format", "onnxkit-calibration");
  w.KeyInt("version", 1);
  w.KeyInt("bins", c.bins);
  w.KeyInt("samples", c.samples);
  w.Key("tensors");
  w.BeginArray();
  for (const auto& [name, t] : c.tensors) {
    w.BeginObject();
    w.KeyString("name", name);
    w.KeyDouble("min", t.min);
    w.KeyDouble("max", t.max);
    w.KeyInt("count", t.count);
    if (t.nonfinite > 0) w.KeyInt("nonfinite", t.nonfinite);
    w.Key("hist");
    w.BeginArray();
    for (double h : t.hist) w.Double(h);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

absl::StatusOr<Calibration> CalibrationFromJson(std::string_view json) {
  Reader r(json);
  Calibration c;
  ONNXKIT_RETURN_IF_ERROR(r.Object([&](const std::string& key) -> absl::Status {
    if (key == "bins" || key == "samples") {
      ONNXKIT_ASSIGN_OR_RETURN(double v, r.Number());
      if (!(v >= 0 && v <= 1 << 30) || v != std::floor(v))
        return r.Error(absl::StrCat(key, " is not a count"));
      (key == "bins" ? c.bins : c.samples) = static_cast<int>(v);
      return absl::OkStatus();
    }
    if (key != "tensors") return r.SkipValue();
    return r.Array([&]() -> absl::Status {
      std::string name;
      ONNXKIT_ASSIGN_OR_RETURN(TensorRange t, ReadTensor(r, &name));
      c.tensors[name] = std::move(t);
      return absl::OkStatus();
    });
  }));
  for (auto& [name, t] : c.tensors) {
    if (static_cast<int>(t.hist.size()) != c.bins) t.hist.clear();  // inconsistent: min/max only
  }
  return c;
}

}  // namespace onnxkit::quant
