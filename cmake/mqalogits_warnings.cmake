# Warning flags for the project's own targets only (never set on the library's INTERFACE, never
# global): -Wall -Wextra -Werror on GCC and Clang.
include(CheckCXXCompilerFlag)

# The flag that builds for this machine's own instruction set, where the compiler has one
# (-march=native on x86 and ARM, -mcpu=native on POWER), and never when cross compiling: the
# build machine is not the target then (pass -march=... in CMAKE_CXX_FLAGS instead).
if(NOT DEFINED MQALOGITS_NATIVE_FLAG)
  set(MQALOGITS_NATIVE_FLAG "")
  if(NOT CMAKE_CROSSCOMPILING AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    check_cxx_compiler_flag(-march=native MQALOGITS_HAS_MARCH_NATIVE)
    if(MQALOGITS_HAS_MARCH_NATIVE)
      set(MQALOGITS_NATIVE_FLAG -march=native)
    else()
      check_cxx_compiler_flag(-mcpu=native MQALOGITS_HAS_MCPU_NATIVE)
      if(MQALOGITS_HAS_MCPU_NATIVE)
        set(MQALOGITS_NATIVE_FLAG -mcpu=native)
      endif()
    endif()
  endif()
  get_property(_told GLOBAL PROPERTY MQALOGITS_NATIVE_TOLD)
  if(MQALOGITS_NATIVE AND NOT MQALOGITS_NATIVE_FLAG AND NOT _told)
    set_property(GLOBAL PROPERTY MQALOGITS_NATIVE_TOLD TRUE)
    message(STATUS "mqalogits: MQALOGITS_NATIVE has no effect here (cross compiling, or no "
                   "-march=native / -mcpu=native): the targets take CMAKE_CXX_FLAGS as they are")
  endif()
endif()

function(mqalogits_strict target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  endif()
  # The project's own targets are built for this machine's instruction set (see MQALOGITS_NATIVE).
  if(MQALOGITS_NATIVE AND MQALOGITS_NATIVE_FLAG)
    target_compile_options(${target} PRIVATE ${MQALOGITS_NATIVE_FLAG})
  endif()
endfunction()

# What ships (examples, benchmarks, the Python module): built for the baseline with runtime
# dispatch when MQALOGITS_DISPATCH is ON, else like the tests.
function(mqalogits_shipped target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  endif()
  if(MQALOGITS_DISPATCH)
    target_link_libraries(${target} PRIVATE mqalogits::dispatch)
  elseif(MQALOGITS_NATIVE AND MQALOGITS_NATIVE_FLAG)
    target_compile_options(${target} PRIVATE ${MQALOGITS_NATIVE_FLAG})
  endif()
endfunction()
