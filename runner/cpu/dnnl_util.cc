// Shared pieces of the cpu backend: see dnnl_util.h.
#include "runner/cpu/dnnl_util.h"

#include <omp.h>

#include "lib/io/proto.h"
#include "runner/cpu/threads.h"
#include "runner/kernel_registry.h"

namespace onnxkit::runner::cpu {

dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  static dnnl::stream* stream = new dnnl::stream(Engine());
  return *stream;
}

std::optional<dnnl::memory::data_type> DnnlType(int32_t onnx_dtype) {
  using dt = dnnl::memory::data_type;
  switch (onnx_dtype) {
    case pb::kFloat:
      return dt::f32;
    case pb::kFloat16:
      return dt::f16;
    case pb::kBfloat16:
      return dt::bf16;
    case pb::kInt8:
      return dt::s8;
    case pb::kUint8:
      return dt::u8;
    case pb::kInt32:
      return dt::s32;
    default:
      return std::nullopt;
  }
}

dnnl::memory::dims Dims(const std::vector<int64_t>& shape) {
  dnnl::memory::dims d(shape.begin(), shape.end());
  if (d.empty()) d.push_back(1);
  return d;
}

dnnl::memory::format_tag PlainTag(int rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 0:
    case 1:
      return tag::a;
    case 2:
      return tag::ab;
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
    case 6:
      return tag::abcdef;
    default:
      return tag::undef;
  }
}

dnnl::memory::desc PlainDesc(const std::vector<int64_t>& shape, dnnl::memory::data_type dt) {
  return dnnl::memory::desc(Dims(shape), dt, PlainTag(static_cast<int>(shape.size())));
}

dnnl::memory UserMemory(const Tensor& t) { return UserMemory(t, PlainDesc(t.shape(), *DnnlType(t.dtype()))); }

dnnl::memory UserMemory(const Tensor& t, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, Engine(), const_cast<void*>(t.raw()));
}

dnnl::memory HeldMemory::At(const void* data, const dnnl::memory::desc& desc) {
  absl::Status s = Guard("memory", [&] {
    if (!memory_ || desc != desc_) {
      memory_ = dnnl::memory(desc, Engine(), const_cast<void*>(data));
      desc_ = desc;
    } else {
      memory_.set_data_handle(const_cast<void*>(data));
    }
  });
  // A failure leaves an empty object: the primitive given it fails in Execute.
  if (!s.ok()) memory_ = dnnl::memory();
  return memory_;
}

absl::Status Execute(std::string_view what, const dnnl::primitive& p,
                     const std::unordered_map<int, dnnl::memory>& args) {
  return Guard(what, [&] {
    p.execute(Stream(), args);
    Stream().wait();
  });
}

absl::StatusOr<dnnl::memory> PreparedWeight::Get(const Tensor& src, const dnnl::memory::desc& src_desc,
                                                 const dnnl::memory::desc& want) {
  if (source_ == src.raw() && memory_ && want_ == want) return memory_;
  dnnl::memory prepared;
  absl::Status s = Guard("weight reorder", [&] {
    dnnl::memory user(src_desc, Engine(), const_cast<void*>(src.raw()));
    prepared = dnnl::memory(want, Engine());
    dnnl::reorder(user, prepared).execute(Stream(), user, prepared);
    Stream().wait();
  });
  if (!s.ok()) return s;
  source_ = src.raw();
  want_ = want;
  memory_ = prepared;
  return memory_;
}

absl::StatusOr<std::unique_ptr<Kernel>> MakeReferenceKernel(const ir::Node& node, const KernelInfo& info) {
  absl::StatusOr<const KernelEntry*> entry =
      FindKernel(Backend::kReference, node.domain(), node.op_type(), info.opset);
  if (!entry.ok()) return entry.status();
  return (*entry)->factory(node, info);
}


void SetThreads(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }

ThreadsScope::ThreadsScope(int threads) : saved_(omp_get_max_threads()) {
  if (threads < 1) threads = 1;
  if (threads != saved_) omp_set_num_threads(threads);
}

ThreadsScope::~ThreadsScope() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

bool Bf16Supported() {
  // The ISA values are bit sets: each one holds the bits of those it extends.
  const int bf16 = static_cast<int>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<int>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

bool AmxSupported() {
  static const bool amx = [] {
    const int isa = static_cast<int>(dnnl::cpu_isa::avx512_core_amx);
    return (static_cast<int>(dnnl::get_effective_cpu_isa()) & isa) == isa;
  }();
  return amx;
}

}  // namespace onnxkit::runner::cpu
