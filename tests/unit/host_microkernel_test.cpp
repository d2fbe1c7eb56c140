// Every micro-kernel path the build compiles (the ladder's compiled_isas: portable always, NEON
// on ARM64, AVX2 and AVX-512 when the target has them) against the reference and against each
// other: the exact decoders code by code, each ISA's int8 dot product in its own encoding, the
// fp32 and int8 score kernels over head counts that exercise every register blocking and tail,
// the three plan shapes, NaN propagation, block scales whose product fits where one of them
// alone would overflow, and the generic fp32 path for a format the backend has never heard of.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

#define MQALOGITS_STRINGIZE_(x) #x
#define MQALOGITS_STRINGIZE(x) MQALOGITS_STRINGIZE_(x)

namespace {

namespace ml = mqalogits;
namespace hb = mqalogits::host_backend;

template <class I>
std::string isa_label() {
  return std::string("isa ") + I::name;
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

// Runs the whole kernel on instruction set I through the backend's driver.
template <class I, class Format, class Plan, class W, class O>
void run_on(const ml::rows_view<Format>& q, const Plan& plan, ml::matrix_view<const W> w,
            ml::logits_buffer<O>& out, bool clean = true) {
  ml::logits_row_output<O> output(out.view(), clean);
  hb::run_with<I>(q, plan, w, output, ml::options{},
                  ml::backend_kernels<ml::backend::host>::work_tiling);
}

// Row `row` of the e4m3 decoder cases: every code, 128 to a row (rows 0 and 1, which hold the
// NaN codes 0x7F and 0xFF), or the same rows with their NaN code replaced by 0x7E (rows 2 and 3:
// decoders may take a faster route for rows without NaN codes).
void fill_e4m3_row(std::vector<std::uint8_t>& data, int row) {
  for (int i = 0; i < 128; ++i) {
    data[i] = static_cast<std::uint8_t>(row % 2 * 128 + i);
    if (row >= 2 && (data[i] & 0x7F) == 0x7F) data[i] ^= 1;
  }
}

template <class I>
void check_decoders() {
  INFO(isa_label<I>());
  std::vector<std::uint8_t> data(128);
  const std::uint8_t scale_bytes[] = {0, 1, 100, 127, 140, 200, 254, 255};
  for (int row = 0; row < 4; ++row) {
    fill_e4m3_row(data, row);
    for (std::uint8_t s : scale_bytes) {
      const std::uint8_t scales[4] = {s, static_cast<std::uint8_t>(255 - s), 127, s};
      float got[128], want[128];
      hb::decode_key_f32<I, ml::mxfp8>(data.data(), scales, got);
      ml::mxfp8::decode_row(data.data(), scales, want);
      for (int i = 0; i < 128; ++i) {
        INFO("MXFP8 code " << int(data[i]) << " scale byte " << int(scales[i / 32]));
        CHECK(same_float(got[i], want[i]));
      }
    }
  }
  // FP8 per-token: every code under row scales that are ordinary, subnormal, huge (products
  // overflow), zero, negative, infinite and NaN, and without scales (null: 1).
  const float row_scales[] = {1.0f,
                              0.3f,
                              -2.5f,
                              1e-40f,
                              3e38f,
                              0.0f,
                              -0.0f,
                              1e-30f,
                              std::numeric_limits<float>::infinity(),
                              7.1e-3f,
                              std::numeric_limits<float>::quiet_NaN()};
  for (int row = 0; row < 4; ++row) {
    fill_e4m3_row(data, row);
    for (float s : row_scales) {
      std::uint8_t scale_bytes_of[4];
      std::memcpy(scale_bytes_of, &s, 4);
      for (const std::uint8_t* sp : {static_cast<const std::uint8_t*>(scale_bytes_of),
                                     static_cast<const std::uint8_t*>(nullptr)}) {
        float got[128], want[128];
        hb::decode_key_f32<I, ml::fp8_per_token>(data.data(), sp, got);
        ml::fp8_per_token::decode_row(data.data(), sp, want);
        for (int i = 0; i < 128; ++i) {
          INFO("FP8 per-token code " << int(data[i]) << " scale " << (sp ? s : 1.0f));
          CHECK(same_float(got[i], want[i]));
        }
      }
    }
  }
  // MXFP4: every byte value in every position of a block, in I's int8 key encoding (and the
  // signed query codes), block order; a masked key is all zero in that encoding.
  std::mt19937_64 rng(7);
  const int offset = I::int8::offset_keys ? 12 : 0;
  for (int round = 0; round < 8; ++round) {
    std::uint8_t packed[64], scales[4];
    for (int i = 0; i < 64; ++i) packed[i] = static_cast<std::uint8_t>((round * 64 + i) * 37 % 256);
    for (auto& s : scales) s = static_cast<std::uint8_t>(rng() % 256);
    std::uint8_t got[128], query[128];
    float ks[4];
    hb::decode_key_i8<I>(packed, scales, got, ks);
    I::decode_e2m1_doubled(packed, hb::same_codes<128>(hb::query_code), query);
    for (int b = 0; b < 4; ++b) {
      CHECK(same_float(ks[b], ml::ue8m0_values[scales[b]]));
      for (int j = 0; j < 16; ++j) {
        const std::uint8_t byte = packed[b * 16 + j];
        INFO("MXFP4 byte " << int(byte) << " block " << b << " position " << j);
        const int lo = ml::float_e2m1::decode_doubled(byte & 0xF);
        const int hi = ml::float_e2m1::decode_doubled(byte >> 4);
        CHECK(std::int8_t(got[b * 32 + j] - offset) == lo);
        CHECK(std::int8_t(got[b * 32 + 16 + j] - offset) == hi);
        CHECK(std::int8_t(query[b * 32 + j]) == lo);
        CHECK(std::int8_t(query[b * 32 + 16 + j]) == hi);
      }
    }
  }
  std::uint8_t masked[128];
  float masked_scales[4];
  hb::masked_key_i8<I>(masked, masked_scales);
  for (int i = 0; i < 128; ++i) CHECK(int(masked[i]) - offset == 0);
  for (float f : masked_scales) CHECK(f == 0.0f);
}

// I's dot4 on every pair of codes its encoding stores: keys from I::int8::key_code (unsigned
// bytes when the encoding offsets keys, signed otherwise), queries signed doubled codes, four
// per 32-bit lane, lanes independent, added to the accumulator.
template <class I>
void check_dot4() {
  INFO(isa_label<I>());
  constexpr int L = I::lanes;
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    alignas(64) std::int32_t acc[L], q[L], out[L];
    std::uint8_t k[4];
    for (auto& b : k) b = I::int8::key_code[rng() % 16];
    if (round < 16) k[0] = k[1] = k[2] = k[3] = I::int8::key_code[round];  // every key code
    for (int l = 0; l < L; ++l) {
      acc[l] = static_cast<std::int32_t>(rng() % 20001) - 10000;
      std::uint8_t qb[4];
      for (auto& b : qb) b = hb::query_code[rng() % 16];
      if (round < 16) qb[0] = qb[1] = qb[2] = qb[3] = hb::query_code[(round + l) % 16];
      std::memcpy(&q[l], qb, 4);
    }
    typename I::vi r = I::dot4(I::loadi(acc), I::broadcast4(k), I::loadi(q));
    std::memcpy(out, &r, sizeof out);
    for (int l = 0; l < L; ++l) {
      std::int32_t want = acc[l];
      for (int b = 0; b < 4; ++b) {
        const std::uint8_t qb =
            static_cast<std::uint8_t>(static_cast<std::uint32_t>(q[l]) >> 8 * b);
        want += (I::int8::offset_keys ? int(k[b]) : int(std::int8_t(k[b]))) * std::int8_t(qb);
      }
      INFO("round " << round << " lane " << l);
      CHECK(out[l] == want);
    }
  }
}

// ISAs that sum a block in int16 (no VNNI): a whole block, 8 steps of dot4_int16 from the
// block's start (i8_int16_start), widened once, equals the block start plus its 32 products in
// int32. Each lane holds its own query block; the first rounds take the extremes: every query
// code +-12 (starts of -+4608) against keys of every code, then the largest pairs of both signs.
template <class I>
void check_int16_block_sums() {
  if constexpr (hb::int16_block_sums<I>) {
    INFO(isa_label<I>() << ": int16 block sums");
    constexpr int L = I::lanes;
    std::mt19937_64 rng(13);
    const std::uint8_t plus12 = hb::query_code[7], minus12 = hb::query_code[15];
    for (int round = 0; round < 100; ++round) {
      alignas(64) std::int32_t q[8][L], start[L], out[L];
      std::uint8_t k[8][4];
      for (int s = 0; s < 8; ++s)
        for (auto& b : k[s]) {
          b = I::int8::key_code[rng() % 16];
          if (round < 16) b = I::int8::key_code[round];
          if (round == 16) b = I::int8::key_code[7];   // +12
          if (round == 17) b = I::int8::key_code[15];  // -12
        }
      for (int l = 0; l < L; ++l) {
        std::int32_t sum = 0;
        for (int s = 0; s < 8; ++s) {
          std::uint8_t qb[4];
          for (auto& b : qb) {
            b = hb::query_code[rng() % 16];
            if (round < 18) b = (l + round) % 2 ? plus12 : minus12;
            sum += std::int8_t(b);
          }
          std::memcpy(&q[s][l], qb, 4);
        }
        start[l] = I::int8::block_start(sum);
      }
      alignas(64) std::int32_t packed[L];
      for (int l = 0; l < L; ++l) packed[l] = hb::i8_int16_start(start[l]);
      typename I::vi acc = I::loadi(packed);
      for (int s = 0; s < 8; ++s) acc = I::dot4_int16(acc, I::broadcast4(k[s]), I::loadi(q[s]));
      const typename I::vi r = I::widen_int16(acc);
      std::memcpy(out, &r, sizeof out);
      for (int l = 0; l < L; ++l) {
        std::int32_t want = start[l];
        for (int s = 0; s < 8; ++s)
          for (int b = 0; b < 4; ++b) {
            const auto qb = static_cast<std::uint8_t>(static_cast<std::uint32_t>(q[s][l]) >> 8 * b);
            want +=
                (I::int8::offset_keys ? int(k[s][b]) : int(std::int8_t(k[s][b]))) * std::int8_t(qb);
          }
        INFO("round " << round << " lane " << l << " start " << start[l]);
        CHECK(out[l] == want);
      }
    }
  }
}

// Dense logits of instruction set I for H heads against ref::dense; also returns the output.
template <class I, class Format, class O>
ml::logits_buffer<O> dense_case(std::uint64_t seed, std::int64_t H, std::int64_t num_q,
                                std::int64_t N, int nan_codes = 0, int nan_scales = 0) {
  std::mt19937_64 rng(seed);
  ref::rand::code_options codes;
  codes.nan_codes = nan_codes;
  codes.nan_scales = nan_scales;
  auto q = ref::rand::rows<Format>(rng, num_q * H, codes);
  auto kv = ref::rand::rows<Format>(rng, N, codes);
  auto w = ref::rand::weights<float>(rng, num_q, H);
  std::vector<std::int32_t> ks(num_q), ke(num_q);
  for (std::int64_t r = 0; r < num_q; ++r) {
    ks[r] = static_cast<std::int32_t>(ref::rand::uniform(rng, -3, N / 3));
    ke[r] = static_cast<std::int32_t>(ref::rand::uniform(rng, ks[r], N + 5));
  }
  const std::int64_t cols = N;
  const ml::dense_plan<Format> plan(kv.view(), ks, ke, cols);
  ml::logits_buffer<O> out(num_q, cols);
  run_on<I>(q.view(), plan, w.view(), out);
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                                   std::span<const std::int32_t>(ke), cols);
  INFO(isa_label<I>() << ", " << Format::name << ", H = " << H << ", num_q = " << num_q
                      << ", N = " << N << ", seed " << seed);
  CHECK(check::valid_count(expected) > 0);
  CHECK(check::against(out, expected) == "");
  if (nan_codes + nan_scales > 0) CHECK(check::nan_count(expected) > 0);
  return out;
}

template <class I, class Format>
void check_dense_all_heads() {
  // 1..128 heads: every blocking (HC x NK) and every tail chunk of 8- and 16-lane vectors.
  for (std::int64_t H : {1, 3, 8, 9, 16, 17, 24, 32, 40, 48, 63, 64, 80, 100, 128}) {
    auto out = dense_case<I, Format, float>(100 + static_cast<std::uint64_t>(H), H, 5, 61);
    auto portable =
        dense_case<hb::isa_portable, Format, float>(100 + static_cast<std::uint64_t>(H), H, 5, 61);
    // Paths may sum in different orders; both meet the accuracy bound above, and agree closely.
    for (std::int64_t r = 0; r < out.rows(); ++r)
      for (std::int64_t c = 0; c < out.cols(); ++c) {
        const double a = out(r, c), b = portable(r, c);
        if (std::isinf(a) || std::isnan(a)) {
          INFO(isa_label<I>() << " H = " << H << " [" << r << "][" << c << "]");
          CHECK((std::isnan(b) ? std::isnan(a) : a == b));
        } else {
          INFO(isa_label<I>() << " H = " << H << " [" << r << "][" << c << "] " << a << " vs "
                              << b);
          CHECK(std::fabs(a - b) <= 1e-4 * (1.0 + std::fabs(b)) * H);
        }
      }
  }
  dense_case<I, Format, ml::bf16>(5, 64, 9, 300, 3, 2);  // NaN codes / scales reach valid columns
}

template <class I, class Format>
void check_paged_and_sparse() {
  std::mt19937_64 rng(99);
  const std::int64_t H = 64, B = 3, next_n = 2, page_kv = 64, pages = 40;
  auto q = ref::rand::rows<Format>(rng, B * next_n * H);
  auto w = ref::rand::weights<ml::bf16>(rng, B * next_n, H);
  auto cache = ref::rand::paged_cache<Format>(rng, pages, page_kv);
  auto lens = ref::rand::context_lens(rng, B, next_n, 700, 1);
  const std::int64_t max_blocks = 12, max_len = max_blocks * page_kv;
  auto table = ref::rand::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto sched = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3);
  const ml::paged_plan<Format> plan(cache.view(), table.view(), lens.view(), max_len, sched);
  ml::logits_buffer<float> out(B * next_n, max_len);
  run_on<I>(q.view(), plan, w.view(), out);
  const auto expected =
      ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), max_len);
  {
    INFO(isa_label<I>() << ", " << Format::name << ", paged B = 3, next_n = 2, H = 64");
    CHECK(check::valid_count(expected) > 0);
    CHECK(check::against(out, expected) == "");
  }

  const std::int64_t N = 900, rows = 7, cap = 24, blk = 16;
  auto kv = ref::rand::rows<Format>(rng, N);
  auto q2 = ref::rand::rows<Format>(rng, rows * H);
  auto w2 = ref::rand::weights<float>(rng, rows, H);
  std::vector<std::int32_t> ks(rows), ke(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    ks[r] = static_cast<std::int32_t>(ref::rand::uniform(rng, 0, 100));
    ke[r] = static_cast<std::int32_t>(ref::rand::uniform(rng, ks[r], N));
  }
  auto idx = ref::rand::sparse_indices(rng, rows, cap, N / blk);
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), blk);
  const ml::sparse_plan<Format> splan(kv.view(), meta);
  ml::logits_buffer<float> sout(rows, cap * blk);
  run_on<I>(q2.view(), splan, w2.view(), sout);
  const auto sexp = ref::sparse(q2.view(), kv.view(), w2.view(), std::span<const std::int32_t>(ks),
                                std::span<const std::int32_t>(ke), N, idx.view(), blk);
  INFO(isa_label<I>() << ", " << Format::name << ", sparse rows = 7, cap = 24, B = 16, H = 64");
  CHECK(check::valid_count(sexp) > 0);
  CHECK(check::against(sout, sexp) == "");
}

// A format the backend knows nothing about: int8 codes times one fp32 scale per row, scales
// optional (null = 1), like the per-token FP8 format. It must run through the generic path.
// Its data codec: one signed byte per element.
struct int8_codes {
  [[maybe_unused]] static constexpr const char* name = "int8";
  [[maybe_unused]] static constexpr float max_finite = 127.0f;
  static constexpr int bits = 8;
  static constexpr bool doubled_is_int8 = false;
  static constexpr float element(const std::uint8_t* data, int i) {
    return static_cast<float>(static_cast<std::int8_t>(data[i]));
  }
  static constexpr void store(std::uint8_t* data, int i, std::uint8_t code) { data[i] = code; }
};
struct toy_int8 : ml::block_scaled<int8_codes, ml::fp32_row_scale, 128> {
  [[maybe_unused]] static constexpr const char* name = "toy int8";
};
static_assert(ml::row_format<toy_int8>);

template <class I>
void check_generic_format() {
  std::mt19937_64 rng(3);
  const std::int64_t H = 20, num_q = 4, N = 50;
  std::vector<std::uint8_t> qd(num_q * H * 128), kd(N * 128);
  std::vector<float> kscale(N);
  for (auto& b : qd) b = static_cast<std::uint8_t>(rng() % 256);
  for (auto& b : kd) b = static_cast<std::uint8_t>(rng() % 256);
  for (auto& s : kscale) s = std::ldexp(1.0f, static_cast<int>(rng() % 5) - 9);
  auto w = ref::rand::weights<float>(rng, num_q, H);
  const ml::rows_view<toy_int8> q(qd.data(), static_cast<const float*>(nullptr), num_q * H);
  const ml::rows_view<toy_int8> kv(kd.data(), kscale.data(), N);
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  const ml::dense_plan<toy_int8> plan(kv, ks, ke, N);
  ml::logits_buffer<float> out(num_q, N);
  run_on<I>(q, plan, w.view(), out);
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t t = 0; t < N; ++t) {
      double exact = 0, mag = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        double dot = 0, m = 0;
        for (int i = 0; i < 128; ++i) {
          const double p = double(std::int8_t(qd[(r * H + h) * 128 + i])) *
                           std::int8_t(kd[t * 128 + i]) * kscale[t];
          dot += p;
          m += std::fabs(p);
        }
        exact += std::max(dot, 0.0) * w(r, h);
        mag += std::fabs(w(r, h)) * m;
      }
      INFO(isa_label<I>() << " generic format, row " << r << " key " << t);
      CHECK(accuracy::within(out(r, t), exact, mag));
    }
}

template <class I>
void check_isa() {
  check_decoders<I>();
  check_dense_all_heads<I, ml::mxfp8>();
  check_dense_all_heads<I, ml::mxfp4>();
  check_paged_and_sparse<I, ml::mxfp8>();
  check_paged_and_sparse<I, ml::mxfp4>();
  check_generic_format<I>();
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("host micro-kernels: every compiled path against the reference",
                        "[host][microkernel]", hb::compiled_isas) {
  check_isa<TestType>();
}

// Head dims 64 and 32 (32 for the FP8 formats) on every compiled path: the decoders, the
// micro-kernels and their register blockings are compiled per head dim.
TEMPLATE_LIST_TEST_CASE("host micro-kernels: head dims 64 and 32 on every compiled path",
                        "[host][microkernel][head_dim]", hb::compiled_isas) {
  using I = TestType;
  for (std::int64_t H : {1, 9, 17, 40, 64}) {
    const auto seed = 300 + static_cast<std::uint64_t>(H);
    dense_case<I, ml::mxfp8::with_head_dim<64>, float>(seed, H, 3, 45);
    dense_case<I, ml::mxfp8::with_head_dim<32>, ml::bf16>(seed, H, 3, 45);
    dense_case<I, ml::mxfp4::with_head_dim<64>, float>(seed, H, 3, 45);
    dense_case<I, ml::fp8_per_token::with_head_dim<64>, ml::bf16>(seed, H, 3, 45);
    dense_case<I, ml::fp8_per_token::with_head_dim<32>, float>(seed, H, 3, 45);
  }
  dense_case<I, ml::mxfp8::with_head_dim<32>, float>(8, 24, 4, 100, 3, 2);  // NaN reaches logits
  check_paged_and_sparse<I, ml::mxfp8::with_head_dim<32>>();
  check_paged_and_sparse<I, ml::mxfp4::with_head_dim<64>>();
  check_paged_and_sparse<I, ml::fp8_per_token::with_head_dim<64>>();

  // MXFP4 rows of 64 whose two block exponents fold (within 2 of each other) and rows that do
  // not, mixed in one key group: the folded and the per-block int8 kernels at D = 64.
  using G = ml::mxfp4::with_head_dim<64>;
  std::mt19937_64 rng(64);
  const std::int64_t H = 12, num_q = 3, N = 50;
  ref::rand::code_options near;
  near.scale_lo = 120;
  near.scale_hi = 122;
  auto q = ref::rand::rows<G>(rng, num_q * H, near);
  auto kv = ref::rand::rows<G>(rng, N, near);
  for (std::int64_t t = 0; t < N; t += 3) kv.scale(t)[1] = 131;      // these keys do not fold
  for (std::int64_t r = 0; r < num_q * H; ++r) q.scale(r)[3] = 255;  // unused: never read
  auto w = ref::rand::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  const ml::dense_plan<G> plan(kv.view(), ks, ke, N);
  ml::logits_buffer<float> out(num_q, N);
  run_on<I>(q.view(), plan, w.view(), out);
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                                   std::span<const std::int32_t>(ke), N);
  INFO(isa_label<I>() << ", MXFP4 D = 64, folded and per-block keys");
  CHECK(check::against(out, expected) == "");
}

TEMPLATE_LIST_TEST_CASE("host micro-kernels: int8 dot products in each ISA's own encoding",
                        "[host][microkernel]", hb::compiled_isas) {
  check_dot4<TestType>();
  check_int16_block_sums<TestType>();
}

// All MXFP4 codes +6 (0x77), Q block scales 2^118, K block scales 2^-118: every product is 36
// and each logit is an ordinary number (4608 per head times its weight), though a block sum
// times the Q scale alone (4608 x 2^116) is past the float range. And an all-zero query under
// the largest scales meets keys under the largest scales: the scale product is past the float
// range, the block sums are 0, the logits exactly 0.
TEMPLATE_LIST_TEST_CASE("host micro-kernels: MXFP4 block scales that only fit together",
                        "[host][microkernel][mxfp4]", hb::compiled_isas) {
  using I = TestType;
  const std::int64_t H = 20, num_q = 3, N = 40;
  std::vector<std::uint8_t> qd(num_q * H * 64, 0x77), kd(N * 64, 0x77);
  std::vector<std::uint8_t> qs(num_q * H * 4, 245), kscale(N * 4, 9);
  std::mt19937_64 rng(5);
  auto w = ref::rand::weights<float>(rng, num_q, H);
  for (std::int64_t h = 0; h < H; ++h) std::fill_n(qd.begin() + (2 * H + h) * 64, 64, 0);
  for (std::int64_t h = 0; h < H; ++h) std::fill_n(qs.begin() + (2 * H + h) * 4, 4, 254);
  for (std::int64_t t = 30; t < N; ++t) std::fill_n(kscale.begin() + t * 4, 4, 254);
  const ml::rows_view<ml::mxfp4> q(qd.data(), qs.data(), num_q * H);
  const ml::rows_view<ml::mxfp4> kv(kd.data(), kscale.data(), N);
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  ke[2] = static_cast<std::int32_t>(N);
  ke[0] = ke[1] = 30;  // rows 0, 1 meet only the 2^-118 keys
  const ml::dense_plan<ml::mxfp4> plan(kv, ks, ke, N);
  ml::logits_buffer<float> out(num_q, N);
  run_on<I>(q, plan, w.view(), out);
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t t = 0; t < ke[r]; ++t) {
      double want = 0, mag = 0;
      if (r < 2)
        for (std::int64_t h = 0; h < H; ++h) {
          want += 4608.0 * w(r, h);
          mag += 4608.0 * std::fabs(w(r, h));
        }
      INFO(isa_label<I>() << " row " << r << " key " << t << ": " << out(r, t) << " vs " << want);
      CHECK(std::isfinite(out(r, t)));
      CHECK(std::fabs(out(r, t) - want) <= 1e-6 * mag);
    }
  const auto expected = ref::dense(q, kv, w.view(), std::span<const std::int32_t>(ks),
                                   std::span<const std::int32_t>(ke), N);
  CHECK(check::against(out, expected) == "");
}

// ---- MXFP4 exponent folding ----

// I's folded decoders, code by code: a key row folds when its 4 block exponents lie within
// fold_spread of their minimum (and inside [fold_min_scale, fold_max_scale]); each block's
// doubled codes are then shifted by its exponent over the minimum, in I's folded key encoding.
template <class I>
void check_fold_decoders() {
  INFO(isa_label<I>());
  std::mt19937_64 rng(17);
  const std::uint8_t patterns[][4] = {
      {127, 127, 127, 127}, {120, 121, 122, 123}, {130, 127, 128, 127}, {66, 69, 67, 68},
      {254, 254, 252, 251}, {127, 131, 127, 127}, {127, 127, 255, 127}, {65, 65, 66, 67},
      {66, 66, 66, 66},     {200, 196, 199, 200}};
  for (const auto& sc : patterns) {
    const int lo = *std::min_element(sc, sc + 4), hi = *std::max_element(sc, sc + 4);
    const bool folds = lo >= hb::fold_min_scale && hi <= hb::fold_max_scale && hi - lo <= 3;
    CHECK((hb::fold_exponent(sc, hb::fold_spread) >= 0) == folds);
    for (int round = 0; round < 4; ++round) {
      std::uint8_t packed[64];
      for (int i = 0; i < 64; ++i)
        packed[i] = static_cast<std::uint8_t>(round == 0 ? (i * 37) % 256 : rng() % 256);
      std::uint8_t got[128];
      float scale = -1.0f;
      INFO("scales " << int(sc[0]) << " " << int(sc[1]) << " " << int(sc[2]) << " " << int(sc[3]));
      REQUIRE(hb::decode_key_i8_fold<I>(packed, sc, got, &scale) == folds);
      if (!folds) continue;
      CHECK(same_float(scale, ml::ue8m0_values[lo]));
      for (int b = 0; b < 4; ++b)
        for (int j = 0; j < 16; ++j) {
          const std::uint8_t byte = packed[b * 16 + j];
          const int shift = sc[b] - lo;
          const int k_lo = ml::float_e2m1::decode_doubled(byte & 0xF) * (1 << shift);
          const int k_hi = ml::float_e2m1::decode_doubled(byte >> 4) * (1 << shift);
          const int off = I::int8::fold_offset;
          INFO("byte " << int(byte) << " block " << b);
          CHECK((I::int8::offset_keys ? int(got[b * 32 + j]) - off
                                      : int(std::int8_t(got[b * 32 + j]))) == k_lo);
          CHECK((I::int8::offset_keys ? int(got[b * 32 + 16 + j]) - off
                                      : int(std::int8_t(got[b * 32 + 16 + j]))) == k_hi);
        }
    }
  }
  // Query rows: folded only when every head folds within I's query spread.
  const int heads = 3, hp = (heads + I::lanes - 1) / I::lanes * I::lanes;
  std::vector<std::uint8_t> qd(heads * 64), qs(heads * 4);
  for (auto& b : qd) b = static_cast<std::uint8_t>(rng() % 256);
  for (int spread = 0; spread <= 4; ++spread) {
    for (int h = 0; h < heads; ++h)
      for (int b = 0; b < 4; ++b)
        qs[h * 4 + b] = static_cast<std::uint8_t>(120 + h + (b == (h + 1) % 4 ? spread : 0));
    const ml::rows_view<ml::mxfp4> q(qd.data(), qs.data(), heads);
    std::vector<std::int32_t> data(32 * hp, -1), start(hp, -1);
    std::vector<float> scale(hp, -1.0f);
    const bool folds =
        hb::decode_q_i8_fold<I>(q, 0, heads, hp, data.data(), start.data(), scale.data());
    INFO("query spread " << spread);
    REQUIRE(folds == (spread <= I::fold_query_spread));
    if (!folds) continue;
    for (int h = 0; h < hp; ++h) {
      std::int32_t sum = 0;
      for (int e = 0; e < 128; ++e) {
        std::int8_t byte;
        const int word = hb::i8_query_word<I::lanes>(32, e / 4, h);
        std::memcpy(&byte, reinterpret_cast<const std::uint8_t*>(&data[word]) + e % 4, 1);
        int want = 0;
        if (h < heads) {  // stored block order: per block, 16 low nibbles then 16 high ones
          const int b = e / 32, p = e % 32;
          const std::uint8_t packed = qd[h * 64 + b * 16 + p % 16];
          want = ml::float_e2m1::decode_doubled(p < 16 ? packed & 0xF : packed >> 4) *
                 (1 << (qs[h * 4 + b] - (120 + h)));
        }
        CHECK(int(byte) == want);
        sum += want;
      }
      CHECK(start[h] == I::int8::fold_start(sum));
      CHECK(same_float(scale[h], h < heads ? 0.25f * ml::ue8m0_values[120 + h] : 0.0f));
    }
  }
}

// The compact int8 kernel (folded, or relative on paths that sum blocks in int16) against the
// per-block one, bit for bit, through the whole driver: key t and key t + 1 hold the same codes
// and the same values, their last block all zeros; key t's zero block has an exponent in the
// row's range (it has the compact form), key t + 1's one that keeps it out (4 above the others
// for folding, 15 for the relative form; the zeros make the scale immaterial). So both give the
// same logits whichever path computed them, and groups mix compact and per-block keys. Query
// rows likewise: row 2r has the compact form, row 2r + 1 does not (a block exponent 124 keeps
// it from folding, 200 from the relative range); and a second round where every row has it
// (the tiles then skip the per-block form of compact keys, which mixed groups still run
// through).
template <class I>
void check_fold_against_per_block() {
  INFO(isa_label<I>());
  constexpr bool relative = hb::relative_rows<I>;
  auto compact_key = [](const std::uint8_t* sc) {
    if constexpr (hb::relative_rows<I>)
      return hb::rel_exponent(sc) >= 0;
    else
      return hb::fold_exponent(sc, hb::fold_spread) >= 0;
  };
  std::mt19937_64 rng(23);
  for (const bool every_row_folds : {false, true})
    for (const std::int64_t H : {1, 5, 16, 20, 64}) {
      INFO("every row folds: " << every_row_folds);
      const std::int64_t num_q = 4, N = 46;
      std::vector<std::uint8_t> qd(num_q * H * 64), qs(num_q * H * 4), kd(N * 64), kscale(N * 4);
      for (auto& b : qd) b = static_cast<std::uint8_t>(rng() % 256);
      for (auto& b : kd) b = static_cast<std::uint8_t>(rng() % 256);
      for (std::int64_t r = 0; r < num_q; r += 2)
        for (std::int64_t h = 0; h < H; ++h) {
          std::uint8_t* row = qd.data() + (r * H + h) * 64;
          std::fill_n(row + 48, 16, 0);  // block 3: zeros
          std::copy_n(row, 64, qd.begin() + ((r + 1) * H + h) * 64);
          for (int b = 0; b < 4; ++b) {  // spread <= 2: folds on every ISA
            const auto e = static_cast<std::uint8_t>(120 + (b + h) % 3);
            qs[(r * H + h) * 4 + b] = e;
            qs[((r + 1) * H + h) * 4 + b] =
                b == 3 && !every_row_folds ? static_cast<std::uint8_t>(relative ? 200 : 124) : e;
          }
        }
      for (std::int64_t t = 0; t < N; t += 2) {
        std::fill_n(kd.begin() + t * 64 + 48, 16, 0);
        std::copy_n(kd.begin() + t * 64, 64, kd.begin() + (t + 1) * 64);
        for (int b = 0; b < 4; ++b) {  // spread 3 (or 0 for every fourth pair)
          const auto e = static_cast<std::uint8_t>(124 + (t % 8 == 0 ? 0 : (b + t / 2) % 4));
          kscale[t * 4 + b] = e;
          kscale[(t + 1) * 4 + b] = e;
        }
        kscale[(t + 1) * 4 + 3] = static_cast<std::uint8_t>(
            *std::min_element(kscale.begin() + (t + 1) * 4, kscale.begin() + (t + 1) * 4 + 3) +
            (relative ? 15 : 4));
      }
      CHECK(compact_key(kscale.data() + 8));
      CHECK_FALSE(compact_key(kscale.data() + 12));
      std::vector<float> wf(num_q * H);
      for (auto& x : wf) x = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f;
      for (std::int64_t r = 0; r < num_q; r += 2)  // row pairs share their weights too
        std::copy_n(wf.begin() + r * H, H, wf.begin() + (r + 1) * H);
      const ml::matrix_view<const float> w(wf.data(), num_q, H, H);
      const ml::rows_view<ml::mxfp4> q(qd.data(), qs.data(), num_q * H);
      const ml::rows_view<ml::mxfp4> kv(kd.data(), kscale.data(), N);
      std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
      ks[0] = ks[1] = 3;  // groups start at odd keys too (columns count from ks)
      const ml::dense_plan<ml::mxfp4> plan(kv, ks, ke, N);
      ml::logits_buffer<float> out(num_q, N);
      run_on<I>(q, plan, w, out);
      auto at = [&](std::int64_t r, std::int64_t t) { return out(r, t - ks[r]); };
      int nonzero = 0;
      for (std::int64_t r = 0; r < num_q; r += 2)
        for (std::int64_t t = 4; t < N; t += 2) {
          INFO("H = " << H << " row " << r << " key " << t);
          CHECK(same_float(at(r, t), at(r, t + 1)));
          CHECK(same_float(at(r, t), at(r + 1, t)));
          CHECK(same_float(at(r + 1, t), at(r + 1, t + 1)));
          nonzero += at(r, t) != 0.0f;
        }
      CHECK(nonzero > 0);
      const auto expected = ref::dense(q, kv, w, std::span<const std::int32_t>(ks),
                                       std::span<const std::int32_t>(ke), N);
      CHECK(check::against(out, expected) == "");
    }
}

// ---- MXFP4 relative form (paths whose per-block kernel sums in int16) ----

// The relative decoders: a key row has the form when its block exponents lie in [rel_min_scale,
// rel_max_scale] within rel_spread of their minimum; it keeps the per-block codes, and its words
// are the multipliers 2^(e_b - e_min) in both int16 halves, then the base scale 2^(e_min - 127).
// A query row has it when every head's exponents lie in the range (its kernel then reads the
// per-block form).
template <class I>
void check_rel_decoders() {
  INFO(isa_label<I>());
  const std::uint8_t patterns[][4] = {
      {127, 127, 127, 127}, {100, 114, 107, 100}, {100, 115, 107, 100}, {87, 90, 101, 87},
      {86, 90, 91, 92},     {167, 160, 153, 167}, {168, 160, 160, 160}, {127, 127, 255, 127},
      {0, 0, 0, 0},         {254, 250, 250, 250}, {153, 167, 160, 155}};
  for (const auto& sc : patterns) {
    const int lo = *std::min_element(sc, sc + 4), hi = *std::max_element(sc, sc + 4);
    const bool has = lo >= hb::rel_min_scale && hi <= hb::rel_max_scale && hi - lo <= 14;
    INFO("scales " << int(sc[0]) << " " << int(sc[1]) << " " << int(sc[2]) << " " << int(sc[3]));
    CHECK((hb::rel_exponent(sc) >= 0) == has);
    float words[5] = {-1, -1, -1, -1, -1};
    REQUIRE(hb::rel_key_scales(sc, words) == has);
    if (!has) {
      for (const float x : words) CHECK(x == -1.0f);
      continue;
    }
    for (int b = 0; b < 4; ++b) {
      std::int32_t m;
      std::memcpy(&m, words + b, 4);
      CHECK(m == (1 << (sc[b] - lo)) * 0x00010001);
    }
    CHECK(same_float(words[4], ml::ue8m0_values[lo]));
  }
  // Query rows: every head in the range (also without scales: 1), or one block out of it.
  const int heads = 3;
  std::vector<std::uint8_t> qd(heads * 64), qs(heads * 4);
  for (const int odd : {87, 167, 86, 168, 255}) {
    for (int i = 0; i < heads * 4; ++i) qs[i] = static_cast<std::uint8_t>(100 + 5 * i);
    qs[7] = static_cast<std::uint8_t>(odd);
    for (const bool scaled : {true, false}) {
      const ml::rows_view<ml::mxfp4> q(qd.data(), scaled ? qs.data() : nullptr, heads);
      INFO("odd exponent " << odd << (scaled ? "" : ", no scales"));
      CHECK(hb::q_rows_relative(q, 0, heads) ==
            (!scaled || (odd >= hb::rel_min_scale && odd <= hb::rel_max_scale)));
      CHECK(hb::q_rows_relative(q, 0, 1));  // head 0 alone is in range
    }
  }
}

// The relative kernel against the per-block one, bit for bit, at the blocking the path picks for
// each head count: random codes, and keys whose codes are all +6 or all -6 (a block's largest
// sums), under block exponents across the form's whole range with spreads up to 14.
template <class I>
void check_rel_kernel() {
  INFO(isa_label<I>());
  std::mt19937_64 rng(29);
  constexpr int D = 128, words = hb::i8_compact_scale_words<D>;
  for (const int H : {1, 5, 8, 16, 20, 24, 64}) {
    const int hp = (H + I::lanes - 1) / I::lanes * I::lanes, N = 48, padded_n = N + 16;
    std::vector<std::uint8_t> qd(H * 64), qs(H * 4), kd(padded_n * 64), kscale(padded_n * 4);
    for (auto& b : qd) b = static_cast<std::uint8_t>(rng() % 256);
    for (auto& e : qs) e = static_cast<std::uint8_t>(hb::rel_min_scale + rng() % 81);
    for (int t = 0; t < padded_n; ++t) {
      const std::uint8_t fill = t % 7 == 1 ? 0x77 : t % 7 == 2 ? 0xFF : 0;  // all +6 / all -6
      for (int i = 0; i < 64; ++i)
        kd[t * 64 + i] = fill ? fill : static_cast<std::uint8_t>(rng() % 256);
      const int lo = hb::rel_min_scale + static_cast<int>(rng() % 67);  // up to 153 = 167 - 14
      for (int b = 0; b < 4; ++b)
        kscale[t * 4 + b] =
            static_cast<std::uint8_t>(b == t % 4                       ? lo
                                      : b == (t + 1) % 4 && t % 3 == 0 ? lo + 14
                                                                       : lo + rng() % 15);
    }
    const ml::rows_view<ml::mxfp4> q(qd.data(), qs.data(), H);
    std::vector<std::int32_t> data(32 * hp), start(4 * hp);
    std::vector<float> scale(4 * hp), w(hp, 0.0f);
    for (int h = 0; h < H; ++h) w[h] = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f;
    REQUIRE(hb::q_rows_relative(q, 0, H));
    hb::decode_q_i8<I>(q, 0, H, hp, data.data(), start.data(), scale.data());
    const ml::host_abi::i8_query query{data.data(), start.data(), scale.data(), w.data(), H, hp};
    std::vector<std::uint8_t> codes(padded_n * D);
    std::vector<float> ks(padded_n * 4), kw(padded_n * words);
    for (int t = 0; t < padded_n; ++t) {
      hb::decode_key_i8<I>(kd.data() + t * 64, kscale.data() + t * 4, codes.data() + t * D,
                           ks.data() + t * 4);
      REQUIRE(hb::rel_key_scales(kscale.data() + t * 4, kw.data() + t * words));
    }
    const auto per_block = hb::select_kernel<I, hb::i8_path<D>>(hp / I::lanes);
    const auto rel = hb::select_kernel<I, hb::i8_rel_path<D>>(hp / I::lanes);
    std::vector<float> want(padded_n), got(padded_n);
    for (int t = 0; t < N; t += per_block.keys)
      per_block.fn(query, {codes.data() + t * D, ks.data() + t * 4}, want.data() + t);
    for (int t = 0; t < N; t += rel.keys)
      rel.fn(query, {codes.data() + t * D, kw.data() + t * words}, got.data() + t);
    int nonzero = 0;
    for (int t = 0; t < N; ++t) {
      INFO("H = " << H << " key " << t);
      CHECK(same_float(got[t], want[t]));
      nonzero += want[t] != 0.0f;
    }
    CHECK(nonzero > N / 4);
  }
}

TEMPLATE_LIST_TEST_CASE("host micro-kernels: MXFP4 relative form, decoders and kernel",
                        "[host][microkernel][mxfp4]", hb::compiled_isas) {
  if constexpr (hb::relative_rows<TestType>) {
    check_rel_decoders<TestType>();
    check_rel_kernel<TestType>();
  } else {
    SUCCEED(isa_label<TestType>() << " folds instead");
  }
}

TEMPLATE_LIST_TEST_CASE("host micro-kernels: MXFP4 exponent folding, decoders and kernel",
                        "[host][microkernel][mxfp4]", hb::compiled_isas) {
  check_fold_decoders<TestType>();
  check_fold_against_per_block<TestType>();
  // Random rows whose exponents fold (narrow range), rows that fold on some ISAs only (range 3:
  // keys everywhere, queries where products of 96 x 96 are exact) and rows that mostly do not:
  // against the reference, and against the portable path.
  for (const int spread : {1, 2, 3, 6}) {
    std::mt19937_64 rng(31 + static_cast<std::uint64_t>(spread));
    ref::rand::code_options codes;
    codes.scale_lo = 124;
    codes.scale_hi = 124 + spread;
    const std::int64_t H = 64, num_q = 9, N = 200;
    auto q = ref::rand::rows<ml::mxfp4>(rng, num_q * H, codes);
    auto kv = ref::rand::rows<ml::mxfp4>(rng, N, codes);
    auto w = ref::rand::weights<float>(rng, num_q, H);
    std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
    const ml::dense_plan<ml::mxfp4> plan(kv.view(), ks, ke, N);
    ml::logits_buffer<float> out(num_q, N), portable(num_q, N);
    run_on<TestType>(q.view(), plan, w.view(), out);
    run_on<hb::isa_portable>(q.view(), plan, w.view(), portable);
    const auto expected =
        ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                   std::span<const std::int32_t>(ke), N);
    INFO(isa_label<TestType>() << " exponent range " << spread);
    CHECK(check::against(out, expected) == "");
    for (std::int64_t r = 0; r < num_q; ++r)
      for (std::int64_t t = 0; t < N; ++t)  // lanes are summed in different orders
        CHECK(std::fabs(out(r, t) - portable(r, t)) <=
              1e-5 * H * (1.0 + std::fabs(portable(r, t))));
  }
}

// How often MXFP4 rows the library's own quantizer writes take the folded path: keys (spread
// 3), query heads (spread 3 with VNNI or plain integer products, 2 with vpmaddubsw) and whole
// 64-head query rows, for Gaussian rows and for heavy-tailed ones (Student t, 3 degrees of
// freedom). Reported, and bounded below where it matters.
TEST_CASE("host micro-kernels: MXFP4 folding rate on quantised data", "[host][mxfp4]") {
  std::mt19937_64 rng(41);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::student_t_distribution<float> heavy(3.0f);
  const std::int64_t rows = 64 * 256;
  for (const bool tailed : {false, true}) {
    std::vector<float> x(rows * 128);
    for (auto& v : x) v = tailed ? heavy(rng) : gauss(rng);
    const auto qz = ml::quantize_rows<ml::mxfp4>(std::span<const float>(x));
    int key3 = 0, head2 = 0, row3 = 0, row2 = 0;
    for (std::int64_t r = 0; r < rows; r += 64) {
      bool all3 = true, all2 = true;
      for (std::int64_t h = r; h < r + 64; ++h) {
        const bool f3 = hb::fold_exponent(qz.scales.data() + h * 4, 3) >= 0;
        const bool f2 = hb::fold_exponent(qz.scales.data() + h * 4, 2) >= 0;
        key3 += f3;
        head2 += f2;
        all3 = all3 && f3;
        all2 = all2 && f2;
      }
      row3 += all3;
      row2 += all2;
    }
    const double n = static_cast<double>(rows), nr = static_cast<double>(rows / 64);
    WARN((tailed ? "Student t(3)" : "Gaussian")
         << " rows, MXFP4 quantised: " << 100.0 * key3 / n << "% of rows fold within 3 ("
         << 100.0 * head2 / n << "% within 2); whole 64-head query rows: " << 100.0 * row3 / nr
         << "% within 3, " << 100.0 * row2 / nr << "% within 2");
    if (!tailed) {
      CHECK(key3 / n > 0.99);
      CHECK(head2 / n > 0.95);
    }
  }
}

TEST_CASE("host micro-kernels: the backend runs the widest compiled path", "[host][microkernel]") {
  // The ladder's last entry, and what host_isa_name() reports for this unit.
  CHECK(
      std::string(hb::isa_best::name) ==
      std::string(
          std::tuple_element_t<std::tuple_size_v<hb::compiled_isas> - 1, hb::compiled_isas>::name));
  // host_isa_name() is the path's full name: target.hpp's own tag for the unit (avx512_vnni,
  // avx2, neon_dotprod, ...), the ISA name possibly followed by its int8 extension.
  const std::string tag = MQALOGITS_STRINGIZE(MQALOGITS_ISA_TAG);
  const std::string name = ml::host_isa_name();
  INFO("ISA tag " << tag << ", host_isa_name " << name);
  CHECK(name == tag);
  CHECK(name == hb::isa_best::path);
  CHECK(name.compare(0, std::string(hb::isa_best::name).size(), hb::isa_best::name) == 0);
  CHECK(std::string(std::tuple_element_t<0, hb::compiled_isas>::name) == "portable");
}

// The bf16 kernel (paths with bf16 pair dot products) takes a query row or a key only where the
// fp32 arithmetic stays the same (no subnormal value, product or partial sum): MXFP8 rows whose
// block scales are all at least 2^-54 and not NaN, FP8 per-token rows (queries and keys) with a
// scale in [2^-100, 2^100]. Here some query rows and
// some keys of every key group fall outside, in items that mix both kinds of rows: every logit
// must be within the contract, and on a bf16 path the logits of those rows and keys must be the
// fp32 kernel's, bit for bit.
template <class I, class F>
void check_bf16_forms() {
  INFO(isa_label<I>() << ", " << F::name << ", D = " << F::head_dim);
  std::mt19937_64 rng(73);
  const std::int64_t H = 20, num_q = 5, N = 70;
  auto q = ref::rand::rows<F>(rng, num_q * H);
  auto kv = ref::rand::rows<F>(rng, N);
  auto set_float = [](std::uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); };
  auto general_row = [](std::int64_t r) { return r == 1 || r == 3; };
  auto general_key = [](std::int64_t t) { return t % 5 == 0 || t % 7 == 3; };
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t h = 0; h < H; ++h) {
      std::uint8_t* s = q.scale(r * H + h);
      if constexpr (ml::host_backend::e4m3_ue8m0_rows<F>) {
        if (general_row(r) && h == 7) s[F::blocks - 1] = r == 1 ? 72 : 255;
      } else {
        set_float(s, general_row(r) && h == 7 ? (r == 1 ? 0x1p-101f : -0x1p-103f)
                                              : 0.3f * static_cast<float>(h + 1));
      }
    }
  for (std::int64_t t = 0; t < N; ++t) {
    if (!general_key(t)) continue;
    if constexpr (ml::host_backend::e4m3_ue8m0_rows<F>)
      kv.scale(t)[t % F::blocks] = t % 5 == 0 ? 72 : 20;
    else
      set_float(kv.scale(t), t % 5 == 0 ? 0x1p-101f : -0x1p-120f);
  }
  auto w = ref::rand::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  const ml::dense_plan<F> plan(kv.view(), ks, ke, N);
  ml::logits_buffer<float> out(num_q, N);
  run_on<I>(q.view(), plan, w.view(), out);
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                                   std::span<const std::int32_t>(ke), N);
  CHECK(check::against(out, expected) == "");
#if defined(MQALOGITS_HOST_BF16)
  if constexpr (std::is_same_v<I, hb::isa_avx512_bf16>) {
    ml::logits_buffer<float> fp32(num_q, N);
    run_on<hb::isa_avx512>(q.view(), plan, w.view(), fp32);
    int differ = 0;
    for (std::int64_t r = 0; r < num_q; ++r)
      for (std::int64_t t = 0; t < N; ++t) {
        if (general_row(r) || general_key(t)) {
          INFO("row " << r << " key " << t << " got " << out(r, t) << " fp32 " << fp32(r, t));
          CHECK(same_float(out(r, t), fp32(r, t)));
        } else {
          differ += !same_float(out(r, t), fp32(r, t));
        }
      }
    // The bf16 kernel ran for the others: its sums run in another order, so some differ.
    CHECK(differ > 0);
  }
#endif
}

#if defined(MQALOGITS_HOST_BF16)
// The bf16 form's decoder, code by code: every e4m3 code (rows with and without NaN codes, so
// both its routes) under block scales across the range it accepts (2^-54 .. 2^127: the direct
// route up to 2^119, fp32 above), each value exactly the reference's; and FP8 per-token keys,
// whose bf16 values are their codes and whose scale is kept apart. ([x86]: it exists on x86
// builds with the bf16 path only, and the ARM job leaves it out when it compares test lists.)
TEST_CASE("host micro-kernels: the bf16 decoder, code by code", "[host][microkernel][bf16][x86]") {
  using I = hb::isa_avx512_bf16;
  std::vector<std::uint8_t> data(128);
  auto value = [](std::uint32_t pairs, int half) {
    const std::uint32_t bits = (half ? pairs >> 16 : pairs & 0xFFFFu) << 16;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  const std::uint8_t scale_bytes[] = {73, 74, 100, 127, 140, 200, 246, 247, 254};
  for (int row = 0; row < 4; ++row) {
    fill_e4m3_row(data, row);
    for (std::uint8_t s : scale_bytes) {
      const std::uint8_t scales[4] = {s, static_cast<std::uint8_t>(s == 254 ? 73 : s + 1), 127, s};
      std::uint32_t got[64];
      float key_scale = 0.0f, want[128];
      REQUIRE(hb::decode_key_bf16<I, ml::mxfp8>(data.data(), scales, got, &key_scale));
      CHECK(key_scale == 1.0f);
      ml::mxfp8::decode_row(data.data(), scales, want);
      for (int i = 0; i < 128; ++i) {
        INFO("MXFP8 code " << int(data[i]) << " scale byte " << int(scales[i / 32]));
        CHECK(same_float(value(got[i / 2], i % 2), want[i]));
      }
    }
    const std::uint8_t low[4] = {72, 127, 127, 127}, nan_scale[4] = {127, 255, 127, 127};
    std::uint32_t unused[64];
    float key_scale = 0.0f;
    CHECK(!hb::decode_key_bf16<I, ml::mxfp8>(data.data(), low, unused, &key_scale));
    CHECK(!hb::decode_key_bf16<I, ml::mxfp8>(data.data(), nan_scale, unused, &key_scale));
    for (float s : {0.37f, -0x1p100f, 0x1p-100f}) {
      std::uint8_t field[4];
      std::memcpy(field, &s, sizeof s);
      std::uint32_t got[64];
      float key_scale = 0.0f, want[128];
      REQUIRE(hb::decode_key_bf16<I, ml::fp8_per_token>(data.data(), field, got, &key_scale));
      CHECK(key_scale == s);
      for (int i = 0; i < 128; ++i) want[i] = ml::fp8_per_token::element(data.data(), i);
      for (int i = 0; i < 128; ++i) {
        INFO("FP8 per-token code " << int(data[i]));
        CHECK(same_float(value(got[i / 2], i % 2), want[i]));
      }
    }
  }
}
#endif

TEMPLATE_LIST_TEST_CASE("host micro-kernels: e4m3 rows with and without the bf16 form",
                        "[host][microkernel][bf16]", hb::compiled_isas) {
  check_bf16_forms<TestType, ml::mxfp8>();
  check_bf16_forms<TestType, ml::fp8_per_token>();
  check_bf16_forms<TestType, ml::mxfp8::with_head_dim<64>>();
  check_bf16_forms<TestType, ml::fp8_per_token::with_head_dim<32>>();
}

// The fp32 query row's panels: every (d, head) of a row has its own slot inside the row, and
// each chunk's panel is one contiguous stretch in the order its kernel reads it ([d][heads]).
TEST_CASE("fp32 query panels: one slot per element, each chunk contiguous") {
  constexpr int D = 128;
  for (const int lanes : {4, 8, 16})
    for (const int vectors : {1, 2, 3, 5, 8, 9, 16})
      for (const int chunk : {1, 2, 3, 4}) {
        INFO("lanes " << lanes << " vectors " << vectors << " chunk " << chunk);
        const int heads = vectors * lanes;
        std::vector<int> seen(static_cast<std::size_t>(heads * D), 0);
        const int full = vectors / chunk * chunk;
        for (int first = 0; first < vectors; first += chunk) {
          const int width = first < full ? chunk : vectors - full;
          std::int64_t next = std::int64_t{first} * lanes * D;
          for (int d = 0; d < D; ++d)
            for (int h = first * lanes; h < (first + width) * lanes; ++h) {
              const std::int64_t i = hb::panel_index(D, lanes, vectors, chunk, d, h);
              REQUIRE(i == next++);
              ++seen[static_cast<std::size_t>(i)];
            }
          if (width < chunk) break;
        }
        CHECK(std::count(seen.begin(), seen.end(), 1) == heads * D);
      }
}
