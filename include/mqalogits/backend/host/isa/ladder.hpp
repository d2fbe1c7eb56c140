// The instruction sets compiled into this translation unit, from the most portable to the
// fastest, and the one the host backend runs (the last). Which ones exist is decided by the
// compiler's target macros (target.hpp), never at run time: a header-only library takes its
// consumer's flags. Adding an ISA: its file, and one line here; adding a path: a row of
// paths.def too.
#pragma once

#include <string_view>
#include <tuple>

#include "../../../config.hpp"
#include "avx2.hpp"
#include "avx512.hpp"
#include "avx512_amx.hpp"
#include "avx512_bf16.hpp"
#include "neon.hpp"
#include "paths.hpp"
#include "portable.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Every compiled ISA, as a type list (the micro-kernel tests run each of them).
// clang-format off
using compiled_isas = std::tuple<isa_portable
#if defined(MQALOGITS_HOST_NEON)
    , isa_neon
#endif
#if defined(MQALOGITS_HOST_AVX2)
    , isa_avx2
#endif
#if defined(MQALOGITS_HOST_AVX512)
    , isa_avx512
#endif
#if defined(MQALOGITS_HOST_BF16)
    , isa_avx512_bf16
#endif
#if defined(MQALOGITS_HOST_AMX)
    , isa_avx512_amx
#endif
    >;
// clang-format on

// The widest of them: what the backend runs.
using isa_best = std::tuple_element_t<std::tuple_size_v<compiled_isas> - 1, compiled_isas>;

#define MQALOGITS_LADDER_STRING_(x) #x
#define MQALOGITS_LADDER_STRING(x) MQALOGITS_LADDER_STRING_(x)
static_assert(is_isa_path(isa_best::path), "the widest compiled ISA runs a path paths.def lacks");
static_assert(std::string_view(isa_best::path) == MQALOGITS_LADDER_STRING(MQALOGITS_ISA_TAG),
              "target.hpp's tag names another path than the one the unit's kernels run");
#undef MQALOGITS_LADDER_STRING
#undef MQALOGITS_LADDER_STRING_

}  // namespace host_backend

MQALOGITS_NAMESPACE_END
