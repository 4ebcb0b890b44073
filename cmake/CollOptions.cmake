#===- cmake/CollOptions.cmake - warnings, sanitizers, CUDA detection ------===#

# Warnings for our own code only (generated ANTLR sources get their own flags).
add_library(coll_warnings INTERFACE)
# GCC 12 reports false positives from inlined LLVM/libstdc++ code
# (llvm::formatv's HelperStyle, std::string's memcpy); they are not ours.
target_compile_options(coll_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized -Wno-restrict>)

# (CUDA's flags once the language is enabled, in coll_detect_cuda: before,
# they are empty, and an empty normal variable would hide the cached "-O3"
# at the first configure only, so that a second one, as `pip install .`
# makes, would change nvcc's command and rebuild every kernel.)
if(COLL_ENABLE_ASSERTIONS)
  foreach(flags CMAKE_CXX_FLAGS_RELEASE CMAKE_CXX_FLAGS_RELWITHDEBINFO
                CMAKE_C_FLAGS_RELEASE CMAKE_C_FLAGS_RELWITHDEBINFO)
    string(REPLACE "-DNDEBUG" "" ${flags} "${${flags}}")
  endforeach()
endif()

# The fuzz build (COLL_BUILD_FUZZERS, docs/FUZZING.md), a build folder of
# its own: libFuzzer needs clang, and every target is compiled with its
# coverage instrumentation (fuzzer-no-link: the counters, not libFuzzer's
# main) and with ASan and UBSan, so that the fuzzers (tests/fuzz) link the
# libraries they fuzz as this build makes them.
if(COLL_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COLL_BUILD_FUZZERS needs clang: configure with "
                        "CC=clang CXX=clang++")
  endif()
  if(NOT COLL_SANITIZE)
    set(COLL_SANITIZE address undefined)
  elseif(NOT COLL_SANITIZE STREQUAL "address;undefined")
    message(FATAL_ERROR "COLL_BUILD_FUZZERS builds with COLL_SANITIZE='address;undefined', "
                        "not '${COLL_SANITIZE}'")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(COLL_SANITIZE)
  string(REPLACE ";" "," _coll_san "${COLL_SANITIZE}")
  message(STATUS "Coll: sanitizers ${_coll_san}")
  # -g1: line tables and function names, what the sanitizers' reports
  # print; full debug info made these builds a third slower to compile.
  add_compile_options(-fsanitize=${_coll_san} -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${_coll_san})
  if("undefined" IN_LIST COLL_SANITIZE)
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

# Sets COLL_HAVE_CUDA when the CUDA backend can be built here.
macro(coll_detect_cuda)
  set(COLL_HAVE_CUDA OFF)
  if(NOT COLL_ENABLE_CUDA STREQUAL "OFF" AND NOT COLL_SANITIZE)
    include(CheckLanguage)
    if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
      enable_language(CUDA)
      if(COLL_ENABLE_ASSERTIONS)
        foreach(_coll_flags CMAKE_CUDA_FLAGS_RELEASE CMAKE_CUDA_FLAGS_RELWITHDEBINFO)
          string(REPLACE "-DNDEBUG" "" ${_coll_flags} "${${_coll_flags}}")
        endforeach()
      endif()
      find_package(CUDAToolkit REQUIRED)
      # The fatbins' compression: nvcc's default ("balance"). "size" made
      # each kernel object about half as large (KernelsLL.cu's 28 MB of
      # sm_90 code with line info: 1.9 MB against 3.6) but cost 78 s of
      # fatbinary per protocol, a tenth of the build's CPU time
      # (docs/performance/build.md, "one kernel file under nvcc --time").
      # CUDA 13 needs driver r580 either way.
      add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:--compress-mode=balance>)
      set(COLL_HAVE_CUDA ON)
      message(STATUS "Coll: CUDA backend enabled (sm_${CMAKE_CUDA_ARCHITECTURES})")
    elseif(COLL_ENABLE_CUDA STREQUAL "ON")
      message(FATAL_ERROR "COLL_ENABLE_CUDA=ON but no CUDA compiler was found")
    else()
      message(STATUS "Coll: no CUDA compiler; the CUDA backend is not built")
    endif()
  endif()
endmacro()
