// The ONNX protobuf messages as plain C++ structs (namespace onnxkit::pb).
//
// This mirror of onnx.proto (IR version 11, onnx 1.23) is what lib/io decodes
// files into and encodes files from; it is lossless:
//   - every field of onnx.proto that onnxkit reads is a member;
//   - any other field (newer or foreign) is kept, as wire bytes in original
//     order, in `unknown_fields` and written back unchanged;
//   - `present` records which singular scalar/string fields were present in
//     the input (bit N = field number N), so a field explicitly set to its
//     default value survives a round trip. Encoders write a singular field
//     when its value differs from the default or its bit is set.
//   - TensorProto::raw_data is a Bytes view into the mapped file when decoded
//     from a mapping, so decoding never reads weight pages.
//
// Sub-messages that may be absent are Box<T> (deep-copying optional pointer).
#ifndef ONNXKIT_LIB_IO_PROTO_H_
#define ONNXKIT_LIB_IO_PROTO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/io/box.h"
#include "lib/io/bytes.h"

namespace onnxkit::pb {

// Fields common to every message: presence bits and unknown wire bytes.
struct MessageBase {
  uint64_t present = 0;        // bit N set: singular field N was present
  std::string unknown_fields;  // wire bytes of fields this mirror does not model

  bool Has(int field) const { return (present >> field) & 1; }
  void MarkPresent(int field) { present |= uint64_t{1} << field; }
};

// TensorProto.DataType values.
enum DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBfloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUint2 = 25,
  kInt2 = 26,
};

// AttributeProto.AttributeType values.
enum AttributeType : int32_t {
  kAttrUndefined = 0,
  kAttrFloat = 1,
  kAttrInt = 2,
  kAttrString = 3,
  kAttrTensor = 4,
  kAttrGraph = 5,
  kAttrFloats = 6,
  kAttrInts = 7,
  kAttrStrings = 8,
  kAttrTensors = 9,
  kAttrGraphs = 10,
  kAttrSparseTensor = 11,
  kAttrSparseTensors = 12,
  kAttrTypeProto = 13,
  kAttrTypeProtos = 14,
};

struct GraphProto;
struct TypeProto;

struct StringStringEntryProto : MessageBase {
  std::string key;    // 1
  std::string value;  // 2
};

struct OperatorSetIdProto : MessageBase {
  std::string domain;   // 1
  int64_t version = 0;  // 2
};

struct TensorShapeProto : MessageBase {
  struct Dimension : MessageBase {
    // oneof value: dim_value (1) or dim_param (2); neither means unknown.
    enum Kind { kNone = 0, kValue = 1, kParam = 2 };
    Kind kind = kNone;
    int64_t dim_value = 0;   // 1
    std::string dim_param;   // 2
    std::string denotation;  // 3
  };
  std::vector<Dimension> dim;  // 1
};

struct TypeProto : MessageBase {
  struct Tensor : MessageBase {
    int32_t elem_type = 0;        // 1
    Box<TensorShapeProto> shape;  // 2
  };
  struct Sequence : MessageBase {
    Box<TypeProto> elem_type;  // 1
  };
  struct Map : MessageBase {
    int32_t key_type = 0;       // 1
    Box<TypeProto> value_type;  // 2
  };
  struct Optional : MessageBase {
    Box<TypeProto> elem_type;  // 1
  };
  struct SparseTensor : MessageBase {
    int32_t elem_type = 0;        // 1
    Box<TensorShapeProto> shape;  // 2
  };
  struct Opaque : MessageBase {
    std::string domain;  // 1
    std::string name;    // 2
  };
  // oneof value; at most one of these is set (the decoder keeps the last).
  Box<Tensor> tensor_type;               // 1
  Box<Sequence> sequence_type;           // 4
  Box<Map> map_type;                     // 5
  Box<Opaque> opaque_type;               // 7
  Box<SparseTensor> sparse_tensor_type;  // 8
  Box<Optional> optional_type;           // 9
  std::string denotation;                // 6
};

struct TensorProto : MessageBase {
  struct Segment : MessageBase {
    int64_t begin = 0;  // 1
    int64_t end = 0;    // 2
  };
  std::vector<int64_t> dims;                            // 1
  int32_t data_type = 0;                                // 2
  Box<Segment> segment;                                 // 3
  std::vector<float> float_data;                        // 4 (packed)
  std::vector<int32_t> int32_data;                      // 5 (packed)
  std::vector<std::string> string_data;                 // 6
  std::vector<int64_t> int64_data;                      // 7 (packed)
  std::string name;                                     // 8
  Bytes raw_data;                                       // 9
  std::vector<double> double_data;                      // 10 (packed)
  std::vector<uint64_t> uint64_data;                    // 11 (packed)
  std::string doc_string;                               // 12
  std::vector<StringStringEntryProto> external_data;    // 13
  int32_t data_location = 0;                            // 14 (0 DEFAULT, 1 EXTERNAL)
  std::vector<StringStringEntryProto> metadata_props;   // 16
};

struct SparseTensorProto : MessageBase {
  Box<TensorProto> values;    // 1
  Box<TensorProto> indices;   // 2
  std::vector<int64_t> dims;  // 3
};

struct AttributeProto : MessageBase {
  std::string name;                                // 1
  float f = 0;                                     // 2
  int64_t i = 0;                                   // 3
  std::string s;                                   // 4
  Box<TensorProto> t;                              // 5
  Box<GraphProto> g;                               // 6
  std::vector<float> floats;                       // 7
  std::vector<int64_t> ints;                       // 8
  std::vector<std::string> strings;                // 9
  std::vector<TensorProto> tensors;                // 10
  std::vector<GraphProto> graphs;                  // 11
  std::string doc_string;                          // 13
  Box<TypeProto> tp;                               // 14
  std::vector<TypeProto> type_protos;              // 15
  int32_t type = 0;                                // 20 (AttributeType)
  std::string ref_attr_name;                       // 21
  Box<SparseTensorProto> sparse_tensor;            // 22
  std::vector<SparseTensorProto> sparse_tensors;   // 23
};

struct NodeProto : MessageBase {
  std::vector<std::string> input;                      // 1
  std::vector<std::string> output;                     // 2
  std::string name;                                    // 3
  std::string op_type;                                 // 4
  std::vector<AttributeProto> attribute;               // 5
  std::string doc_string;                              // 6
  std::string domain;                                  // 7
  std::string overload;                                // 8
  std::vector<StringStringEntryProto> metadata_props;  // 9
};

struct ValueInfoProto : MessageBase {
  std::string name;                                    // 1
  Box<TypeProto> type;                                 // 2
  std::string doc_string;                              // 3
  std::vector<StringStringEntryProto> metadata_props;  // 4
};

struct TensorAnnotation : MessageBase {
  std::string tensor_name;                                           // 1
  std::vector<StringStringEntryProto> quant_parameter_tensor_names;  // 2
};

struct GraphProto : MessageBase {
  std::vector<NodeProto> node;                           // 1
  std::string name;                                      // 2
  std::vector<TensorProto> initializer;                  // 5
  std::string doc_string;                                // 10
  std::vector<ValueInfoProto> input;                     // 11
  std::vector<ValueInfoProto> output;                    // 12
  std::vector<ValueInfoProto> value_info;                // 13
  std::vector<TensorAnnotation> quantization_annotation; // 14
  std::vector<SparseTensorProto> sparse_initializer;     // 15
  std::vector<StringStringEntryProto> metadata_props;    // 16
};

struct FunctionProto : MessageBase {
  std::string name;                                    // 1
  std::vector<std::string> input;                      // 4
  std::vector<std::string> output;                     // 5
  std::vector<std::string> attribute;                  // 6
  std::vector<NodeProto> node;                         // 7
  std::string doc_string;                              // 8
  std::vector<OperatorSetIdProto> opset_import;        // 9
  std::string domain;                                  // 10
  std::vector<AttributeProto> attribute_proto;         // 11
  std::vector<ValueInfoProto> value_info;              // 12
  std::string overload;                                // 13
  std::vector<StringStringEntryProto> metadata_props;  // 14
};

struct TrainingInfoProto : MessageBase {
  Box<GraphProto> initialization;                             // 1
  Box<GraphProto> algorithm;                                  // 2
  std::vector<StringStringEntryProto> initialization_binding; // 3
  std::vector<StringStringEntryProto> update_binding;         // 4
};

struct ModelProto : MessageBase {
  int64_t ir_version = 0;                              // 1
  std::string producer_name;                           // 2
  std::string producer_version;                        // 3
  std::string domain;                                  // 4
  int64_t model_version = 0;                           // 5
  std::string doc_string;                              // 6
  Box<GraphProto> graph;                               // 7
  std::vector<OperatorSetIdProto> opset_import;        // 8
  std::vector<StringStringEntryProto> metadata_props;  // 14
  std::vector<TrainingInfoProto> training_info;        // 20
  std::vector<FunctionProto> functions;                // 25
};

// Test-data containers (onnx's SequenceProto, MapProto, OptionalProto), used
// for .pb input/output files.
struct SequenceProto;
struct MapProto;
struct OptionalProto;

struct SequenceProto : MessageBase {
  enum ElemType { kUndefined = 0, kTensor = 1, kSparseTensor = 2, kSequence = 3, kMap = 4, kOptional = 5 };
  std::string name;                                 // 1
  int32_t elem_type = 0;                            // 2
  std::vector<TensorProto> tensor_values;           // 3
  std::vector<SparseTensorProto> sparse_tensor_values;  // 4
  std::vector<SequenceProto> sequence_values;       // 5
  std::vector<MapProto> map_values;                 // 6
  std::vector<OptionalProto> optional_values;       // 7
};

struct MapProto : MessageBase {
  std::string name;                   // 1
  int32_t key_type = 0;               // 2
  std::vector<int64_t> keys;          // 3
  std::vector<std::string> string_keys;  // 4
  Box<SequenceProto> values;          // 5
};

struct OptionalProto : MessageBase {
  enum ElemType { kUndefined = 0, kTensor = 1, kSparseTensor = 2, kSequence = 3, kMap = 4, kOptional = 5 };
  std::string name;                       // 1
  int32_t elem_type = 0;                  // 2
  Box<TensorProto> tensor_value;          // 3
  Box<SparseTensorProto> sparse_tensor_value;  // 4
  Box<SequenceProto> sequence_value;      // 5
  Box<MapProto> map_value;                // 6
  Box<OptionalProto> optional_value;      // 7
};

}  // namespace onnxkit::pb

#endif  // ONNXKIT_LIB_IO_PROTO_H_
