// NumPy .npz archives (a ZIP of .npy files) <-> lists of ONNX tensors.
//
// Reading handles what numpy.savez (STORED entries, zip64 local headers) and
// numpy.savez_compressed (DEFLATE, via zlib) write, and zip64 archives. The
// ZIP parsing trusts nothing:
//   - the end-of-central-directory record is searched only in the last
//     22 + 65,535 bytes and its comment must end exactly at the end of file;
//   - multi-disk archives, encryption and methods other than STORED/DEFLATE
//     are refused (Unimplemented);
//   - the entry count is bounded (kMaxNpzEntries) and checked against the
//     central directory size; every offset and size is checked against the
//     file (data must lie before the central directory); local and central
//     names must agree;
//   - declared uncompressed sizes are bounded per archive
//     (kMaxNpzUncompressedBytes) and by DEFLATE's maximum ratio; inflation
//     stops at the declared size (a stream that produces more, or less, is
//     DataLoss) and its buffer grows with the actual output;
//   - every entry's CRC-32 is verified (mismatch: DataLoss).
// Entries must be named "<name>.npy"; tensors are named <name> and returned
// in archive order (duplicates and other entries are InvalidArgument).
//
// Writing produces STORED entries, deterministically: fixed timestamps
// (1980-01-01 00:00), entries in input order, no extra fields. Tensors with
// an empty name are written as "arr_<index>" (numpy.savez's positional
// names). Archives that would need zip64 (4 GiB, 65,535 entries) are
// refused (ResourceExhausted).
#ifndef ONNXKIT_LIB_TENSOR_NPZ_H_
#define ONNXKIT_LIB_TENSOR_NPZ_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/proto.h"

namespace onnxkit::tensor {

// Most entries read from one archive; each costs a tensor and a parse, and
// real archives hold at most a few thousand arrays.
inline constexpr int64_t kMaxNpzEntries = int64_t{1} << 16;

// Most bytes all entries of one archive may inflate to (64 GiB): far above
// real data, below what would exhaust a machine's address space by surprise.
inline constexpr int64_t kMaxNpzUncompressedBytes = int64_t{1} << 36;

// Parses a whole .npz file.
absl::StatusOr<std::vector<pb::TensorProto>> ReadNpz(std::string_view bytes);

// Serializes tensors as a .npz file of STORED .npy entries (see WriteNpy).
absl::StatusOr<std::string> WriteNpz(const std::vector<pb::TensorProto>& tensors);

}  // namespace onnxkit::tensor

#endif  // ONNXKIT_LIB_TENSOR_NPZ_H_
