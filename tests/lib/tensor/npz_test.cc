// Tests for lib/tensor/npz: numpy.savez / savez_compressed fixtures, write ->
// read round trips, zip64, and hostile archives (truncation, size lies, CRC
// mismatch, overlapping entries, entry-count and size limits).
#include "lib/tensor/npz.h"

#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/tensor_data.h"
#include "tests/util/test_paths.h"

namespace onnxkit::tensor {
namespace {

using ::onnxkit::testing::ReadFileOrEmpty;
using ::onnxkit::testing::TestdataPath;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) { return ReadFileOrEmpty(TestdataPath("tensors/" + name)); }

uint64_t Get(const std::string& b, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void Set(std::string* b, size_t at, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) (*b)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

void Append(std::string* b, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) b->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Offset of the central directory (archives without a comment).
size_t CdOffset(const std::string& zip) { return Get(zip, zip.size() - 22 + 16, 4); }

// Offset of central directory entry `index`.
size_t CentralEntry(const std::string& zip, int index) {
  size_t pos = CdOffset(zip);
  for (int i = 0; i < index; ++i)
    pos += 46 + Get(zip, pos + 28, 2) + Get(zip, pos + 30, 2) + Get(zip, pos + 32, 2);
  return pos;
}

// Rewrites an archive from WriteNpz (no extra fields, no comments) in zip64
// form: saturated sizes and offsets with zip64 extra fields, a zip64 end
// record and locator. `entries` overrides the zip64 entry count when set;
// `usize0` overrides entry 0's uncompressed size when set.
std::string ToZip64(const std::string& zip, uint64_t entries = 0, uint64_t usize0 = 0) {
  const size_t cd = CdOffset(zip);
  const uint64_t count = Get(zip, zip.size() - 22 + 10, 2);
  std::string out = zip.substr(0, cd);
  size_t pos = cd;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t name_len = Get(zip, pos + 28, 2);
    std::string header = zip.substr(pos, 46);
    const uint64_t csize = Get(zip, pos + 20, 4), offset = Get(zip, pos + 42, 4);
    const uint64_t usize = (i == 0 && usize0 != 0) ? usize0 : Get(zip, pos + 24, 4);
    Set(&header, 20, 0xFFFFFFFF, 4);
    Set(&header, 24, 0xFFFFFFFF, 4);
    Set(&header, 42, 0xFFFFFFFF, 4);
    Set(&header, 30, 28, 2);
    out += header + zip.substr(pos + 46, name_len);
    Append(&out, 1, 2);
    Append(&out, 24, 2);
    Append(&out, usize, 8);
    Append(&out, csize, 8);
    Append(&out, offset, 8);
    pos += 46 + name_len;
  }
  const uint64_t cd_size = out.size() - cd, record = out.size();
  Append(&out, 0x06064b50, 4);
  Append(&out, 44, 8);
  Append(&out, 45, 2);
  Append(&out, 45, 2);
  Append(&out, 0, 4);
  Append(&out, 0, 4);
  Append(&out, entries ? entries : count, 8);
  Append(&out, entries ? entries : count, 8);
  Append(&out, cd_size, 8);
  Append(&out, cd, 8);
  Append(&out, 0x07064b50, 4);
  Append(&out, 0, 4);
  Append(&out, record, 8);
  Append(&out, 1, 4);
  Append(&out, 0x06054b50, 4);
  Append(&out, 0, 4);
  Append(&out, 0xFFFF, 2);
  Append(&out, 0xFFFF, 2);
  Append(&out, 0xFFFFFFFF, 4);
  Append(&out, 0xFFFFFFFF, 4);
  Append(&out, 0, 2);
  return out;
}

std::vector<pb::TensorProto> SmallTensors() {
  return {FromRawBytes("a", pb::kFloat, {2}, std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8)),
          FromRawBytes("b", pb::kInt64, {1}, std::string(8, '\x07')),
          FromStrings("s", {2}, {"x", "\xC3\xA9"})};
}

void ExpectSameData(const pb::TensorProto& a, const pb::TensorProto& b) {
  EXPECT_EQ(a.data_type, b.data_type);
  EXPECT_EQ(a.dims, b.dims);
  if (a.data_type == pb::kString) {
    EXPECT_EQ(a.string_data, b.string_data);
  } else {
    EXPECT_EQ(*ToRawBytes(a), *ToRawBytes(b));
  }
}

absl::StatusCode ReadCode(const std::string& bytes) { return ReadNpz(bytes).status().code(); }

// --- numpy fixtures ----------------------------------------------------------

TEST(NpzTest, ReadsNumpySavezAndSavezCompressed) {
  for (const char* file : {"savez.npz", "savez_compressed.npz"}) {
    SCOPED_TRACE(file);
    auto tensors = ReadNpz(Fixture(file));
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    ASSERT_EQ(tensors->size(), 3u);
    const char* names[] = {"a", "b", "s"};
    const char* pbs[] = {"f32.pb", "i64.pb", "str.pb"};
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ((*tensors)[i].name, names[i]);
      auto expected = io::DecodeTensor(Fixture(pbs[i]));
      ASSERT_TRUE(expected.ok());
      ExpectSameData((*tensors)[i], *expected);
    }
  }
}

// --- Writing -----------------------------------------------------------------

TEST(NpzTest, WriteReadRoundTripIsDeterministic) {
  auto zip = WriteNpz(SmallTensors());
  ASSERT_TRUE(zip.ok()) << zip.status();
  EXPECT_EQ(*zip, *WriteNpz(SmallTensors()));
  EXPECT_EQ(Get(*zip, 8, 2), 0u);          // method: stored
  EXPECT_EQ(Get(*zip, 10, 4), 0x210000u);  // 1980-01-01 00:00
  auto back = ReadNpz(*zip);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].name, SmallTensors()[i].name);
    ExpectSameData((*back)[i], SmallTensors()[i]);
  }
}

TEST(NpzTest, WriteNamesAndErrors) {
  std::vector<pb::TensorProto> unnamed = SmallTensors();
  unnamed[0].name.clear();
  unnamed[1].name.clear();
  auto back = ReadNpz(*WriteNpz(unnamed));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].name, "arr_0");
  EXPECT_EQ((*back)[1].name, "arr_1");
  std::vector<pb::TensorProto> dup = SmallTensors();
  dup[1].name = "a";
  EXPECT_THAT(WriteNpz(dup).status().message(), HasSubstr("duplicate array name 'a.npy'"));
  std::vector<pb::TensorProto> bad = SmallTensors();
  bad[0].dims = {3};
  EXPECT_EQ(WriteNpz(bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto none = WriteNpz({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(ReadNpz(*none)->empty());
}

TEST(NpzTest, ReadsZip64) {
  const std::string zip = ToZip64(*WriteNpz(SmallTensors()));
  auto back = ReadNpz(zip);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) ExpectSameData((*back)[i], SmallTensors()[i]);
}

// --- Hostile archives ----------------------------------------------------------

TEST(NpzTest, EveryTruncationIsAnError) {
  for (const std::string& zip : {Fixture("savez.npz"), Fixture("savez_compressed.npz")}) {
    for (size_t n = 0; n < zip.size(); ++n) {
      absl::StatusCode code = ReadCode(zip.substr(0, n));
      EXPECT_TRUE(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument)
          << "prefix " << n << ": " << code;
    }
  }
  EXPECT_EQ(ReadCode(Fixture("savez.npz").substr(0, 500)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCode("definitely not a zip archive at all"), absl::StatusCode::kInvalidArgument);
}

TEST(NpzTest, CrcMismatchIsDataLoss) {
  std::string zip = *WriteNpz({SmallTensors()[0]});
  zip[CdOffset(zip) - 1] ^= 0x01;  // last data byte
  auto st = ReadNpz(zip).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("CRC-32 mismatch"));
  EXPECT_THAT(st.message(), HasSubstr("entry 'a.npy'"));
}

TEST(NpzTest, StoredSizeLies) {
  const std::string good = *WriteNpz({SmallTensors()[0]});
  const size_t ce = CentralEntry(good, 0);
  std::string zip = good;
  Set(&zip, ce + 20, 0x7FFFFFF0, 4);
  Set(&zip, ce + 24, 0x7FFFFFF0, 4);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("runs past the entry data area"));
  zip = good;
  Set(&zip, ce + 24, Get(zip, ce + 24, 4) + 1, 4);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("stored entry sizes disagree"));
  zip = good;
  Set(&zip, ce + 42, 5, 4);  // local header offset
  EXPECT_EQ(ReadCode(zip), absl::StatusCode::kInvalidArgument);
}

TEST(NpzTest, DeflatedSizeLies) {
  const std::string good = Fixture("savez_compressed.npz");
  const size_t ce = CentralEntry(good, 0);
  const uint64_t usize = Get(good, ce + 24, 4);
  std::string zip = good;
  Set(&zip, ce + 24, usize - 1, 4);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("inflates past its declared size"));
  zip = good;
  Set(&zip, ce + 24, usize + 1, 4);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("inflates to"));
  zip = good;
  Set(&zip, ce + 24, 0xFFFFFF00, 4);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("impossible"));
  zip = good;
  Set(&zip, ce + 20, Get(zip, ce + 20, 4) - 8, 4);  // cut the stream short
  EXPECT_EQ(ReadCode(zip), absl::StatusCode::kDataLoss);
}

TEST(NpzTest, EntryCountAndSizeLimits) {
  std::string zip = *WriteNpz(SmallTensors());
  Set(&zip, zip.size() - 22 + 8, 0x7FFF, 2);
  Set(&zip, zip.size() - 22 + 10, 0x7FFF, 2);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("does not fit the file"));
  const std::string base = *WriteNpz(SmallTensors());
  EXPECT_EQ(ReadCode(ToZip64(base, uint64_t{1} << 40)), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadCode(ToZip64(base, 0, uint64_t{1} << 40)), absl::StatusCode::kResourceExhausted);
}

TEST(NpzTest, RefusesEncryptionMethodsAndForeignEntries) {
  const std::string good = *WriteNpz({SmallTensors()[0]});
  const size_t ce = CentralEntry(good, 0);
  std::string zip = good;
  Set(&zip, ce + 8, 1, 2);  // encrypted
  EXPECT_EQ(ReadCode(zip), absl::StatusCode::kUnimplemented);
  zip = good;
  Set(&zip, ce + 10, 12, 2);  // bzip2
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("compression method 12"));
  zip = good;
  zip.replace(30 + 1, 4, ".txt");       // local name a.npy -> a.txt
  zip.replace(ce + 46 + 1, 4, ".txt");  // central name
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("is not a .npy array"));
  zip = good;
  zip.replace(ce + 46, 1, "z");  // central name disagrees with the local one
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("local header does not match"));
}

TEST(NpzTest, DuplicateAndOverlappingEntries) {
  const std::string good = *WriteNpz({SmallTensors()[0], SmallTensors()[1]});
  const size_t ce0 = CentralEntry(good, 0), ce1 = CentralEntry(good, 1);
  const uint64_t local1 = Get(good, ce1 + 42, 4);
  std::string zip = good;
  zip[local1 + 30] = 'a';
  zip[ce1 + 46] = 'a';
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("duplicate entry 'a.npy'"));
  zip = good;
  const uint64_t grown = local1 - (30 + 5) + 10;  // a.npy's data reaches into b.npy's header
  Set(&zip, ce0 + 20, grown, 4);
  Set(&zip, ce0 + 24, grown, 4);
  EXPECT_THAT(ReadNpz(zip).status().message(), HasSubstr("overlap"));
}

TEST(NpzTest, MalformedNpyInsideIsReportedWithEntryName) {
  std::string zip = *WriteNpz({SmallTensors()[0]});
  // Corrupt the .npy magic and fix the CRC so only the .npy check fails.
  const size_t ce = CentralEntry(zip, 0);
  zip[30 + 5] = 'X';
  const std::string data = zip.substr(30 + 5, Get(zip, ce + 20, 4));
  Set(&zip, ce + 16, crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size()), 4);
  auto st = ReadNpz(zip).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("entry 'a.npy'"));
  EXPECT_THAT(st.message(), HasSubstr("not a .npy file"));
}

TEST(NpzTest, RandomMutationsNeverCrash) {
  std::mt19937 rng(4321);
  for (const std::string& zip :
       {Fixture("savez_compressed.npz"), Fixture("savez.npz"), ToZip64(*WriteNpz(SmallTensors()))}) {
    for (int iter = 0; iter < 1500; ++iter) {
      std::string m = zip;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
      auto t = ReadNpz(m);
      if (t.ok()) {
        for (const auto& tensor : *t) EXPECT_TRUE(ValidateTensorData(tensor).ok());
      }
    }
  }
}

}  // namespace
}  // namespace onnxkit::tensor
