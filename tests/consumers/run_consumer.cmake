# Runs one consumer check as a ctest test: cmake -DMODE=... -P run_consumer.cmake
#   MODE=install   SOURCE_DIR (mqalogits), WORK_DIR: configure mqalogits alone, install to
#                  WORK_DIR/prefix (what a packager does).
#   MODE=project   PROJECT_DIR, WORK_DIR, ARGS (;-list of extra configure args), RUN (0/1),
#                  EXPECT (text the program must print), EXE (default consumer): configure +
#                  build a consumer project in a fresh WORK_DIR, then run its program EXE.
#   MODE=git       SOURCE_DIR (a git checkout of mqalogits), PROJECT_DIR, WORK_DIR, EXPECT, EXE:
#                  clone SOURCE_DIR to WORK_DIR/mirror, then build PROJECT_DIR with
#                  -DMQALOGITS_GIT_REPOSITORY=file://<mirror> -DMQALOGITS_GIT_TAG=<HEAD's hash>
#                  (FetchContent's git form, as the README documents it) and run EXE.
#   MODE=pkgconfig PREFIX, SOURCE (a .cpp), WORK_DIR, CXX: compile SOURCE with the flags
#                  `pkg-config --cflags --libs mqalogits` gives for PREFIX, then run it.
# Always passed: GENERATOR, CXX_COMPILER, LAUNCHER, TOOLCHAIN (a cross build's toolchain file)
# and EMULATOR (;-list: what runs the cross-built programs), each possibly empty.
cmake_minimum_required(VERSION 3.21)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

set(common -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
if(LAUNCHER)
  list(APPEND common "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
if(TOOLCHAIN)
  list(APPEND common "-DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN}")
  # The toolchain searches packages under its roots only: an install prefix the consumer is
  # pointed at becomes one more root.
  if(ARGS MATCHES "-DCMAKE_PREFIX_PATH=([^;\\]*)")
    list(APPEND ARGS "-DCMAKE_FIND_ROOT_PATH=${CMAKE_MATCH_1}")
  endif()
endif()
file(REMOVE_RECURSE "${WORK_DIR}")

if(MODE STREQUAL "install")
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" ${common}
      -DMQALOGITS_BUILD_TESTS=OFF -DMQALOGITS_BUILD_BENCH=OFF -DMQALOGITS_BUILD_EXAMPLES=OFF
      -DMQALOGITS_BUILD_PYTHON=OFF
      "-DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix")
  run(${CMAKE_COMMAND} --install "${WORK_DIR}/build")
  foreach(f include/mqalogits/mqalogits.hpp include/mqalogits/quantize.hpp
            include/mqalogits/backend/host/isa/paths.def
            share/cmake/mqalogits/mqalogitsConfig.cmake
            share/cmake/mqalogits/mqalogitsConfigVersion.cmake
            share/cmake/mqalogits/mqalogitsTargets.cmake share/pkgconfig/mqalogits.pc)
    if(NOT EXISTS "${WORK_DIR}/prefix/${f}")
      message(FATAL_ERROR "install did not produce ${f}")
    endif()
  endforeach()
  file(READ "${WORK_DIR}/prefix/share/cmake/mqalogits/mqalogitsConfigVersion.cmake" version_file)
  # ARCH_INDEPENDENT: CMake's template returns before its pointer-size check.
  if(NOT version_file MATCHES "no architecture check, don't perform the check\nif\\(\"TRUE\"\\)")
    message(FATAL_ERROR "the version file checks the pointer size: not ARCH_INDEPENDENT")
  endif()
  message(STATUS "installed to ${WORK_DIR}/prefix")
elseif(MODE STREQUAL "project" OR MODE STREQUAL "git")
  if(MODE STREQUAL "git")
    find_program(GIT git REQUIRED)
    run(${GIT} -C "${SOURCE_DIR}" rev-parse HEAD)
    string(STRIP "${run_output}" head)
    run(${GIT} clone --quiet "file://${SOURCE_DIR}" "${WORK_DIR}/mirror")
    list(APPEND ARGS "-DMQALOGITS_GIT_REPOSITORY=file://${WORK_DIR}/mirror"
         "-DMQALOGITS_GIT_TAG=${head}")
    set(WORK_DIR "${WORK_DIR}/build")
  endif()
  run(${CMAKE_COMMAND} -S "${PROJECT_DIR}" -B "${WORK_DIR}" ${common} ${ARGS})
  message(STATUS "${run_output}")
  # A consumer's configure is silent: no CMake warning (CMP0135 and the like) from mqalogits.
  if(run_output MATCHES "CMake (Warning|Deprecation)")
    message(FATAL_ERROR "configuring the consumer printed a CMake warning:\n${run_output}")
  endif()
  if(RUN)
    run(${CMAKE_COMMAND} --build "${WORK_DIR}")
    if(NOT EXE)
      set(EXE consumer)
    endif()
    run(${EMULATOR} "${WORK_DIR}/${EXE}")
    message(STATUS "${run_output}")
    if(NOT run_output MATCHES "${EXPECT}")
      message(FATAL_ERROR "the consumer printed '${run_output}', expected '${EXPECT}'")
    endif()
  endif()
elseif(MODE STREQUAL "pkgconfig")
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/share/pkgconfig")
  execute_process(COMMAND pkg-config --cflags --libs mqalogits RESULT_VARIABLE rc
                  OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs mqalogits failed (${rc})")
  endif()
  # Normalised paths: the include directory itself, no `..` hops through share/pkgconfig.
  if(flags MATCHES "/\\.\\./" OR NOT flags MATCHES "-I${PREFIX}/include( |$)")
    message(FATAL_ERROR "pkg-config flags are not normalised: '${flags}' (want -I${PREFIX}/include)")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY "${WORK_DIR}")
  run(${LAUNCHER} ${CXX_COMPILER} ${SOURCE} ${flags} -o "${WORK_DIR}/consumer")
  run(${EMULATOR} "${WORK_DIR}/consumer")
  message(STATUS "${run_output}")
  if(NOT run_output MATCHES "${EXPECT}")
    message(FATAL_ERROR "the consumer printed '${run_output}', expected '${EXPECT}'")
  endif()
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()
