// The NeuronCore model itself: per-generation budgets (compile time and run time), engine
// semantics (matmul overwrite / accumulate, relu evacuation with a per-partition scale, bf16
// rounding, access-pattern rules) and the cost counters of whole calls against analytic counts.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "support/error_of.hpp"

#include "reference/random_inputs.hpp"

namespace ml = mqalogits;
namespace nb = ml::neuron_backend;
namespace rnd = ref::rand;
using ml::backend::trn1;
using ml::backend::trn2;
using ml::backend::trn3;
using nb::dtype;

// ---- compile-time budgets: the predicates the static_asserts of constexpr tile shapes use ----
static_assert(nb::fits_sbuf_v<trn1, dtype::fp32, 128, 48 * 1024>);  // 192 KiB exactly
static_assert(!nb::fits_sbuf_v<trn1, dtype::fp32, 128, 48 * 1024 + 1>);
static_assert(nb::fits_sbuf_v<trn2, dtype::fp32, 128, 56 * 1024>);  // 224 KiB
static_assert(!nb::fits_sbuf_v<trn2, dtype::fp32, 128, 56 * 1024 + 1>);
static_assert(nb::fits_sbuf_v<trn3, dtype::fp32, 128, 64 * 1024>);  // 256 KiB
static_assert(!nb::fits_sbuf_v<trn3, dtype::fp32, 128, 64 * 1024 + 1>);
static_assert(nb::fits_sbuf_v<trn3, dtype::bf16, 128, 64 * 1024, 2>);  // double-buffered
static_assert(!nb::fits_sbuf_v<trn3, dtype::bf16, 128, 64 * 1024 + 1, 2>);
static_assert(!nb::fits_sbuf_v<trn1, dtype::u8, 129, 1>);  // 128 partitions
static_assert(nb::fits_psum_v<trn2, 128, 512> && !nb::fits_psum_v<trn2, 128, 513>);
static_assert(nb::fits_psum_v<trn3, 128, 4096> && !nb::fits_psum_v<trn3, 128, 4097>);  // 8 banks
static_assert(nb::partition_bytes(dtype::fp4, 129) == 65);
static_assert(sizeof(ml::backend::neuron<trn2>) == 1 && std::is_empty_v<ml::backend::neuron<trn3>>);
static_assert(ml::is_backend_v<ml::backend::neuron<trn1>> && ml::is_backend_v<ml::backend::host>);

namespace {}  // namespace

TEMPLATE_TEST_CASE("neuron model: SBUF budget per generation is enforced at run time", "[neuron]",
                   trn1, trn2, trn3) {
  nb::core<TestType> c;
  const std::int64_t budget = nb::traits<TestType>::sbuf_partition_bytes;
  INFO(nb::traits<TestType>::name << " budget " << budget);
  CHECK(c.sbuf_pool().budget() == budget);
  {
    nb::tile a = c.sbuf("a", dtype::fp32, 128, budget / 4);  // exactly the budget
    CHECK(c.sbuf_pool().in_use() == budget);
    const std::string e = check::error_of([&] { (void)c.sbuf("b", dtype::u8, 1, 1); });
    CHECK(e.find("SBUF budget exceeded") != std::string::npos);
    CHECK(e.find(nb::traits<TestType>::name) != std::string::npos);
  }
  CHECK(c.sbuf_pool().in_use() == 0);  // released
  CHECK(c.sbuf_pool().peak() == budget);
  const std::string e =
      check::error_of([&] { (void)c.sbuf("big", dtype::bf16, 64, budget / 2 + 1); });
  CHECK(e.find("tile big [64 x " + std::to_string(budget / 2 + 1) + " bf16]") != std::string::npos);
  CHECK_THROWS_AS(c.sbuf("wide", dtype::u8, 129, 1), ml::error);
  // A tile that fits trn3 but not trn1: the same shape, different budgets.
  const std::string t1 = check::error_of([] {
    nb::core<trn1> c1;
    (void)c1.sbuf("k", dtype::bf16, 128, 100 * 1024);
  });
  const std::string t3 = check::error_of([] {
    nb::core<trn3> c3;
    (void)c3.sbuf("k", dtype::bf16, 128, 100 * 1024);
  });
  CHECK(t1.find("budget exceeded") != std::string::npos);
  CHECK(t3 == "");
}

TEST_CASE("neuron model: PSUM has 8 banks of 2 KiB per partition, a tile fits one bank",
          "[neuron]") {
  nb::core<trn2> c;
  std::vector<nb::tile> banks;
  for (int i = 0; i < 8; ++i) banks.push_back(c.psum("bank", 128, 1 + i));  // any size: one bank
  CHECK(c.psum_pool().in_use() == 16 * 1024);
  CHECK(check::error_of([&] { (void)c.psum("ninth", 1, 1); }).find("PSUM budget exceeded") !=
        std::string::npos);
  banks.clear();
  CHECK(check::error_of([&] { (void)c.psum("wide", 128, 513); }).find("more than one 2 KiB bank") !=
        std::string::npos);
  CHECK_NOTHROW(c.psum("full bank", 128, 512));
  CHECK(c.counters().peak_psum_bytes == 16 * 1024);
}

TEST_CASE("neuron model: double-buffered PSUM tiles are refused past the 8 banks", "[neuron]") {
  // trn3's MX decode at 4 x 256 keys per tile: scores and head sum take 2 banks each, so
  // double-buffered they fill the 8 banks and the transposes' buffers have none left.
  nb::core<trn3> c;
  nb::tile s = c.psum("scores", 128, 1024, dtype::fp32, 2);
  nb::tile h = c.psum("head sum", 128, 1024, dtype::fp32, 2);
  CHECK(c.psum_pool().in_use() == 16 * 1024);
  const std::string e =
      check::error_of([&] { (void)c.psum("transpose", 128, 128, dtype::fp32, 2); });
  CHECK(e.find("PSUM budget exceeded") != std::string::npos);
  CHECK(e.find("2 more of the 8 PSUM banks, 8 taken") != std::string::npos);
  // At 4 x 128 keys (the schedule's tile) the four streaming tiles fit, double-buffered.
  nb::core<trn3> d;
  std::vector<nb::tile> tiles;
  for (const char* name : {"scores", "head sum", "transpose", "transpose (words)"})
    tiles.push_back(d.psum(name, 128, 512, dtype::fp32, 2));
  CHECK(d.psum_pool().in_use() == 16 * 1024);
  static_assert(nb::psum_banks_of(512) == 1 && nb::psum_banks_of(1024) == 2 &&
                nb::psum_banks_of(513) == 2);
}

TEST_CASE("neuron model: matmul contracts over partitions, overwrites then accumulates",
          "[neuron]") {
  nb::core<trn1> c;
  nb::tile st = c.sbuf("st", dtype::bf16, 3, 2), mv = c.sbuf("mv", dtype::bf16, 3, 4);
  nb::tile out = c.psum("out", 2, 4);
  for (int k = 0; k < 3; ++k) {
    for (int m = 0; m < 2; ++m) st.at(k, m) = static_cast<float>(k + 2 * m + 1);
    for (int n = 0; n < 4; ++n) mv.at(k, n) = static_cast<float>(n - k);
  }
  auto expected = [&](int m, int n) {
    float s = 0;
    for (int k = 0; k < 3; ++k) s += st.at(k, m) * mv.at(k, n);
    return s;
  };
  out.at(1, 3) = 999.0f;  // stale PSUM contents: the first write overwrites them
  c.matmul(out, st, mv);
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 4; ++n) CHECK(out.at(m, n) == expected(m, n));
  c.matmul(out, st, mv, nb::matmul_kind::score, nb::write_mode::accumulate);
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 4; ++n) CHECK(out.at(m, n) == 2 * expected(m, n));
  const auto& rep = c.counters();
  CHECK(rep.matmul_score == 2);
  CHECK(rep.tensor.cycles == 2 * 64);  // max(N, 64) cycles
  CHECK(rep.matmul_flops == 2 * (2 * 3 * 2 * 4));

  // TensorE limits: stationary free <= 128, moving free <= 512, matching contraction.
  nb::tile wide_st = c.sbuf("wide st", dtype::bf16, 3, 129);
  nb::tile big = c.psum("big", 128, 4);
  CHECK(check::error_of([&] {
          c.matmul(nb::window(big), wide_st, mv);
        }).find("stationary free <= 128") != std::string::npos);
  nb::tile wide_mv = c.sbuf("wide mv", dtype::bf16, 3, 513);
  CHECK_THROWS_AS(c.matmul(out, st, wide_mv), ml::error);
  nb::tile short_mv = c.sbuf("short mv", dtype::bf16, 2, 4);
  CHECK_THROWS_AS(c.matmul(out, st, short_mv), ml::error);
  // fp32 operands run 4 passes.
  nb::tile st32 = c.sbuf("st32", dtype::fp32, 3, 2), mv32 = c.sbuf("mv32", dtype::fp32, 3, 4);
  const std::int64_t before = c.counters().tensor.cycles;
  c.matmul(out, st32, mv32);
  CHECK(c.counters().tensor.cycles - before == 4 * 64);
}

TEST_CASE("neuron model: ScalarE relu with a per-partition scale, VectorE bf16 rounding",
          "[neuron]") {
  nb::core<trn2> c;
  nb::tile in = c.psum("in", 2, 3), out = c.sbuf("out", dtype::fp32, 2, 3);
  nb::tile scale = c.sbuf("scale", dtype::fp32, 2, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float v[2][3] = {{-1.0f, 2.0f, nan}, {3.0f, -4.0f, 0.5f}};
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 3; ++i) in.at(p, i) = v[p][i];
  scale.at(0, 0) = 2.0f;
  scale.at(1, 0) = -1.0f;
  const nb::window s(scale);
  c.activation(out, in, nb::activation_fn::relu, &s);
  CHECK(out.at(0, 0) == 0.0f);
  CHECK(out.at(0, 1) == 4.0f);
  CHECK(std::isnan(out.at(0, 2)));  // relu(NaN) is NaN
  CHECK(out.at(1, 0) == 0.0f);      // relu(3 * -1)
  CHECK(out.at(1, 1) == 4.0f);
  CHECK(out.at(1, 2) == 0.0f);
  CHECK(c.counters().scalar.instructions == 1);
  CHECK(c.counters().scalar.cycles == 60 + 3);

  // Writes to bf16 round to nearest even: 1 + 2^-8 is a tie (to 1), 1 + 3 * 2^-8 too (to
  // 1 + 2^-6), 1 + 2^-8 + 2^-20 rounds up.
  nb::tile f = c.sbuf("f", dtype::fp32, 1, 3), b = c.sbuf("b", dtype::bf16, 1, 3);
  f.at(0, 0) = 1.0f + 0x1p-8f;
  f.at(0, 1) = 1.0f + 3 * 0x1p-8f;
  f.at(0, 2) = 1.0f + 0x1p-8f + 0x1p-20f;
  c.copy(b, f);
  CHECK(b.at(0, 0) == 1.0f);
  CHECK(b.at(0, 1) == 1.0f + 0x1p-6f);
  CHECK(b.at(0, 2) == 1.0f + 0x1p-7f);
}

TEST_CASE("neuron model: access patterns start where NKI allows", "[neuron]") {
  nb::core<trn1> c;
  nb::tile t = c.sbuf("t", dtype::fp32, 128, 4);
  CHECK_NOTHROW(c.memset(nb::window(t, 96, 32, 0, 4), 0.0f));
  CHECK_NOTHROW(c.memset(nb::window(t, 64, 64, 0, 4), 0.0f));
  CHECK_NOTHROW(c.memset(nb::window(t, 0, 65, 0, 4), 0.0f));
  CHECK(check::error_of([&] {
          c.memset(nb::window(t, 16, 16, 0, 4), 0.0f);
        }).find("cannot start at partition 16") != std::string::npos);
  CHECK_THROWS_AS(c.memset(nb::window(t, 32, 64, 0, 4), 0.0f), ml::error);
  CHECK_THROWS_AS(c.memset(nb::window(t, 64, 65, 0, 4), 0.0f), ml::error);
}

// ---- the cost counters of whole kernel calls against analytic counts ----

TEMPLATE_TEST_CASE("neuron cost: paged decode counts", "[neuron]", trn1, trn2, trn3) {
  using Gen = TestType;
  constexpr bool mx = nb::traits<Gen>::mx_matmul;
  rnd::engine rng(21);
  const std::int64_t H = 64, len = 300, cols = 320;
  const auto q = rnd::rows<ml::mxfp8>(rng, H);
  const auto cache = rnd::paged_cache<ml::mxfp8>(rng, 6, 64);
  const auto w = rnd::weights<float>(rng, 1, H);
  auto lens = rnd::matrix<std::int32_t>(1, 1);
  lens(0, 0) = static_cast<std::int32_t>(len);
  const auto table = rnd::block_table(rng, lens, 6, 64, 6);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), 64, 1);
  ml::logits_buffer<ml::bf16> out(1, cols);
  nb::report rep;
  {
    // Pages read whole, one per partition row, as counted below (left to itself the schedule
    // may cut a request this short into runs of fewer tokens, to use more partitions).
    nb::capture cap(rep, {.page_run = 64});
    ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), cache.view(), w.view(),
                                 lens.view(), table.view(), schedule, cols, out.view());
  }
  INFO(rep.summary());
  CHECK(std::string(rep.generation) == nb::traits<Gen>::name);
  CHECK(rep.calls == 1);
  // DMA, 7 transfers: the -inf fill of the 20 columns past the context; the 5 pages (one per
  // partition row) in two gathers, 8 KiB of codes and 256 B of scales each; Q's 64 head rows
  // (128 + 4 B); the 64 weights of the block-diagonal stationary; the 300 logits with their
  // keys on partitions (3 per partition, partition i holding keys 3i .. 3i + 2): one 6-byte
  // descriptor for each of 100 partitions.
  CHECK(rep.dma_transfers == 7);
  CHECK(rep.dma_gathers == 2);
  CHECK(rep.dma_gathered_blocks == 10);
  CHECK(rep.dma_descriptors == 1 + 10 + 2 * H + H + 100);
  CHECK(rep.dma_bytes == 40 + 5 * 8192 + 5 * 256 + H * 132 + H * 4 + len * 2);
  CHECK(rep.dma_small_descriptors == 1 + 3 * H + 100);
  CHECK(rep.dma_inefficient_descriptors == rep.dma_descriptors - 5);
  const auto& tr = nb::traits<Gen>{};
  // trn1 has no indirect DMA: each of the gathers' 10 blocks is a DMA of its own.
  const double starts = tr.indirect_dma ? 7 : 5 + 10;
  CHECK(rep.dma_seconds ==
        Approx(starts * tr.dma_fixed_s / 16 +
               (rep.dma_bytes + 512.0 * rep.dma_descriptors) / tr.dma_bytes_per_s));
  // TensorE. trn1: 64 slot transposes of the 5 pages' codes and of their exponents, Q's two,
  // two exponent broadcasts (320 and 64 columns), one bf16 score matmul (300 columns) and the
  // head sum. trn2 decodes before transposing: 64 slot transposes of the decoded keys and Q's
  // one, no broadcasts. trn3: 16 transposes of four slots' x4 words (32-bit: 4 passes) and of their
  // scales, Q's two, four row-tiled MX matmuls of 75 columns (a quarter of max(75, 64) each,
  // rounded up) and the head sum. (32-bit transposes: 2 passes in trn3's transpose mode.) The
  // head sum puts the keys on its output partitions: 3 fp32 matmuls (4 passes) of stationary
  // relu [64 heads, 100 keys] (columns u, u + 3, ...) against the weights [64, 1] as moving,
  // max(1, 64) cycles each, where the keys along the moving side would take max(300, 64).
  // ScalarE: the relu evacuation, then the cast of 3 logits on each of 100 partitions.
  CHECK(rep.matmul_head_sum == 3);
  CHECK(rep.matmul_flops == 2 * 128 * H * len + 2 * H * 1 * len);
  if constexpr (mx) {
    CHECK(rep.matmul_score == 4);
    CHECK(rep.matmul_transpose == 34);
    CHECK(rep.matmul_broadcast == 0);
    const std::int64_t word_transpose = tr.pe_fp32_transpose_passes * 64;  // 32-bit words
    CHECK(rep.tensor.cycles ==
          16 * (word_transpose + 64) + (word_transpose + 64) + 4 * 19 + 3 * 4 * 64);
    // One relu evacuation of the four and the cast, besides the copies it takes from VectorE.
    CHECK(rep.scalar.instructions - rep.scalar_copies == 1 + 1);
    CHECK(rep.scalar.cycles - rep.scalar_copy_cycles == (60 + 4 * 75) + (60 + 3));
  } else {
    constexpr bool decode_first = nb::traits<Gen>::exact_pe_transpose;
    CHECK(rep.matmul_score == 1);
    CHECK(rep.matmul_transpose == (decode_first ? 65 : 130));
    CHECK(rep.matmul_broadcast == (decode_first ? 0 : 2));
    CHECK(rep.tensor.cycles ==
          (decode_first ? 65 * 64 : 128 * 64 + 2 * 64 + 320 + 64) + len + 3 * 4 * 64);
    CHECK(rep.scalar.instructions - rep.scalar_copies == 1 + 1);
    CHECK(rep.scalar.cycles - rep.scalar_copy_cycles == (60 + len) + (60 + 3));
  }
  CHECK(rep.tensor.seconds == Approx(rep.tensor.cycles / tr.tensor_hz));
  // PSUM: transposes, scores, head sum (and exponent broadcast on trn1, words on trn3), one bank
  // each, double-buffered: all 8 banks, 6 on trn2.
  CHECK(rep.peak_psum_bytes == (!mx && tr.exact_pe_transpose ? 6 : 8) * 2048);
  CHECK(rep.peak_sbuf_bytes <= nb::traits<Gen>::sbuf_partition_bytes);
  CHECK(rep.estimated_seconds() > 0);
  CHECK(rep.summary().find("not a device run") != std::string::npos);
}

TEMPLATE_TEST_CASE("neuron cost: dense prefill counts", "[neuron]", trn1, trn2, trn3) {
  using Gen = TestType;
  constexpr bool mx = nb::traits<Gen>::mx_matmul;
  rnd::engine rng(22);
  const std::int64_t H = 8, num_q = 3, N = 600;
  const auto q = rnd::rows<ml::mxfp4>(rng, num_q * H);
  const auto kv = rnd::rows<ml::mxfp4>(rng, N);
  const auto w = rnd::weights<ml::bf16>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  ml::logits_buffer<float> out(num_q, N);
  nb::report rep;
  {
    nb::capture cap(rep);
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), kv.view(), w.view(), ks, ke, N,
                           out.view());
  }
  INFO(rep.summary());
  // Keys: 19 partition rows of 32 tokens (2 KiB of MXFP4 codes, 128 B of scales); Q: one row of
  // all heads per token (512 + 32 B); weights one bf16 row per token; the logits of the 3 rows.
  // No fill: every row covers all columns.
  CHECK(rep.dma_gathers == 0);
  // trn2 loads the weights once more, on the diagonals of its TensorE head sum.
  constexpr bool diag = !mx && !nb::traits<Gen>::psum_read_exclusive;
  // trn3's passes with their keys on partitions (below; none elsewhere) read their weights again,
  // spread over the 128 partitions: a row of H bf16 each.
  const std::int64_t on_tensor = mx ? rep.matmul_head_sum / 5 : 0, on_keys = mx ? 3 - on_tensor : 0;
  CHECK(rep.dma_bytes == 19 * 2048 + 19 * 128 + num_q * H * 68 + num_q * H * 2 * (diag ? 2 : 1) +
                             num_q * N * 4 + on_keys * 128 * H * 2);
  if constexpr (mx) {
    // trn3 runs decode's passes: H = 8 puts one row per pass (its 8 heads on 8 partitions), so
    // per row a DMA of its Q words (8 descriptors, one per head), of their scales (8) and of
    // its block-diagonal weights (8, one per weight). Each pass puts its head sum on TensorE or
    // scores with its keys on partitions, whichever ends sooner given the engines' queues (at
    // least the first, the engines being idle, takes TensorE). On TensorE: 5 fp32 matmuls of
    // [8, 120] x [8, 1] (columns u, u + 5, ...: 120 partitions of 5 consecutive keys each), its
    // 600 logits one descriptor per partition; its scores 2 steps (128 + 22 columns of K^T) of
    // four MX matmuls of stationary Q^T [32, 8]. With its keys on partitions: no head-sum matmul,
    // the weights spread (one more DMA, a descriptor per partition), 2 steps of four MX matmuls
    // of K^T's columns u, u + 2, ... (76 each: 75 rounded up to even) as stationary, its logits
    // on 75 partitions of 8 keys.
    CHECK(on_tensor >= 1);
    CHECK(on_keys >= 0);
    CHECK(rep.matmul_head_sum == on_tensor * 5);
    CHECK(rep.dma_transfers == 2 + num_q * (3 + 1) + on_keys);
    CHECK(rep.dma_descriptors ==
          19 + 19 + num_q * (H + H + H) + on_tensor * 120 + on_keys * (128 + 75));
    CHECK(rep.matmul_flops ==
          on_tensor * (2 * 128 * H * N + 5 * 2 * H * 120) + on_keys * 2 * 128 * H * (2 * 76 * 4));
    CHECK(rep.matmul_score == num_q * 2 * 4);
    // K: 8 + 8 (words, scales); Q: per pass one of its words and one of its scales.
    CHECK(rep.matmul_transpose == 8 + 8 + 2 * num_q);
  } else if constexpr (nb::traits<Gen>::psum_read_exclusive) {
    // The logits in one tile (a head's relu scores accumulate over four PSUM banks: up to 2048
    // keys) of 3 fp32 rows.
    CHECK(rep.dma_transfers == 5 + 1);
    CHECK(rep.dma_descriptors == 19 + 19 + num_q + num_q + num_q + num_q);
    CHECK(rep.matmul_head_sum == 0);
    CHECK(rep.matmul_flops == 2 * 128 * num_q * N * H);
  } else {
    // trn2: as trn1, and each head's sum may go to TensorE (an fp32 matmul of diag(w[:, h])
    // against its relu scores, 512 + 88 keys: two matmuls of [3, 3] x [3, <= 512]), where it
    // ends sooner than VectorE's or GpSimd's pass given the engines' queues: the diagonals are
    // one more DMA, a descriptor per weight. TensorE is idle at first, so it takes some.
    CHECK(rep.dma_transfers == 5 + 1 + 1);
    CHECK(rep.dma_descriptors == 19 + 19 + num_q + num_q + num_q + num_q + num_q * H);
    CHECK(rep.matmul_head_sum % 2 == 0);
    CHECK(rep.matmul_head_sum > 0);
    CHECK(rep.matmul_head_sum <= 2 * H);
    CHECK(rep.matmul_flops ==
          2 * 128 * num_q * N * H + rep.matmul_head_sum / 2 * 2 * num_q * num_q * N);
  }
  if constexpr (!mx) {
    CHECK(rep.matmul_score == 2 * H);
    if constexpr (nb::traits<Gen>::exact_pe_transpose) {
      // trn2 decodes first: the 32 slots' decoded keys and Q's 8 head slots (their columns in
      // Q^T follow one another: four share a PSUM bank and one copy), no exponents, no
      // broadcasts.
      CHECK(rep.matmul_transpose == 32 + H);
      CHECK(rep.matmul_broadcast == 0);
    } else {
      CHECK(rep.matmul_transpose == 2 * 32 + 2 * H);
      CHECK(rep.matmul_broadcast == 2 + 1);
    }
  }
  // ScalarE: the cast and the 2 x H relu evacuations (trn1, whose VectorE shares the PSUM port),
  // or those it is free for first, besides the copies it takes (trn2, trn3). Per head one
  // accumulation of the two score tiles' relu scores (VectorE or GpSimd). trn3: per pass two
  // relu evacuations (ScalarE or VectorE) and the cast of its logits.
  const std::int64_t scalar_own = rep.scalar.instructions - rep.scalar_copies;
  if constexpr (mx) {
    CHECK(scalar_own <= num_q * (2 + 1));
    CHECK(scalar_own >= num_q);
  } else if constexpr (nb::traits<Gen>::psum_read_exclusive) {
    CHECK(scalar_own == 2 * H + 1);
  } else {
    CHECK(scalar_own <= 2 * H + 1);
    CHECK(scalar_own > 1);
  }
}

TEST_CASE("neuron cost: prefill Q rows and dense key rows are efficient descriptors", "[neuron]") {
  rnd::engine rng(23);
  const std::int64_t H = 64, num_q = 2, N = 50;
  const auto q = rnd::rows<ml::mxfp8>(rng, num_q * H);
  const auto kv = rnd::rows<ml::mxfp8>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  ml::logits_buffer<float> out(num_q, N);
  nb::report rep;
  {
    nb::capture cap(rep);
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn2>{}, q.view(), kv.view(), w.view(), ks, ke, N,
                           out.view());
  }
  // The two Q rows (64 heads x 128 B = 8 KiB each) and the two 32-token key rows (4 KiB) are
  // the only descriptors of >= 4 KiB.
  CHECK(rep.dma_descriptors - rep.dma_inefficient_descriptors == num_q + 2);
}

TEST_CASE("neuron cost: sparse gathers one block per selected index, masks with memsets",
          "[neuron]") {
  rnd::engine rng(24);
  const std::int64_t H = 16, N = 200, B = 16;
  const auto q = rnd::rows<ml::mxfp8>(rng, H);
  const auto kv = rnd::rows<ml::mxfp8>(rng, N);
  const auto w = rnd::weights<float>(rng, 1, H);
  const std::vector<std::int32_t> ks{0}, ke{static_cast<std::int32_t>(N)};
  const std::vector<std::int32_t> idx{3, -1, 0, 5};
  const auto meta = ml::get_sparse_mqa_logits_metadata(
      ks, ke, N, ml::matrix_view<const std::int32_t>(idx.data(), 1, 4), B);
  ml::logits_buffer<float> out(1, 4 * B);
  nb::report rep, outer;
  {
    nb::capture c1(outer);
    {
      nb::capture c2(rep, {.page_run = B});  // the innermost capture receives the call
      ml::fp8_fp4_sparse_mqa_logits(ml::backend::neuron<trn2>{}, q.view(), kv.view(), w.view(),
                                    meta, out.view());
    }
  }
  CHECK(outer.calls == 0);
  CHECK(rep.calls == 1);
  // Two gathers (codes, scales) of the 3 selected blocks, one per partition row; the -1 block
  // is not read. Q 16 + 16 rows, 16 weights; the 64 logits with their keys on 64 partitions,
  // one descriptor each (the -1 block's 16 as -inf).
  CHECK(rep.dma_gathers == 2);
  CHECK(rep.dma_gathered_blocks == 6);
  CHECK(rep.dma_descriptors == 3 + 3 + 2 * H + H + 64);
  // trn2: GpSimd writes the gathers' descriptors (no indirect DMA in hardware DGE), 16 cycles
  // per descriptor, and the iota of the epilogue's key mask. Q's and K's codes are decoded
  // where they arrive, no exponents broadcast: each in seven SBUF instructions (the exponents'
  // three, the bits, the re-bias, the scale, the NaN-code flag), each on GpSimd or VectorE,
  // whichever would finish first.
  CHECK(rep.matmul_broadcast == 0);
  const std::int64_t on_gpsimd = rep.gpsimd.instructions - 2 - 1;
  CHECK(on_gpsimd > 0);
  CHECK(on_gpsimd + rep.vector.instructions >= 2 * 7);
  for (std::int64_t c = B; c < 2 * B; ++c) CHECK(std::isinf(out(0, c)));
  CHECK(std::isfinite(out(0, 0)));
}

TEST_CASE("neuron cost: calls without a capture report nothing, reports add up", "[neuron]") {
  rnd::engine rng(25);
  const auto q = rnd::rows<ml::mxfp8>(rng, 4);
  const auto kv = rnd::rows<ml::mxfp8>(rng, 10);
  const auto w = rnd::weights<float>(rng, 1, 4);
  const std::vector<std::int32_t> ks{0}, ke{10};
  ml::logits_buffer<float> out(1, 10);
  CHECK(nb::current_report() == nullptr);
  ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn1>{}, q.view(), kv.view(), w.view(), ks, ke, 10,
                         out.view());
  nb::report one, two;
  {
    nb::capture cap(one);
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn1>{}, q.view(), kv.view(), w.view(), ks, ke, 10,
                           out.view());
  }
  {
    nb::capture cap(two);
    for (int i = 0; i < 2; ++i)
      ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn1>{}, q.view(), kv.view(), w.view(), ks, ke, 10,
                             out.view());
  }
  CHECK(nb::current_report() == nullptr);
  CHECK(two.calls == 2);
  CHECK(two.dma_bytes == 2 * one.dma_bytes);
  CHECK(two.matmul_instructions() == 2 * one.matmul_instructions());
  CHECK(two.peak_sbuf_bytes == one.peak_sbuf_bytes);
}
