// Tests for lib/tensor/tensor_data: storage rules per element type (checked
// against onnx.helper.make_tensor's typed fields in testdata/tensors),
// validation messages, raw conversion and .pb round trips of every type.
#include "lib/tensor/tensor_data.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/io/proto_codec.h"
#include "tests/util/test_paths.h"

namespace onnxkit::tensor {
namespace {

using ::onnxkit::testing::ReadFileOrEmpty;
using ::onnxkit::testing::TestdataPath;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) { return ReadFileOrEmpty(TestdataPath("tensors/" + name)); }

pb::TensorProto Decoded(const std::string& name) {
  auto t = io::DecodeTensor(Fixture(name));
  EXPECT_TRUE(t.ok()) << name << ": " << t.status();
  return t.ok() ? *t : pb::TensorProto();
}

pb::TensorProto Floats(std::vector<int64_t> dims, std::vector<float> values) {
  pb::TensorProto t;
  t.name = "w";
  t.data_type = pb::kFloat;
  t.dims = std::move(dims);
  t.float_data = std::move(values);
  return t;
}

// Raw bytes of `count` elements with a varied pattern.
std::string Pattern(int32_t data_type, int64_t count) {
  std::string s(static_cast<size_t>(*RawByteSize(data_type, count)), '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 37 + 11) & 0xff);
  if (data_type == pb::kBool) {
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i % 2);
  }
  return s;
}

// --- ElementCount ----------------------------------------------------------

TEST(TensorDataTest, ElementCount) {
  EXPECT_EQ(*ElementCount(Floats({}, {})), 1);
  EXPECT_EQ(*ElementCount(Floats({2, 3}, {})), 6);
  EXPECT_EQ(*ElementCount(Floats({0, 5}, {})), 0);
}

TEST(TensorDataTest, ElementCountRejectsNegativeOverflowAndRank) {
  auto neg = ElementCount(Floats({2, -1}, {}));
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(neg.status().message(), HasSubstr("negative dim -1"));
  auto overflow = ElementCount(Floats({int64_t{1} << 40, int64_t{1} << 40}, {}));
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overflow.status().message(), HasSubstr("overflows"));
  auto rank = ElementCount(Floats(std::vector<int64_t>(65, 1), {}));
  EXPECT_EQ(rank.status().code(), absl::StatusCode::kResourceExhausted);
}

// --- Storage rules ---------------------------------------------------------

TEST(TensorDataTest, TypedFieldForEveryType) {
  EXPECT_EQ(TypedFieldFor(pb::kFloat), DataField::kFloat);
  EXPECT_EQ(TypedFieldFor(pb::kComplex64), DataField::kFloat);
  EXPECT_EQ(TypedFieldFor(pb::kInt64), DataField::kInt64);
  EXPECT_EQ(TypedFieldFor(pb::kUint32), DataField::kUint64);
  EXPECT_EQ(TypedFieldFor(pb::kUint64), DataField::kUint64);
  EXPECT_EQ(TypedFieldFor(pb::kDouble), DataField::kDouble);
  EXPECT_EQ(TypedFieldFor(pb::kComplex128), DataField::kDouble);
  EXPECT_EQ(TypedFieldFor(pb::kString), DataField::kString);
  for (int32_t dt :
       {pb::kUint8, pb::kInt8, pb::kUint16, pb::kInt16, pb::kInt32, pb::kBool, pb::kFloat16, pb::kBfloat16,
        pb::kFloat8E4M3FN, pb::kFloat8E4M3FNUZ, pb::kFloat8E5M2, pb::kFloat8E5M2FNUZ, pb::kUint4, pb::kInt4,
        pb::kFloat4E2M1, pb::kFloat8E8M0, pb::kUint2, pb::kInt2}) {
    EXPECT_EQ(TypedFieldFor(dt), DataField::kInt32) << DataTypeName(dt);
  }
  EXPECT_EQ(TypedFieldFor(0), DataField::kNone);
  EXPECT_EQ(TypedFieldFor(27), DataField::kNone);
}

TEST(TensorDataTest, TypedFieldLength) {
  EXPECT_EQ(TypedFieldLength(pb::kFloat, 3), 3);
  EXPECT_EQ(TypedFieldLength(pb::kComplex64, 3), 6);
  EXPECT_EQ(TypedFieldLength(pb::kComplex128, 2), 4);
  EXPECT_EQ(TypedFieldLength(pb::kFloat16, 3), 3);  // one bit pattern per entry
  EXPECT_EQ(TypedFieldLength(pb::kInt4, 5), 3);     // two per entry
  EXPECT_EQ(TypedFieldLength(pb::kFloat4E2M1, 4), 2);
  EXPECT_EQ(TypedFieldLength(pb::kUint2, 5), 2);  // four per entry
  EXPECT_EQ(TypedFieldLength(pb::kString, 2), 2);
  EXPECT_FALSE(TypedFieldLength(pb::kFloat, -1).has_value());
  EXPECT_FALSE(TypedFieldLength(0, 1).has_value());
}

// onnx.helper.make_tensor wrote typed_<type>.pb; numpy wrote the raw bytes.
TEST(TensorDataTest, TypedFieldsMatchOnnxHelper) {
  for (const char* type : {"float16", "bfloat16", "int8", "uint16", "bool", "uint32", "complex64",
                           "complex128", "double", "int64"}) {
    SCOPED_TRACE(type);
    pb::TensorProto t = Decoded(std::string("typed_") + type + ".pb");
    EXPECT_TRUE(t.raw_data.empty());
    ASSERT_TRUE(ValidateTensorData(t).ok()) << ValidateTensorData(t);
    auto raw = ToRawBytes(t);
    ASSERT_TRUE(raw.ok()) << raw.status();
    EXPECT_EQ(*raw, Fixture(std::string("typed_") + type + ".raw"));
  }
}

TEST(TensorDataTest, SubByteTypesPackIntoInt32Data) {
  // int4 [1, 2, -1]: first element in the low nibble, one byte per entry.
  pb::TensorProto t;
  t.data_type = pb::kInt4;
  t.dims = {3};
  t.int32_data = {0x21, 0x0F};
  EXPECT_EQ(*ToRawBytes(t), std::string("\x21\x0F", 2));
  // uint2 [0, 1, 2, 3, 1]: bits 0-1 hold the first element.
  t.data_type = pb::kUint2;
  t.dims = {5};
  t.int32_data = {0xE4, 0x01};
  EXPECT_EQ(*ToRawBytes(t), std::string("\xE4\x01", 2));
  t.int32_data = {0xE4};
  EXPECT_THAT(ValidateTensorData(t).message(), HasSubstr("int32_data has 1 entries, expected 2"));
}

TEST(TensorDataTest, Int32DataKeepsLowBitsAndNormalizesBool) {
  pb::TensorProto t;
  t.dims = {3};
  t.data_type = pb::kInt16;
  t.int32_data = {-2, 0x12345, 7};
  EXPECT_EQ(*ToRawBytes(t), std::string("\xFE\xFF\x45\x23\x07\x00", 6));
  t.data_type = pb::kBool;
  t.int32_data = {1, 0, 2};
  EXPECT_EQ(*ToRawBytes(t), std::string("\x01\x00\x01", 3));
  t.data_type = pb::kFloat8E4M3FN;
  t.int32_data = {0x7E, 0x80, 0};
  EXPECT_EQ(*ToRawBytes(t), std::string("\x7E\x80\x00", 3));
  t.int32_data.clear();
  t.data_type = pb::kUint32;
  t.uint64_data = {0xFFFFFFFF, 1, 0x100000002};
  EXPECT_EQ(*ToRawBytes(t), std::string("\xFF\xFF\xFF\xFF\x01\x00\x00\x00\x02\x00\x00\x00", 12));
}

// --- Validation ------------------------------------------------------------

TEST(TensorDataTest, ValidAcceptsRawTypedAndEmpty) {
  EXPECT_TRUE(ValidateTensorData(Floats({2}, {1, 2})).ok());
  EXPECT_TRUE(ValidateTensorData(FromRawBytes("r", pb::kFloat, {2}, std::string(8, '\0'))).ok());
  EXPECT_TRUE(ValidateTensorData(Floats({0, 4}, {})).ok());
  EXPECT_TRUE(ValidateTensorData(FromStrings("s", {2}, {"a", ""})).ok());
}

TEST(TensorDataTest, RawSizeMismatchNamesTensorAndCounts) {
  absl::Status st = ValidateTensorData(FromRawBytes("w", pb::kFloat, {2, 3}, std::string(20, '\0')));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("tensor 'w' (float, dims [2, 3])"));
  EXPECT_THAT(st.message(), HasSubstr("raw_data has 20 bytes, expected 24"));
}

TEST(TensorDataTest, TypedCountMismatch) {
  absl::Status st = ValidateTensorData(Floats({2, 3}, {1, 2, 3, 4, 5}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("float_data has 5 entries, expected 6"));
  pb::TensorProto c = Floats({2}, {1, 2});
  c.data_type = pb::kComplex64;  // two floats per element
  EXPECT_THAT(ValidateTensorData(c).message(), HasSubstr("float_data has 2 entries, expected 4"));
}

TEST(TensorDataTest, WrongFieldForType) {
  pb::TensorProto t = Floats({2}, {1, 2});
  t.data_type = pb::kInt64;
  absl::Status st = ValidateTensorData(t);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("data in float_data, but int64 tensors store it in int64_data"));
}

TEST(TensorDataTest, SeveralFieldsMissingDataAndBadTypes) {
  pb::TensorProto both = Floats({1}, {1});
  both.raw_data = Bytes::Copy(std::string(4, '\0'));
  EXPECT_THAT(ValidateTensorData(both).message(), HasSubstr("data in both raw_data and float_data"));
  EXPECT_THAT(ValidateTensorData(Floats({3}, {})).message(),
              HasSubstr("no data, expected 3 elements in float_data or raw_data"));
  pb::TensorProto s = FromRawBytes("s", pb::kString, {1}, "x");
  EXPECT_THAT(ValidateTensorData(s).message(), HasSubstr("string data must be in string_data"));
  pb::TensorProto undefined = Floats({1}, {1});
  undefined.data_type = 0;
  EXPECT_THAT(ValidateTensorData(undefined).message(), HasSubstr("data_type is undefined"));
  undefined.data_type = 99;
  EXPECT_THAT(ValidateTensorData(undefined).message(), HasSubstr("unknown data_type"));
}

TEST(TensorDataTest, ExternalAndSegmentedAreReported) {
  pb::TensorProto ext = Floats({2}, {});
  ext.data_location = 1;
  absl::Status st = ValidateTensorData(ext);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("external"));
  pb::TensorProto seg = Floats({1}, {1});
  seg.segment = pb::TensorProto::Segment();
  EXPECT_EQ(ValidateTensorData(seg).code(), absl::StatusCode::kUnimplemented);
}

// --- ToRawBytes / FromRawBytes ----------------------------------------------

TEST(TensorDataTest, ToRawBytesExternal) {
  pb::TensorProto ext = Floats({2}, {});
  ext.data_location = 1;
  EXPECT_EQ(ToRawBytes(ext).status().code(), absl::StatusCode::kFailedPrecondition);
  Bytes eight = Bytes::Copy(std::string(8, '\x01'));
  EXPECT_EQ(*ToRawBytes(ext, &eight), std::string(8, '\x01'));
  Bytes seven = Bytes::Copy(std::string(7, '\x01'));
  EXPECT_THAT(ToRawBytes(ext, &seven).status().message(), HasSubstr("external data has 7 bytes, expected 8"));
}

TEST(TensorDataTest, ToRawBytesRefusesStrings) {
  EXPECT_EQ(ToRawBytes(FromStrings("s", {1}, {"a"})).status().code(), absl::StatusCode::kInvalidArgument);
}

// FromRawBytes encodes exactly as onnx.numpy_helper.from_array does.
TEST(TensorDataTest, FromRawBytesEncodesLikeNumpyHelper) {
  for (const char* stem : {"f32", "f16", "i64", "bool", "u8", "c64", "scalar", "empty", "fortran"}) {
    SCOPED_TRACE(stem);
    const std::string file = Fixture(std::string(stem) + ".pb");
    pb::TensorProto t = Decoded(std::string(stem) + ".pb");
    auto raw = ToRawBytes(t);
    ASSERT_TRUE(raw.ok()) << raw.status();
    EXPECT_EQ(io::Encode(FromRawBytes(t.name, t.data_type, t.dims, *raw)), file);
  }
}

TEST(TensorDataTest, EveryTypeRoundTripsThroughPb) {
  for (int32_t dt = 1; IsKnownDataType(dt); ++dt) {
    SCOPED_TRACE(DataTypeName(dt));
    if (dt == pb::kString) {
      pb::TensorProto s = FromStrings("s", {2, 1}, {"h\xC3\xA9", std::string("a\0b", 3)});
      auto back = io::DecodeTensor(io::Encode(s));
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(back->string_data, s.string_data);
      EXPECT_TRUE(ValidateTensorData(*back).ok());
      continue;
    }
    for (std::vector<int64_t> dims : {std::vector<int64_t>{}, {0}, {3, 5}}) {
      const std::string raw = Pattern(dt, *CheckedElementCount(dims));
      auto back = io::DecodeTensor(io::Encode(FromRawBytes("t", dt, dims, raw)));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->data_type, dt);
      EXPECT_EQ(back->dims, dims);
      ASSERT_TRUE(ValidateTensorData(*back).ok()) << ValidateTensorData(*back);
      EXPECT_EQ(*ToRawBytes(*back), raw);
    }
  }
}

TEST(TensorDataTest, DataFieldInUse) {
  EXPECT_EQ(*DataFieldInUse(Floats({1}, {1})), DataField::kFloat);
  EXPECT_EQ(*DataFieldInUse(FromRawBytes("r", pb::kFloat, {0}, "")), DataField::kRaw);
  EXPECT_EQ(*DataFieldInUse(Floats({0}, {})), DataField::kNone);
  EXPECT_EQ(DataFieldName(DataField::kUint64), "uint64_data");
}

}  // namespace
}  // namespace onnxkit::tensor
