// .npz (ZIP of .npy) reading and writing; the hardening rules are in npz.h.
#include "lib/tensor/npz.h"

#include <zlib.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/base/checked_math.h"
#include "lib/base/status_macros.h"
#include "lib/base/strings.h"
#include "lib/tensor/npy.h"

namespace onnxkit::tensor {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kLocalHeaderBytes = 30;
constexpr uint64_t kCentralHeaderBytes = 46;
constexpr uint64_t kEocdBytes = 22;
constexpr uint64_t kZip64EocdBytes = 56;
constexpr uint64_t kZip64LocatorBytes = 20;
constexpr uint64_t kMaxCommentBytes = 0xFFFF;
// DEFLATE cannot expand data by more than 1032:1 (RFC 1951 limits a 258-byte
// match to at least 2 bits); a larger declared ratio is a lie.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01

uint64_t Load(std::string_view b, uint64_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void Put(uint64_t v, int width, std::string* out) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// True when [offset, offset + size) lies within [0, limit).
bool Fits(uint64_t offset, uint64_t size, uint64_t limit) {
  auto end = CheckedAddU(offset, size);
  return end && *end <= limit;
}

uint32_t Crc32(std::string_view data) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<z_size_t>(data.size())));
}

struct Directory {
  uint64_t entries = 0;
  uint64_t cd_offset = 0;
  uint64_t cd_size = 0;
  uint64_t cd_limit = 0;  // where the central directory must end (the EOCD records)
};

struct Entry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
  uint64_t data_start = 0;  // set by LocateData
};

absl::StatusOr<Directory> ReadZip64Directory(std::string_view b, uint64_t eocd) {
  const uint64_t loc = eocd - kZip64LocatorBytes;
  if (Load(b, loc + 4, 4) != 0 || Load(b, loc + 16, 4) > 1) {
    return absl::UnimplementedError("multi-disk (split) ZIP archives are not supported");
  }
  const uint64_t rec = Load(b, loc + 8, 8);
  if (!Fits(rec, kZip64EocdBytes, loc) || Load(b, rec, 4) != kZip64EocdSig) {
    return absl::InvalidArgumentError("zip64 end-of-central-directory record is missing or out of bounds");
  }
  if (Load(b, rec + 16, 4) != 0 || Load(b, rec + 20, 4) != 0) {
    return absl::UnimplementedError("multi-disk (split) ZIP archives are not supported");
  }
  Directory d;
  d.entries = Load(b, rec + 32, 8);
  if (Load(b, rec + 24, 8) != d.entries) {
    return absl::InvalidArgumentError("zip64 directory entry counts disagree");
  }
  d.cd_size = Load(b, rec + 40, 8);
  d.cd_offset = Load(b, rec + 48, 8);
  d.cd_limit = rec;
  return d;
}

absl::StatusOr<Directory> ReadDirectory(std::string_view b) {
  if (b.size() < kEocdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ZIP archive: ", b.size(), " bytes is shorter than the end record"));
  }
  std::optional<uint64_t> eocd;
  const uint64_t last = b.size() - kEocdBytes;
  const uint64_t first = last > kMaxCommentBytes ? last - kMaxCommentBytes : 0;
  for (uint64_t p = last + 1; p-- > first;) {
    if (Load(b, p, 4) == kEocdSig && p + kEocdBytes + Load(b, p + 20, 2) == b.size()) {
      eocd = p;
      break;
    }
  }
  if (!eocd) {
    if (Load(b, 0, 4) == kLocalSig) {
      return absl::DataLossError("ZIP archive is truncated: no end-of-central-directory record");
    }
    return absl::InvalidArgumentError("not a ZIP archive: no end-of-central-directory record");
  }
  const uint64_t e = *eocd;
  if (e >= kZip64LocatorBytes && Load(b, e - kZip64LocatorBytes, 4) == kZip64LocatorSig) {
    return ReadZip64Directory(b, e);
  }
  if (Load(b, e + 4, 2) != 0 || Load(b, e + 6, 2) != 0) {
    return absl::UnimplementedError("multi-disk (split) ZIP archives are not supported");
  }
  Directory d;
  d.entries = Load(b, e + 10, 2);
  if (Load(b, e + 8, 2) != d.entries) {
    return absl::InvalidArgumentError("directory entry counts disagree");
  }
  d.cd_size = Load(b, e + 12, 4);
  d.cd_offset = Load(b, e + 16, 4);
  d.cd_limit = e;
  return d;
}

// Applies the zip64 extended-information extra field (id 1) to the fields
// saturated at 0xFFFFFFFF, in the order the format defines.
absl::Status ApplyZip64Extra(std::string_view extra, Entry* entry) {
  uint64_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const uint64_t id = Load(extra, pos, 2), len = Load(extra, pos + 2, 2);
    if (!Fits(pos + 4, len, extra.size())) break;  // tolerate trailing padding
    if (id == 1) {
      std::string_view body = extra.substr(pos + 4, len);
      uint64_t at = 0;
      for (uint64_t* field : {&entry->uncompressed, &entry->compressed, &entry->local_offset}) {
        if (*field != 0xFFFFFFFF) continue;
        if (at + 8 > body.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("entry '", entry->name, "': zip64 extra field is too short"));
        }
        *field = Load(body, at, 8);
        at += 8;
      }
      return absl::OkStatus();
    }
    pos += 4 + len;
  }
  if (entry->uncompressed == 0xFFFFFFFF || entry->compressed == 0xFFFFFFFF ||
      entry->local_offset == 0xFFFFFFFF) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry '", entry->name, "': zip64 sizes without a zip64 extra field"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Entry>> ReadCentralDirectory(std::string_view b, const Directory& d) {
  if (d.entries > static_cast<uint64_t>(kMaxNpzEntries)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "archive declares ", d.entries, " entries, over the limit of ", kMaxNpzEntries, " (kMaxNpzEntries)"));
  }
  if (!Fits(d.cd_offset, d.cd_size, d.cd_limit) || d.entries * kCentralHeaderBytes > d.cd_size) {
    return absl::InvalidArgumentError(absl::StrCat("central directory (offset ", d.cd_offset, ", ", d.cd_size,
                                                   " bytes, ", d.entries, " entries) does not fit the file"));
  }
  std::string_view cd = b.substr(d.cd_offset, d.cd_size);
  std::vector<Entry> entries;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < d.entries; ++i) {
    if (!Fits(pos, kCentralHeaderBytes, cd.size()) || Load(cd, pos, 4) != kCentralSig) {
      return absl::InvalidArgumentError(absl::StrCat("central directory entry ", i, " is malformed"));
    }
    const uint64_t name_len = Load(cd, pos + 28, 2), extra_len = Load(cd, pos + 30, 2),
                   comment_len = Load(cd, pos + 32, 2);
    if (!Fits(pos + kCentralHeaderBytes, name_len + extra_len + comment_len, cd.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("central directory entry ", i, " runs past the directory"));
    }
    Entry e;
    e.flags = static_cast<uint16_t>(Load(cd, pos + 8, 2));
    e.method = static_cast<uint16_t>(Load(cd, pos + 10, 2));
    e.crc = static_cast<uint32_t>(Load(cd, pos + 16, 4));
    e.compressed = Load(cd, pos + 20, 4);
    e.uncompressed = Load(cd, pos + 24, 4);
    e.local_offset = Load(cd, pos + 42, 4);
    e.name = std::string(cd.substr(pos + kCentralHeaderBytes, name_len));
    if (Load(cd, pos + 34, 2) != 0 && Load(cd, pos + 34, 2) != 0xFFFF) {
      return absl::UnimplementedError("multi-disk (split) ZIP archives are not supported");
    }
    ONNXKIT_RETURN_IF_ERROR(ApplyZip64Extra(cd.substr(pos + kCentralHeaderBytes + name_len, extra_len), &e));
    entries.push_back(std::move(e));
    pos += kCentralHeaderBytes + name_len + extra_len + comment_len;
  }
  return entries;
}

// Inflates raw DEFLATE `in` into exactly `size` bytes. The buffer grows with
// the real output, so a lying declared size costs nothing; once `size` bytes
// are out, a one-byte probe checks that the stream ends there.
absl::StatusOr<std::string> Inflate(std::string_view in, uint64_t size) {
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return absl::InternalError("zlib inflateInit2 failed");
  std::string out;
  out.resize(static_cast<size_t>(std::min<uint64_t>(size, (uint64_t{1} << 20) + 4 * in.size())));
  uint64_t in_pos = 0, out_pos = 0;
  std::string_view error;
  for (;;) {
    if (out_pos == out.size() && out.size() < size) {
      out.resize(static_cast<size_t>(std::min<uint64_t>(size, out.size() * 2)));
    }
    const bool full = out_pos == out.size();
    unsigned char probe = 0;
    const uint64_t in_chunk = std::min<uint64_t>(in.size() - in_pos, uint64_t{1} << 30);
    const uint64_t out_chunk = full ? 1 : std::min<uint64_t>(out.size() - out_pos, uint64_t{1} << 30);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
    zs.avail_in = static_cast<uInt>(in_chunk);
    zs.next_out = full ? &probe : reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(out_chunk);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const uint64_t produced = out_chunk - zs.avail_out, consumed = in_chunk - zs.avail_in;
    in_pos += consumed;
    if (full && produced > 0) {
      error = "deflate stream inflates past its declared size";
      break;
    }
    if (!full) out_pos += produced;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      error = "deflate stream is corrupt";
      break;
    }
    if (produced == 0 && consumed == 0) {
      error = "deflate stream is truncated";
      break;
    }
  }
  inflateEnd(&zs);
  if (!error.empty()) return absl::DataLossError(Sv(error));
  if (out_pos != size) {
    return absl::DataLossError(
        absl::StrCat("deflate stream inflates to ", out_pos, " bytes, declared ", size));
  }
  return out;
}

// Checks an entry against its local header and sets its data_start.
absl::Status LocateData(std::string_view b, const Directory& d, Entry* e) {
  if ((e->flags & 0x41) != 0) return absl::UnimplementedError("encrypted entries are not supported");
  if (e->method != kMethodStored && e->method != kMethodDeflate) {
    return absl::UnimplementedError(
        absl::StrCat("compression method ", e->method, " is not supported (supported: 0 stored, 8 deflate)"));
  }
  if (!Fits(e->local_offset, kLocalHeaderBytes, d.cd_offset) || Load(b, e->local_offset, 4) != kLocalSig) {
    return absl::InvalidArgumentError(
        absl::StrCat("local header at offset ", e->local_offset, " is missing or out of bounds"));
  }
  const uint64_t name_len = Load(b, e->local_offset + 26, 2);
  const uint64_t extra_len = Load(b, e->local_offset + 28, 2);
  e->data_start = e->local_offset + kLocalHeaderBytes + name_len + extra_len;
  if (e->data_start > d.cd_offset || b.substr(e->local_offset + kLocalHeaderBytes, name_len) != e->name) {
    return absl::InvalidArgumentError("local header does not match the central directory");
  }
  if (!Fits(e->data_start, e->compressed, d.cd_offset)) {
    return absl::InvalidArgumentError(absl::StrCat("compressed size ", e->compressed, " at offset ",
                                                   e->data_start, " runs past the entry data area (",
                                                   d.cd_offset, " bytes)"));
  }
  if (e->method == kMethodStored && e->compressed != e->uncompressed) {
    return absl::InvalidArgumentError(
        absl::StrCat("stored entry sizes disagree (", e->compressed, " vs ", e->uncompressed, ")"));
  }
  if (e->method == kMethodDeflate && e->uncompressed > e->compressed * kMaxDeflateRatio + 1024) {
    return absl::InvalidArgumentError(absl::StrCat("declared size ", e->uncompressed, " is impossible for ",
                                                   e->compressed, " deflated bytes"));
  }
  return absl::OkStatus();
}

// Entries must not share bytes: overlapping entries are the classic way to
// make a small archive inflate to a huge total.
absl::Status CheckNoOverlap(std::vector<const Entry*> by_offset) {
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->local_offset < b->local_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& prev = *by_offset[i - 1];
    if (prev.data_start + prev.compressed > by_offset[i]->local_offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("entries '", prev.name, "' and '", by_offset[i]->name, "' overlap"));
    }
  }
  return absl::OkStatus();
}

// The uncompressed bytes of a located entry, CRC-checked.
absl::StatusOr<std::string> ExtractEntry(std::string_view b, const Entry& e) {
  std::string_view packed = b.substr(e.data_start, e.compressed);
  std::string data;
  if (e.method == kMethodStored) {
    data = std::string(packed);
  } else {
    ONNXKIT_ASSIGN_OR_RETURN(data, Inflate(packed, e.uncompressed));
  }
  const uint32_t crc = Crc32(data);
  if (crc != e.crc) {
    return absl::DataLossError(
        absl::StrCat("CRC-32 mismatch: computed 0x", absl::Hex(crc), ", recorded 0x", absl::Hex(e.crc)));
  }
  return data;
}

absl::StatusOr<std::vector<pb::TensorProto>> ReadNpzImpl(std::string_view b) {
  ONNXKIT_ASSIGN_OR_RETURN(Directory d, ReadDirectory(b));
  ONNXKIT_ASSIGN_OR_RETURN(std::vector<Entry> entries, ReadCentralDirectory(b, d));
  uint64_t total = 0;
  std::set<std::string> names;
  std::vector<const Entry*> located;
  for (Entry& e : entries) {
    auto sum = CheckedAddU(total, e.uncompressed);
    if (!sum || *sum > static_cast<uint64_t>(kMaxNpzUncompressedBytes)) {
      return absl::ResourceExhaustedError(absl::StrCat("entries declare more than ", kMaxNpzUncompressedBytes,
                                                       " uncompressed bytes (kMaxNpzUncompressedBytes)"));
    }
    total = *sum;
    constexpr std::string_view kSuffix = ".npy";
    if (e.name.size() <= kSuffix.size() || !e.name.ends_with(kSuffix)) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry '", e.name, "' is not a .npy array (expected '<name>.npy')"));
    }
    if (!names.insert(e.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate entry '", e.name, "'"));
    }
    ONNXKIT_RETURN_IF_ERROR_CTX(LocateData(b, d, &e), absl::StrCat("entry '", e.name, "'"));
    located.push_back(&e);
  }
  ONNXKIT_RETURN_IF_ERROR(CheckNoOverlap(std::move(located)));
  std::vector<pb::TensorProto> tensors;
  tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    const std::string context = absl::StrCat("entry '", e.name, "'");
    auto data = ExtractEntry(b, e);
    if (!data.ok()) return AnnotateStatus(data.status(), context);
    auto tensor = ReadNpy(*data, e.name.substr(0, e.name.size() - 4));
    if (!tensor.ok()) return AnnotateStatus(tensor.status(), context);
    tensors.push_back(*std::move(tensor));
  }
  return tensors;
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Local header or central directory entry for a STORED file.
void PutHeader(bool central, std::string_view name, uint32_t crc, uint64_t size, uint64_t offset,
               std::string* out) {
  const uint16_t flags = IsAscii(name) ? 0 : 0x0800;  // bit 11: UTF-8 name
  Put(central ? kCentralSig : kLocalSig, 4, out);
  if (central) Put(20, 2, out);  // made by: MS-DOS, ZIP 2.0
  Put(20, 2, out);               // version needed: 2.0
  Put(flags, 2, out);
  Put(kMethodStored, 2, out);
  Put(0, 2, out);  // time 00:00:00
  Put(kDosDate1980, 2, out);
  Put(crc, 4, out);
  Put(size, 4, out);  // compressed
  Put(size, 4, out);  // uncompressed
  Put(name.size(), 2, out);
  Put(0, 2, out);  // extra
  if (central) {
    Put(0, 2, out);  // comment
    Put(0, 2, out);  // disk
    Put(0, 2, out);  // internal attributes
    Put(0, 4, out);  // external attributes
    Put(offset, 4, out);
  }
  out->append(name);
}

}  // namespace

absl::StatusOr<std::vector<pb::TensorProto>> ReadNpz(std::string_view bytes) {
  auto result = ReadNpzImpl(bytes);
  if (!result.ok()) return AnnotateStatus(result.status(), "npz");
  return result;
}

absl::StatusOr<std::string> WriteNpz(const std::vector<pb::TensorProto>& tensors) {
  if (tensors.size() >= 0xFFFF) {
    return absl::ResourceExhaustedError(
        absl::StrCat(tensors.size(), " arrays need a zip64 archive, which WriteNpz does not write"));
  }
  struct Written {
    std::string name;
    uint32_t crc;
    uint64_t size;
    uint64_t offset;
  };
  std::vector<Written> written;
  std::set<std::string> names;
  std::string out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const pb::TensorProto& t = tensors[i];
    std::string name = absl::StrCat(t.name.empty() ? absl::StrCat("arr_", i) : t.name, ".npy");
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("npz: duplicate array name '", name, "'"));
    }
    if (name.size() > 0xFFFF) {
      return absl::InvalidArgumentError(
          absl::StrCat("npz: array name of ", name.size(), " bytes is too long for ZIP"));
    }
    auto npy = WriteNpy(t);
    if (!npy.ok()) return AnnotateStatus(npy.status(), absl::StrCat("npz entry '", name, "'"));
    const uint64_t offset = out.size();
    if (offset + kLocalHeaderBytes + name.size() + npy->size() >= 0xFFFFFFFF) {
      return absl::ResourceExhaustedError(
          "npz: archive over 4 GiB needs zip64, which WriteNpz does not write");
    }
    const uint32_t crc = Crc32(*npy);
    PutHeader(false, name, crc, npy->size(), 0, &out);
    out += *npy;
    written.push_back({std::move(name), crc, npy->size(), offset});
  }
  const uint64_t cd_offset = out.size();
  for (const Written& w : written) PutHeader(true, w.name, w.crc, w.size, w.offset, &out);
  const uint64_t cd_size = out.size() - cd_offset;
  if (out.size() + kEocdBytes >= 0xFFFFFFFF) {
    return absl::ResourceExhaustedError("npz: archive over 4 GiB needs zip64, which WriteNpz does not write");
  }
  Put(kEocdSig, 4, &out);
  Put(0, 2, &out);  // this disk
  Put(0, 2, &out);  // directory disk
  Put(written.size(), 2, &out);
  Put(written.size(), 2, &out);
  Put(cd_size, 4, &out);
  Put(cd_offset, 4, &out);
  Put(0, 2, &out);  // comment
  return out;
}

}  // namespace onnxkit::tensor
