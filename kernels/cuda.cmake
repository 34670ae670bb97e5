# CUDA kernels (included from kernels/CMakeLists.txt when nvcc is found). Launchers are declared in
# CUDA-free headers (ragd/kernels/cuda/*.h), so C++ code links them without CUDA includes.
# cudart is linked statically: a binary starts (and reports "no CUDA device") on machines with no
# driver (libcuda.so is loaded lazily by the static runtime).
add_library(ragd_kernels_cuda STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/device.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/memory.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/graph.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/gemm.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/gemv.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/elementwise.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/attention_prefill.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/attention_prefill_sm90.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/attention_prefill_sm90_ws.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/attention_decode.cu)
target_include_directories(ragd_kernels_cuda PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_compile_definitions(ragd_kernels_cuda PUBLIC RAGD_HAVE_CUDA=1)
# The repo-wide add_compile_options (-Wall, -march=...) are host-compiler flags that nvcc rejects:
# keep them for C/C++ sources of `target` only.
function(ragd_cuda_host_only_flags target)
  get_target_property(_opts ${target} COMPILE_OPTIONS)
  if(_opts)
    set(_wrapped "")
    foreach(o ${_opts})
      list(APPEND _wrapped "$<$<COMPILE_LANGUAGE:C,CXX>:${o}>")
    endforeach()
    set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "${_wrapped}")
  endif()
endfunction()
ragd_cuda_host_only_flags(ragd_kernels_cuda)
target_compile_options(ragd_kernels_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wno-unused-parameter -lineinfo>)
set_target_properties(ragd_kernels_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF CUDA_RUNTIME_LIBRARY Static)
target_link_libraries(ragd_kernels_cuda PUBLIC ragd_common CUDA::cudart_static CUDA::cublas)
