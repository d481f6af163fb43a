// Tests for lib/tensor/npy: numpy-written fixtures (testdata/tensors, made by
// gen_tensors.py) against onnx.numpy_helper's .pb of the same values, byte-
// identical rewriting, the container convention for types numpy lacks, and
// hostile headers (truncation, length lies, overflowing shapes, pickles).
#include "lib/tensor/npy.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/tensor_data.h"
#include "tests/util/test_paths.h"

namespace onnxkit::tensor {
namespace {

using ::onnxkit::testing::ReadFileOrEmpty;
using ::onnxkit::testing::TestdataPath;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) { return ReadFileOrEmpty(TestdataPath("tensors/" + name)); }

// A .npy file with header text `dict` (padded like numpy) followed by `data`.
std::string MakeNpy(const std::string& dict, const std::string& data, int major = 1) {
  const size_t len_width = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + len_width + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < len_width; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string Dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// Field-for-field equality after normalizing data to raw bytes.
void ExpectSameTensor(const pb::TensorProto& a, const pb::TensorProto& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.data_type, b.data_type);
  EXPECT_EQ(a.dims, b.dims);
  ASSERT_TRUE(ValidateTensorData(a).ok()) << ValidateTensorData(a);
  ASSERT_TRUE(ValidateTensorData(b).ok()) << ValidateTensorData(b);
  if (a.data_type == pb::kString) {
    EXPECT_EQ(a.string_data, b.string_data);
  } else {
    EXPECT_EQ(*ToRawBytes(a), *ToRawBytes(b));
  }
}

absl::StatusCode ReadCode(const std::string& bytes) { return ReadNpy(bytes, "x").status().code(); }

// --- numpy fixtures ----------------------------------------------------------

TEST(NpyTest, MatchesOnnxNumpyHelper) {
  for (const char* stem : {"f32", "f16", "i64", "bool", "u8", "c64", "str", "bytes", "f32_be", "c64_be",
                           "str_be", "fortran", "fortran_str", "scalar", "empty", "v2", "v3"}) {
    SCOPED_TRACE(stem);
    auto from_npy = ReadNpy(Fixture(std::string(stem) + ".npy"), stem);
    ASSERT_TRUE(from_npy.ok()) << from_npy.status();
    auto from_pb = io::DecodeTensor(Fixture(std::string(stem) + ".pb"));
    ASSERT_TRUE(from_pb.ok()) << from_pb.status();
    ExpectSameTensor(*from_npy, *from_pb);
  }
}

TEST(NpyTest, ReadsExpectedValues) {
  auto str = ReadNpy(Fixture("str.npy"), "s");
  ASSERT_TRUE(str.ok());
  EXPECT_THAT(str->string_data, ::testing::ElementsAre("hello", "h\xC3\xA9llo", "\xE6\x97\xA5\xE6\x9C\xAC",
                                                       "\xF0\x9F\x99\x82", ""));
  auto bytes = ReadNpy(Fixture("bytes.npy"), "b");
  ASSERT_TRUE(bytes.ok());
  EXPECT_THAT(bytes->string_data, ::testing::ElementsAre("ab", std::string("c\0d", 3), ""));
  auto scalar = ReadNpy(Fixture("scalar.npy"), "x");
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->dims.empty());
  EXPECT_EQ(scalar->data_type, pb::kDouble);
  auto empty = ReadNpy(Fixture("empty.npy"), "x");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->dims, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(empty->raw_data.empty());
}

TEST(NpyTest, RewritesNumpyFilesByteForByte) {
  for (const char* stem : {"f32", "f16", "i64", "bool", "u8", "c64", "str", "scalar", "empty"}) {
    SCOPED_TRACE(stem);
    const std::string file = Fixture(std::string(stem) + ".npy");
    auto t = ReadNpy(file, stem);
    ASSERT_TRUE(t.ok()) << t.status();
    auto written = WriteNpy(*t);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(*written, file);
  }
}

// --- Round trips -------------------------------------------------------------

std::string Pattern(int32_t data_type, int64_t count) {
  std::string s(static_cast<size_t>(*RawByteSize(data_type, count)), '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 37 + 11) & 0xff);
  if (data_type == pb::kBool) {
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i % 2);
  }
  // Padding bits of a partly used last byte are zero (they do not survive
  // unpacking).
  const int64_t used_bits = (count * DataTypeBits(data_type)) % 8;
  if (used_bits != 0) s.back() = static_cast<char>(s.back() & ((1 << used_bits) - 1));
  return s;
}

TEST(NpyTest, EveryTypeRoundTrips) {
  for (int32_t dt = 1; IsKnownDataType(dt); ++dt) {
    if (dt == pb::kString) continue;
    SCOPED_TRACE(DataTypeName(dt));
    for (std::vector<int64_t> dims : {std::vector<int64_t>{}, {0}, {2, 4}}) {
      pb::TensorProto t = FromRawBytes("t", dt, dims, Pattern(dt, *CheckedElementCount(dims)));
      auto npy = WriteNpy(t);
      ASSERT_TRUE(npy.ok()) << npy.status();
      EXPECT_THAT(*npy, HasSubstr("'descr': '" + std::string(NpyDescrFor(dt)) + "'"));
      auto back = ReadNpy(*npy, "t");
      ASSERT_TRUE(back.ok()) << back.status();
      auto restored = FromNpyContainer(*back, dt);
      ASSERT_TRUE(restored.ok()) << restored.status();
      ExpectSameTensor(*restored, t);
    }
  }
}

TEST(NpyTest, ContainerConventionForTypesNumpyLacks) {
  EXPECT_EQ(NpyDescrFor(pb::kBfloat16), "<u2");
  EXPECT_EQ(NpyDescrFor(pb::kFloat8E4M3FN), "|u1");
  EXPECT_EQ(NpyDescrFor(pb::kFloat8E8M0), "|u1");
  EXPECT_EQ(NpyDescrFor(pb::kInt4), "|i1");
  EXPECT_EQ(NpyDescrFor(pb::kUint4), "|u1");
  EXPECT_EQ(NpyDescrFor(pb::kFloat4E2M1), "|u1");
  EXPECT_EQ(NpyDescrFor(pb::kInt2), "|i1");
  EXPECT_EQ(NpyDescrFor(pb::kString), "");
  // int4 [1, -2, 7]: one sign-extended value per byte.
  auto npy = WriteNpy(FromRawBytes("q", pb::kInt4, {3}, std::string("\xE1\x07", 2)));
  ASSERT_TRUE(npy.ok());
  auto back = ReadNpy(*npy, "q");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data_type, pb::kInt8);
  EXPECT_EQ(back->raw_data.view(), std::string("\x01\xFE\x07", 3));
  auto restored = FromNpyContainer(*back, pb::kInt4);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->raw_data.view(), std::string("\xE1\x07", 2));
}

TEST(NpyTest, FromNpyContainerChecksTypeAndRange) {
  pb::TensorProto i8 = FromRawBytes("q", pb::kInt8, {2}, std::string("\x01\x10", 2));
  auto out_of_range = FromNpyContainer(i8, pb::kInt4);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("element 1 = 16 does not fit int4 [-8, 15]"));
  i8.raw_data = Bytes::Copy(std::string("\xF7\x09", 2));  // -9 is out of range too
  EXPECT_EQ(FromNpyContainer(i8, pb::kInt4).status().code(), absl::StatusCode::kInvalidArgument);
  // ml_dtypes keeps int4 -2 as 0x0E: both forms give the same nibble.
  i8.raw_data = Bytes::Copy(std::string("\xFE\x0E", 2));
  auto masked = FromNpyContainer(i8, pb::kInt4);
  ASSERT_TRUE(masked.ok());
  EXPECT_EQ(masked->raw_data.view(), std::string("\xEE", 1));
  pb::TensorProto u8 = FromRawBytes("u", pb::kUint8, {1}, std::string("\x10", 1));
  EXPECT_THAT(FromNpyContainer(u8, pb::kUint4).status().message(), HasSubstr("does not fit uint4 [0, 15]"));
  EXPECT_THAT(FromNpyContainer(i8, pb::kBfloat16).status().message(), HasSubstr("stored as uint16"));
  EXPECT_THAT(FromNpyContainer(i8, pb::kFloat).status().message(), HasSubstr("cannot reinterpret"));
  EXPECT_TRUE(FromNpyContainer(i8, pb::kInt8).ok());
}

TEST(NpyTest, StringsRoundTripAndFallBackToBytes) {
  pb::TensorProto s = FromStrings("s", {2, 2}, {"a", "\xE6\x97\xA5", "", "\xF0\x9F\x99\x82x"});
  auto npy = WriteNpy(s);
  ASSERT_TRUE(npy.ok());
  EXPECT_THAT(*npy, HasSubstr("'<U2'"));
  ExpectSameTensor(*ReadNpy(*npy, "s"), s);
  pb::TensorProto raw = FromStrings("s", {2}, {"\xFF\xFE", "ok"});  // not UTF-8
  npy = WriteNpy(raw);
  ASSERT_TRUE(npy.ok());
  EXPECT_THAT(*npy, HasSubstr("'|S2'"));
  ExpectSameTensor(*ReadNpy(*npy, "s"), raw);
}

TEST(NpyTest, WriteRefusesInvalidTensors) {
  pb::TensorProto bad = FromRawBytes("w", pb::kFloat, {3}, std::string(8, '\0'));
  EXPECT_EQ(WriteNpy(bad).status().code(), absl::StatusCode::kInvalidArgument);
  pb::TensorProto ext = FromRawBytes("w", pb::kFloat, {2}, "");
  ext.data_location = 1;
  EXPECT_EQ(WriteNpy(ext).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NpyTest, HeaderVariantsAccepted) {
  const std::string data(8, '\x01');
  // Double quotes, no trailing comma, Python 2 long suffix, version 2.0.
  EXPECT_TRUE(
      ReadNpy(MakeNpy("{\"descr\": \"<i4\", \"shape\": (2L,), \"fortran_order\": False}", data), "x").ok());
  EXPECT_TRUE(ReadNpy(MakeNpy(Dict("<f4", "(2,)"), data, 2), "x").ok());
  EXPECT_TRUE(ReadNpy(MakeNpy(Dict("<f4", "(1, 2)", true), data), "x").ok());
  EXPECT_TRUE(ReadNpy(MakeNpy(Dict("f4", "(2,)"), data), "x").ok());  // native order
}

// --- Hostile input -----------------------------------------------------------

TEST(NpyTest, EveryTruncationIsAnError) {
  for (const char* stem : {"f32", "str", "fortran", "v2"}) {
    const std::string file = Fixture(std::string(stem) + ".npy");
    for (size_t n = 0; n < file.size(); ++n) {
      absl::StatusCode code = ReadCode(file.substr(0, n));
      EXPECT_TRUE(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument)
          << stem << " prefix " << n << ": " << code;
    }
  }
  const std::string f32 = Fixture("f32.npy");
  EXPECT_EQ(ReadCode(f32.substr(0, f32.size() - 1)), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ReadNpy(f32.substr(0, f32.size() - 1), "x").status().message(),
              HasSubstr("needs 24 bytes, 23 present"));
}

TEST(NpyTest, HeaderLengthLies) {
  std::string file = Fixture("f32.npy");
  file[8] = '\xFF';
  file[9] = '\xFF';  // 65535 > file size
  EXPECT_EQ(ReadCode(file), absl::StatusCode::kDataLoss);
  file = Fixture("f32.npy");
  file[8] = 20;  // cuts the dict short
  file[9] = 0;
  EXPECT_EQ(ReadCode(file), absl::StatusCode::kInvalidArgument);
  std::string v2 = MakeNpy(Dict("<f4", "(2,)"), std::string(8, '\0'), 2);
  v2[11] = '\x7F';  // 2 GiB header
  EXPECT_EQ(ReadCode(v2), absl::StatusCode::kResourceExhausted);
}

TEST(NpyTest, ShapeOverflowAndNegativeDims) {
  EXPECT_THAT(ReadNpy(MakeNpy(Dict("<f4", "(4294967296, 4294967296, 16)"), ""), "x").status().message(),
              HasSubstr("overflows"));
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<f4", "(4294967296, 4294967296, 16)"), "")),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<f4", "(99999999999999999999,)"), "")),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<f4", "(-1,)"), "")), absl::StatusCode::kInvalidArgument);
  std::string rank65 = "(";
  for (int i = 0; i < 65; ++i) rank65 += "1, ";
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<f4", rank65 + ")"), "")), absl::StatusCode::kResourceExhausted);
  // A huge declared shape with no data is refused before allocating.
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<f8", "(1000000000, 1000)"), "")), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<U0", "(1000000000,)"), "")), absl::StatusCode::kResourceExhausted);
}

TEST(NpyTest, RefusesPicklesAndUnsupportedDtypes) {
  auto pickle = ReadNpy(MakeNpy(Dict("|O", "(2,)"), std::string(16, '\0')), "x");
  EXPECT_EQ(pickle.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pickle.status().message(), HasSubstr("never unpickles"));
  EXPECT_EQ(ReadCode(MakeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                             std::string(4, '\0'))),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<M8[ns]", "(1,)"), std::string(8, '\0'))),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<f16", "(1,)"), std::string(16, '\0'))), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("|V4", "(1,)"), std::string(4, '\0'))), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<x4", "(1,)"), std::string(4, '\0'))), absl::StatusCode::kUnimplemented);
}

TEST(NpyTest, MalformedHeaders) {
  const std::string four(4, '\0');
  for (const std::string& dict : {
           std::string("{'descr': '<f4', 'shape': (1,), }"),                                // missing key
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}"),  // extra key
           std::string("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"),
           Dict("<f4", "(1)"),  // int, not tuple
           Dict("<f4", "[1]"),
           std::string("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}"),
           std::string("{'descr': '<\\x66', 'fortran_order': False, 'shape': (1,)}"),  // escape
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing"),
           std::string("['descr', '<f4']"),
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,"),
       }) {
    EXPECT_EQ(ReadCode(MakeNpy(dict, four)), absl::StatusCode::kInvalidArgument) << dict;
  }
}

TEST(NpyTest, BadMagicVersionAndTrailingBytes) {
  std::string file = Fixture("f32.npy");
  EXPECT_EQ(ReadCode("PK\x03\x04 not npy"), absl::StatusCode::kInvalidArgument);
  file[6] = 4;
  EXPECT_EQ(ReadCode(file), absl::StatusCode::kUnimplemented);
  auto trailing = ReadNpy(Fixture("f32.npy") + "xx", "x");
  EXPECT_EQ(trailing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(trailing.status().message(), HasSubstr("2 trailing bytes"));
}

TEST(NpyTest, InvalidUtf32CodePoint) {
  std::string data("\x00\xD8\x00\x00", 4);  // U+D800, a surrogate
  auto t = ReadNpy(MakeNpy(Dict("<U1", "(1,)"), data), "x");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("code point"));
  EXPECT_EQ(ReadCode(MakeNpy(Dict("<U1", "(1,)"), std::string("\x00\x00\x11\x00", 4))),
            absl::StatusCode::kInvalidArgument);
}

TEST(NpyTest, BoolBytesAreNormalized) {
  auto t = ReadNpy(MakeNpy(Dict("|b1", "(3,)"), std::string("\x00\x02\x01", 3)), "b");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->raw_data.view(), std::string("\x00\x01\x01", 3));
}

TEST(NpyTest, RandomMutationsNeverCrash) {
  std::mt19937 rng(1234);
  for (const char* stem : {"f32", "str", "fortran", "c64_be"}) {
    const std::string file = Fixture(std::string(stem) + ".npy");
    for (int iter = 0; iter < 2000; ++iter) {
      std::string m = file;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
      auto t = ReadNpy(m, "x");
      if (t.ok()) {
        EXPECT_TRUE(ValidateTensorData(*t).ok());
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::tensor
