# mqalogits::dispatch: runtime dispatch of the host kernels (include/mqalogits/backend/host/
# dispatch.hpp). A small static library beside the header-only target: src/dispatch/path.cpp
# compiled once per host path with that path's flags, and src/dispatch/select.cpp, which picks
# the fastest path the CPU runs. Linking it defines MQALOGITS_RUNTIME_DISPATCH for the consumer,
# whose own units can then be built for the baseline (x86-64, armv8-a) and still run every CPU's
# best path. Built only when something links it.
include(CheckCXXCompilerFlag)

# Each path: its name (target.hpp's tag) and its flags, from the one table of the host paths,
# include/mqalogits/backend/host/isa/paths.def (its comment says what each column means). A
# row is one line: MQALOGITS_ISA_PATH(name, arch, cpu, opt_in, base, checked, "flags").
set(_mqalogits_paths_def ${PROJECT_SOURCE_DIR}/include/mqalogits/backend/host/isa/paths.def)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_mqalogits_paths_def})
file(STRINGS ${_mqalogits_paths_def} _mqalogits_rows REGEX "^MQALOGITS_ISA_PATH\\(")
set(_n "([a-z0-9_]+)")  # a name
string(CONCAT _mqalogits_row_regex "^MQALOGITS_ISA_PATH\\(${_n}, ${_n}, [a-z0-9_]+, [01], ${_n}, "
              "([01]), \"([^\"]*)\"\\)$")
set(_mqalogits_paths)      # the paths this library holds
set(_mqalogits_all_paths)  # every row of the table
foreach(_row IN LISTS _mqalogits_rows)
  if(NOT _row MATCHES "${_mqalogits_row_regex}")
    message(FATAL_ERROR "${_mqalogits_paths_def}: a row CMake cannot read: ${_row}")
  endif()
  set(path ${CMAKE_MATCH_1})
  set(_arch ${CMAKE_MATCH_2})
  set(_base ${CMAKE_MATCH_3})
  set(_checked ${CMAKE_MATCH_4})
  separate_arguments(_own UNIX_COMMAND "${CMAKE_MATCH_5}")
  # The base row's flags, then its own (a base comes before the rows built on it).
  if(_base STREQUAL "none")
    set(_mqalogits_flags_${path} ${_own})
  elseif(_base IN_LIST _mqalogits_all_paths)
    set(_mqalogits_flags_${path} ${_mqalogits_flags_${_base}} ${_own})
  else()
    message(FATAL_ERROR "${_mqalogits_paths_def}: ${path}'s base ${_base} is not a row above it")
  endif()
  list(APPEND _mqalogits_all_paths ${path})
  # Only the rows of this architecture's ladder (any: on every ladder).
  if(NOT _arch MATCHES "^(any|x86_64|aarch64)$")
    message(FATAL_ERROR "${_mqalogits_paths_def}: ${path}'s arch ${_arch} is not any, x86_64 or "
                        "aarch64")
  endif()
  if((_arch STREQUAL "x86_64" AND NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$") OR
     (_arch STREQUAL "aarch64" AND NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$"))
    continue()
  endif()
  # A checked row is built only where the compiler takes its own flags.
  if(_checked)
    string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${_own}")
    list(GET _own 0 _first)
    check_cxx_compiler_flag(${_first} MQALOGITS_HAS_FLAGS_${path})
    unset(CMAKE_REQUIRED_FLAGS)
    if(NOT MQALOGITS_HAS_FLAGS_${path})
      continue()
    endif()
  endif()
  list(APPEND _mqalogits_paths ${path})
endforeach()

add_library(mqalogits_dispatch STATIC EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/src/dispatch/select.cpp)
add_library(mqalogits::dispatch ALIAS mqalogits_dispatch)
target_link_libraries(mqalogits_dispatch PUBLIC mqalogits)
target_compile_definitions(mqalogits_dispatch PUBLIC MQALOGITS_RUNTIME_DISPATCH=1)
option(MQALOGITS_AMX_BY_DEFAULT
       "mqalogits::dispatch: take the AMX path where it runs (OFF: only when MQALOGITS_HOST_ISA or limit_host_isa names it)"
       ON)
# PUBLIC: the dispatch tests expect the path the library picks.
if(MQALOGITS_AMX_BY_DEFAULT)
  target_compile_definitions(mqalogits_dispatch PUBLIC MQALOGITS_DISPATCH_AMX_BY_DEFAULT=1)
else()
  target_compile_definitions(mqalogits_dispatch PUBLIC MQALOGITS_DISPATCH_AMX_BY_DEFAULT=0)
endif()
set_target_properties(mqalogits_dispatch PROPERTIES POSITION_INDEPENDENT_CODE ON)
foreach(path IN LISTS _mqalogits_paths)
  add_library(mqalogits_dispatch_${path} OBJECT EXCLUDE_FROM_ALL
              ${PROJECT_SOURCE_DIR}/src/dispatch/path.cpp)
  # Not mqalogits::mqalogits: its definitions are the consumer's (one default backend, no
  # MQALOGITS_RUNTIME_DISPATCH); a path is plain host kernels.
  target_include_directories(mqalogits_dispatch_${path} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_features(mqalogits_dispatch_${path} PRIVATE cxx_std_20)
  target_compile_definitions(mqalogits_dispatch_${path} PRIVATE MQALOGITS_DISPATCH_PATH=${path})
  target_compile_options(mqalogits_dispatch_${path} PRIVATE ${_mqalogits_flags_${path}})
  set_target_properties(mqalogits_dispatch_${path} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(PROJECT_IS_TOP_LEVEL AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(mqalogits_dispatch_${path} PRIVATE -Wall -Wextra -Werror)
  endif()
  target_sources(mqalogits_dispatch PRIVATE $<TARGET_OBJECTS:mqalogits_dispatch_${path}>)
endforeach()
# select.cpp reads every row of the table: 1 for the paths this library holds, 0 for the others.
foreach(path IN LISTS _mqalogits_all_paths)
  if(path IN_LIST _mqalogits_paths)
    target_compile_definitions(mqalogits_dispatch PRIVATE MQALOGITS_DISPATCH_HAS_${path}=1)
  else()
    target_compile_definitions(mqalogits_dispatch PRIVATE MQALOGITS_DISPATCH_HAS_${path}=0)
  endif()
endforeach()
if(PROJECT_IS_TOP_LEVEL AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(mqalogits_dispatch PRIVATE -Wall -Wextra -Werror)
endif()
set(MQALOGITS_DISPATCH_PATHS ${_mqalogits_paths} CACHE INTERNAL "the host paths of mqalogits::dispatch")
