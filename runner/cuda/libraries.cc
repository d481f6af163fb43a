// Loading cuBLAS, cuBLASLt and cuDNN on first use (see libraries.h).
#include "runner/cuda/libraries.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace onnxkit::runner::cuda {
namespace {

#define ONNXKIT_STRINGIFY_(x) #x
#define ONNXKIT_STRINGIFY(x) ONNXKIT_STRINGIFY_(x)

// The sonames of the versions this backend was compiled against.
constexpr const char* kCublas = "libcublas.so." ONNXKIT_STRINGIFY(CUBLAS_VER_MAJOR);
constexpr const char* kCublasLt = "libcublasLt.so." ONNXKIT_STRINGIFY(CUBLAS_VER_MAJOR);
constexpr const char* kCudnn = "libcudnn.so." ONNXKIT_STRINGIFY(CUDNN_MAJOR);

Libraries libraries;

// Opens `soname` from the loader's search path (LD_LIBRARY_PATH, the
// system's library folders), else from the folder the build found it in.
absl::Status Open(const char* soname, const char* build_folder, void** handle) {
  *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (*handle != nullptr) return absl::OkStatus();
  const char* first = dlerror();
  std::string error = first != nullptr ? first : "not found";
  if (build_folder[0] != '\0') {
    const std::string path = absl::StrCat(build_folder, "/", soname);
    *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (*handle != nullptr) return absl::OkStatus();
    const char* why = dlerror();
    if (why != nullptr) error = why;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no CUDA device: ", soname, " could not be loaded (", error,
                   "); install the CUDA libraries or add their folder to LD_LIBRARY_PATH"));
}

template <typename T>
absl::Status Resolve(void* handle, const char* library, const char* name, T* entry) {
  *entry = reinterpret_cast<T>(dlsym(handle, name));
  if (*entry != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("no CUDA device: ", library, " has no entry ", name, " (a version this build does not support)"));
}

absl::Status Load() {
  void* cublas = nullptr;
  void* cublas_lt = nullptr;
  void* cudnn = nullptr;
  absl::Status status = Open(kCublas, ONNXKIT_CUBLAS_FOLDER, &cublas);
  if (status.ok()) status = Open(kCublasLt, ONNXKIT_CUBLAS_FOLDER, &cublas_lt);
  if (status.ok()) status = Open(kCudnn, ONNXKIT_CUDNN_FOLDER, &cudnn);
#define ONNXKIT_RESOLVE(library, handle)                                                                  \
  [&](const char* name, auto* entry) {                                                                    \
    if (status.ok()) status = Resolve(handle, library, name, entry);                                      \
  }
  auto from_cublas = ONNXKIT_RESOLVE(kCublas, cublas);
  auto from_cublas_lt = ONNXKIT_RESOLVE(kCublasLt, cublas_lt);
  auto from_cudnn = ONNXKIT_RESOLVE(kCudnn, cudnn);
#undef ONNXKIT_RESOLVE
#define ONNXKIT_FROM_CUBLAS(name) from_cublas(#name, &libraries.name);
#define ONNXKIT_FROM_CUBLASLT(name) from_cublas_lt(#name, &libraries.name);
#define ONNXKIT_FROM_CUDNN(name) from_cudnn(#name, &libraries.name);
  ONNXKIT_CUBLAS_ENTRIES(ONNXKIT_FROM_CUBLAS)
  ONNXKIT_CUBLASLT_ENTRIES(ONNXKIT_FROM_CUBLASLT)
  ONNXKIT_CUDNN_ENTRIES(ONNXKIT_FROM_CUDNN)
#undef ONNXKIT_FROM_CUBLAS
#undef ONNXKIT_FROM_CUBLASLT
#undef ONNXKIT_FROM_CUDNN
  from_cublas("cublasGemmStridedBatchedEx", &libraries.cublasGemmStridedBatchedEx);
  // The libraries stay loaded for the life of the process (their handles
  // are never closed: contexts may outlive any one caller).
  return status;
}

}  // namespace

absl::Status LoadLibraries() {
  static std::once_flag once;
  static absl::Status status;
  std::call_once(once, [] { status = Load(); });
  return status;
}

const Libraries& Libs() { return libraries; }

}  // namespace onnxkit::runner::cuda
