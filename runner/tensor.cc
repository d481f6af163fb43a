// Tensor and Buffer.
#include "runner/tensor.h"

#include <malloc.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/checked_math.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"

namespace onnxkit::runner {

namespace {

std::atomic<int64_t> g_limit{0};
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

}  // namespace

void SetMemoryLimit(int64_t bytes) { g_limit = bytes; }
int64_t LiveTensorBytes() { return g_live; }
int64_t PeakTensorBytes() { return g_peak; }

namespace {

// Keeps freed tensor memory in the heap for reuse: by default glibc maps
// every block over 128 KiB afresh and unmaps it when freed, so each run of a
// model would page-fault all of its activations in again.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeBufferBytes = size_t{4} << 20;

void TuneAllocator() {
  static const bool tuned = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    return true;
  }();
  (void)tuned;
}

// Blocks over the mmap threshold are mapped afresh by glibc for every
// allocation and unmapped when freed, so each run of a model with large
// activations (a detector's 50 MB roi features) would page-fault and zero
// them again. Smaller blocks on 2 MiB pages fare no better: a freed one is
// too short for the next allocation of its size plus the alignment, so
// the heap grows and the new pages are faulted in and zeroed (a 20 MB
// activation cost about 2 ms a run that way, far more on a host that backs
// memory lazily). Freed blocks from kCachedBlockBytes are kept here instead,
// at most kCachedBlocks of them and kCachedTotalBytes together, and an
// allocation takes the smallest that fits without wasting more than half of
// it. The cache is never destroyed (tensors may die during static
// destruction).
constexpr size_t kCachedBlockBytes = kHugeBufferBytes;
constexpr size_t kCachedBlocks = 64;
constexpr size_t kCachedTotalBytes = size_t{2} << 30;

// Small blocks (at most 4 KiB, in 64-byte classes) freed by a thread, kept
// for that thread's next allocations: an aligned allocation always takes the
// allocator's slow path, which outweighed the work of small tensors' kernels.
constexpr size_t kSmallBlockBytes = 4096;
constexpr size_t kSmallClasses = kSmallBlockBytes / 64;
constexpr size_t kSmallPerClass = 32;
constexpr size_t kSmallTotalBytes = size_t{1} << 20;

class SmallBlocks {
 public:
  ~SmallBlocks() {
    for (std::vector<void*>& blocks : free_) {
      for (void* p : blocks) std::free(p);
    }
  }
  // A kept block of exactly `block` bytes (a multiple of 64), or nullptr.
  void* Take(size_t block) {
    std::vector<void*>& blocks = free_[block / 64 - 1];
    if (blocks.empty()) return nullptr;
    void* p = blocks.back();
    blocks.pop_back();
    total_ -= block;
    return p;
  }
  // Keeps `data` if there is room; false: the caller frees it.
  bool Put(void* data, size_t block) {
    std::vector<void*>& blocks = free_[block / 64 - 1];
    if (blocks.size() >= kSmallPerClass || total_ + block > kSmallTotalBytes) return false;
    blocks.push_back(data);
    total_ += block;
    return true;
  }

 private:
  std::vector<void*> free_[kSmallClasses];
  size_t total_ = 0;
};

// This thread's small blocks; null once the thread is ending (its blocks
// freed), when a buffer freed later is freed at once.
thread_local bool t_small_blocks_gone = false;
struct SmallBlocksHolder {
  SmallBlocks blocks;
  ~SmallBlocksHolder() { t_small_blocks_gone = true; }
};
SmallBlocks* ThreadSmallBlocks() {
  if (t_small_blocks_gone) return nullptr;
  thread_local SmallBlocksHolder holder;
  return &holder.blocks;
}

class BlockCache {
 public:
  static BlockCache& Get() {
    static BlockCache* cache = new BlockCache();
    return *cache;
  }

  // A cached block of at least `bytes` (its size in *block), or nullptr.
  void* Take(size_t bytes, size_t* block) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = blocks_.size();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const size_t size = blocks_[i].second;
      if (size >= bytes && size / 2 <= bytes && (best == blocks_.size() || size < blocks_[best].second))
        best = i;
    }
    if (best == blocks_.size()) return nullptr;
    void* data = blocks_[best].first;
    *block = blocks_[best].second;
    total_ -= *block;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
    return data;
  }

  // Frees every cached block (an allocation failed: the memory is wanted).
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [data, size] : blocks_) std::free(data);
    blocks_.clear();
    total_ = 0;
  }

  // Keeps `data` (`block` bytes) if there is room; false: the caller frees it.
  bool Put(void* data, size_t block) {
    if (block < kCachedBlockBytes) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (blocks_.size() >= kCachedBlocks || total_ + block > kCachedTotalBytes) return false;
    blocks_.emplace_back(data, block);
    total_ += block;
    return true;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> blocks_;
  size_t total_ = 0;
};

}  // namespace

std::shared_ptr<Buffer> Buffer::Allocate(size_t bytes, bool zero_fill) {
  TuneAllocator();
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  int64_t limit = g_limit;
  int64_t live = g_live.fetch_add(static_cast<int64_t>(rounded)) + static_cast<int64_t>(rounded);
  if (limit > 0 && live > limit) {
    g_live -= static_cast<int64_t>(rounded);
    return nullptr;
  }
  int64_t peak = g_peak;
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  auto b = std::shared_ptr<Buffer>(new Buffer());
  if (rounded >= kHugeBufferBytes) {
    // Big tensors on 2 MiB pages: one page fault per 2 MiB instead of per
    // 4 KiB (weights folded at load, large activations), and fewer TLB misses.
    size_t huge = (rounded + kHugePage - 1) / kHugePage * kHugePage;
    b->data_ = BlockCache::Get().Take(huge, &b->block_);  // every huge block is cacheable
    if (b->data_ == nullptr) {
      b->data_ = std::aligned_alloc(kHugePage, huge);
      if (b->data_ == nullptr) {  // the cached blocks may be what is missing
        BlockCache::Get().Clear();
        b->data_ = std::aligned_alloc(kHugePage, huge);
      }
      b->block_ = huge;
      if (b->data_ != nullptr) madvise(b->data_, huge, MADV_HUGEPAGE);
    }
  } else {
    SmallBlocks* small = rounded <= kSmallBlockBytes ? ThreadSmallBlocks() : nullptr;
    b->data_ = small != nullptr ? small->Take(rounded) : nullptr;
    if (b->data_ == nullptr) b->data_ = std::aligned_alloc(64, rounded);
    b->block_ = rounded;
  }
  if (b->data_ == nullptr) {
    g_live -= static_cast<int64_t>(rounded);
    return nullptr;
  }
  b->capacity_ = rounded;
  if (zero_fill) std::memset(b->data_, 0, rounded);
  b->size_ = bytes;
  b->owned_ = true;
  return b;
}

std::shared_ptr<Buffer> Buffer::View(std::shared_ptr<const void> keepalive, const void* data, size_t bytes) {
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = const_cast<void*>(data);
  b->size_ = bytes;
  b->keepalive_ = std::move(keepalive);
  return b;
}

std::shared_ptr<Buffer> Buffer::Adopt(void* data, size_t bytes, MemoryKind kind,
                                      std::function<void(void*)> release) {
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = data;
  b->size_ = bytes;
  b->kind_ = kind;
  b->release_ = std::move(release);
  return b;
}

Buffer::~Buffer() {
  if (release_) release_(data_);
  if (owned_) {
    SmallBlocks* small = block_ >= 64 && block_ <= kSmallBlockBytes ? ThreadSmallBlocks() : nullptr;
    if (small != nullptr) {
      if (!small->Put(data_, block_)) std::free(data_);
    } else if (!BlockCache::Get().Put(data_, block_)) {
      std::free(data_);
    }
    g_live -= static_cast<int64_t>(capacity_);
  }
}

namespace {

absl::StatusOr<int64_t> CheckShape(const std::vector<int64_t>& shape) {
  if (shape.size() > static_cast<size_t>(limits::kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", shape.size(), " exceeds the limit ", limits::kMaxRank));
  }
  auto count = CheckedElementCount(shape);
  if (!count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape [", absl::StrJoin(shape, ", "), "] has a negative dim or too many elements"));
  }
  return *count;
}

}  // namespace

absl::StatusOr<Tensor> Tensor::Allocate(int32_t dtype, std::vector<int64_t> shape) {
  return AllocateImpl(dtype, std::move(shape), true);
}

absl::StatusOr<Tensor> Tensor::AllocateUninitialized(int32_t dtype, std::vector<int64_t> shape) {
  return AllocateImpl(dtype, std::move(shape), dtype == 8);
}

absl::StatusOr<Tensor> Tensor::AllocateImpl(int32_t dtype, std::vector<int64_t> shape, bool zero_fill) {
  auto count = CheckShape(shape);
  if (!count.ok()) return count.status();
  Tensor t;
  t.dtype_ = dtype;
  t.size_ = *count;
  t.shape_ = std::move(shape);
  if (dtype == 8) {  // string
    if (*count > (int64_t{1} << 32)) return absl::ResourceExhaustedError("string tensor too large");
    t.strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(*count));
    t.buffer_ = Buffer::Allocate(0);
    if (t.buffer_ == nullptr) return absl::ResourceExhaustedError("memory limit reached");
    return t;
  }
  auto bytes = RawByteSize(dtype, *count);
  if (!bytes) return absl::InvalidArgumentError(absl::StrCat("cannot allocate a tensor of element type ", dtype));
  if (*bytes > (int64_t{1} << 46)) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor of ", *bytes, " bytes is too large"));
  }
  t.buffer_ = Buffer::Allocate(static_cast<size_t>(*bytes), zero_fill);
  if (t.buffer_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", *bytes, " bytes for a tensor of shape [",
                                                     absl::StrJoin(t.shape_, ", "), "]: memory limit (",
                                                     LiveTensorBytes(), " bytes live) or out of memory"));
  }
  return t;
}

absl::StatusOr<Tensor> Tensor::Wrap(int32_t dtype, std::vector<int64_t> shape, std::shared_ptr<Buffer> buffer) {
  auto count = CheckShape(shape);
  if (!count.ok()) return count.status();
  auto bytes = RawByteSize(dtype, *count);
  if (!bytes || buffer == nullptr || buffer->size() != static_cast<size_t>(*bytes)) {
    return absl::InvalidArgumentError("buffer size does not match the tensor's shape and type");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.size_ = *count;
  t.shape_ = std::move(shape);
  t.buffer_ = std::move(buffer);
  return t;
}

absl::StatusOr<Tensor> Tensor::Strings(std::vector<int64_t> shape, std::vector<std::string> values) {
  auto count = CheckShape(shape);
  if (!count.ok()) return count.status();
  if (static_cast<size_t>(*count) != values.size()) {
    return absl::InvalidArgumentError("string count does not match the shape");
  }
  Tensor t;
  t.dtype_ = 8;
  t.size_ = *count;
  t.shape_ = std::move(shape);
  t.buffer_ = Buffer::Allocate(0);
  t.strings_ = std::make_shared<std::vector<std::string>>(std::move(values));
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshaped(std::vector<int64_t> shape) const {
  auto count = CheckShape(shape);
  if (!count.ok()) return count.status();
  if (*count != size_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot view ", size_, " elements as shape [",
                                                   absl::StrJoin(shape, ", "), "]"));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = *this;
  if (strings_) {
    t.strings_ = std::make_shared<std::vector<std::string>>(*strings_);
    return t;
  }
  if (buffer_) {
    t.buffer_ = Buffer::Allocate(buffer_->size());
    if (t.buffer_ == nullptr) return Tensor();
    if (buffer_->size() > 0) std::memcpy(t.buffer_->data(), buffer_->data(), buffer_->size());
  }
  return t;
}

std::string DescribeTensor(const Tensor& t) {
  std::string name(DataTypeName(t.dtype()));
  if (name.empty()) name = absl::StrCat("type", t.dtype());
  return absl::StrCat(name, "[", absl::StrJoin(t.shape(), ", "), "]");
}

}  // namespace onnxkit::runner
