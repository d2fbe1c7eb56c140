# mqalogits::dispatch: runtime dispatch of the host kernels (include/mqalogits/backend/host/
# dispatch.hpp). A small static library beside the header-only target: src/dispatch/path.cpp
# compiled once per host path with that path's flags, and src/dispatch/select.cpp, which picks
# the fastest path the CPU runs. Linking it defines MQALOGITS_RUNTIME_DISPATCH for the consumer,
# whose own units can then be built for the baseline (x86-64, armv8-a) and still run every CPU's
# best path. Built only when something links it.
include(CheckCXXCompilerFlag)

# Each path: its name (target.hpp's tag) and its flags.
set(_mqalogits_paths portable)
set(_mqalogits_flags_portable -DMQALOGITS_HOST_PORTABLE=1)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  list(APPEND _mqalogits_paths avx2 avx512 avx512_vnni)
  # F16C with every AVX2 path: every AVX2 CPU has it, and the e4m3 decode widens through it.
  set(_mqalogits_flags_avx2 -mavx2 -mfma -mf16c)
  set(_mqalogits_flags_avx512 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq)
  set(_mqalogits_flags_avx512_vnni ${_mqalogits_flags_avx512} -mavx512vnni)
  check_cxx_compiler_flag(-mavx512bf16 MQALOGITS_HAS_MAVX512BF16)
  if(MQALOGITS_HAS_MAVX512BF16)
    list(APPEND _mqalogits_paths avx512_bf16)
    # Chosen at run time only where it pays (src/dispatch/select.cpp), so built whatever the
    # compiler's tuning.
    set(_mqalogits_flags_avx512_bf16 ${_mqalogits_flags_avx512_vnni} -mavx512bf16
        -DMQALOGITS_HOST_BF16_DOT=1)
  endif()
  # AMX tiles (Sapphire Rapids and later): opt-in at run time until the path has passed the test
  # suite on an AMX CPU (src/dispatch/select.cpp); MQALOGITS_AMX_BY_DEFAULT lets "native" reach
  # it.
  set(CMAKE_REQUIRED_FLAGS "-mamx-tile -mamx-bf16 -mamx-int8")
  check_cxx_compiler_flag(-mamx-tile MQALOGITS_HAS_MAMX)
  unset(CMAKE_REQUIRED_FLAGS)
  if(MQALOGITS_HAS_MAMX)
    list(APPEND _mqalogits_paths avx512_amx)
    set(_mqalogits_flags_avx512_amx ${_mqalogits_flags_avx512_vnni} -mamx-tile -mamx-bf16
        -mamx-int8 -DMQALOGITS_ENABLE_AMX=1)
  endif()
  check_cxx_compiler_flag(-mavxvnni MQALOGITS_HAS_MAVXVNNI)
  if(MQALOGITS_HAS_MAVXVNNI)
    list(APPEND _mqalogits_paths avx2_vnni)
    set(_mqalogits_flags_avx2_vnni -mavx2 -mfma -mf16c -mavxvnni)
  endif()
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  list(APPEND _mqalogits_paths neon neon_dotprod)
  set(_mqalogits_flags_neon -march=armv8-a)
  set(_mqalogits_flags_neon_dotprod -march=armv8.2-a+dotprod)
endif()

add_library(mqalogits_dispatch STATIC EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/src/dispatch/select.cpp)
add_library(mqalogits::dispatch ALIAS mqalogits_dispatch)
target_link_libraries(mqalogits_dispatch PUBLIC mqalogits)
target_compile_definitions(mqalogits_dispatch PUBLIC MQALOGITS_RUNTIME_DISPATCH=1)
option(MQALOGITS_AMX_BY_DEFAULT
       "mqalogits::dispatch: take the AMX path without MQALOGITS_HOST_ISA=avx512_amx" OFF)
if(MQALOGITS_AMX_BY_DEFAULT)
  # PUBLIC: the dispatch tests expect the path the library picks.
  target_compile_definitions(mqalogits_dispatch PUBLIC MQALOGITS_DISPATCH_AMX_BY_DEFAULT=1)
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
  target_compile_definitions(mqalogits_dispatch PRIVATE MQALOGITS_DISPATCH_HAS_${path}=1)
endforeach()
if(PROJECT_IS_TOP_LEVEL AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(mqalogits_dispatch PRIVATE -Wall -Wextra -Werror)
endif()
set(MQALOGITS_DISPATCH_PATHS ${_mqalogits_paths} CACHE INTERNAL "the host paths of mqalogits::dispatch")
