// The neuron model's floor (neuron_backend::floor_terms): hand-computed floors of small decodes,
// the floor below the estimate on every line example 09 prints, the floor's binding term, the
// printed line format and the closing summary.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "../../examples/09_neuron_schedule/floor_summary.hpp"
#include "../../examples/09_neuron_schedule/shapes.hpp"

namespace ml = mqalogits;
namespace nb = ml::neuron_backend;
using ml::backend::trn1;
using ml::backend::trn2;
using ml::backend::trn3;

// 2 requests of 1024 keys, H = 64, D = 128, pages of 64: 2048 keys, 2048 scores per head, 32
// pages, 2 rows of 2048 bf16 logits. Rates typed in from the architecture guides.
TEST_CASE("neuron floor: 2 x 1024 MXFP8 decode on trn3, by hand", "[neuron]") {
  const nb::report r = neuron_shapes::paged_decode<trn3, ml::mxfp8>(2, 1024);
  // DMA at 528 GB/s: Q (132 B) and fp32 weights per row and head, 132 B per key, 2 B per logit;
  // 66 descriptors (the codes and the scales of 32 pages, two HBM ranges each, and 2 output
  // rows) of 512 B each; one gather of 1.3 us / 16 queues.
  const double dma =
      (2 * 64 * 136 + 2048 * 132 + 2048 * 2 + 66 * 512) / 528e9 + 1.3e-6 / 16;  // 698 ns
  // TensorE at 2.4 GHz: the MX score matmuls 2048 x 64 x 128 / (4 x 128 x 128) = 256 cycles; the
  // transposes of 2048 keys, 32 words in 2 passes and a 1-pass row of scales per 4 keys each
  // (96 / 128 cycles), and of 128 Q rows (33 words in 2 passes each, 66 / 128): 1858.
  const double tensor_fixed = (256 + (2048 * 96 + 128 * 66) / 128.0) / 2.4e9;
  // VectorE: the transposed keys' words copied out of PSUM, 2048 x 32 / 128 at 2 per cycle.
  const double copies_v = 512 / 2.4e9;
  // Movable: the fp32 head sum, 131072 relu values: TensorE 131072 / 16384 x 4 x 64 cycles,
  // VectorE 2 x 131072 / 256 cycles at 1.2 GHz, or GpSimd 2 x 131072 / 128 cycles at 1.2 GHz;
  // the PSUM reads: the relu, ScalarE 131072 / 128 cycles at 1.2 GHz or VectorE 131072 / 256,
  // and the 512 rows of transposed scales (u8), ScalarE 512 or VectorE 512 / 2 cycles.
  const double head_t = 2048 / 2.4e9, head_v = 1024 / 1.2e9, head_g = 2048 / 1.2e9;
  const double relu_s = (1024 + 512) / 1.2e9, relu_v = (512 + 256) / 1.2e9;
  // GpSimd: 64 descriptors (codes and scales of 32 pages) of 16 cycles at 1.2 GHz, 853.3 ns.
  const double gpsimd = 64 * 16 / 1.2e9;
  CHECK(r.floor.gpsimd_descriptors_s == Approx(gpsimd).epsilon(1e-12));
  CHECK(r.floor.head_sum_gpsimd_s == Approx(head_g).epsilon(1e-12));
  // Balanced: TensorE tensor_fixed + x head_t = ScalarE y relu_s = GpSimd gpsimd + g head_g =
  // VectorE copies_v + (1 - x - g) head_v + (1 - y) relu_v = T, with head_v = head_t = head_g /
  // 2 and relu_v = relu_s / 2: T = (tensor_fixed + copies_v + head_t + relu_v + gpsimd / 2) / 3
  // = 969.2 ns, above the DMA's 698 ns (992.3 ns with the head sum kept off GpSimd).
  const double t = (tensor_fixed + copies_v + head_t + relu_v + gpsimd / 2) / 3;
  CHECK(head_v == Approx(head_t));
  CHECK(head_g == Approx(2 * head_v));
  CHECK(relu_v == Approx(relu_s / 2));
  CHECK(t > dma);
  CHECK(t > gpsimd);
  const auto s = r.floor.split_at(t);
  CHECK(s.tensor == Approx(t).epsilon(1e-9));
  CHECK(s.scalar == Approx(t).epsilon(1e-9));
  CHECK(s.vector == Approx(t).epsilon(1e-9));
  CHECK(s.gpsimd == Approx(t).epsilon(1e-9));
  CHECK(s.head_sum_on_gpsimd == Approx((t - gpsimd) / head_g).epsilon(1e-9));
  CHECK(r.floor.vector_copies_s == Approx(copies_v).epsilon(1e-12));
  CHECK(r.floor_seconds() == Approx(t).epsilon(1e-9));
  CHECK(r.floor.dma_bytes_s + r.floor.dma_descriptors_s + r.floor.dma_fixed_s ==
        Approx(dma).epsilon(1e-12));
  // All four are busy up to the floor: one binds, the other three are named with it.
  const auto bound = r.floor_bound();
  const std::string all = std::string(bound.engine) + "+" + bound.with;
  for (const char* e : {"TensorE", "ScalarE", "VectorE", "GpSimd"})
    CHECK(all.find(e) != std::string::npos);
  CHECK(all.find("DMA") == std::string::npos);
  CHECK(r.floor_seconds() <= r.estimated_seconds());
  // The model's TensorE cycles by kind: each head-sum matmul 4 fp32 passes of max(R, 64) = 64.
  CHECK(r.tensor_head_sum_cycles == 4 * 64 * r.matmul_head_sum);
  CHECK(r.tensor_transpose_cycles > 0);
  CHECK(r.tensor_head_sum_cycles + r.tensor_transpose_cycles < r.tensor.cycles);
}

TEST_CASE("neuron floor: 2 x 1024 MXFP8 decode on trn2 is its code decode, by hand", "[neuron]") {
  const nb::report r = neuron_shapes::paged_decode<trn2, ml::mxfp8>(2, 1024);
  // The e4m3 decode of every code of 2048 keys and 128 Q rows, plus each row's 4 UE8M0 scales
  // (3 one-input integer steps), per 128 partitions. VectorE at 0.96 GHz: shift-and-mask (fp32
  // width 2 per cycle) 64, re-bias (bf16 copy mode, 4 per cycle) 32, times the scale (two
  // inputs) 128, NaN flags 64, the scales 6 cycles; GpSimd at 1.2 GHz, one per cycle, two
  // inputs 2: 128 + 128 + 256 + 128 + 12.
  const double decode_v = 2176 * 294 / 128.0 / 0.96e9;  // 5206 ns
  const double decode_g = 2176 * 652 / 128.0 / 1.2e9;   // 9237 ns
  // 853 ns of software DGE: 64 descriptors, the codes and the scales of 32 pages.
  const double descriptors_g = 64 * 16 / 1.2e9;
  // VectorE and GpSimd share the decode (everything else fits beside it): (1 - c) decode_v =
  // descriptors_g + c decode_g = T.
  const double t = decode_v * (decode_g + descriptors_g) / (decode_g + decode_v);  // 3637 ns
  CHECK(r.floor_seconds() == Approx(t).epsilon(1e-9));
  const auto bound = r.floor_bound();
  CHECK((std::string(bound.engine) == "VectorE" || std::string(bound.engine) == "GpSimd"));
  CHECK(std::string(bound.term) == "code decode");
  CHECK(r.floor_seconds() <= r.estimated_seconds());
  // LNC = 2: the floor halves.
  const nb::report two =
      neuron_shapes::paged_decode<trn2, ml::mxfp8>(2, 1024, {.logical_cores = 2});
  CHECK(two.floor_seconds() == Approx(t / 2).epsilon(1e-9));
}

TEST_CASE("neuron floor: GpSimd's room goes to the decode or the head sum, best saving first",
          "[neuron]") {
  // TensorE could take the head sum only at 1000 s: VectorE does it in 1 s or GpSimd in 2 s,
  // and the decode takes VectorE 1 s or GpSimd 1 s. The decode saves VectorE more per GpSimd
  // second, so GpSimd takes it first: GpSimd c = T, TensorE x 1000 = T, VectorE (1 - x) + (1 -
  // c) = T, so T = 2 / 2.001 (the head sum first would give 2 / 1.501).
  nb::floor_terms f;
  f.head_sum_tensor_s = 1000;
  f.head_sum_vector_s = 1;
  f.head_sum_gpsimd_s = 2;
  f.decode_vector_s = 1;
  f.decode_gpsimd_s = 1;
  CHECK(f.seconds() == Approx(2 / 2.001).epsilon(1e-9));
  CHECK(f.split_at(f.seconds()).head_sum_on_gpsimd == 0);
  // A decode that saves VectorE 0.25 s per GpSimd second: now the head sum (0.5 per second)
  // goes first, g = T / 2, and VectorE 1 - T / 1000 - T / 2 + 0.25 = T: T = 1.25 / 1.501.
  f.decode_vector_s = 0.25;
  const double t = 1.25 / 1.501;
  CHECK(f.seconds() == Approx(t).epsilon(1e-9));
  const auto s = f.split_at(t);
  CHECK(s.head_sum_on_gpsimd == Approx(t / 2).epsilon(1e-9));
  CHECK(s.decode_on_gpsimd == Approx(0).margin(1e-9));
  // trn1 (VectorE and GpSimd share the SBUF port): GpSimd's slower pass would only add to the
  // port's time, so no head sum is charged to it.
  nb::floor_terms one;
  nb::add_floor<trn1, ml::mxfp8, ml::dense_plan<ml::mxfp8, std::int32_t>>(
      one, {.rows = 128, .keys = 128, .scores = 128}, 64, 4, 2);
  CHECK(one.head_sum_vector_s > 0);
  CHECK(one.head_sum_gpsimd_s == 0);
}

TEST_CASE("neuron floor: trn1 shares the PSUM and SBUF ports", "[neuron]") {
  // Only the relu's read of PSUM: 1 Mi fp32 scores on ScalarE (1.4 GHz) or VectorE (1.12 GHz),
  // 128 per cycle; on one port they cannot overlap, so the floor is ScalarE's whole read.
  nb::floor_terms f;
  f.relu_scalar_s = 8192 / 1.4e9;
  f.relu_vector_s = 8192 / 1.12e9;
  const double split = 1 / (1 / f.relu_scalar_s + 1 / f.relu_vector_s);  // the two overlapped
  CHECK(f.seconds() == Approx(split).epsilon(1e-9));
  f.psum_port_shared = true;
  CHECK(f.seconds() == Approx(8192 / 1.4e9).epsilon(1e-9));
  const std::string engine = f.bound().engine;  // both at the floor: ScalarE, the port
  CHECK((engine == "ScalarE" || engine == "PSUM-read(ScalarE+VectorE)"));
  CHECK(std::string(f.bound().term) == "psum-read relu");
}

namespace {

template <class G>
void check_floors(const std::vector<neuron_shapes::shape_line>& lines) {
  const std::regex format(
      R"(^neuron (trn1|trn2|trn3) [a-z0-9-]+ [A-Za-z0-9/x]+ estimate ([0-9]+\.[0-9]{2}) us bound \S+ roofline [0-9]+\.[0-9]{2} us floor ([0-9]+\.[0-9]{2}) us( lnc2 ([0-9]+\.[0-9]{2}) us)?$)");
  for (const auto& l : lines) {
    INFO(l.printed);
    std::smatch m;
    REQUIRE(std::regex_match(l.printed, m, format));
    CHECK(l.printed.rfind(l.line, 0) == 0);  // the report's own line, extended
    const nb::report& r = l.report;
    CHECK(r.floor_seconds() > 0);
    CHECK(r.floor_seconds() <= r.estimated_seconds());
    CHECK(std::stod(m[3]) == Approx(r.floor_seconds() * 1e6).margin(0.006));
    const auto bound = r.floor_bound();
    CHECK(std::string(bound.term) != "none");
    // The floor is at least each engine's fixed share: the bytes over the DMA bandwidth and
    // the score matmuls at TensorE's peak (the roofline's two terms).
    CHECK(r.floor_seconds() >= r.roofline_dma_s * (1 - 1e-9));
    CHECK(r.floor_seconds() >= r.roofline_tensor_s * (1 - 1e-9));
    const bool lnc2 = nb::traits<G>::max_logical_cores > 1;
    CHECK(m[4].matched == lnc2);
    if (lnc2) {
      CHECK(l.lnc2.logical_cores == 2);
      CHECK(l.lnc2.floor_seconds() <= l.lnc2.estimated_seconds());
      CHECK(l.lnc2.floor_seconds() == Approx(r.floor_seconds() / 2).epsilon(1e-9));
      CHECK(std::stod(m[5]) == Approx(l.lnc2.estimated_seconds() * 1e6).margin(0.006));
    }
  }
}

}  // namespace

TEST_CASE("example 09: floor below the estimate on every line, named, LNC = 2 beside it",
          "[neuron]") {
  const auto l1 = neuron_shapes::lines<trn1>();
  const auto l2 = neuron_shapes::lines<trn2>();
  const auto l3 = neuron_shapes::lines<trn3>();
  check_floors<trn1>(l1);
  check_floors<trn2>(l2);
  check_floors<trn3>(l3);
  // The native MX layout's 32 descriptors per block bind its floor on GpSimd, as they bind its
  // estimate.
  const auto& native = l3[5];
  REQUIRE(native.line.find("-native 64x8192") != std::string::npos);
  CHECK(std::string(native.report.floor_bound().engine) == "GpSimd");
  CHECK(std::string(native.report.floor_bound().term) == "gather descriptors");
  // trn3's MX prefill runs decode's passes (two rows of H = 64 each): a TensorE head sum puts
  // 128 keys on its output partitions, 4 fp32 passes of max(2 rows, 64) cycles per 128 keys x
  // 128 partitions, the floor's rate (a matmul of diag(w[:, h]) against a head's relu scores,
  // with the query rows on partitions, would take 4 x 128 per 128 x 128); the passes that do
  // not, score with their keys on partitions. Its floor also lets GpSimd take a share of the
  // head sum (as the schedule's keys-on-partitions passes do with their reduces).
  const auto& prefill = l3[4];
  REQUIRE(prefill.line.find("dense-prefill-mxfp8 4096x4096") != std::string::npos);
  const nb::report& pr = prefill.report;
  CHECK(pr.matmul_head_sum > 0);
  CHECK(pr.tensor_head_sum_cycles == 4 * 64 * pr.matmul_head_sum);
  CHECK(pr.gpsimd.instructions > 0);  // reduces of the keys-on-partitions passes
  CHECK(pr.floor.split_at(pr.floor_seconds()).head_sum_on_gpsimd > 0);
  // The summary names each trn2 / trn3 line's ratio and, past 1.25x, the engine that makes it.
  std::vector<const neuron_shapes::shape_line*> all;
  for (const auto* g : {&l2, &l3})
    for (const auto& l : *g) all.push_back(&l);
  const std::string text = neuron_shapes::floor_summary(all, 1.25);
  INFO(text);
  for (const auto* l : all) {
    const double ratio = l->report.estimated_seconds() / l->report.floor_seconds();
    const std::string name = neuron_shapes::line_name(l->line).substr(7);
    CHECK(text.find(name + ": ") != std::string::npos);
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.2fx: ", ratio);
    CHECK((text.find(name + buf) != std::string::npos) == (ratio > 1.25));
  }
  // Where the model can say what the binding engine spends beyond the floor: trn3's TensorE by
  // matmul kind, for the lines over 1.25x that TensorE binds (the trn3 decode lines are under
  // it). Pages of 128 / 256 tokens fill all 128 partitions (runs of 64 or 128 tokens).
  bool tensor_over = false;
  for (const auto& l : l3)
    tensor_over = tensor_over || (l.report.estimated_seconds() > 1.25 * l.report.floor_seconds() &&
                                  std::string(l.report.bound_by()) == "TensorE");
  CHECK((text.find("TensorE: fp32 head sum") != std::string::npos) == tensor_over);
  CHECK(text.find("of 128 partitions") == std::string::npos);
  // trn3's MX prefill, where it is over, with the rule that keeps it there.
  const bool prefill_over = pr.estimated_seconds() > 1.25 * pr.floor_seconds();
  CHECK((text.find(nb::trn3_mx_prefill_floor_rule) != std::string::npos) == prefill_over);
  // trn1 against its 2x goal: every line's ratio, and the rule named where a line is over it.
  const std::string t1 = neuron_shapes::trn1_summary(l1, 2.0);
  INFO(t1);
  bool past = false;
  for (const auto& l : l1) {
    const double ratio = l.report.estimated_seconds() / l.report.floor_seconds();
    char buf[32];
    std::snprintf(buf, sizeof buf, ": %.2fx ", ratio);
    CHECK(t1.find(neuron_shapes::line_name(l.line).substr(7) + buf) != std::string::npos);
    past = past || ratio > 2.0;
  }
  CHECK((t1.find(nb::trn1_floor_rule) != std::string::npos) == past);
}

TEST_CASE("example 09: decode lines with the selection engines call (top-k)", "[neuron]") {
  const auto t3 = neuron_shapes::topk_lines<trn3>();
  check_floors<trn3>(t3);
  REQUIRE(t3.size() == 6);
  CHECK(t3[0].line.find("64x8192/H64/page64/topk2048") != std::string::npos);
  CHECK(t3[3].line.find("64x8192/H32/page128/next2/topk512") != std::string::npos);
  for (const auto& l : t3) CHECK(l.report.topk_calls > 0);
  // nisa.topk over every logit: 64 rows in 8 calls of 4 x 8192 + 2048 cycles at 1.2 GHz; V4.1's
  // 128 rows (64 requests x 2 tokens), k = 512.
  CHECK(t3[0].report.floor.gpsimd_topk_s == Approx(8 * (4 * 8192 + 2048) / 1.2e9).epsilon(1e-12));
  CHECK(t3[3].report.floor.gpsimd_topk_s == Approx(16 * (4 * 8192 + 512) / 1.2e9).epsilon(1e-12));
  // V4.1's candidate source: nisa.topk over the 32768 logits (k = 512) and over the 4096 block
  // maxima (N = 2048); its consumer's paged-sparse kernel over 2048 blocks of 8.
  CHECK(t3[4].line.find("64x32768/H32/page128/topk512/blocks8x2048") != std::string::npos);
  CHECK(t3[4].report.floor.gpsimd_topk_s ==
        Approx(8 * (4 * 32768 + 512 + 4 * 4096 + 2048) / 1.2e9).epsilon(1e-12));
  CHECK(t3[5].line.find("paged-sparse-mxfp8 64x16384/H32/page128/blocks8/topk512") !=
        std::string::npos);
  // Its gather: per row 2048 blocks, each two descriptors (the block's codes and its scales sit in
  // two ranges of the page), 16 GpSimd cycles each at 1.2 GHz: 3495 us, as the schedule issues.
  CHECK(t3[5].report.floor.gpsimd_descriptors_s ==
        Approx(64 * 2048 * 2 * 16 / 1.2e9).epsilon(1e-12));
  CHECK(t3[5].report.estimated_seconds() <= 1.25 * t3[5].report.floor_seconds());
  // The selection adds to the decode without it.
  const auto plain = neuron_shapes::paged_decode<trn3, ml::mxfp8>(64, 8192);
  CHECK(t3[0].report.gpsimd.seconds > plain.gpsimd.seconds);
  CHECK(t3[0].report.floor_seconds() >= plain.floor_seconds());
  // trn2: the decode's code steps, VectorE or GpSimd, balance around the selection's GpSimd work.
  const auto t2 = neuron_shapes::paged_decode_topk<trn2, ml::mxfp8>(64, 8192, 2048);
  CHECK(t2.estimated_seconds() <= 1.25 * t2.floor_seconds());
  CHECK(t2.vector.seconds == Approx(t2.gpsimd.seconds).epsilon(0.01));
}

TEST_CASE("neuron decode: requests too short for 128 rows of 64 tokens go as shorter runs",
          "[neuron]") {
  // 64 requests of 1024 keys on pages of 64: runs of 64 tokens fill 16 of a chunk's 128
  // partition rows, and trn2's decode passes (every key element, on VectorE / GpSimd) cost the
  // same per partition whatever the rows: runs of 8 tokens fill all 128, at eight times the
  // gather descriptors. The schedule takes them, and ends well under the runs of 64.
  const auto by64 = neuron_shapes::paged_decode<trn2, ml::mxfp8>(64, 1024, {.page_run = 64});
  const auto best = neuron_shapes::paged_decode<trn2, ml::mxfp8>(64, 1024);
  INFO(by64.summary() << best.summary());
  CHECK(by64.dma_gathered_rows == 64 * 16 * 2);
  CHECK(best.dma_gathered_rows == 64 * 128 * 2);
  CHECK(best.estimated_seconds() < 0.3 * by64.estimated_seconds());
  CHECK(best.estimated_seconds() <= 2.0 * best.floor_seconds());
  // trn3: runs of 16 or 8 where they end sooner; never slower than the runs of 64.
  const auto t64 = neuron_shapes::paged_decode<trn3, ml::mxfp8>(64, 1024, {.page_run = 64});
  const auto t = neuron_shapes::paged_decode<trn3, ml::mxfp8>(64, 1024);
  CHECK(t.estimated_seconds() < t64.estimated_seconds());
  CHECK(t.dma_gathered_rows > t64.dma_gathered_rows);
  // A run must divide the page.
  CHECK_THROWS_WITH((neuron_shapes::paged_decode<trn2, ml::mxfp8>(2, 512, {.page_run = 48})),
                    Catch::Contains("page_run = 48 does not divide"));
}

TEST_CASE("neuron trn3 pages of 128 and 256: runs of 128 tokens where they end the call sooner",
          "[neuron]") {
  // Runs of 128 tokens, one per partition row, take half the gather descriptors of runs of 64;
  // with 64 rows a chunk (8192 keys of one request) the K transposes stay at TensorE's full
  // rate (64 rows is its shortest pass), so the GpSimd time the descriptors free takes part of
  // the head sum: the decode ends sooner than with pages of 64, and within 1.25x of its floor.
  const auto p64 = neuron_shapes::paged_decode<trn3, ml::mxfp8>(64, 8192);
  for (const std::int32_t page : {128, 256}) {
    INFO("page " << page);
    const auto p = neuron_shapes::paged_decode<trn3, ml::mxfp8>(64, 8192, {}, {.page = page});
    CHECK(p.estimated_seconds() < p64.estimated_seconds());
    CHECK(p.estimated_seconds() <= 1.25 * p.floor_seconds());
    // Two gather descriptors (codes, scales) per run of 128 tokens where pages of 64 take four.
    CHECK(p64.dma_gathered_rows == 64 * 128 * 2);
    CHECK(p.dma_gathered_rows == 64 * 64 * 2);
  }
  // V4.1's candidate source: the selection's nisa.topk binds GpSimd, so each page of 128 goes
  // whole on one partition row, two descriptors (codes, scales) as the floor counts: per row
  // 256 pages x 2 x 16 cycles at 1.2 GHz. With runs GpSimd would write twice as many.
  const auto t3 = neuron_shapes::topk_lines<trn3>();
  const auto& src = t3[4].report;
  CHECK(src.floor.gpsimd_descriptors_s == Approx(64 * 256 * 2 * 16 / 1.2e9).epsilon(1e-12));
  CHECK(src.gpsimd.seconds < src.floor.gpsimd_topk_s + 1.25 * src.floor.gpsimd_descriptors_s);
  CHECK(src.estimated_seconds() <= 1.25 * src.floor_seconds());
  CHECK(t3[3].report.estimated_seconds() <= 1.25 * t3[3].report.floor_seconds());
}
