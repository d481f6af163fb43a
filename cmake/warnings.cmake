# Warning flags for project code (not for third-party headers).
set(ONNXKIT_WARNING_FLAGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(ONNXKIT_WERROR)
  list(APPEND ONNXKIT_WARNING_FLAGS -Werror)
endif()
function(onnxkit_target_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${ONNXKIT_WARNING_FLAGS}>)
endfunction()
