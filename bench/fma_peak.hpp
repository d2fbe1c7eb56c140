// The clocks and the fp32 FMA peak the x86 benchmarks divide by: the peak of the vectors the
// host path runs (zmm on the AVX-512 paths, ymm on AVX2), whichever flags the benchmark is built
// with: each loop is compiled for its own instruction set and picked by the path the library
// reports (runtime dispatch or not).
#pragma once

#include <time.h>

#include <cstdio>
#include <string>

#include <mqalogits/mqalogits.hpp>

#if defined(__x86_64__)
#include <immintrin.h>

namespace bench {

inline double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
inline double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// 12 independent FMA chains (FMA latency x 2 pipes needs at least 8), written out so that every
// chain stays in its own register.
constexpr int chains = 12;
#define MQALOGITS_PEAK_LOOP(vec, set1, fmadd, first)                                           \
  const vec a = set1(0.999f), b = set1(1e-7f);                                                 \
  vec x0 = set1(1.0f), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0, x8 = x0, \
      x9 = x0, x10 = x0, x11 = x0;                                                             \
  for (long i = 0; i < steps; ++i) {                                                           \
    x0 = fmadd(x0, a, b);                                                                      \
    x1 = fmadd(x1, a, b);                                                                      \
    x2 = fmadd(x2, a, b);                                                                      \
    x3 = fmadd(x3, a, b);                                                                      \
    x4 = fmadd(x4, a, b);                                                                      \
    x5 = fmadd(x5, a, b);                                                                      \
    x6 = fmadd(x6, a, b);                                                                      \
    x7 = fmadd(x7, a, b);                                                                      \
    x8 = fmadd(x8, a, b);                                                                      \
    x9 = fmadd(x9, a, b);                                                                      \
    x10 = fmadd(x10, a, b);                                                                    \
    x11 = fmadd(x11, a, b);                                                                    \
    __asm__ volatile(""                                                                        \
                     : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(x6),   \
                       "+v"(x7), "+v"(x8), "+v"(x9), "+v"(x10), "+v"(x11));                    \
  }                                                                                            \
  return first(x0) + first(x11);

__attribute__((target("avx512f"), noinline)) inline float fma_chains_zmm(long steps) {
  MQALOGITS_PEAK_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
}
__attribute__((target("avx2,fma"), noinline)) inline float fma_chains_ymm(long steps) {
  MQALOGITS_PEAK_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
}

inline bool zmm_path() {
  return std::string(mqalogits::host_isa_name()).rfind("avx512", 0) == 0;
}
inline const char* peak_instruction() {
  return zmm_path() ? "vfmadd231ps zmm" : "vfmadd231ps ymm";
}

// One thread's peak.
inline double fma_peak_gflops() {
  constexpr long steps = 2000000;
  const bool zmm = zmm_path();
  const double t0 = cpu_seconds();
  const float sink = zmm ? fma_chains_zmm(steps) : fma_chains_ymm(steps);
  const double t = cpu_seconds() - t0;
  if (sink == 12345.0f) std::puts("");  // keeps the chains alive
  return 2.0 * (zmm ? 16 : 8) * chains * static_cast<double>(steps) / t / 1e9;
}

}  // namespace bench
#endif
