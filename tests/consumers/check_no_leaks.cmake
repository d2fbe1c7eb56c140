# Injected into a consumer project with -DCMAKE_PROJECT_INCLUDE=<this file>: it runs right after
# the consumer's project() (before mqalogits is brought in), records the global state, and
# defers a check to the end of the consumer's configure step that fails when bringing in
# mqalogits leaked anything into the parent:
#   - global flags or settings (CMAKE_CXX_FLAGS*, linker flags, CMAKE_CXX_STANDARD, build type,
#     directory compile options / definitions / include directories / link options);
#   - targets other than the library itself and its optional dispatch library (no tests,
#     benchmarks, examples, Catch2, ...) and
#     ctest tests;
#   - compile options on the INTERFACE target (no -Werror / -march for consumers);
# and checks that the backend the parent chose (MQALOGITS_CONSUMER_EXPECT_BACKEND) is the one
# the target carries.
if(NOT CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR OR DEFINED _mqalogits_leak_vars)
  return()  # only the consumer's own top-level project() call
endif()

set(_mqalogits_leak_vars
    CMAKE_CXX_FLAGS CMAKE_CXX_FLAGS_DEBUG CMAKE_CXX_FLAGS_RELEASE CMAKE_CXX_FLAGS_RELWITHDEBINFO
    CMAKE_EXE_LINKER_FLAGS CMAKE_SHARED_LINKER_FLAGS CMAKE_CXX_STANDARD CMAKE_CXX_EXTENSIONS
    CMAKE_BUILD_TYPE CMAKE_POSITION_INDEPENDENT_CODE CMAKE_INTERPROCEDURAL_OPTIMIZATION
    CMAKE_CXX_VISIBILITY_PRESET BUILD_TESTING)
foreach(v ${_mqalogits_leak_vars})
  set(_mqalogits_before_${v} "${${v}}")
endforeach()
set(_mqalogits_leak_props COMPILE_OPTIONS COMPILE_DEFINITIONS INCLUDE_DIRECTORIES LINK_OPTIONS)
foreach(p ${_mqalogits_leak_props})
  get_directory_property(_mqalogits_before_${p} ${p})
endforeach()

# Collects a directory property (BUILDSYSTEM_TARGETS, TESTS) over dir's subdirectories, recursively.
function(_mqalogits_collect prop dir out)
  set(found "")
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    get_property(here DIRECTORY ${sub} PROPERTY ${prop})
    _mqalogits_collect(${prop} ${sub} more)
    list(APPEND found ${here} ${more})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

function(_mqalogits_check_no_leaks)
  set(errors "")
  foreach(v ${_mqalogits_leak_vars})
    if(NOT "${${v}}" STREQUAL "${_mqalogits_before_${v}}")
      list(APPEND errors "${v} changed from '${_mqalogits_before_${v}}' to '${${v}}'")
    endif()
  endforeach()
  foreach(p ${_mqalogits_leak_props})
    get_directory_property(now ${p})
    if(NOT "${now}" STREQUAL "${_mqalogits_before_${p}}")
      list(APPEND errors "directory property ${p} changed to '${now}'")
    endif()
  endforeach()
  # Targets below the consumer's own directory: the library only (no tests, bench, examples,
  # Catch2, ...); and no ctest tests anywhere below it.
  _mqalogits_collect(BUILDSYSTEM_TARGETS ${CMAKE_SOURCE_DIR} targets)
  foreach(t ${targets})
    # The header-only target, and the optional runtime-dispatch library (mqalogits::dispatch:
    # built only when linked) with its per-path objects.
    if(NOT t MATCHES "^mqalogits(_dispatch(_[a-z0-9_]+)?)?$")
      list(APPEND errors "target '${t}' leaked into the parent")
    endif()
  endforeach()
  _mqalogits_collect(TESTS ${CMAKE_SOURCE_DIR} tests)
  if(tests)
    list(APPEND errors "ctest tests leaked into the parent: ${tests}")
  endif()
  if(NOT TARGET mqalogits::mqalogits)
    list(APPEND errors "no mqalogits::mqalogits target")
  else()
    get_target_property(options mqalogits::mqalogits INTERFACE_COMPILE_OPTIONS)
    if(options)
      list(APPEND errors "mqalogits::mqalogits carries compile options '${options}'")
    endif()
    get_target_property(defs mqalogits::mqalogits INTERFACE_COMPILE_DEFINITIONS)
    string(TOUPPER "${MQALOGITS_CONSUMER_EXPECT_BACKEND}" expect)
    if(expect AND NOT "MQALOGITS_BACKEND_${expect}=1" IN_LIST defs)
      list(APPEND errors "mqalogits::mqalogits definitions '${defs}' lack MQALOGITS_BACKEND_${expect}=1")
    endif()
  endif()
  if(errors)
    list(JOIN errors "\n  " text)
    message(FATAL_ERROR "mqalogits leaked into its consumer:\n  ${text}")
  endif()
  message(STATUS "mqalogits consumer check: nothing leaked, backend ${MQALOGITS_CONSUMER_EXPECT_BACKEND}")
endfunction()

cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _mqalogits_check_no_leaks)
