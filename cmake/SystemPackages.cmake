#===- cmake/SystemPackages.cmake - What the build needs from Debian -------===#
#
# coll_check_system_packages(): looks, before anything else is looked for in
# earnest, for every library and tool this configuration needs from the
# system, and stops with one message naming the Debian packages that provide
# the missing ones (scripts/setup.sh installs them all), rather than with the
# first find_package's error. `pip install .` reaches it too.
#
#===------------------------------------------------------------------------===#
function(coll_check_system_packages)
  set(missing "")
  find_package(LLVM 14 QUIET CONFIG)
  if(NOT LLVM_FOUND)
    list(APPEND missing llvm-14-dev llvm-14-tools)
  endif()
  find_package(tinyxml2 QUIET CONFIG)
  if(NOT tinyxml2_FOUND)
    list(APPEND missing libtinyxml2-dev)
  endif()
  if(COLL_ENABLE_LANG)
    find_package(antlr4-runtime QUIET CONFIG)
    if(NOT antlr4-runtime_FOUND)
      list(APPEND missing libantlr4-runtime-dev)
    endif()
    find_program(COLL_ANTLR4 NAMES antlr4 antlr4-tool)
    if(NOT COLL_ANTLR4)
      list(APPEND missing antlr4)
    endif()
  endif()
  if(COLL_BUILD_TESTS)
    find_package(GTest QUIET)
    if(NOT GTest_FOUND)
      list(APPEND missing googletest libgtest-dev libgmock-dev)
    endif()
  endif()
  if(COLL_BUILD_TESTS AND COLL_BUILD_BENCHMARKS)
    find_package(benchmark QUIET)
    if(NOT benchmark_FOUND)
      list(APPEND missing libbenchmark-dev)
    endif()
  endif()
  if(missing)
    list(JOIN missing " " names)
    message(FATAL_ERROR "Coll cannot be built here: these Debian packages are missing:\n"
      "  ${names}\n"
      "Install them with\n"
      "  sudo apt-get install ${names}\n"
      "or run scripts/setup.sh, which installs everything Coll builds with.")
  endif()
endfunction()
