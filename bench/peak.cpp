// Peak throughput of each instruction the micro-kernels use (or could use), measured the same
// way as the kernels: independent accumulator chains, so only issue throughput limits them.
// Counters in the kernels' unit: FLOP/s with a multiply-add counted as 2 operations.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace {

// As many chains as the register file holds beside the loop's two constants: 16 with AVX-512's
// 32 vector registers, 12 with AVX2's 16 (16 chains there spill to the stack and halve the rate).
#if defined(__AVX512F__)
constexpr int chains = 16;
#else
constexpr int chains = 12;
#endif
constexpr int steps = 1024;

template <class V, class Step>
void run_peak(benchmark::State& st, V init, Step step, double ops_per_instruction) {
  V acc[chains];
  for (auto& a : acc) a = init;
  for (auto _ : st) {
    for (int s = 0; s < steps; ++s)
      for (auto& a : acc) a = step(a);
    for (auto& a : acc) benchmark::DoNotOptimize(a);
  }
  // Google Benchmark sums a counter over the threads and multiplies an iteration-invariant one
  // by the iterations of all threads: each thread contributes its share of one iteration's work.
  st.counters["FLOP/s"] = benchmark::Counter(ops_per_instruction * chains * steps / st.threads(),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

#if defined(__AVX2__) && defined(__FMA__)
void peak_fma_ymm(benchmark::State& st) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-7f);
  run_peak(
      st, _mm256_set1_ps(1.0f), [&](__m256 x) { return _mm256_fmadd_ps(x, a, b); }, 16);
}
#endif

#if defined(__AVX512F__)
void peak_fma_zmm(benchmark::State& st) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
  run_peak(
      st, _mm512_set1_ps(1.0f), [&](__m512 x) { return _mm512_fmadd_ps(x, a, b); }, 32);
}
#endif

#if defined(__AVX512BF16__)
void peak_dpbf16_zmm(benchmark::State& st) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  // 16 lanes x 2 bf16 products, each multiply + add
  run_peak(
      st, _mm512_set1_ps(1.0f), [&](__m512 x) { return _mm512_dpbf16_ps(x, a, b); }, 64);
}
#endif

#if defined(__AVX512VNNI__)
void peak_dpbusd_zmm(benchmark::State& st) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  // 16 lanes x 4 u8*s8 products, each multiply + add
  run_peak(
      st, _mm512_set1_epi32(1), [&](__m512i x) { return _mm512_dpbusd_epi32(x, a, b); }, 128);
}
#endif

#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
void peak_dpbusd_ymm(benchmark::State& st) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  run_peak(
      st, _mm256_set1_epi32(1), [&](__m256i x) { return _mm256_dpbusd_epi32(x, a, b); }, 64);
#else
  run_peak(
      st, _mm256_set1_epi32(1), [&](__m256i x) { return _mm256_dpbusd_avx_epi32(x, a, b); }, 64);
#endif
}
#endif

#if defined(__AVX2__)
// The int8 dot product of the AVX2 path without VNNI: vpmaddubsw (u8 x s8 pairs into int16),
// vpmaddwd by ones (pairs into int32), vpaddd; 8 lanes x 4 products per sequence.
void peak_maddubs_ymm(benchmark::State& st) {
  // The chain runs through the unsigned operand, so nothing is loop-invariant.
  const __m256i b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  run_peak(
      st, _mm256_set1_epi32(1),
      [&](__m256i x) {
        return _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(x, b), ones));
      },
      64);
}

// Twelve int16 chains in named variables, read by an empty asm: through run_peak's array and
// DoNotOptimize, GCC keeps some of these chains in memory (a store per step) and the loop then
// measures the stores. Each chain starts from its own value: from one value they are one
// computation, which GCC emits once (a single latency-bound chain counted twelve times: 3x the
// true peak on Zen 3). Step s begins with at_step(s); step(x, that, chain) then updates each.
template <class AtStep, class Step>
void run_int16_chains(benchmark::State& st, AtStep at_step, Step step) {
  auto start = [](short v) { return _mm256_set1_epi16(v); };
  __m256i x0 = start(1), x1 = start(2), x2 = start(3), x3 = start(4), x4 = start(5), x5 = start(6),
          x6 = start(7), x7 = start(8), x8 = start(9), x9 = start(10), x10 = start(11),
          x11 = start(12);
  for (auto _ : st) {
    for (int s = 0; s < steps; ++s) {
      const auto a = at_step(s);
      step(x0, a, 0), step(x1, a, 1), step(x2, a, 2), step(x3, a, 3), step(x4, a, 4);
      step(x5, a, 5), step(x6, a, 6), step(x7, a, 7), step(x8, a, 8), step(x9, a, 9);
      step(x10, a, 10), step(x11, a, 11);
    }
    // Read from registers (DoNotOptimize would take their addresses and put them in memory).
    __asm__ volatile("" ::"v"(x0), "v"(x1), "v"(x2), "v"(x3), "v"(x4), "v"(x5));
    __asm__ volatile("" ::"v"(x6), "v"(x7), "v"(x8), "v"(x9), "v"(x10), "v"(x11));
  }
  // 16 lanes x 2 products per step.
  st.counters["FLOP/s"] = benchmark::Counter(64.0 * 12 * steps / st.threads(),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

// The per-block step without VNNI: a block's vpmaddubsw pairs summed in int16 (vpaddw), widened
// once per block outside this loop. The chain runs through the unsigned operand.
void peak_maddubs_int16_ymm(benchmark::State& st) {
  const __m256i b = _mm256_set1_epi8(-2);
  run_int16_chains(
      st, [](int) { return 0; },
      [&](__m256i& x, int, int) { x = _mm256_add_epi16(x, _mm256_maddubs_epi16(x, b)); });
}

// The same step with its unsigned operand broadcast from memory, as the per-block kernel takes a
// key's 4 bytes (vpbroadcastd m32, then vpmaddubsw against a query vector, vpaddw): one
// broadcast per vpmaddubsw, as at the path's 1 x 6 blocking. Against the step above it tells
// whether the broadcasts cost vector-pipe throughput on this CPU. Twelve keys 128 bytes apart,
// each step 4 bytes further along them, at an address the compiler cannot see through.
void peak_bcast_maddubs_int16_ymm(benchmark::State& st) {
  alignas(64) static std::uint8_t keys[12 * 128];
  for (int i = 0; i < 12 * 128; ++i) keys[i] = static_cast<std::uint8_t>(i % 25);
  const __m256i q = _mm256_set1_epi8(-2);
  run_int16_chains(
      st,
      [](int s) {
        const std::uint8_t* k = keys + 4 * (s & 31);
        __asm__("" : "+r"(k));  // opaque: GCC summed the periodic steps ahead otherwise
        return k;
      },
      [&](__m256i& x, const std::uint8_t* k, int chain) {
        std::int32_t v;
        std::memcpy(&v, k + 128 * chain, 4);
        x = _mm256_add_epi16(x, _mm256_maddubs_epi16(_mm256_set1_epi32(v), q));
      });
}
#endif

#if defined(__SSE2__) && !defined(__AVX2__)
// The portable path on x86 without vector flags: the compiler vectorises its loops with SSE2,
// whose fp32 multiply-add is mulps + addps (no FMA); 4 lanes x 2 operations per pair.
void peak_mul_add_xmm(benchmark::State& st) {
  const __m128 a = _mm_set1_ps(0.999f), b = _mm_set1_ps(1e-7f);
  run_peak(
      st, _mm_set1_ps(1.0f), [&](__m128 x) { return _mm_add_ps(_mm_mul_ps(x, a), b); }, 8);
}
#endif

const int all_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

#define MQALOGITS_PEAK(fn, label)                                \
  BENCHMARK(fn)->Name("peak/" label)->Threads(1)->UseRealTime(); \
  BENCHMARK(fn)->Name("peak/" label)->Threads(all_threads)->UseRealTime()

#if defined(__SSE2__) && !defined(__AVX2__)
MQALOGITS_PEAK(peak_mul_add_xmm, "mulps_addps_xmm");
#endif
#if defined(__AVX512F__)
MQALOGITS_PEAK(peak_fma_zmm, "vfmadd231ps_zmm");
#endif
#if defined(__AVX512BF16__)
MQALOGITS_PEAK(peak_dpbf16_zmm, "vdpbf16ps_zmm");
#endif
#if defined(__AVX512VNNI__)
MQALOGITS_PEAK(peak_dpbusd_zmm, "vpdpbusd_zmm");
#endif
#if defined(__AVX2__) && defined(__FMA__)
MQALOGITS_PEAK(peak_fma_ymm, "vfmadd231ps_ymm");
#endif
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
MQALOGITS_PEAK(peak_dpbusd_ymm, "vpdpbusd_ymm");
#endif
#if defined(__AVX2__)
MQALOGITS_PEAK(peak_maddubs_ymm, "vpmaddubsw_ymm");
MQALOGITS_PEAK(peak_maddubs_int16_ymm, "vpmaddubsw_vpaddw_ymm");
MQALOGITS_PEAK(peak_bcast_maddubs_int16_ymm, "vpbroadcastd_vpmaddubsw_vpaddw_ymm");
#endif

}  // namespace
