// <immintrin.h> for the x86 ISA files, without the warnings GCC 12's AVX-512 intrinsics raise
// inside the header (they seed results with _mm512_undefined_*(), which -Wuninitialized
// reports); the pragma covers the header's lines only.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
