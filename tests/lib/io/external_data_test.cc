// Tests for lib/io/external_data: entry parsing, the location rules (every
// hostile form is refused with its code), and reading with size checks.
#include "lib/io/external_data.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/model_io.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::io {
namespace {

namespace fs = std::filesystem;
using ::onnxkit::testing::Entry;
using ::onnxkit::testing::ExternalTensor;
using ::onnxkit::testing::FloatBytes;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void WriteFile(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

pb::TensorProto TensorWithEntries(std::vector<std::pair<std::string, std::string>> entries) {
  pb::TensorProto t;
  t.name = "w";
  t.data_type = pb::kFloat;
  t.data_location = 1;
  for (auto& [k, v] : entries) t.external_data.push_back(Entry(k, v));
  return t;
}

// --- ParseExternalData -----------------------------------------------------

TEST(ExternalDataParseTest, ParsesAllKeys) {
  auto info = ParseExternalData(
      TensorWithEntries({{"location", "w.bin"}, {"offset", "128"}, {"length", "64"}, {"checksum", "abc"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->location, "w.bin");
  EXPECT_EQ(info->offset, 128);
  EXPECT_EQ(info->length, 64);
  EXPECT_EQ(info->checksum, "abc");
}

TEST(ExternalDataParseTest, OffsetAndLengthAreOptional) {
  auto info = ParseExternalData(TensorWithEntries({{"location", "w.bin"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->offset, 0);
  EXPECT_FALSE(info->length.has_value());
}

TEST(ExternalDataParseTest, MissingLocationIsInvalid) {
  auto info = ParseExternalData(TensorWithEntries({{"offset", "0"}}));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("tensor 'w': external_data has no 'location'"));
}

TEST(ExternalDataParseTest, DuplicateKeysAreInvalid) {
  for (const char* key : {"location", "offset", "length", "checksum"}) {
    auto twice = ParseExternalData(TensorWithEntries({{"location", "a"}, {key, "1"}, {key, "1"}}));
    EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(std::string(twice.status().message()), HasSubstr("duplicate external_data key"));
  }
}

TEST(ExternalDataParseTest, UnknownKeysAreInvalid) {
  for (const char* key : {"__class__", "evil", "basepath", ""}) {
    auto info = ParseExternalData(TensorWithEntries({{"location", "a"}, {key, "x"}}));
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(std::string(info.status().message()), HasSubstr("unknown external_data key"));
  }
}

TEST(ExternalDataParseTest, NonNumericNumbersAreInvalid) {
  for (const char* value : {"abc", "12abc", " 5", "5 ", "+5", "", "0x10", "1e3", "1.5"}) {
    for (const char* key : {"offset", "length"}) {
      auto info = ParseExternalData(TensorWithEntries({{"location", "a"}, {key, value}}));
      EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << key << "=" << value;
      EXPECT_THAT(std::string(info.status().message()), HasSubstr("is not a non-negative decimal integer"));
    }
  }
}

TEST(ExternalDataParseTest, NegativeNumbersAreInvalid) {
  for (const char* key : {"offset", "length"}) {
    auto info = ParseExternalData(TensorWithEntries({{"location", "a"}, {key, "-1"}}));
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(info.status().message()), HasSubstr("is negative"));
  }
}

TEST(ExternalDataParseTest, NumbersOverInt64AreInvalid) {
  auto max = ParseExternalData(TensorWithEntries({{"location", "a"}, {"length", "9223372036854775807"}}));
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(*max->length, std::numeric_limits<int64_t>::max());
  for (const char* value : {"9223372036854775808", "99999999999999999999999"}) {
    auto info = ParseExternalData(TensorWithEntries({{"location", "a"}, {"offset", value}}));
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(info.status().message()), HasSubstr("does not fit in int64"));
  }
}

// --- ResolveLocation --------------------------------------------------------

class ExternalDataResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = onnxkit::testing::MakeTempDir();
    WriteFile(dir_ / "w.bin", FloatBytes(8));
    WriteFile(dir_ / "sub" / "w.bin", FloatBytes(8));
    WriteFile(dir_ / "w..bin", FloatBytes(8));
  }
  absl::Status Resolve(const std::string& location) {
    ExternalDataResolver resolver(dir_);
    return resolver.ResolveLocation(location).status();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    for (const fs::path& p : extra_) fs::remove_all(p, ec);
  }
  // Another fresh folder (outside dir_), removed after the test.
  fs::path ExtraDir() {
    extra_.push_back(onnxkit::testing::MakeTempDir());
    return extra_.back();
  }
  fs::path dir_;
  std::vector<fs::path> extra_;
};

TEST_F(ExternalDataResolveTest, AcceptsPlainAndNestedNames) {
  ExternalDataResolver resolver(dir_);
  for (const char* location : {"w.bin", "sub/w.bin", "./w.bin", "sub//w.bin", "w..bin"}) {
    auto resolved = resolver.ResolveLocation(location);
    ASSERT_TRUE(resolved.ok()) << location << ": " << resolved.status();
    EXPECT_TRUE(fs::equivalent(*resolved, dir_ / fs::path(location).lexically_normal())) << location;
  }
}

TEST_F(ExternalDataResolveTest, EmptyLocationIsInvalid) {
  absl::Status s = Resolve("");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("location is empty"));
  EXPECT_EQ(Resolve("./").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExternalDataResolveTest, AbsolutePathsAreRefused) {
  for (std::string location : {std::string("/etc/passwd"), (dir_ / "w.bin").string()}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << location;
    EXPECT_THAT(std::string(s.message()), HasSubstr("is an absolute path"));
  }
}

TEST_F(ExternalDataResolveTest, DotDotComponentsAreRefused) {
  for (const char* location :
       {"../x", "a/../../x", "./../x", "sub/../w.bin", "..", "sub/..", "sub/../../../etc"}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << location;
    EXPECT_THAT(std::string(s.message()), HasSubstr("has a '..' component")) << location;
  }
}

TEST_F(ExternalDataResolveTest, NulBytesAreRefused) {
  absl::Status s = Resolve(std::string("w.bin\0/../../etc/passwd", 23));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("contains a NUL byte"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("w.bin\\x00"));  // escaped, not truncated
}

TEST_F(ExternalDataResolveTest, BackslashesAndDrivesAreRefused) {
  for (const char* location : {"sub\\w.bin", "..\\x", "C:\\x", "\\\\server\\share\\x"}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << location;
    EXPECT_THAT(std::string(s.message()), HasSubstr("backslash")) << location;
  }
  absl::Status s = Resolve("C:x");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("drive letter"));
}

TEST_F(ExternalDataResolveTest, InMemoryMarkerIsRefused) {
  for (const char* location : {"*/_ORT_MEM_ADDR_/*", "*/_ORT_NATIVE_ENDIAN_MEM_ADDR_/*"}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(s.message()), HasSubstr("in-memory address marker"));
  }
}

TEST_F(ExternalDataResolveTest, SymlinkedFileIsRefused) {
  fs::create_symlink("w.bin", dir_ / "inside.link");
  fs::create_symlink("/etc/passwd", dir_ / "outside.link");
  for (const char* location : {"inside.link", "outside.link"}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << location;
    EXPECT_THAT(std::string(s.message()), HasSubstr("is a symlink"));
  }
}

TEST_F(ExternalDataResolveTest, SymlinkedDirectoryComponentIsRefused) {
  fs::create_directory_symlink("sub", dir_ / "linkdir");
  fs::path outside = ExtraDir();
  WriteFile(outside / "secret.bin", FloatBytes(8));
  fs::create_directory_symlink(outside, dir_ / "outdir");
  for (const char* location : {"linkdir/w.bin", "outdir/secret.bin"}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << location;
    EXPECT_THAT(std::string(s.message()), HasSubstr("is a symlink"));
  }
}

TEST_F(ExternalDataResolveTest, HardLinkIsRefused) {
  fs::create_hard_link(dir_ / "w.bin", dir_ / "hard.bin");
  absl::Status s = Resolve("hard.bin");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("hard links"));
}

TEST_F(ExternalDataResolveTest, FifoTargetIsNotARegularFile) {
  ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  absl::Status s = Resolve("pipe");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a FIFO, not a regular file"));
}

TEST_F(ExternalDataResolveTest, DirectoryTargetIsNotARegularFile) {
  absl::Status s = Resolve("sub");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a directory, not a regular file"));
  EXPECT_EQ(Resolve("sub/").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ExternalDataResolveTest, SocketTargetIsNotARegularFile) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = (dir_ / "sock").string();
  if (path.size() >= sizeof(addr.sun_path)) {
    ::close(fd);
    GTEST_SKIP() << "temp path too long for a unix socket";
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  absl::Status s = Resolve("sock");
  ::close(fd);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a socket"));
}

TEST_F(ExternalDataResolveTest, DeviceTargetIsNotARegularFile) {
  if (::mknod((dir_ / "zero").c_str(), S_IFCHR | 0600, makedev(1, 5)) != 0) {
    GTEST_SKIP() << "cannot create a device node here";
  }
  absl::Status s = Resolve("zero");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a character device"));
}

TEST_F(ExternalDataResolveTest, SymlinkToDeviceIsRefused) {
  fs::create_symlink("/dev/zero", dir_ / "zero.link");
  EXPECT_EQ(Resolve("zero.link").code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(ExternalDataResolveTest, MissingFileIsNotFound) {
  for (const char* location : {"nope.bin", "nope/w.bin"}) {
    absl::Status s = Resolve(location);
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << location;
    EXPECT_THAT(std::string(s.message()), HasSubstr("not found"));
  }
}

TEST_F(ExternalDataResolveTest, FileUsedAsFolderIsRefused) {
  absl::Status s = Resolve("w.bin/x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a folder"));
}

TEST_F(ExternalDataResolveTest, EmptyBaseDirIsRefused) {
  ExternalDataResolver resolver("");
  absl::Status s = resolver.ResolveLocation("w.bin").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no model folder"));
}

// --- Read / Validate / TensorRawBytes ---------------------------------------

class ExternalDataReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = onnxkit::testing::MakeTempDir();
    WriteFile(dir_ / "w.bin", FloatBytes(16));  // 64 bytes
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    for (const fs::path& p : extra_) fs::remove_all(p, ec);
  }
  // Another fresh folder (outside dir_), removed after the test.
  fs::path ExtraDir() {
    extra_.push_back(onnxkit::testing::MakeTempDir());
    return extra_.back();
  }
  fs::path dir_;
  std::vector<fs::path> extra_;
};

TEST_F(ExternalDataReadTest, ReadsViewsIntoOneCachedMapping) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("a", {4}, pb::kFloat, "w.bin", 0, 16));
  auto b = resolver.Read(ExternalTensor("b", {2, 4}, pb::kFloat, "./w.bin", 32, 32));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->str(), FloatBytes(4));
  EXPECT_EQ(b->str(), FloatBytes(8, 8));
  EXPECT_EQ(a->keepalive(), b->keepalive());  // one mapping, shared
  EXPECT_EQ(b->data() - a->data(), 32);
}

TEST_F(ExternalDataReadTest, MissingLengthReadsToTheEnd) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("a", {12}, pb::kFloat, "w.bin", 16));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->str(), FloatBytes(12, 4));
}

TEST_F(ExternalDataReadTest, EmptyTensorAtTheEndIsFine) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("a", {0}, pb::kFloat, "w.bin", 64, 0));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->empty());
}

TEST_F(ExternalDataReadTest, OffsetPastEndIsOutOfRange) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("a", {0}, pb::kFloat, "w.bin", 65, 0));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("offset 65 is past the end of the file"));
  EXPECT_THAT(std::string(a.status().message()),
              StartsWith("tensor 'a': external data in 'w.bin' (64 bytes)"));
}

TEST_F(ExternalDataReadTest, LengthPastEndIsOutOfRange) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("a", {4}, pb::kFloat, "w.bin", 56, 16));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("offset 56 + length 16 is past the end"));
}

TEST_F(ExternalDataReadTest, HugeLengthIsOutOfRangeWithoutOverflow) {
  ExternalDataResolver resolver(dir_);
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (int64_t offset : {int64_t{0}, int64_t{10}, int64_t{64}}) {
    auto a = resolver.Read(ExternalTensor("a", {4}, pb::kFloat, "w.bin", offset, max));
    EXPECT_EQ(a.status().code(), absl::StatusCode::kOutOfRange) << offset;
  }
  auto huge_offset = resolver.Read(ExternalTensor("a", {4}, pb::kFloat, "w.bin", max, 16));
  EXPECT_EQ(huge_offset.status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(ExternalDataResolveTest, NegativeNumbersAreRefusedByRead) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(TensorWithEntries({{"location", "w.bin"}, {"length", "-4"}}));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("is negative"));
}

TEST_F(ExternalDataReadTest, LengthMustMatchDims) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("a", {5}, pb::kFloat, "w.bin", 0, 16));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("length 16 does not match dims [5] of float (20 bytes)"));
  // Without a length, the rest of the file must match too.
  auto b = resolver.Read(ExternalTensor("b", {4}, pb::kFloat, "w.bin", 0));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExternalDataReadTest, BadDimsAreInvalid) {
  ExternalDataResolver resolver(dir_);
  const int64_t big = int64_t{1} << 62;
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{-1, 4}, std::vector<int64_t>{big, big}, std::vector<int64_t>{big}}) {
    auto a = resolver.Read(ExternalTensor("a", dims, pb::kFloat, "w.bin", 0, 16));
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(a.status().message()), HasSubstr("negative or their byte size overflows"));
  }
}

TEST_F(ExternalDataReadTest, PackedSubByteTypesRoundUp) {
  ExternalDataResolver resolver(dir_);
  EXPECT_TRUE(resolver.Read(ExternalTensor("a", {3}, pb::kInt4, "w.bin", 0, 2)).ok());
  EXPECT_TRUE(resolver.Read(ExternalTensor("a", {5}, pb::kInt2, "w.bin", 0, 2)).ok());
  EXPECT_EQ(resolver.Read(ExternalTensor("a", {3}, pb::kInt4, "w.bin", 0, 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ExternalDataReadTest, TypesWithoutFixedLayoutSkipTheSizeCheck) {
  ExternalDataResolver resolver(dir_);
  EXPECT_TRUE(resolver.Read(ExternalTensor("a", {1}, 999, "w.bin", 0, 7)).ok());
}

TEST_F(ExternalDataReadTest, InlineTensorIsNotRead) {
  ExternalDataResolver resolver(dir_);
  pb::TensorProto t = onnxkit::testing::RawFloatTensor("a", {2});
  EXPECT_EQ(resolver.Read(t).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExternalDataReadTest, ErrorsNameTheTensor) {
  ExternalDataResolver resolver(dir_);
  auto a = resolver.Read(ExternalTensor("weights.0", {4}, pb::kFloat, "../w.bin", 0, 16));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(a.status().message()),
              StartsWith("tensor 'weights.0': external data location '../w.bin' refused"));
  auto b = resolver.Read(ExternalTensor("b", {4}, pb::kFloat, "missing.bin", 0, 16));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(b.status().message()), StartsWith("tensor 'b': "));
}

TEST_F(ExternalDataReadTest, ValidateChecksWithoutReturningData) {
  ExternalDataResolver resolver(dir_);
  EXPECT_TRUE(resolver.Validate(ExternalTensor("a", {4}, pb::kFloat, "w.bin", 48, 16)).ok());
  EXPECT_EQ(resolver.Validate(ExternalTensor("a", {4}, pb::kFloat, "w.bin", 56, 16)).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(resolver.Validate(ExternalTensor("a", {4}, pb::kFloat, "/w.bin", 0, 16)).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(ExternalDataReadTest, TensorRawBytesCoversEveryStorage) {
  ExternalDataResolver resolver(dir_);
  pb::TensorProto inline_tensor = onnxkit::testing::RawFloatTensor("a", {2});
  auto raw = TensorRawBytes(inline_tensor, &resolver);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->str(), FloatBytes(2));

  pb::TensorProto external = ExternalTensor("b", {4}, pb::kFloat, "w.bin", 0, 16);
  auto ext = TensorRawBytes(external, &resolver);
  ASSERT_TRUE(ext.ok()) << ext.status();
  EXPECT_EQ(ext->str(), FloatBytes(4));
  EXPECT_EQ(TensorRawBytes(external, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);

  pb::TensorProto typed;
  typed.name = "c";
  typed.data_type = pb::kFloat;
  typed.dims = {2};
  typed.float_data = {1, 2};
  EXPECT_EQ(TensorRawBytes(typed, &resolver).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace onnxkit::io
