// Tests for lib/io/model_io: every load error path (code and message), lazy
// loading, atomic writes, and SaveModel's external data handling (threshold,
// re-homing, saving over the input, determinism, size limit).
#include "lib/io/model_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/io/external_data.h"
#include "lib/io/proto_codec.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::io {
namespace {

namespace fs = std::filesystem;
using ::onnxkit::testing::ExternalTensor;
using ::onnxkit::testing::FloatBytes;
using ::onnxkit::testing::MakeTempDir;
using ::onnxkit::testing::MinimalModel;
using ::onnxkit::testing::RawFloatTensor;
using ::onnxkit::testing::ReadFileOrEmpty;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void WriteFile(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> ListDir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string EntryValue(const pb::TensorProto& t, const std::string& key) {
  for (const auto& e : t.external_data) {
    if (e.key == key) return e.value;
  }
  return "<absent>";
}

// Limits the size of files this process may write while in scope, so that a
// write fails half-way (EFBIG) even when running as root.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_;
  sighandler_t old_handler_;
};

// --- MappedFile / LoadModel errors -----------------------------------------

class ModelIoLoadTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
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

TEST_F(ModelIoLoadTest, MissingFileIsNotFound) {
  fs::path path = dir_ / "missing.onnx";
  auto loaded = LoadModel(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(loaded.status().message()),
              StartsWith(path.string() + ": cannot open: No such file"));
}

TEST_F(ModelIoLoadTest, DirectoryIsFailedPrecondition) {
  auto loaded = LoadModel(dir_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(loaded.status().message(), dir_.string() + ": is a directory, not a regular file");
}

TEST_F(ModelIoLoadTest, FifoIsFailedPreconditionWithoutBlocking) {
  fs::path path = dir_ / "pipe.onnx";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto loaded = LoadModel(path);  // must not wait for a writer
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(loaded.status().message(), path.string() + ": is a FIFO, not a regular file");
}

TEST_F(ModelIoLoadTest, CharacterDeviceIsFailedPrecondition) {
  auto loaded = LoadModel("/dev/zero");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(loaded.status().message(), "/dev/zero: is a character device, not a regular file");
  // The same through a symlink named like a model (A5).
  fs::create_symlink("/dev/zero", dir_ / "zero.onnx");
  auto linked = LoadModel(dir_ / "zero.onnx");
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(linked.status().message()), HasSubstr("is a character device"));
}

TEST_F(ModelIoLoadTest, EmptyFileIsNotAnOnnxModel) {
  fs::path path = dir_ / "empty.onnx";
  WriteFile(path, "");
  auto loaded = LoadModel(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(), path.string() + ": is not an ONNX model (empty file)");
}

TEST_F(ModelIoLoadTest, TruncatedModelIsDataLoss) {
  std::string bytes = Encode(MinimalModel({RawFloatTensor("w", {16})}));
  fs::path path = dir_ / "truncated.onnx";
  WriteFile(path, bytes.substr(0, bytes.size() - 7));
  auto loaded = LoadModel(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(loaded.status().message()),
              StartsWith(path.string() + ": not a valid ONNX model (malformed protobuf at byte offset "));
}

TEST_F(ModelIoLoadTest, GarbageBytesAreRejected) {
  fs::path path = dir_ / "garbage.onnx";
  WriteFile(path, std::string(32, '\xff'));
  auto loaded = LoadModel(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(loaded.status().message()),
              StartsWith(path.string() + ": not a valid ONNX model (malformed"));

  // Random bytes: either malformed protobuf or "not an ONNX model", never OK.
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(1 + rng() % 256, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    WriteFile(path, bytes);
    auto random = LoadModel(path);
    if (random.ok()) continue;  // a valid protobuf with a model field is possible, if unlikely
    EXPECT_THAT(random.status().code(),
                ::testing::AnyOf(absl::StatusCode::kDataLoss, absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(std::string(random.status().message()), StartsWith(path.string() + ": "));
  }
}

TEST_F(ModelIoLoadTest, FileOverTheLimitIsResourceExhausted) {
  fs::path path = dir_ / "big.onnx";
  WriteFile(path, Encode(MinimalModel({RawFloatTensor("w", {64})})));
  LoadOptions options;
  options.max_file_bytes = 100;
  auto loaded = LoadModel(path, options);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(loaded.status().message()), StartsWith(path.string() + ": file is "));
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("over the limit of 100 bytes"));
}

TEST_F(ModelIoLoadTest, PermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  fs::path path = dir_ / "secret.onnx";
  WriteFile(path, Encode(MinimalModel()));
  fs::permissions(path, fs::perms::none);
  auto loaded = LoadModel(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(loaded.status().message()),
              StartsWith(path.string() + ": cannot open: Permission denied"));
}

TEST_F(ModelIoLoadTest, ProtobufThatIsNotAModelIsInvalidArgument) {
  // A TensorProto with data_type (field 2, a varint where ModelProto has a
  // string) and doc_string (field 12, unused by ModelProto): valid protobuf
  // whose fields all land in ModelProto's unknown fields.
  pb::TensorProto tensor;
  tensor.data_type = pb::kFloat;
  tensor.doc_string = "not a model";
  fs::path path = dir_ / "tensor.pb";
  WriteFile(path, Encode(tensor));
  auto loaded = LoadModel(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), StartsWith(path.string() + ": is not an ONNX model ("));
}

TEST_F(ModelIoLoadTest, LoadsModelAndBaseDir) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("w", {4})});
  fs::path path = dir_ / "m.onnx";
  WriteFile(path, Encode(model));
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Encode(loaded->proto), Encode(model));
  EXPECT_EQ(loaded->path, path);
  EXPECT_EQ(loaded->base_dir, dir_);
}

TEST_F(ModelIoLoadTest, RawDataIsAViewIntoTheMapping) {
  fs::path path = dir_ / "m.onnx";
  WriteFile(path, Encode(MinimalModel({RawFloatTensor("w", {1024})})));
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Bytes& raw = loaded->proto.graph->initializer[0].raw_data;
  std::string_view mapped = loaded->mapping->bytes();
  ASSERT_EQ(raw.size(), 4096u);
  EXPECT_GE(raw.data(), mapped.data());
  EXPECT_LE(raw.data() + raw.size(), mapped.data() + mapped.size());
  EXPECT_EQ(raw.keepalive(), std::static_pointer_cast<const void>(loaded->mapping));
  EXPECT_EQ(raw.str(), FloatBytes(1024));
}

TEST_F(ModelIoLoadTest, MappedFileSymlinkRules) {
  WriteFile(dir_ / "real.bin", "abc");
  fs::create_symlink("real.bin", dir_ / "link.bin");
  auto followed = MappedFile::Open(dir_ / "link.bin", 100);
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_EQ((*followed)->bytes(), "abc");
  auto refused = MappedFile::Open(dir_ / "link.bin", 100, /*follow_symlinks=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("is a symlink"));
}

TEST_F(ModelIoLoadTest, MappedFileEmptyFileIsEmpty) {
  WriteFile(dir_ / "empty.bin", "");
  auto file = MappedFile::Open(dir_ / "empty.bin", 100);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->bytes().empty());
  EXPECT_EQ((*file)->path(), dir_ / "empty.bin");
}

// --- WriteFileAtomically -----------------------------------------------------

class ModelIoWriteTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
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

TEST_F(ModelIoWriteTest, ReplacesContentAndLeavesNoTemporaryFile) {
  fs::path path = dir_ / "out.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(ReadFileOrEmpty(path), "second");
  EXPECT_THAT(ListDir(dir_), ElementsAre("out.bin"));
}

TEST_F(ModelIoWriteTest, KeepsThePermissionsOfAReplacedFile) {
  fs::path path = dir_ / "out.bin";
  WriteFile(path, "old");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(ModelIoWriteTest, MissingParentIsNotFound) {
  fs::path path = dir_ / "no" / "such" / "out.bin";
  absl::Status s = WriteFileAtomically(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), StartsWith(path.string() + ": cannot save: folder '"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not exist"));
  EXPECT_TRUE(ListDir(dir_).empty());
}

TEST_F(ModelIoWriteTest, ParentThatIsAFileIsFailedPrecondition) {
  WriteFile(dir_ / "file", "x");
  absl::Status s = WriteFileAtomically(dir_ / "file" / "out.bin", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not a folder"));
}

TEST_F(ModelIoWriteTest, DirectoryTargetIsFailedPrecondition) {
  fs::create_directory(dir_ / "out.bin");
  absl::Status s = WriteFileAtomically(dir_ / "out.bin", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), (dir_ / "out.bin").string() + ": cannot save: is a directory");
  EXPECT_THAT(ListDir(dir_), ElementsAre("out.bin"));
}

TEST_F(ModelIoWriteTest, FailedWriteLeavesTheOldFileUntouched) {
  fs::path path = dir_ / "out.bin";
  WriteFile(path, "old content");
  absl::Status s;
  {
    FileSizeLimit limit(1024);
    s = WriteFileAtomically(path, std::string(8192, 'x'));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), StartsWith(path.string() + ": cannot write: File too large"));
  EXPECT_EQ(ReadFileOrEmpty(path), "old content");
  EXPECT_THAT(ListDir(dir_), ElementsAre("out.bin"));
}

TEST_F(ModelIoWriteTest, ReadOnlyFolderFailsCleanly) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  fs::path path = dir_ / "ro" / "out.bin";
  WriteFile(path, "old");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  absl::Status s = WriteFileAtomically(path, "new");
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ReadFileOrEmpty(path), "old");
}

TEST_F(ModelIoWriteTest, ReplacesAPlantedSymlinkInsteadOfFollowingIt) {
  fs::path outside = ExtraDir();
  WriteFile(outside / "victim", "precious");
  fs::create_symlink(outside / "victim", dir_ / "out.bin");
  ASSERT_TRUE(WriteFileAtomically(dir_ / "out.bin", "new").ok());
  EXPECT_EQ(ReadFileOrEmpty(outside / "victim"), "precious");
  EXPECT_FALSE(fs::is_symlink(dir_ / "out.bin"));
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "out.bin"), "new");
}

// A FIFO (or a character device such as /dev/null) is written through, not
// replaced by a renamed file; one nothing reads fails at once.
TEST_F(ModelIoWriteTest, WritesThroughAFifoInsteadOfReplacingIt) {
  fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::Status unread = WriteFileAtomically(fifo, "bytes");
  EXPECT_EQ(unread.code(), absl::StatusCode::kFailedPrecondition) << unread;
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(WriteFileAtomically(fifo, "bytes").ok());
  char buf[16] = {};
  EXPECT_EQ(::read(reader, buf, sizeof buf), 5);
  ::close(reader);
  EXPECT_EQ(std::string(buf), "bytes");
  EXPECT_EQ(fs::symlink_status(fifo).type(), fs::file_type::fifo);
}

// --- SaveModel --------------------------------------------------------------

class ModelIoSaveTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }

  // Reads tensor data through a resolver on the model's folder.
  static std::string DataOf(const pb::TensorProto& t, const fs::path& base_dir) {
    ExternalDataResolver resolver(base_dir);
    auto bytes = TensorRawBytes(t, &resolver);
    return bytes.ok() ? bytes->str() : "<error: " + std::string(bytes.status().message()) + ">";
  }

  // A model in `dir`/m.onnx whose two initializers live in `data_name`.
  static pb::ModelProto WriteExternalModel(const fs::path& dir, const std::string& data_name) {
    std::string data = FloatBytes(16, 100) + FloatBytes(4, 200);
    WriteFile(dir / data_name, data);
    pb::ModelProto model = MinimalModel({ExternalTensor("big", {16}, pb::kFloat, data_name, 0, 64),
                                         ExternalTensor("small", {4}, pb::kFloat, data_name, 64, 16),
                                         RawFloatTensor("inline", {8}, 300)});
    WriteFile(dir / "m.onnx", Encode(model));
    return model;
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

TEST_F(ModelIoSaveTest, RoundTripsAModelWithoutExternalData) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("w", {8})});
  model.doc_string = "doc";
  model.graph->unknown_fields = std::string("\xa0\x06\x01", 3);  // field 100, varint 1
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx").ok());
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Encode(loaded->proto), Encode(model));
  EXPECT_THAT(ListDir(dir_), ElementsAre("m.onnx"));
}

TEST_F(ModelIoSaveTest, ThresholdMovesBigTensorsOut) {
  pb::ModelProto model = MinimalModel(
      {RawFloatTensor("small", {4}), RawFloatTensor("big", {300}, 1), RawFloatTensor("huge", {20000}, 2)});
  SaveOptions options;
  options.external_data_threshold = 1024;
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx", options).ok());
  EXPECT_THAT(ListDir(dir_), ElementsAre("m.onnx", "m.onnx.data"));

  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto& init = loaded->proto.graph->initializer;
  EXPECT_FALSE(HasExternalData(init[0]));
  EXPECT_EQ(init[0].raw_data.str(), FloatBytes(4));
  for (int i : {1, 2}) {
    EXPECT_TRUE(HasExternalData(init[i]));
    EXPECT_TRUE(init[i].raw_data.empty());
    ASSERT_EQ(init[i].external_data.size(), 3u);
    EXPECT_EQ(init[i].external_data[0].key, "location");
    EXPECT_EQ(init[i].external_data[1].key, "offset");
    EXPECT_EQ(init[i].external_data[2].key, "length");
    EXPECT_EQ(EntryValue(init[i], "location"), "m.onnx.data");
  }
  EXPECT_EQ(EntryValue(init[1], "offset"), "0");
  EXPECT_EQ(EntryValue(init[1], "length"), "1200");
  EXPECT_EQ(EntryValue(init[2], "offset"), "4096");  // >= 64 KiB: page aligned
  EXPECT_EQ(EntryValue(init[2], "length"), "80000");
  EXPECT_EQ(DataOf(init[1], loaded->base_dir), FloatBytes(300, 1));
  EXPECT_EQ(DataOf(init[2], loaded->base_dir), FloatBytes(20000, 2));
  EXPECT_EQ(fs::file_size(dir_ / "m.onnx.data"), 4096u + 80000u);
  // The caller's model is not modified.
  EXPECT_FALSE(HasExternalData(model.graph->initializer[1]));
}

TEST_F(ModelIoSaveTest, ThresholdZeroMovesEveryTensorWithRawData) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {1}), RawFloatTensor("b", {3})});
  SaveOptions options;
  options.external_data_threshold = 0;
  options.external_data_name = "weights.bin";
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx", options).ok());
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto& init = loaded->proto.graph->initializer;
  EXPECT_EQ(EntryValue(init[0], "location"), "weights.bin");
  EXPECT_EQ(EntryValue(init[1], "offset"), "64");  // small tensors: 64-byte aligned
  EXPECT_EQ(DataOf(init[0], dir_), FloatBytes(1));
  EXPECT_EQ(DataOf(init[1], dir_), FloatBytes(3));
}

TEST_F(ModelIoSaveTest, MovesEveryKindOfTensor) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("init", {4}, 1)});
  pb::GraphProto& g = *model.graph;
  pb::SparseTensorProto sparse;
  sparse.values = RawFloatTensor("sparse_values", {2}, 2);
  pb::TensorProto indices;
  indices.name = "sparse_indices";
  indices.data_type = pb::kInt64;
  indices.dims = {2};
  indices.raw_data = Bytes::Copy(std::string("\x01\0\0\0\0\0\0\0\x03\0\0\0\0\0\0\0", 16));
  sparse.indices = indices;
  sparse.dims = {8};
  g.sparse_initializer.push_back(sparse);

  pb::NodeProto constant;
  constant.op_type = "Constant";
  pb::AttributeProto value;
  value.name = "value";
  value.type = pb::kAttrTensor;
  value.t = RawFloatTensor("const_t", {2}, 3);
  constant.attribute.push_back(value);
  pb::AttributeProto tensors;
  tensors.name = "list";
  tensors.type = pb::kAttrTensors;
  tensors.tensors.push_back(RawFloatTensor("const_list", {2}, 4));
  constant.attribute.push_back(tensors);
  g.node.push_back(constant);

  pb::NodeProto if_node;
  if_node.op_type = "If";
  pb::AttributeProto then_branch;
  then_branch.name = "then_branch";
  then_branch.type = pb::kAttrGraph;
  pb::GraphProto body;
  body.initializer.push_back(RawFloatTensor("then_init", {2}, 5));
  body.node.push_back(constant);  // a Constant inside the subgraph, two levels deep
  body.node[0].attribute[0].t->name = "nested_const";
  then_branch.g = body;
  if_node.attribute.push_back(then_branch);
  pb::AttributeProto graphs;
  graphs.name = "bodies";
  graphs.type = pb::kAttrGraphs;
  pb::GraphProto loop_body;
  loop_body.initializer.push_back(RawFloatTensor("loop_init", {2}, 6));
  graphs.graphs.push_back(loop_body);
  if_node.attribute.push_back(graphs);
  g.node.push_back(if_node);

  pb::FunctionProto function;
  function.name = "f";
  function.node.push_back(constant);
  function.node[0].attribute[0].t->name = "function_const";
  pb::AttributeProto default_attr;
  default_attr.name = "default";
  default_attr.t = RawFloatTensor("function_default", {2}, 7);
  function.attribute_proto.push_back(default_attr);
  model.functions.push_back(function);

  pb::TrainingInfoProto training;
  pb::GraphProto init_graph;
  init_graph.initializer.push_back(RawFloatTensor("training_init", {2}, 8));
  training.initialization = init_graph;
  model.training_info.push_back(training);

  SaveOptions options;
  options.external_data_threshold = 1;
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx", options).ok());
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const pb::ModelProto& m = loaded->proto;
  const pb::GraphProto& lg = *m.graph;
  std::vector<std::pair<const pb::TensorProto*, const pb::TensorProto*>> pairs = {
      {&lg.initializer[0], &g.initializer[0]},
      {lg.sparse_initializer[0].values.get(), g.sparse_initializer[0].values.get()},
      {lg.sparse_initializer[0].indices.get(), g.sparse_initializer[0].indices.get()},
      {lg.node[0].attribute[0].t.get(), g.node[0].attribute[0].t.get()},
      {&lg.node[0].attribute[1].tensors[0], &g.node[0].attribute[1].tensors[0]},
      {&lg.node[1].attribute[0].g->initializer[0], &g.node[1].attribute[0].g->initializer[0]},
      {lg.node[1].attribute[0].g->node[0].attribute[0].t.get(),
       g.node[1].attribute[0].g->node[0].attribute[0].t.get()},
      {&lg.node[1].attribute[1].graphs[0].initializer[0], &g.node[1].attribute[1].graphs[0].initializer[0]},
      {m.functions[0].node[0].attribute[0].t.get(), model.functions[0].node[0].attribute[0].t.get()},
      {m.functions[0].attribute_proto[0].t.get(), model.functions[0].attribute_proto[0].t.get()},
      {&m.training_info[0].initialization->initializer[0],
       &model.training_info[0].initialization->initializer[0]},
  };
  for (const auto& [saved, original] : pairs) {
    EXPECT_TRUE(HasExternalData(*saved)) << original->name;
    EXPECT_EQ(saved->name, original->name);
    EXPECT_EQ(DataOf(*saved, dir_), original->raw_data.str()) << original->name;
  }
}

TEST_F(ModelIoSaveTest, RehomesExternalDataNextToTheOutput) {
  fs::path a = dir_ / "a";
  fs::path b = dir_ / "b";
  fs::create_directories(b);
  WriteExternalModel(a, "weights/w.bin");
  const std::string a_data = ReadFileOrEmpty(a / "weights" / "w.bin");
  auto loaded = LoadModel(a / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::Status s = SaveModel(loaded->proto, loaded->base_dir, b / "out.onnx");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(ListDir(b), ElementsAre("out.onnx", "out.onnx.data"));
  EXPECT_EQ(ReadFileOrEmpty(a / "weights" / "w.bin"), a_data);

  auto saved = LoadModel(b / "out.onnx");
  ASSERT_TRUE(saved.ok()) << saved.status();
  const auto& init = saved->proto.graph->initializer;
  EXPECT_EQ(EntryValue(init[0], "location"), "out.onnx.data");
  EXPECT_EQ(DataOf(init[0], b), FloatBytes(16, 100));
  EXPECT_EQ(DataOf(init[1], b), FloatBytes(4, 200));
  EXPECT_FALSE(HasExternalData(init[2]));  // threshold -1: inline stays inline
  EXPECT_EQ(init[2].raw_data.str(), FloatBytes(8, 300));
}

// The classic data-loss trap: the input's data file has the default output
// data name, and the output path is the input path.
TEST_F(ModelIoSaveTest, SavingOverTheInputKeepsItsDataIntact) {
  WriteExternalModel(dir_, "m.onnx.data");
  const std::string old_data = ReadFileOrEmpty(dir_ / "m.onnx.data");
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  absl::Status s = SaveModel(loaded->proto, loaded->base_dir, dir_ / "m.onnx");
  ASSERT_TRUE(s.ok()) << s;
  // A fresh data name; the data the old model maps is untouched.
  EXPECT_THAT(ListDir(dir_), ElementsAre("m.onnx", "m.onnx.data", "m.onnx.data.1"));
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "m.onnx.data"), old_data);
  // The model loaded before the save still reads correct data (its inline
  // raw data views the old, replaced file's mapping).
  const auto& old_init = loaded->proto.graph->initializer;
  EXPECT_EQ(DataOf(old_init[0], dir_), FloatBytes(16, 100));
  EXPECT_EQ(old_init[2].raw_data.str(), FloatBytes(8, 300));

  auto saved = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(saved.ok()) << saved.status();
  const auto& init = saved->proto.graph->initializer;
  EXPECT_EQ(EntryValue(init[0], "location"), "m.onnx.data.1");
  EXPECT_EQ(DataOf(init[0], dir_), FloatBytes(16, 100));
  EXPECT_EQ(DataOf(init[1], dir_), FloatBytes(4, 200));
  EXPECT_EQ(init[2].raw_data.str(), FloatBytes(8, 300));

  // Saving over it again goes back to the now unreferenced default name.
  ASSERT_TRUE(SaveModel(saved->proto, saved->base_dir, dir_ / "m.onnx").ok());
  auto again = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(EntryValue(again->proto.graph->initializer[0], "location"), "m.onnx.data");
  EXPECT_EQ(DataOf(again->proto.graph->initializer[0], dir_), FloatBytes(16, 100));
  EXPECT_EQ(DataOf(again->proto.graph->initializer[1], dir_), FloatBytes(4, 200));
}

TEST_F(ModelIoSaveTest, SavingOverTheInputWithAnotherDataName) {
  WriteExternalModel(dir_, "w.bin");
  const std::string old_data = ReadFileOrEmpty(dir_ / "w.bin");
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  SaveOptions options;
  options.external_data_name = "w.bin";  // asks for the input's data file: refused, renamed
  ASSERT_TRUE(SaveModel(loaded->proto, loaded->base_dir, dir_ / "m.onnx", options).ok());
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "w.bin"), old_data);
  auto saved = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(EntryValue(saved->proto.graph->initializer[0], "location"), "w.bin.1");
  EXPECT_EQ(DataOf(saved->proto.graph->initializer[1], dir_), FloatBytes(4, 200));
}

TEST_F(ModelIoSaveTest, OutputOntoASourceDataFileIsRefused) {
  WriteExternalModel(dir_, "w.bin");
  const std::string old_data = ReadFileOrEmpty(dir_ / "w.bin");
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::Status s = SaveModel(loaded->proto, loaded->base_dir, dir_ / "w.bin");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the model reads its external data from this file"));
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "w.bin"), old_data);
}

TEST_F(ModelIoSaveTest, IsDeterministic) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {100}), RawFloatTensor("b", {5000}, 1)});
  SaveOptions options;
  options.external_data_threshold = 256;
  fs::path other = ExtraDir();
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx", options).ok());
  const std::string first_model = ReadFileOrEmpty(dir_ / "m.onnx");
  const std::string first_data = ReadFileOrEmpty(dir_ / "m.onnx.data");
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx", options).ok());
  ASSERT_TRUE(SaveModel(model, dir_, other / "m.onnx", options).ok());
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "m.onnx"), first_model);
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "m.onnx.data"), first_data);
  EXPECT_EQ(ReadFileOrEmpty(other / "m.onnx"), first_model);
  EXPECT_EQ(ReadFileOrEmpty(other / "m.onnx.data"), first_data);
}

TEST_F(ModelIoSaveTest, InvalidDataFileNamesAreRefused) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {100})});
  SaveOptions options;
  options.external_data_threshold = 0;
  for (const char* name : {"../x.data", "sub/x.data", "/tmp/x.data", "..", ".", "a\\b", "C:x"}) {
    options.external_data_name = name;
    absl::Status s = SaveModel(model, dir_, dir_ / "m.onnx", options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr("invalid external data file name"));
  }
  EXPECT_TRUE(ListDir(dir_).empty());
}

TEST_F(ModelIoSaveTest, MissingParentIsNotFoundAndWritesNothing) {
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {100})});
  SaveOptions options;
  options.external_data_threshold = 0;
  absl::Status s = SaveModel(model, dir_, dir_ / "missing" / "m.onnx", options);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not exist"));
  EXPECT_TRUE(ListDir(dir_).empty());
}

TEST_F(ModelIoSaveTest, DirectoryTargetFailsAndLeavesNoTemporaryFiles) {
  fs::create_directory(dir_ / "m.onnx");
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {100})});
  SaveOptions options;
  options.external_data_threshold = 0;
  absl::Status s = SaveModel(model, dir_, dir_ / "m.onnx", options);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ListDir(dir_), ElementsAre("m.onnx"));
}

TEST_F(ModelIoSaveTest, FailedSaveLeavesOldModelAndDataUntouched) {
  WriteFile(dir_ / "m.onnx", "old model");
  WriteFile(dir_ / "m.onnx.data", "old data");
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {4000})});
  SaveOptions options;
  options.external_data_threshold = 0;
  absl::Status s;
  {
    FileSizeLimit limit(4096);  // the 16000-byte data file cannot be written
    s = SaveModel(model, dir_, dir_ / "m.onnx", options);
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "m.onnx"), "old model");
  EXPECT_EQ(ReadFileOrEmpty(dir_ / "m.onnx.data"), "old data");
  EXPECT_THAT(ListDir(dir_), ElementsAre("m.onnx", "m.onnx.data"));
}

TEST_F(ModelIoSaveTest, PlantedSymlinkAtTheDataNameIsReplacedNotFollowed) {
  fs::path outside = ExtraDir();
  WriteFile(outside / "victim", "precious");
  fs::create_symlink(outside / "victim", dir_ / "m.onnx.data");
  pb::ModelProto model = MinimalModel({RawFloatTensor("a", {100})});
  SaveOptions options;
  options.external_data_threshold = 0;
  ASSERT_TRUE(SaveModel(model, dir_, dir_ / "m.onnx", options).ok());
  EXPECT_EQ(ReadFileOrEmpty(outside / "victim"), "precious");
  EXPECT_FALSE(fs::is_symlink(dir_ / "m.onnx.data"));
  auto loaded = LoadModel(dir_ / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(DataOf(loaded->proto.graph->initializer[0], dir_), FloatBytes(100));
}

TEST_F(ModelIoSaveTest, UnsafeSourceDataIsRefusedAndWritesNothing) {
  fs::path model_dir = dir_ / "model";
  WriteFile(dir_ / "secret.bin", FloatBytes(4));
  fs::create_directories(model_dir);
  pb::ModelProto model = MinimalModel({ExternalTensor("w", {4}, pb::kFloat, "../secret.bin", 0, 16)});
  absl::Status s = SaveModel(model, model_dir, model_dir / "m.onnx");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.initializer[0]: tensor 'w': external data location '../secret.bin'"));
  EXPECT_TRUE(ListDir(model_dir).empty());
}

TEST_F(ModelIoSaveTest, ExternalDataWithoutABaseDirIsRefused) {
  pb::ModelProto model = MinimalModel({ExternalTensor("w", {4}, pb::kFloat, "w.bin", 0, 16)});
  absl::Status s = SaveModel(model, "", dir_ / "m.onnx");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no model folder"));
  EXPECT_TRUE(ListDir(dir_).empty());
}

TEST_F(ModelIoSaveTest, ModelOver2GiBWithoutExternalDataIsResourceExhausted) {
  // 2 GiB of address space that is never touched: sizes are computed only.
  const size_t size = (size_t{1} << 31) + 4096;
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) GTEST_SKIP() << "cannot reserve 2 GiB of address space";
  std::shared_ptr<const void> keep(p, [n = size](const void* q) { ::munmap(const_cast<void*>(q), n); });
  pb::TensorProto huge;
  huge.name = "huge";
  huge.data_type = pb::kUint8;
  huge.dims = {static_cast<int64_t>(size)};
  huge.raw_data = Bytes::View(keep, static_cast<const char*>(p), size);
  pb::ModelProto model = MinimalModel({huge});
  absl::Status s = SaveModel(model, dir_, dir_ / "m.onnx");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              StartsWith((dir_ / "m.onnx").string() + ": cannot save: the model would be "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--external-data"));
  EXPECT_TRUE(ListDir(dir_).empty());
}

}  // namespace
}  // namespace onnxkit::io
