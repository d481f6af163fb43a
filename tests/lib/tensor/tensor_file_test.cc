// Tests for lib/tensor/tensor_file: reading by extension, error paths (each
// message starts with the path), atomic writes and .pb external data.
#include "lib/tensor/tensor_file.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/tensor_data.h"
#include "tests/util/test_paths.h"

namespace onnxkit::tensor {
namespace {

namespace fs = std::filesystem;
using ::onnxkit::testing::MakeTempDir;
using ::onnxkit::testing::ReadFileOrEmpty;
using ::onnxkit::testing::TestdataPath;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

pb::TensorProto Sample() {
  return FromRawBytes("w", pb::kFloat, {2}, std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
}

void ExpectSameData(const pb::TensorProto& a, const pb::TensorProto& b) {
  EXPECT_EQ(a.data_type, b.data_type);
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(*ToRawBytes(a), *ToRawBytes(b));
}

TEST(TensorFileTest, ReadsEachFormat) {
  auto npy = ReadTensorFile(TestdataPath("tensors/f32.npy"));
  ASSERT_TRUE(npy.ok()) << npy.status();
  ASSERT_EQ(npy->size(), 1u);
  EXPECT_EQ((*npy)[0].name, "f32");  // the file's stem
  auto pbt = ReadTensorFile(TestdataPath("tensors/f32.pb"));
  ASSERT_TRUE(pbt.ok()) << pbt.status();
  ASSERT_EQ(pbt->size(), 1u);
  ExpectSameData((*npy)[0], (*pbt)[0]);
  auto npz = ReadTensorFile(TestdataPath("tensors/savez_compressed.npz"));
  ASSERT_TRUE(npz.ok()) << npz.status();
  EXPECT_EQ(npz->size(), 3u);
}

TEST(TensorFileTest, ExtensionIsCaseInsensitive) {
  const fs::path dir = MakeTempDir();
  WriteFile(dir / "X.NPY", ReadFileOrEmpty(TestdataPath("tensors/i64.npy")));
  auto t = ReadTensorFile(dir / "X.NPY");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)[0].data_type, pb::kInt64);
}

TEST(TensorFileTest, UnknownExtensionListsSupported) {
  const fs::path dir = MakeTempDir();
  WriteFile(dir / "t.txt", "x");
  auto t = ReadTensorFile(dir / "t.txt");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), StartsWith((dir / "t.txt").string()));
  EXPECT_THAT(t.status().message(), HasSubstr("'.txt' (supported: .pb, .npy, .npz)"));
  EXPECT_THAT(ReadTensorFile(dir / "noext").status().message(), HasSubstr("'(none)'"));
  EXPECT_EQ(WriteTensorFile(dir / "t.csv", Sample()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorFileTest, PathErrors) {
  const fs::path dir = MakeTempDir();
  auto missing = ReadTensorFile(dir / "missing.npy");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), StartsWith((dir / "missing.npy").string()));
  fs::create_directories(dir / "d.npy");
  EXPECT_EQ(ReadTensorFile(dir / "d.npy").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(::mkfifo((dir / "f.pb").c_str(), 0600), 0);
  EXPECT_EQ(ReadTensorFile(dir / "f.pb").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TensorFileTest, MalformedContentsNameThePath) {
  const fs::path dir = MakeTempDir();
  const std::string npy = ReadFileOrEmpty(TestdataPath("tensors/f32.npy"));
  WriteFile(dir / "cut.npy", npy.substr(0, npy.size() - 4));
  auto cut = ReadTensorFile(dir / "cut.npy");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(cut.status().message()), StartsWith((dir / "cut.npy").string() + ": "));
  // A .pb whose raw_data does not match its dims.
  WriteFile(dir / "bad.pb", io::Encode(FromRawBytes("w", pb::kFloat, {3}, std::string(8, '\0'))));
  auto bad = ReadTensorFile(dir / "bad.pb");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("raw_data has 8 bytes, expected 12"));
  WriteFile(dir / "junk.pb", "\xFF\xFF\xFF");
  EXPECT_EQ(ReadTensorFile(dir / "junk.pb").status().code(), absl::StatusCode::kDataLoss);
  WriteFile(dir / "empty.npz", "");
  EXPECT_FALSE(ReadTensorFile(dir / "empty.npz").ok());
}

TEST(TensorFileTest, WritesAndReadsBackEveryFormat) {
  const fs::path dir = MakeTempDir();
  for (const char* name : {"out.pb", "out.npy", "out.npz"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(WriteTensorFile(dir / name, Sample()).ok());
    auto back = ReadTensorFile(dir / name);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->size(), 1u);
    ExpectSameData((*back)[0], Sample());
    // Overwriting in place works too.
    ASSERT_TRUE(WriteTensorFile(dir / name, Sample()).ok());
  }
  EXPECT_EQ(ReadFileOrEmpty(dir / "out.pb"), io::Encode(Sample()));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 3);  // no temporary files left behind
}

TEST(TensorFileTest, WriteRefusesInvalidAndExternalTensors) {
  const fs::path dir = MakeTempDir();
  pb::TensorProto bad = FromRawBytes("w", pb::kFloat, {3}, std::string(8, '\0'));
  absl::Status st = WriteTensorFile(dir / "bad.pb", bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), StartsWith((dir / "bad.pb").string()));
  EXPECT_FALSE(fs::exists(dir / "bad.pb"));
  pb::TensorProto ext = Sample();
  ext.raw_data = Bytes();
  ext.data_location = 1;
  EXPECT_EQ(WriteTensorFile(dir / "ext.npy", ext).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(dir / "ext.npy"));
}

TEST(TensorFileTest, PbExternalDataIsLoaded) {
  const fs::path dir = MakeTempDir();
  WriteFile(dir / "w.bin", std::string(4, '\0') + std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
  pb::TensorProto t;
  t.name = "w";
  t.data_type = pb::kFloat;
  t.dims = {2};
  t.data_location = 1;
  for (auto [k, v] :
       {std::pair<std::string, std::string>{"location", "w.bin"}, {"offset", "4"}, {"length", "8"}}) {
    pb::StringStringEntryProto e;
    e.key = k;
    e.value = v;
    t.external_data.push_back(e);
  }
  WriteFile(dir / "w.pb", io::Encode(t));
  auto back = ReadTensorFile(dir / "w.pb");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(IsExternal((*back)[0]));
  EXPECT_TRUE((*back)[0].external_data.empty());
  ExpectSameData((*back)[0], Sample());
  // An escaping location is refused by the resolver's rules.
  t.external_data[0].value = "../w.bin";
  WriteFile(dir / "escape.pb", io::Encode(t));
  EXPECT_FALSE(ReadTensorFile(dir / "escape.pb").ok());
}

}  // namespace
}  // namespace onnxkit::tensor
