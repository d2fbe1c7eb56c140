# Warning flags for the project's own targets only (never set on the library's INTERFACE, never
# global): -Wall -Wextra -Werror on GCC and Clang.
function(mqalogits_strict target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  endif()
  # The project's own targets are built for this machine's instruction set (see MQALOGITS_NATIVE).
  if(MQALOGITS_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()
