// Tests of the protobuf mirror's codec: byte-exact agreement with protobuf's
// own serializer over both ONNX backend suites, lossless unknown fields and
// presence, and hostile bytes that must give errors, not crashes.
#include "lib/io/proto_codec.h"

#include <filesystem>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "onnx/onnx-data.pb.h"
#include "tests/util/model_builder.h"
#include "tests/util/test_paths.h"

namespace onnxkit::io {
namespace {

namespace fs = std::filesystem;
using ::onnxkit::testing::BackendDataDir;
using ::onnxkit::testing::DebianBackendDataDir;
using ::onnxkit::testing::ReadFileOrEmpty;
using ::testing::HasSubstr;

// protobuf's deterministic serialization of `bytes` parsed as T.
template <typename T>
std::string ProtobufReserialize(const std::string& bytes, bool* ok) {
  T message;
  *ok = message.ParseFromString(bytes);
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

std::vector<fs::path> FilesNamed(const fs::path& root, const std::string& suffix) {
  std::vector<fs::path> files;
  if (root.empty()) return files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ProtoCodecTest, EveryBackendModelReencodesLikeProtobuf) {
  std::vector<fs::path> files = FilesNamed(BackendDataDir(), ".onnx");
  std::vector<fs::path> debian = FilesNamed(DebianBackendDataDir(), ".onnx");
  // Each suite present must be whole: the onnx 1.23 suite has over 1800
  // models, Debian's over 1000 (a fresh clone may have only Debian's).
  if (!files.empty()) {
    EXPECT_GT(files.size(), 1800u) << "onnx 1.23 suite incomplete";
  }
  if (!debian.empty()) {
    EXPECT_GT(debian.size(), 1000u) << "Debian's suite incomplete";
  }
  files.insert(files.end(), debian.begin(), debian.end());
  if (files.empty()) GTEST_SKIP() << "backend suites not present";
  int identical = 0;
  for (const auto& path : files) {
    std::string bytes = ReadFileOrEmpty(path);
    bool ok = false;
    std::string expected = ProtobufReserialize<onnx::ModelProto>(bytes, &ok);
    ASSERT_TRUE(ok) << path;
    auto model = DecodeModel(bytes);
    ASSERT_TRUE(model.ok()) << path << ": " << model.status();
    std::string ours = Encode(*model);
    EXPECT_EQ(ours.size(), EncodedSize(*model)) << path;
    if (ours == expected) {
      ++identical;
    } else {
      ADD_FAILURE() << path << ": re-encoding differs from protobuf's";
    }
  }
  std::printf("codec: %d of %zu models re-encode byte-identically to protobuf\n", identical, files.size());
}

TEST(ProtoCodecTest, EncodingToASinkGivesTheSameBytesInPieces) {
  // Tensors around the size where the sink gets data uncopied.
  pb::ModelProto m = ::onnxkit::testing::MinimalModel({::onnxkit::testing::RawFloatTensor("small", {3}),
                                            ::onnxkit::testing::RawFloatTensor("big", {40000}, 1),
                                            ::onnxkit::testing::RawFloatTensor("bigger", {300000}, 2)});
  std::string whole = Encode(m);
  std::string pieces;
  int calls = 0;
  ASSERT_TRUE(EncodeToSink(m, [&](std::string_view piece) {
                ++calls;
                pieces.append(piece);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(pieces, whole);
  EXPECT_GT(calls, 2);
  // The sink's first error stops the encoding and is returned.
  int failing_calls = 0;
  absl::Status s = EncodeToSink(m, [&](std::string_view) {
    ++failing_calls;
    return absl::ResourceExhaustedError("disk full");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(failing_calls, 1);
}

TEST(ProtoCodecTest, EveryBackendTensorFileReencodesLikeProtobuf) {
  // Test data files hold TensorProto, SequenceProto, MapProto or OptionalProto;
  // decoded as TensorProto, the fields of the others are kept as unknown
  // fields, so every file must re-encode exactly either way.
  std::vector<fs::path> files = FilesNamed(BackendDataDir(), ".pb");
  if (files.empty()) GTEST_SKIP() << "backend suite not present";
  for (const auto& path : files) {
    std::string bytes = ReadFileOrEmpty(path);
    bool ok = false;
    std::string expected = ProtobufReserialize<onnx::TensorProto>(bytes, &ok);
    auto tensor = DecodeTensor(bytes);
    ASSERT_EQ(ok, tensor.ok()) << path;
    EXPECT_EQ(Encode(*tensor), expected) << path;
  }
  EXPECT_GT(files.size(), 6000u);
}

TEST(ProtoCodecTest, SequenceOptionalAndMapRoundTrip) {
  onnx::SequenceProto seq;
  seq.set_name("s");
  seq.set_elem_type(onnx::SequenceProto::TENSOR);
  auto* t = seq.add_tensor_values();
  t->set_data_type(7);
  t->add_dims(2);
  t->add_int64_data(4);
  t->add_int64_data(-5);
  std::string bytes = seq.SerializeAsString();
  auto decoded = DecodeSequence(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->tensor_values.size(), 1u);
  EXPECT_EQ(decoded->tensor_values[0].int64_data, (std::vector<int64_t>{4, -5}));
  EXPECT_EQ(Encode(*decoded), bytes);

  onnx::OptionalProto opt;
  opt.set_elem_type(onnx::OptionalProto::SEQUENCE);
  *opt.mutable_sequence_value() = seq;
  bytes = opt.SerializeAsString();
  auto o = DecodeOptional(bytes);
  ASSERT_TRUE(o.ok());
  ASSERT_TRUE(o->sequence_value.has_value());
  EXPECT_EQ(Encode(*o), bytes);

  onnx::MapProto map;
  map.set_key_type(7);
  map.add_keys(1);
  map.add_keys(2);
  *map.mutable_values() = seq;
  bytes = map.SerializeAsString();
  auto mp = DecodeMap(bytes);
  ASSERT_TRUE(mp.ok());
  EXPECT_EQ(mp->keys, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Encode(*mp), bytes);
}

TEST(ProtoCodecTest, KeepsUnknownFieldsAndExplicitDefaults) {
  onnx::ModelProto m;
  m.set_ir_version(0);  // explicitly present default
  m.set_producer_name("");
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* node = g->add_node();
  node->set_op_type("Relu");
  node->add_input("x");
  node->add_output("y");
  node->mutable_unknown_fields()->AddVarint(77, 5);
  m.mutable_unknown_fields()->AddLengthDelimited(99, "future");
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  auto decoded = DecodeModel(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->Has(1));
  EXPECT_FALSE(decoded->Has(3));
  EXPECT_FALSE(decoded->unknown_fields.empty());
  EXPECT_FALSE(decoded->graph->node[0].unknown_fields.empty());
  EXPECT_EQ(Encode(*decoded), bytes);
}

TEST(ProtoCodecTest, PackedAndUnpackedRepeatedScalarsBothDecode) {
  onnx::TensorProto t;
  t.add_dims(2);
  t.add_dims(3);
  for (int i = 0; i < 6; ++i) t.add_int64_data(i - 3);
  std::string bytes = t.SerializeAsString();
  auto decoded = DecodeTensor(bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->int64_data, (std::vector<int64_t>{-3, -2, -1, 0, 1, 2}));
  // Unpacked encoding of field 7 (int64_data): tag 0x38, then varints.
  std::string unpacked = "\x38\x05\x38\x07";
  auto u = DecodeTensor(unpacked);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->int64_data, (std::vector<int64_t>{5, 7}));
}

TEST(ProtoCodecTest, EmptyPackedFieldDecodesToNothing) {
  // Regression (found by decode_model_fuzzer): a zero-length packed float
  // field must not reach memcpy with a null destination.
  auto t = DecodeTensor(std::string("\x22\x00", 2));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->float_data.empty());
}

TEST(ProtoCodecTest, RawDataIsAViewWhenAKeepaliveIsGiven) {
  onnx::TensorProto t;
  t.set_data_type(1);
  t.add_dims(4);
  t.set_raw_data(std::string(16, '\x01'));
  auto owned = std::make_shared<std::string>(t.SerializeAsString());
  DecodeOptions options;
  options.keepalive = owned;
  auto decoded = DecodeTensor(*owned, options);
  ASSERT_TRUE(decoded.ok());
  EXPECT_GE(decoded->raw_data.data(), owned->data());
  EXPECT_LE(decoded->raw_data.data() + 16, owned->data() + owned->size());
}

TEST(ProtoCodecTest, MalformedBytesGiveDataLossWithOffsetAndPath) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* node = m.mutable_graph()->add_node();
  node->set_op_type("Relu");
  node->add_input("a_long_input_name");
  std::string bytes = m.SerializeAsString();
  // Cut inside the node: the graph's length prefix now runs past the end.
  auto truncated = DecodeModel(std::string_view(bytes).substr(0, bytes.size() - 3));
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(truncated.status().message()), HasSubstr("byte offset"));

  auto bad_wire = DecodeModel(std::string("\x0f", 1));  // field 1, wire type 7
  ASSERT_FALSE(bad_wire.ok());
  EXPECT_THAT(std::string(bad_wire.status().message()), HasSubstr("wire type"));

  auto overlong = DecodeModel(std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12));
  ASSERT_FALSE(overlong.ok());

  auto zero_field = DecodeModel(std::string("\x00\x01", 2));
  ASSERT_FALSE(zero_field.ok());
}

TEST(ProtoCodecTest, PathNamesTheNestedField) {
  // graph (7) { node (1) { attribute (5) { t (5) { <truncated> } } } }
  std::string t = "\x0a\x05\x41";  // name field claims 5 bytes, has 1
  std::string attr = std::string("\x2a") + static_cast<char>(t.size()) + t;
  std::string node = std::string("\x2a") + static_cast<char>(attr.size()) + attr;
  std::string graph = std::string("\x0a") + static_cast<char>(node.size()) + node;
  std::string model = std::string("\x3a") + static_cast<char>(graph.size()) + graph;
  auto decoded = DecodeModel(model);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("graph.node[0].attribute[0].t"));
}

TEST(ProtoCodecTest, DeepNestingIsRefusedNotOverflowed) {
  // TypeProto sequence_type(4) { elem_type(1) { sequence_type ... } } nested 5000 deep.
  std::string inner;
  for (int i = 0; i < 5000; ++i) {
    std::string seq;  // Sequence { elem_type = inner }
    seq += '\x0a';
    uint64_t n = inner.size();
    while (n >= 0x80) {
      seq += static_cast<char>(n | 0x80);
      n >>= 7;
    }
    seq += static_cast<char>(n);
    seq += inner;
    std::string type = "\x22";
    n = seq.size();
    while (n >= 0x80) {
      type += static_cast<char>(n | 0x80);
      n >>= 7;
    }
    type += static_cast<char>(n);
    type += seq;
    inner = std::move(type);
  }
  auto decoded = DecodeType(inner);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("nested deeper"));
}

TEST(ProtoCodecTest, MillionsOfEmptyNodesAreRefusedNotAmplified) {
  // 5 M empty NodeProto in a 10 MB file would take over a gigabyte decoded.
  std::string graph;
  for (int i = 0; i < 5'000'000; ++i) graph += std::string("\x0a\x00", 2);
  std::string model = "\x3a";
  uint64_t n = graph.size();
  while (n >= 0x80) {
    model += static_cast<char>(n | 0x80);
    n >>= 7;
  }
  model += static_cast<char>(n);
  model += graph;
  auto decoded = DecodeModel(model);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("exhaust memory"));
  // A budget large enough lets the same bytes through.
  DecodeOptions generous;
  generous.max_decoded_bytes = int64_t{8} << 30;
  auto ok = DecodeModel(std::string_view(model).substr(0, 2 + 3 + 2000), generous);
  EXPECT_FALSE(ok.ok());  // truncated prefix: still an error, but not a budget one
  EXPECT_EQ(ok.status().code(), absl::StatusCode::kDataLoss);
}

TEST(ProtoCodecTest, RepeatedFieldsOfALargeMessageAreReservedOnce) {
  // A graph's nodes are counted before they are decoded: the vector is
  // sized (and charged) once, never regrown, whatever the interleaving.
  pb::GraphProto graph;
  for (int i = 0; i < 3000; ++i) {
    pb::NodeProto& node = graph.node.emplace_back();
    node.op_type = "Relu";
    node.input.push_back("x" + std::to_string(i));
    node.output.push_back("x" + std::to_string(i + 1));
    if (i % 1000 == 0) graph.input.emplace_back().name = "in" + std::to_string(i);
  }
  auto decoded = DecodeGraph(Encode(graph));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->node.size(), 3000u);
  EXPECT_EQ(decoded->node.capacity(), 3000u);
  EXPECT_EQ(decoded->input.size(), 3u);
  EXPECT_EQ(decoded->node[2999].output[0], "x3000");
  // Charging the whole field up front refuses it once it cannot fit.
  DecodeOptions tight;
  tight.max_decoded_bytes = int64_t{3000} * sizeof(pb::NodeProto);
  auto refused = DecodeGraph(Encode(graph), tight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(ProtoCodecTest, DeepNestingEncodesInLinearTime) {
  // Regression (found by decode_model_fuzzer): sizing a sub-message walked
  // it twice per level, exponential in depth. 95 nested sequence types
  // decode (under the depth limit of 100) and must re-encode at once.
  auto field = [](char tag, const std::string& payload) {
    std::string out(1, tag);
    uint64_t n = payload.size();
    while (n >= 0x80) {
      out += static_cast<char>(n | 0x80);
      n >>= 7;
    }
    out += static_cast<char>(n);
    return out + payload;
  };
  std::string inner;
  for (int i = 0; i < 47; ++i) inner = field('\x22', field('\x0a', inner));
  auto decoded = DecodeType(inner);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(Encode(*decoded), inner);
}

TEST(ProtoCodecTest, RandomMutationsNeverCrash) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  auto* g = m.mutable_graph();
  auto* node = g->add_node();
  node->set_op_type("Conv");
  node->add_input("x");
  node->add_output("y");
  auto* attr = node->add_attribute();
  attr->set_name("strides");
  attr->add_ints(1);
  attr->add_ints(1);
  auto* init = g->add_initializer();
  init->set_name("w");
  init->add_dims(2);
  init->set_raw_data("12345678");
  std::string bytes = m.SerializeAsString();
  std::mt19937 rng(1234);
  int decoded_ok = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string mutated = bytes;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % mutated.size();
      switch (rng() % 3) {
        case 0: mutated[pos] = static_cast<char>(rng()); break;
        case 1: mutated.erase(pos, 1 + rng() % 3); break;
        default: mutated.insert(pos, 1, static_cast<char>(rng())); break;
      }
      if (mutated.empty()) mutated = "\x08";
    }
    auto result = DecodeModel(mutated);
    if (result.ok()) {
      ++decoded_ok;
      // What decodes must re-encode and decode to the same bytes again.
      std::string again = Encode(*result);
      auto second = DecodeModel(again);
      ASSERT_TRUE(second.ok());
      EXPECT_EQ(Encode(*second), again);
    }
  }
  EXPECT_GT(decoded_ok, 0);
}

}  // namespace
}  // namespace onnxkit::io
