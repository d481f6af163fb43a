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
