# One strict-flags check as a ctest test: cmake -DCOMPILER=... -DSOURCE=... -DINCLUDE=...
# [-DEIGEN=<Eigen include dir>] "-DISA_FLAGS=<;-list>" -P check.cmake
# Compiles SOURCE (syntax and template instantiation only: warnings need no object code) with
# the warnings a strict consumer turns on, the headers taken with a plain -I as a vendored copy
# would be, and fails on any warning.
cmake_minimum_required(VERSION 3.21)
set(flags -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Wshadow -Wconversion
          -Wsign-conversion -Wold-style-cast -Wdouble-promotion -Werror -I${INCLUDE} ${ISA_FLAGS})
if(EIGEN)
  list(APPEND flags -I${EIGEN} -DSTRICT_FLAGS_EIGEN)
endif()
execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  string(REGEX MATCHALL "(warning|error): [^\n]*" warnings "${err}")
  list(LENGTH warnings n)
  string(SUBSTRING "${err}" 0 6000 head)
  message(FATAL_ERROR "${COMPILER} ${ISA_FLAGS}: ${n} diagnostics\n${head}")
endif()
message(STATUS "${COMPILER} ${ISA_FLAGS}: clean")
