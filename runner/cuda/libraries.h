// cuBLAS, cuBLASLt and cuDNN, loaded when the first CUDA context is made instead of
// when the program starts (internal to runner/cuda).
//
// Linked as ordinary shared libraries they would be mapped and relocated by
// every onnxkit process (about 0.07 s and 220 MB of resident memory, for
// `check` as much as for `run --backend cuda`), and a machine without them
// could not start the binary at all. The backend calls them only through
// Libs(), whose entries LoadLibraries() resolves.
#ifndef ONNXKIT_RUNNER_CUDA_LIBRARIES_H_
#define ONNXKIT_RUNNER_CUDA_LIBRARIES_H_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include "runner/cuda/cuda_backend.h"

namespace onnxkit::runner::cuda {

// The entry points the backend uses, by their exported names.
#define ONNXKIT_CUBLAS_ENTRIES(X)                                                                         \
  X(cublasCreate_v2)                                                                                      \
  X(cublasDestroy_v2)                                                                                     \
  X(cublasSetStream_v2)                                                                                   \
  X(cublasSetWorkspace_v2)                                                                                \
  X(cublasGetStatusString)
#define ONNXKIT_CUBLASLT_ENTRIES(X)       \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)
#define ONNXKIT_CUDNN_ENTRIES(X)                                                                          \
  X(cudnnCreate)                                                                                          \
  X(cudnnDestroy)                                                                                         \
  X(cudnnSetStream)                                                                                       \
  X(cudnnGetErrorString)                                                                                  \
  X(cudnnCreateTensorDescriptor)                                                                          \
  X(cudnnDestroyTensorDescriptor)                                                                         \
  X(cudnnSetTensorNdDescriptor)                                                                           \
  X(cudnnCreateFilterDescriptor)                                                                          \
  X(cudnnDestroyFilterDescriptor)                                                                         \
  X(cudnnSetFilterNdDescriptor)                                                                           \
  X(cudnnCreateConvolutionDescriptor)                                                                     \
  X(cudnnDestroyConvolutionDescriptor)                                                                    \
  X(cudnnSetConvolutionNdDescriptor)                                                                      \
  X(cudnnSetConvolutionGroupCount)                                                                        \
  X(cudnnSetConvolutionMathType)                                                                          \
  X(cudnnGetConvolutionNdForwardOutputDim)                                                                \
  X(cudnnFindConvolutionForwardAlgorithm)                                                                 \
  X(cudnnGetConvolutionForwardAlgorithm_v7)                                                               \
  X(cudnnGetConvolutionForwardWorkspaceSize)                                                              \
  X(cudnnConvolutionForward)                                                                              \
  X(cudnnAddTensor)

struct Libraries {
#define ONNXKIT_LIBRARY_ENTRY(name) decltype(&::name) name = nullptr;
  ONNXKIT_CUBLAS_ENTRIES(ONNXKIT_LIBRARY_ENTRY)
  ONNXKIT_CUBLASLT_ENTRIES(ONNXKIT_LIBRARY_ENTRY)
  ONNXKIT_CUDNN_ENTRIES(ONNXKIT_LIBRARY_ENTRY)
#undef ONNXKIT_LIBRARY_ENTRY
  // Overloaded in the header (a C++ form taking cudaDataType as the compute
  // type), so spelled out: the exported C function.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long int,
                                               const void*, cudaDataType, int, long long int, const void*, void*,
                                               cudaDataType, int, long long int, int, cublasComputeType_t,
                                               cublasGemmAlgo_t) = nullptr;
};

// The loaded entries; only after LoadLibraries() (cuda_backend.h) succeeded.
const Libraries& Libs();

}  // namespace onnxkit::runner::cuda

#endif  // ONNXKIT_RUNNER_CUDA_LIBRARIES_H_
