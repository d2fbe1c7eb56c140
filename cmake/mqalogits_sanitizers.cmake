# Sanitizer builds of the project's own test targets (never the library's INTERFACE target, never
# global flags, so a parent project is unaffected).
#
#   cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DMQALOGITS_SANITIZE=address,undefined
#   cmake -S . -B build-tsan -DCMAKE_CXX_COMPILER=clang++ -DMQALOGITS_SANITIZE=thread
#
# UBSan findings abort (-fno-sanitize-recover), so a test with undefined behaviour fails instead
# of printing a line nobody reads.
set(MQALOGITS_SANITIZE "" CACHE STRING
    "Sanitizers for the mqalogits tests: empty, address,undefined or thread")

if(MQALOGITS_SANITIZE AND NOT MQALOGITS_SANITIZE MATCHES "^(address|undefined|thread|address,undefined|undefined,address|thread,undefined|undefined,thread)$")
  message(FATAL_ERROR "MQALOGITS_SANITIZE='${MQALOGITS_SANITIZE}': use address,undefined or thread")
endif()
if(MQALOGITS_SANITIZE AND NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR "MQALOGITS_SANITIZE needs GCC or Clang, not ${CMAKE_CXX_COMPILER_ID}")
endif()

function(mqalogits_sanitize)
  if(NOT MQALOGITS_SANITIZE)
    return()
  endif()
  set(flags -fsanitize=${MQALOGITS_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE ${flags})
    target_link_options(${target} PRIVATE ${flags})
  endforeach()
endfunction()
