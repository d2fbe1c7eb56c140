// What holds paged decode (one query row per request, every key used by that row's heads only)
// below the FMA peak: each cost measured alone, in one process, against the fp32 FMA peak timed
// in the same process.
//
//   call      the whole paged call (bf16 logits), as an engine makes it
//   decode    the call's keys decoded into tiles (the library's decoder and its prefetch), alone
//   score     the score kernel on one decoded tile that stays in L1/L2, alone
//   pf D      the decode with the library's prefetch replaced by one D keys ahead (0: none)
//
// on three cache layouts: pages back to back in request order ("contiguous"), pages scattered
// over a 4 GiB mapping without huge pages ("scattered 4K"), and the same with huge pages
// (madvise; "scattered 2M"). Each is reported in ns per key and as % of the FMA peak for the
// key's 2 x H x 128 FLOP; decode + score is the ceiling of a schedule that runs them one after
// the other on one core. MXFP4 rows in the compact form the call takes (folded, or relative on
// AVX2 without VNNI) are timed in that form, and marked "MXFP4*".
//
//   build/bench/mqalogits_decode_limits [rounds] [format filter] [H]
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "fma_peak.hpp"
#include "inputs.hpp"

#if defined(__x86_64__)

namespace {

namespace ml = mqalogits;
namespace hb = ml::host_backend;

using bench::cpu_seconds;
double fma_peak() {
  return bench::fma_peak_gflops();
}

// The pages of B requests x `blocks` in request order: back to back, or at random page slots of
// a 4 GiB mapping (bench::paged_cache) with or without huge pages.
template <class Format>
struct laid_out_cache {
  bench::paged_cache<Format> cache;
  std::vector<std::int32_t> table;
  laid_out_cache(std::int64_t b, std::int64_t blocks, std::size_t scatter_over, int advice)
      : cache(b * blocks, 64, 11, scatter_over, advice) {
    for (std::int32_t p = 0; p < b * blocks; ++p) table.push_back(cache.slot(p));
  }
  ml::paged_cache_view<Format> view() const { return cache.view(); }
};

template <class Format>
std::vector<ml::host_abi::key_ptrs> keys_in_call_order(const laid_out_cache<Format>& c,
                                                       std::int64_t b, std::int64_t context) {
  const ml::paged_cache_view<Format> v = c.view();
  const std::int64_t blocks = context / 64;
  std::vector<ml::host_abi::key_ptrs> refs;
  refs.reserve(static_cast<std::size_t>(b * context));
  for (std::int64_t r = 0; r < b; ++r)
    for (std::int64_t t = 0; t < context; ++t) {
      const std::int64_t page = c.table[static_cast<std::size_t>(r * blocks + t / 64)];
      refs.push_back({v.data(page, t % 64), v.scale(page, t % 64)});
    }
  return refs;
}

// One decoded tile's buffers (both paths' forms, sized for any format).
struct tile {
  static constexpr std::int64_t keys = hb::key_tile + 64;
  std::vector<unsigned char> valid = std::vector<unsigned char>(keys), compact = valid;
  std::vector<float> f32 = std::vector<float>(keys * 128), i8_scales = std::vector<float>(keys * 4),
                     fold_scales = std::vector<float>(keys * 5), bf16_scales = fold_scales;
  std::vector<std::uint8_t> i8 = std::vector<std::uint8_t>(keys * 128), fold = i8;
  std::vector<std::uint32_t> bf16 = std::vector<std::uint32_t>(keys * 64);
  ml::host_abi::tile_buffers buffers() {
    return {valid.data(),       f32.data(),  i8.data(),          i8_scales.data(), fold.data(),
            fold_scales.data(), bf16.data(), bf16_scales.data(), compact.data()};
  }
};

template <class Format>
struct experiment {
  static constexpr std::int64_t B = 64, context = 8192, blocks = context / 64;
  std::int64_t H;
  bench::rows<Format> q;
  std::vector<ml::bf16> w;
  std::vector<std::int32_t> lens = std::vector<std::int32_t>(B, context);
  ml::logits_buffer<ml::bf16> out{B, context};
  const ml::host_abi::format_kernels& kernels = hb::host_kernels<Format>();
  tile decoded;
  // One decoded query row in the path's layout.
  int padded;
  std::vector<float> qt, q_scale;
  std::vector<std::int32_t> q_words, q_start;
  std::vector<float> w_row;
  // MXFP4: the query row's compact form (folded, or relative on AVX2 without VNNI), which the
  // call takes when the row has it, and which the decode and score experiments then take too.
  bool compact = false;
  std::vector<float> c_scale;
  std::vector<std::int32_t> c_words, c_start;
  ml::host_abi::compact_rows key_forms() const {
    return compact ? ml::host_abi::compact_rows::all : ml::host_abi::compact_rows::none;
  }

  explicit experiment(std::int64_t h)
      : H(h),
        q(B * h, 12),
        w(bench::weights(B * h, 13)),
        padded(static_cast<int>((h + kernels.lanes - 1) / kernels.lanes * kernels.lanes)) {
    const ml::host_abi::rows_ref rows{q.data.data(), q_scales(), Format::data_bytes,
                                      Format::scale_bytes};
    w_row.assign(static_cast<std::size_t>(padded), 0.0f);
    for (std::int64_t h = 0; h < H; ++h)
      w_row[static_cast<std::size_t>(h)] = ml::to_float(w[static_cast<std::size_t>(h)]);
    if constexpr (hb::int8_path<Format>) {
      q_words.resize(static_cast<std::size_t>(padded * 32));
      q_start.resize(static_cast<std::size_t>(padded * 4));
      q_scale.resize(static_cast<std::size_t>(padded * 4));
      kernels.decode_q_i8(rows, 0, static_cast<int>(H), padded, q_words.data(), q_start.data(),
                          q_scale.data());
      c_words.resize(q_words.size());
      c_start.resize(q_start.size());
      c_scale.resize(q_scale.size());
      compact = kernels.fold_rows &&
                kernels.decode_q_i8_fold(rows, 0, static_cast<int>(H), padded, c_words.data(),
                                         c_start.data(), c_scale.data());
    } else {
      qt.resize(static_cast<std::size_t>(padded * 128));
      kernels.decode_q_f32(rows, 0, static_cast<int>(H), padded, qt.data());
    }
  }
  const std::uint8_t* q_scales() const {
    return std::is_same_v<Format, ml::fp8_per_token> ? nullptr : q.scales.data();
  }
  double flop_per_key() const { return 2.0 * static_cast<double>(H) * Format::head_dim; }

  // Seconds per key of each experiment.
  double call(const laid_out_cache<Format>& c) {
    const ml::matrix_view<const std::int32_t> l(lens.data(), B, 1, 1),
        t(c.table.data(), B, blocks, blocks);
    const auto schedule = ml::get_paged_mqa_logits_metadata(l, 64, 1);
    const ml::rows_view<Format> qv(q.data.data(), q_scales(), B * H);
    const ml::matrix_view<const ml::bf16> wv(w.data(), B, H, H);
    const double t0 = cpu_seconds();
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, qv, c.view(), wv, l, t, schedule, context,
                                 out.view(), ml::options{});
    return (cpu_seconds() - t0) / (B * context);
  }
  // The call's keys decoded tile by tile (or its first tile `repeat` times: keys in L2).
  double decode(const std::vector<ml::host_abi::key_ptrs>& refs, bool repeat = false) {
    const auto n = static_cast<std::int64_t>(refs.size());
    const double t0 = cpu_seconds();
    for (std::int64_t i = 0; i < n; i += hb::key_tile)
      kernels.decode_keys(refs.data() + (repeat ? 0 : i), std::min(hb::key_tile, n - i),
                          key_forms(), decoded.buffers());
    return (cpu_seconds() - t0) / n;
  }
  // The same, one key at a time, prefetching `ahead` keys ahead (0: no prefetch).
  double decode_prefetch(const std::vector<ml::host_abi::key_ptrs>& refs, std::int64_t ahead) {
    const auto n = static_cast<std::int64_t>(refs.size());
    const ml::host_abi::tile_buffers b = decoded.buffers();
    const double t0 = cpu_seconds();
    for (std::int64_t i = 0; i < n; ++i) {
      if (ahead && i + ahead < n)
        hb::prefetch_key<Format>(refs[static_cast<std::size_t>(i + ahead)]);
      const std::int64_t slot = i % hb::key_tile;
      kernels.decode_keys(
          refs.data() + i, 1, key_forms(),
          {b.valid + slot, b.f32 + slot * 128, b.i8 + slot * 128, b.i8_scales + slot * 4,
           b.fold + slot * 128, b.fold_scales + slot * 5, b.bf16, b.bf16_scales, b.compact + slot});
    }
    return (cpu_seconds() - t0) / n;
  }
  // Decode and score one after the other, key group by key group (decode group g + 1, then score
  // group g) instead of tile by tile: whether the out-of-order core overlaps the decode of one
  // group with the FMAs of the other. The groups are decoded into two small buffers that stay in
  // L1; with `repeat`, the keys are the first tile's, over and over (read from L2).
  double interleaved(const std::vector<ml::host_abi::key_ptrs>& refs, bool repeat) {
    std::vector<float> scores(static_cast<std::size_t>(tile::keys));
    const auto n = static_cast<std::int64_t>(refs.size());
    const int vectors = padded / kernels.lanes;
    const ml::host_abi::tile_buffers b = decoded.buffers();
    // Group g's keys in slots (g % 2) x 16.
    auto decode_at = [&](std::int64_t i, std::int64_t count, std::int64_t slot) {
      kernels.decode_keys(
          refs.data() + (repeat ? i % hb::key_tile : i), count, ml::host_abi::compact_rows::none,
          {b.valid + slot, b.f32 + slot * 128, b.i8 + slot * 128, b.i8_scales + slot * 4, b.fold,
           b.fold_scales, b.bf16, b.bf16_scales, b.compact});
    };
    const double t0 = cpu_seconds();
    if constexpr (!hb::int8_path<Format>) {
      const auto k = kernels.f32_kernel(vectors);
      const ml::host_abi::f32_query query{qt.data(), w_row.data(), static_cast<int>(H), padded};
      decode_at(0, std::min<std::int64_t>(k.keys, n), 0);
      for (std::int64_t t = 0, g = 0; t < n; t += k.keys, ++g) {
        if (t + k.keys < n)
          decode_at(t + k.keys, std::min<std::int64_t>(k.keys, n - t - k.keys), (g + 1) % 2 * 16);
        k.fn(query, {decoded.f32.data() + g % 2 * 16 * 128}, scores.data() + t % hb::key_tile);
      }
    }
    const double s = cpu_seconds() - t0;
    if (scores[0] == 12345.0f) std::puts("");
    return s / n;
  }
  // The score kernel over the decoded tile, `passes` times.
  double score(int passes) {
    std::vector<float> scores(static_cast<std::size_t>(tile::keys));
    const int vectors = padded / kernels.lanes;
    const double t0 = cpu_seconds();
    if constexpr (hb::int8_path<Format>) {
      const auto k = compact ? kernels.fold_kernel(vectors) : kernels.i8_kernel(vectors);
      const ml::host_abi::i8_query query =
          compact ? ml::host_abi::i8_query{c_words.data(), c_start.data(),      c_scale.data(),
                                           w_row.data(),   static_cast<int>(H), padded}
                  : ml::host_abi::i8_query{q_words.data(), q_start.data(),      q_scale.data(),
                                           w_row.data(),   static_cast<int>(H), padded};
      const std::uint8_t* codes =
          compact && !kernels.compact_reads_per_block ? decoded.fold.data() : decoded.i8.data();
      const float* key_scales = compact ? decoded.fold_scales.data() : decoded.i8_scales.data();
      const int scale_words = compact ? 5 : 4;
      for (int p = 0; p < passes; ++p)
        for (std::int64_t t = 0; t < hb::key_tile; t += k.keys)
          k.fn(query, {codes + t * 128, key_scales + t * scale_words}, scores.data() + t);
    } else {
      const auto k = kernels.f32_kernel(vectors);
      const ml::host_abi::f32_query query{qt.data(), w_row.data(), static_cast<int>(H), padded};
      for (int p = 0; p < passes; ++p)
        for (std::int64_t t = 0; t < hb::key_tile; t += k.keys)
          k.fn(query, {decoded.f32.data() + t * 128}, scores.data() + t);
    }
    const double s = cpu_seconds() - t0;
    if (scores[0] == 12345.0f) std::puts("");
    return s / (static_cast<double>(passes) * hb::key_tile);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each experiment's seconds per key, the median over `rounds` of its ratio to the peak timed
// right before it.
template <class Format>
void run_format(const char* name, std::int64_t h, int rounds) {
  experiment<Format> e(h);
  struct layout {
    const char* name;
    std::size_t scatter_over;
    int advice;
  };
  const layout layouts[] = {{"contiguous", 0, MADV_NOHUGEPAGE},
                            {"scattered 4K", std::size_t{4} << 30, MADV_NOHUGEPAGE},
                            {"scattered 2M", std::size_t{4} << 30, MADV_HUGEPAGE}};
  const std::int64_t aheads[] = {0, 8, 32, 128};
  for (const layout& l : layouts) {
    laid_out_cache<Format> c(e.B, e.blocks, l.scatter_over, l.advice);
    const auto refs = keys_in_call_order(c, e.B, e.context);
    std::vector<double> call, dec, dec_l2, sc, pf[4], inter, inter_l2;
    e.call(c);  // warm
    for (int r = 0; r < rounds; ++r) {
      const auto ratio = [&](double seconds_per_key) {
        return e.flop_per_key() / seconds_per_key / 1e9 / fma_peak();
      };
      call.push_back(ratio(e.call(c)));
      dec.push_back(ratio(e.decode(refs)));
      dec_l2.push_back(ratio(e.decode(refs, true)));
      sc.push_back(ratio(e.score(200)));
      if (!hb::int8_path<Format>) {
        inter.push_back(ratio(e.interleaved(refs, false)));
        inter_l2.push_back(ratio(e.interleaved(refs, true)));
      }
      for (int a = 0; a < 4; ++a) pf[a].push_back(ratio(e.decode_prefetch(refs, aheads[a])));
    }
    const double peak = fma_peak();
    const auto ns = [&](double of_peak) { return e.flop_per_key() / (of_peak * peak); };
    const double d = median(dec), s = median(sc);
    std::printf(
        "%-13s H%-3lld %-13s call %6.1f ns/key %5.1f%% | score %6.1f ns %5.1f%% | decode "
        "%5.1f ns (L2 %4.1f) | decode+score %5.1f%% | decode, prefetch 0/8/32/128 ahead: %5.1f "
        "%5.1f "
        "%5.1f %5.1f ns | by group %5.1f%% (L2 %5.1f%%, decode L2 + score %5.1f%%)\n",
        (std::string(name) + (e.compact ? "*" : "")).c_str(), static_cast<long long>(h), l.name,
        ns(median(call)), 100 * median(call), ns(s), 100 * s, ns(d), ns(median(dec_l2)),
        100 / (1 / d + 1 / s), ns(median(pf[0])), ns(median(pf[1])), ns(median(pf[2])),
        ns(median(pf[3])), inter.empty() ? 0.0 : 100 * median(inter),
        inter.empty() ? 0.0 : 100 * median(inter_l2), 100 / (1 / median(dec_l2) + 1 / s));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::string only = argc > 2 ? argv[2] : "";
  const int heads = argc > 3 ? std::atoi(argv[3]) : 0;
  if (std::string(ml::host_isa_name()).rfind("avx", 0) != 0) {
    std::printf("mqalogits_decode_limits: the host path is %s; the peak loops need AVX2 + FMA\n",
                ml::host_isa_name());
    return 0;
  }
  std::printf(
      "host path %s, paged decode 64 x 8192 (next_n 1, page 64), 1 thread, %d rounds, "
      "peak = %s chains, %.0f GFLOP/s\n",
      ml::host_isa_name(), rounds, bench::peak_instruction(), fma_peak());
  for (const int h : {64, 32}) {
    if (heads && h != heads) continue;
    if (only.empty() || only == "mxfp8") run_format<ml::mxfp8>("MXFP8", h, rounds);
    if (only.empty() || only == "fp8_per_token")
      run_format<ml::fp8_per_token>("fp8_per_token", h, rounds);
    if (only.empty() || only == "mxfp4") run_format<ml::mxfp4>("MXFP4", h, rounds);
  }
}
#else
int main() {
  std::puts("mqalogits_decode_limits: needs an x86-64 build (its peak loops are AVX2 and AVX-512)");
}
#endif
