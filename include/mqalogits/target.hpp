// Which host instruction set this translation unit is compiled for, from the compiler's target
// macros (-march, -mavx2, -mcpu=...+dotprod): preprocessor only, so config.hpp can name it in
// the library's inline namespace. A header-only library takes its consumer's flags; it never
// picks an instruction set at run time.
//
// MQALOGITS_ISA_TAG is the token that names the unit's path in every mangled symbol: one of the
// paths of backend/host/isa/paths.def. The preprocessor cannot walk that table, so the choice
// below names them once more, fastest first; isa/ladder.hpp checks at compile time that the tag
// is a row of the table and the path the unit's kernels run.
// Define MQALOGITS_HOST_PORTABLE to force the portable path whatever the flags say.
#pragma once

#if !defined(MQALOGITS_HOST_PORTABLE)
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__FMA__)
#define MQALOGITS_HOST_AVX512 1
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define MQALOGITS_HOST_AVX2 1
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define MQALOGITS_HOST_NEON 1
#endif
#endif

// The int8 dot-product extensions the paths use when present.
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define MQALOGITS_HOST_VNNI512 1
#endif
#if defined(MQALOGITS_HOST_VNNI512) || defined(__AVXVNNI__)
#define MQALOGITS_HOST_VNNI256 1
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#define MQALOGITS_HOST_DOTPROD 1
#endif
// bf16 pair dot products (vdpbf16ps) for the e4m3 formats. They pay only where the instruction
// issues as often as vfmadd231ps, doing twice its work: AMD Zen 4 and Zen 5. On Intel's
// Sapphire / Emerald Rapids it reached half the fp32 FMA rate in flops, so a build takes them
// when it targets an AMD core with AVX512_BF16 (-march=native or -march=znver4 / znver5 there;
// GCC 12 and Clang 14 name Zen 4 znver3 plus its features), or -mtune=znver4 / znver5.
// MQALOGITS_HOST_BF16_DOT=1 takes them on any CPU with the instructions, =0 never.
#if !defined(MQALOGITS_HOST_BF16_DOT)
#if defined(__znver3__) || defined(__znver4__) || defined(__znver5__) || \
    defined(__tune_znver4__) || defined(__tune_znver5__)
#define MQALOGITS_HOST_BF16_DOT 1
#else
#define MQALOGITS_HOST_BF16_DOT 0
#endif
#endif
#if defined(MQALOGITS_HOST_AVX512) && defined(MQALOGITS_HOST_VNNI512) && \
    defined(__AVX512BF16__) && MQALOGITS_HOST_BF16_DOT
#define MQALOGITS_HOST_BF16 1
#endif

// AMX tiles (AMX-TILE, AMX-BF16, AMX-INT8; GCC spells the macros __AMX_TILE__, Clang 14
// __AMXTILE__). A unit built for AVX-512 + VNNI and the AMX flags (e.g. -march=sapphirerapids)
// takes the AMX path; MQALOGITS_ENABLE_AMX=0 keeps it on avx512_vnni. It asks the OS for the
// tile state at its first call and runs the avx512_vnni kernels where that is refused
// (backend/host/dispatch.hpp).
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && \
    (defined(__AMX_BF16__) || defined(__AMXBF16__)) && \
    (defined(__AMX_INT8__) || defined(__AMXINT8__)) && defined(__x86_64__)
#define MQALOGITS_TARGET_AMX 1
#endif
#if defined(MQALOGITS_TARGET_AMX) && defined(MQALOGITS_HOST_AVX512) && \
    defined(MQALOGITS_HOST_VNNI512) && (!defined(MQALOGITS_ENABLE_AMX) || MQALOGITS_ENABLE_AMX)
#define MQALOGITS_HOST_AMX 1
#endif

#if defined(MQALOGITS_HOST_AMX)
#define MQALOGITS_ISA_TAG avx512_amx
#elif defined(MQALOGITS_HOST_BF16)
#define MQALOGITS_ISA_TAG avx512_bf16
#elif defined(MQALOGITS_HOST_AVX512) && defined(MQALOGITS_HOST_VNNI512)
#define MQALOGITS_ISA_TAG avx512_vnni
#elif defined(MQALOGITS_HOST_AVX512)
#define MQALOGITS_ISA_TAG avx512
#elif defined(MQALOGITS_HOST_AVX2) && defined(MQALOGITS_HOST_VNNI256)
#define MQALOGITS_ISA_TAG avx2_vnni
#elif defined(MQALOGITS_HOST_AVX2)
#define MQALOGITS_ISA_TAG avx2
#elif defined(MQALOGITS_HOST_NEON) && defined(MQALOGITS_HOST_DOTPROD)
#define MQALOGITS_ISA_TAG neon_dotprod
#elif defined(MQALOGITS_HOST_NEON)
#define MQALOGITS_ISA_TAG neon
#else
#define MQALOGITS_ISA_TAG portable
#endif
