# Third-party dependencies, all from Debian 12 packages (see scripts/setup.sh).
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(ZLIB REQUIRED)  # inflate for .npz (savez_compressed)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter)

# libonnx: its shape inference is called behind lib/onnx_bridge; its
# generated protobuf types also let tests cross-check the codec.
find_package(Protobuf REQUIRED)
find_library(ONNX_PROTO_LIB onnx_proto REQUIRED)
find_library(ONNX_LIB onnx REQUIRED)

if(ONNXKIT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(ONNXKIT_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# oneDNN (CPU kernels of the runner). Found by hand: Debian's dnnl-config
# also demands the OpenCL development files, which onnxkit does not use.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
add_library(onnxkit_dnnl INTERFACE)
target_include_directories(onnxkit_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(onnxkit_dnnl INTERFACE ${DNNL_LIBRARY})

# CUDA: built when nvcc is found (standard location /usr/local/cuda) unless
# ONNXKIT_ENABLE_CUDA=OFF. ONNXKIT_HAVE_CUDA tells the rest of the build.
# The CUDA runtime is linked statically (it loads the driver only when a
# device is first asked for, so the binary runs without a driver); cuBLAS
# and cuDNN are linked as the toolkit's shared libraries. Device code is
# built for ONNXKIT_CUDA_ARCHITECTURES only (SASS for sm_80, SASS + PTX for
# sm_90, which newer GPUs JIT-compile), to keep the build short.
set(ONNXKIT_HAVE_CUDA OFF)
set(ONNXKIT_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "GPU architectures of the CUDA backend's device code")
if(ONNXKIT_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${ONNXKIT_CUDA_ARCHITECTURES})
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND TARGET CUDA::cublas)
      set(ONNXKIT_HAVE_CUDA ON)
      if(ONNXKIT_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
        set(CMAKE_CUDA_COMPILER_LAUNCHER ${ONNXKIT_CCACHE})
      endif()
      message(STATUS "onnxkit: CUDA backend enabled (${CMAKE_CUDA_COMPILER}, architectures ${ONNXKIT_CUDA_ARCHITECTURES})")
    else()
      message(STATUS "onnxkit: cuDNN or cuBLAS not found, CUDA backend disabled")
    endif()
  else()
    message(STATUS "onnxkit: nvcc not found, CUDA backend disabled")
  endif()
endif()
