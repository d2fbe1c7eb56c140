# Cross build for 64-bit ARM Linux with Debian's cross compiler (g++-aarch64-linux-gnu), run
# through qemu user emulation (qemu-user):
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DCMAKE_CXX_FLAGS=-march=armv8.2-a+dotprod
#   cmake --build build-arm --target mqalogits_tests && ctest --test-dir build-arm
# ctest, Catch2's test discovery and the consumer tests run ARM programs through
# CMAKE_CROSSCOMPILING_EMULATOR.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(MQALOGITS_CROSS_TRIPLE aarch64-linux-gnu)

find_program(MQALOGITS_CROSS_CXX ${MQALOGITS_CROSS_TRIPLE}-g++ REQUIRED)
set(CMAKE_CXX_COMPILER ${MQALOGITS_CROSS_CXX})
set(MQALOGITS_CROSS_SYSROOT /usr/${MQALOGITS_CROSS_TRIPLE})

find_program(MQALOGITS_QEMU qemu-aarch64)
if(MQALOGITS_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MQALOGITS_QEMU} -L ${MQALOGITS_CROSS_SYSROOT})
endif()

# Libraries and packages come from the ARM sysroot only, never the build machine's own (an x86
# Google Benchmark would be found, then fail to link). Catch2 (a header) and Eigen (headers)
# are the same files for every architecture, installed once under /usr: their package
# configurations are linked into a small root of their own, listed beside the sysroot.
# (Roots given with -DCMAKE_FIND_ROOT_PATH=... are kept, so a consumer can add its install
# prefix.)
list(APPEND CMAKE_FIND_ROOT_PATH ${MQALOGITS_CROSS_SYSROOT})
if(NOT CMAKE_IN_TRY_COMPILE)
  set(_noarch ${CMAKE_BINARY_DIR}/noarch-root)
  foreach(dir usr/lib/cmake/Catch2 usr/share/eigen3 usr/include/eigen3 usr/include/catch2)
    if(EXISTS /${dir} AND NOT EXISTS ${_noarch}/${dir})
      get_filename_component(_parent ${_noarch}/${dir} DIRECTORY)
      file(MAKE_DIRECTORY ${_parent})
      file(CREATE_LINK /${dir} ${_noarch}/${dir} SYMBOLIC)
    endif()
  endforeach()
  list(APPEND CMAKE_FIND_ROOT_PATH ${_noarch})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
