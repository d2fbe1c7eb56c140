// The score micro-kernels alone, at register blockings other than the path's: how a blocking
// was chosen. One query row of H heads against 510-512 decoded keys that stay in L1 / L2,
// 100 passes, best of 5, in % of the fp32 FMA peak timed in the same process (FLOP = 2 x H x
// 128 per key). The inputs' values do not matter to the timing; the layouts are the library's.
// Runs the widest compiled path (isa_best): -march=native, or e.g. -mavx2 -mfma -mf16c. On the
// AVX2 path without VNNI, rows "rel" time the relative int8 kernel (the per-block one with a
// shorter epilogue, which that path runs for MXFP4 rows in its range).
//
//   build/bench/mqalogits_score_blockings
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "fma_peak.hpp"

#if defined(__x86_64__)

namespace {

namespace ml = mqalogits;
namespace hb = ml::host_backend;
using I = hb::isa_best;
constexpr int D = 128;

// Best seconds per key over 5 rounds of `passes` passes of score(first key, out) over n keys,
// Keys at a time.
template <int Keys, class Score>
double per_key(int n, int passes, std::vector<float>& out, Score score) {
  double best = 1e9;
  for (int r = 0; r < 5; ++r) {
    const double t0 = bench::cpu_seconds();
    for (int p = 0; p < passes; ++p)
      for (int t = 0; t + Keys <= n; t += Keys) score(t, out.data() + t);
    best = std::min(best, (bench::cpu_seconds() - t0) / passes / n);
  }
  return best;
}

// The fp32 path (MXFP8, FP8 per-token) at HeadVectors x Keys.
template <int HeadVectors, int Keys>
double f32_blocking(int heads) {
  const int padded = (heads + I::lanes - 1) / I::lanes * I::lanes, n = 510 / Keys * Keys;
  std::vector<float> qt(static_cast<std::size_t>(padded * D)),
      w(static_cast<std::size_t>(padded), 0.5f), keys(static_cast<std::size_t>((n + 16) * D)),
      out(static_cast<std::size_t>(n + 16));
  for (std::size_t i = 0; i < qt.size(); ++i) qt[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<float>(i % 5) * 0.1f - 0.2f;
  const ml::host_abi::f32_query q{qt.data(), w.data(), heads, padded};
  return per_key<Keys>(n, 100, out, [&](int t, float* o) {
    hb::score_keys<I, hb::f32_path<D>, HeadVectors, Keys>(q, {keys.data() + t * D}, o);
  });
}

// A query row of the int8 path and n keys (+16 of padding) of its codes, as both int8 timings
// read them.
struct i8_inputs {
  int padded, n;
  std::vector<std::int32_t> data, start;
  std::vector<float> scale, w, out;
  std::vector<std::uint8_t> codes;
  ml::host_abi::i8_query q;
  i8_inputs(int heads, int keys)
      : padded((heads + I::lanes - 1) / I::lanes * I::lanes),
        n(510 / keys * keys),
        data(static_cast<std::size_t>(padded * D / 4)),
        start(static_cast<std::size_t>(padded * 4)),
        scale(static_cast<std::size_t>(padded * 4), 0.25f),
        w(static_cast<std::size_t>(padded), 0.5f),
        out(static_cast<std::size_t>(n + 16)),
        codes(static_cast<std::size_t>((n + 16) * D)),
        q{data.data(), start.data(), scale.data(), w.data(), heads, padded} {
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = 0x01020304 * static_cast<int>(i % 3);
    for (std::size_t i = 0; i < codes.size(); ++i)
      codes[i] = static_cast<std::uint8_t>(120 + i % 9);
  }
};

// The per-block int8 path (MXFP4) at HeadVectors x Keys.
template <int HeadVectors, int Keys>
double i8_blocking(int heads) {
  i8_inputs in(heads, Keys);
  const std::vector<float> key_scales(static_cast<std::size_t>((in.n + 16) * 4), 2.0f);
  return per_key<Keys>(in.n, 100, in.out, [&](int t, float* o) {
    hb::score_keys<I, hb::i8_path<D>, HeadVectors, Keys>(
        in.q, {in.codes.data() + t * D, key_scales.data() + t * 4}, o);
  });
}

#if !defined(MQALOGITS_HOST_AVX512) && !defined(MQALOGITS_HOST_VNNI256)  // (isa_best: avx2)
#define MQALOGITS_BENCH_RELATIVE 1
// The relative int8 path (MXFP4 where the per-block kernel sums in int16: no VNNI) at
// HeadVectors x Keys: the per-block kernel with its shorter epilogue
// (score_paths_i8_compact.hpp's i8_rel_path), keys with block multipliers 1, 2, 4, 8 and base
// scale 2.
template <int HeadVectors, int Keys>
double i8_rel_blocking(int heads) {
  i8_inputs in(heads, Keys);
  constexpr int words = hb::i8_compact_scale_words<D>;
  std::vector<float> key_words(static_cast<std::size_t>((in.n + 16) * words), 2.0f);
  for (int t = 0; t < in.n + 16; ++t)
    for (int b = 0; b < D / 32; ++b) {
      const std::int32_t m = 0x00010001 << b;
      std::memcpy(&key_words[static_cast<std::size_t>(t * words + b)], &m, 4);
    }
  return per_key<Keys>(in.n, 100, in.out, [&](int t, float* o) {
    hb::score_keys<I, hb::i8_rel_path<D>, HeadVectors, Keys>(
        in.q, {in.codes.data() + t * D, key_words.data() + t * words}, o);
  });
}
#endif

}  // namespace

int main() {
  const double peak = bench::fma_peak_gflops();
  std::printf("host path %s, score kernels alone, %% of the fp32 FMA peak (%.0f GFLOP/s)\n",
              I::path, peak);
  auto print = [&](const char* path, const char* blocking, int heads, double seconds) {
    std::printf("%-5s %-6s H%-3d %7.1f ns/key %6.1f%%\n", path, blocking, heads, seconds * 1e9,
                2.0 * heads * D / seconds / 1e9 / peak * 100);
  };
  for (const int heads : {32, 64}) {
    print("fp32", "2 x 4", heads, f32_blocking<2, 4>(heads));
    print("fp32", "2 x 5", heads, f32_blocking<2, 5>(heads));
    print("fp32", "4 x 3", heads, f32_blocking<4, 3>(heads));
    print("fp32", "1 x 6", heads, f32_blocking<1, 6>(heads));
    print("int8", "2 x 3", heads, i8_blocking<2, 3>(heads));
    print("int8", "1 x 4", heads, i8_blocking<1, 4>(heads));
    print("int8", "1 x 6", heads, i8_blocking<1, 6>(heads));
    print("int8", "1 x 8", heads, i8_blocking<1, 8>(heads));
#if defined(MQALOGITS_BENCH_RELATIVE)
    print("rel", "1 x 6", heads, i8_rel_blocking<1, 6>(heads));
    print("rel", "2 x 3", heads, i8_rel_blocking<2, 3>(heads));
    print("rel", "2 x 4", heads, i8_rel_blocking<2, 4>(heads));
#endif
  }
}

#else
int main() {
  std::puts("mqalogits_score_blockings: x86-64 only");
}
#endif
