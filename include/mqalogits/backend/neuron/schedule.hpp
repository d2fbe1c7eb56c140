// The four kernels scheduled on the NeuronCore model (core.hpp).
//
// Keys (every kernel): a work item's keys (<= 512, one PSUM bank of fp32) arrive token-major by
// DMA, 128 tokens at a time ([tokens on partitions, row bytes], one descriptor per row; paged
// reads resolve one block-table entry per page, sparse reads one index per block). trn1 / trn2
// dequantise them on VectorE to bf16 (exact), trn3 unpacks the codes for the MX matmul; TensorE
// transposes them so the head dimension (the contraction) lies on partitions: K^T [128, <= 512].
//
// Decode (paged, sparse, paged-sparse; one query row or a request's next_n rows):
//   heads on PSUM partitions: S [rows x H, 512] = matmul(stationary Q^T [128, rows x H],
//   moving K^T [128, 512]); ScalarE relu while evacuating S to SBUF (fp32); the weighted head
//   sum is a second matmul with the weights stationary: logits [1, 512] = matmul(stationary
//   w [H, 1], moving relu(S) [H, 512]) per row, in fp32 (bf16 relu scores would cost 2^-9 of
//   SPEC §6's M, over its 2^-14 budget). Rows are packed two (H = 64) or four (H = 32) per score
//   matmul; other head counts run one row per matmul, so every head-sum operand starts on a
//   partition NKI's access rules allow.
// Prefill (dense): query tokens on partitions, up to 128 rows: per head h,
//   S_h [rows, 512] = matmul(stationary Q_h^T [128, rows], moving K^T), ScalarE relu on
//   evacuation, VectorE acc += relu * w[:, h] (a per-partition scalar), heads in order.
// Epilogue: VectorE casts the fp32 logits to the output type (RNE for bf16) and writes -inf in
// masked columns; DMA writes each row's candidate columns; -inf outside them when clean_logits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../exec/options.hpp"
#include "../../output/logits_row.hpp"
#include "../../variant/dense.hpp"
#include "../../variant/paged.hpp"
#include "../../variant/paged_sparse.hpp"
#include "../../variant/plan.hpp"
#include "../../variant/sparse.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "../backend.hpp"
#include "core.hpp"
#include "report.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class T>
inline constexpr bool is_dense_plan_v = false;
template <class F>
inline constexpr bool is_dense_plan_v<dense_plan<F>> = true;
template <class T>
inline constexpr bool is_paged_plan_v = false;
template <class F>
inline constexpr bool is_paged_plan_v<paged_plan<F>> = true;
template <class T>
inline constexpr bool is_sparse_plan_v = false;
template <class F>
inline constexpr bool is_sparse_plan_v<sparse_plan<F>> = true;

// Keys per work item: the moving free size of one matmul (one PSUM bank of fp32).
inline constexpr std::int64_t key_tile = common_traits::pe_max_moving;
// Tokens per DMA / transpose step: one per partition.
inline constexpr std::int64_t key_step = common_traits::partitions;
// Query rows per prefill item: one per partition.
inline constexpr std::int64_t prefill_rows = common_traits::partitions;

// Query rows packed into one decode score matmul (see the header comment).
constexpr std::int64_t decode_rows_per_pass(std::int64_t heads) {
  return heads == 32 ? 4 : heads == 64 ? 2 : 1;
}

template <class F>
inline constexpr bool is_mx_format_v = std::is_same_v<F, mxfp8> || std::is_same_v<F, mxfp4>;

template <class Gen, class Format, class Plan, class W, class O>
class kernel {
  using tr = traits<Gen>;
  // MXFP8 / MXFP4 on trn3 take the MX matmul path.
  static constexpr bool mx = tr::mx_matmul && is_mx_format_v<Format>;
  static constexpr dtype code_type = std::is_same_v<Format, mxfp4> ? dtype::fp4 : dtype::fp8;
  // The matmul operand type of Q and K: MX codes (trn3), bf16 after dequantising an MX format
  // (exact), or fp32 for fp8_per_token (code x fp32 scale is not exact in bf16; the matmul
  // then runs in fp32, 4 passes).
  static constexpr dtype operand_type = mx                       ? code_type
                                        : is_mx_format_v<Format> ? dtype::bf16
                                                                 : dtype::fp32;
  static constexpr dtype out_type = std::is_same_v<O, float> ? dtype::fp32 : dtype::bf16;
  static constexpr int db = Format::data_bytes, sb = Format::scale_bytes;

 public:
  kernel(core<Gen>& c, const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
         const matrix_view<O>& out, bool clean)
      : c_(c),
        q_(q),
        plan_(plan),
        w_(w),
        out_(out),
        clean_(clean),
        heads_(w.cols),
        // Streaming tiles, allocated once per call. Their shapes are compile-time constants, so
        // an overflow is a compile error (fits_sbuf_v / fits_psum_v); K^T is double-buffered.
        kt_(c.template sbuf<shape<operand_type, 128, key_tile>, 2>("K^T")),
        k_raw_(c.template sbuf<shape<dtype::u8, 128, db>, 2>("K rows")),
        k_exp_(c.template sbuf<shape<dtype::u8, 128, sb>, 2>("K scales")),
        k_rows_(c.template sbuf<shape<operand_type, 128, head_dim>>("K rows dequantised")),
        transposed_(c.template psum<shape<dtype::fp32, 128, 128>>("transpose")),
        scores_(c.template psum<shape<dtype::fp32, 128, key_tile>>("scores")),
        relu_(c.template sbuf<shape<dtype::fp32, 128, key_tile>>("relu(scores)")),
        logits_(c.template sbuf<shape<out_type, 128, key_tile>>("logits")) {
    if constexpr (mx) kt_exp_ = c.template sbuf<shape<dtype::u8, 4, key_tile>, 2>("K^T scales");
    valid_.resize(key_tile);
  }

  void run() {
    if (clean_) fill_outside();
    work_list work;
    plan_.fill_work(tiling{is_dense_plan_v<Plan> ? prefill_rows : 8, key_tile}, work);
    for (const work_item& item : work.items)
      for (std::int64_t k0 = item.key_begin; k0 < item.key_end; k0 += key_tile) {
        const std::int64_t n = std::min(key_tile, item.key_end - k0);
        load_keys(item.group, k0, n);
        if constexpr (is_dense_plan_v<Plan>)
          prefill(item, k0, n);
        else
          decode(item, k0, n);
      }
  }

 private:
  // ---- keys ----

  // Which indirect read a key belongs to (a block-table entry, a sparse block), or -1.
  std::int64_t gather_unit(std::int64_t k) const {
    if constexpr (is_paged_plan_v<Plan>)
      return k / plan_.cache().page_kv;
    else if constexpr (is_sparse_plan_v<Plan>)
      return k / plan_.sparse_block_kv();
    else
      return -1;
  }

  // K^T [128, n] (and its [4, n] scales on trn3) for keys [k0, k0 + n) of group g.
  void load_keys(std::int64_t g, std::int64_t k0, std::int64_t n) {
    std::int64_t last_unit = -1;
    for (std::int64_t s0 = 0; s0 < n; s0 += key_step) {
      const int m = static_cast<int>(std::min(key_step, n - s0));
      bool masked = false;
      keys_.clear();
      for (int i = 0; i < m; ++i) {
        keys_.push_back(plan_.key(g, k0 + s0 + i));
        valid_[static_cast<std::size_t>(s0 + i)] = keys_.back().valid();
        masked |= !keys_.back().valid();
      }
      const window raw(k_raw_, 0, m, 0, db), exp(k_exp_, 0, m, 0, sb);
      if (masked) {  // masked keys score a zero row; their columns become -inf
        c_.memset(raw, 0.0f);
        c_.memset(exp, 0.0f);
      }
      for (int i = 0; i < m; ++i) {
        if (!keys_[i].valid()) continue;
        if (const std::int64_t u = gather_unit(k0 + s0 + i); u >= 0 && u != last_unit) {
          c_.dma_gather();
          last_unit = u;
        }
        c_.dma_bytes_in(raw, i, 0, keys_[i].data, db);
        c_.dma_bytes_in(exp, i, 0, keys_[i].scale, sb);
      }
      to_operand(window(kt_, 0, 128, s0, m), raw, exp,
                 mx ? window(kt_exp_, 0, sb, s0, m) : window());
    }
  }

  // Raw rows [m, db] + exponents [m, 4] -> the transposed matmul operand [128, m] at dst (and,
  // on trn3, the transposed exponents [4, m] at dst_exp).
  void to_operand(const window& dst, const window& raw, const window& exp, const window& dst_exp,
                  bool has_scales = true) {
    const int m = raw.np;
    const window rows(k_rows_, 0, m, 0, head_dim), t(transposed_, 0, head_dim, 0, m);
    if constexpr (mx) {
      c_.template unpack_codes<Format>(rows, raw);
      c_.transpose(t, rows);
      c_.copy(dst, t);
      const window te(transposed_, 0, sb, 0, m);
      c_.transpose(te, exp);
      c_.copy(dst_exp, te);
    } else {
      c_.template dequantise<Format>(rows, raw, exp, has_scales);
      c_.transpose(t, rows);
      c_.copy(dst, t);
    }
  }

  // ---- queries ----

  // Q rows [first, first + count) of q (count <= 128) into a raw tile at partitions [0, count).
  void load_q_rows(tile& raw, tile& exp, std::int64_t first, std::int64_t count,
                   std::int64_t per_partition) {
    // One descriptor per partition row when a partition's rows are contiguous in HBM.
    const bool contiguous = q_.data_stride == db && q_.scale_stride == sb;
    for (std::int64_t p = 0; p < count; ++p)
      for (std::int64_t j = 0; j < per_partition; j += contiguous ? per_partition : 1) {
        const std::int64_t r = first + p * per_partition + j;
        const std::int64_t len = contiguous ? per_partition : 1;
        c_.dma_bytes_in(window(raw), p, j * db, q_.row(r), len * db);
        if (q_.scales) c_.dma_bytes_in(window(exp), p, j * sb, q_.scale(r), len * sb);
      }
  }

  // ---- prefill: query tokens on partitions ----

  struct prefill_q {
    std::int64_t row_begin = -1, row_end = -1;
    tile qt, qt_exp, w;  // Q^T [128, H x rows] (heads major), [4, H x rows], weights [rows, H]
  };

  void load_prefill_q(std::int64_t r0, std::int64_t r1) {
    if (pq_.row_begin == r0 && pq_.row_end == r1) return;  // resident from the last item
    pq_ = prefill_q{};
    const std::int64_t R = r1 - r0, H = heads_;
    pq_.row_begin = r0;
    pq_.row_end = r1;
    pq_.qt = c_.sbuf("Q^T", operand_type, 128, H * R);
    if constexpr (mx) pq_.qt_exp = c_.sbuf("Q^T scales", dtype::u8, sb, H * R);
    pq_.w = c_.sbuf("weights", dtype::fp32, R, H);
    {
      tile raw = c_.sbuf("Q rows", dtype::u8, R, H * db),
           exp = c_.sbuf("Q scales", dtype::u8, R, H * sb);
      load_q_rows(raw, exp, r0 * H, R, H);
      for (std::int64_t h = 0; h < H; ++h) {
        const int r = static_cast<int>(R);
        const window dst(pq_.qt, 0, 128, h * R, R);
        to_operand(dst, window(raw, 0, r, h * db, db), window(exp, 0, r, h * sb, sb),
                   mx ? window(pq_.qt_exp, 0, sb, h * R, R) : window(), q_.scales != nullptr);
      }
    }
    for (std::int64_t r = 0; r < R; ++r) c_.dma_values_in(window(pq_.w), r, 0, w_.row(r0 + r), H);
  }

  void prefill(const work_item& item, std::int64_t k0, std::int64_t n) {
    const std::int64_t R = item.row_end - item.row_begin;
    load_prefill_q(item.row_begin, item.row_end);
    const int r = static_cast<int>(R);
    const window acc(logits_acc(), 0, r, 0, n), relu(relu_, 0, r, 0, n);
    for (std::int64_t h = 0; h < heads_; ++h) {
      const window s(scores_, 0, r, 0, n);
      score(s, window(pq_.qt, 0, 128, h * R, R),
            mx ? window(pq_.qt_exp, 0, sb, h * R, R) : window(), n);
      c_.activation(relu, s, activation_fn::relu);
      c_.scale_add(acc, relu, window(pq_.w, 0, r, h, 1), h == 0);
    }
    store(acc, item.row_begin, R, k0, n);
  }

  // The fp32 accumulator of prefill, allocated on first use.
  tile& logits_acc() {
    if (acc_.partitions() == 0)
      acc_ = c_.template sbuf<shape<dtype::fp32, 128, key_tile>>("head-sum accumulator");
    return acc_;
  }

  // ---- decode: heads on PSUM partitions ----

  struct decode_pass {
    std::int64_t row_begin = 0, row_end = 0;
    tile qt, qt_exp, w;  // Q^T [128, rows x H], [4, rows x H], weights [rows x H, 1]
  };

  void load_decode_q(std::int64_t r0, std::int64_t r1) {
    if (dq_row_begin_ == r0 && dq_row_end_ == r1) return;  // resident from the last item
    passes_.clear();
    dq_row_begin_ = r0;
    dq_row_end_ = r1;
    const std::int64_t H = heads_, per = decode_rows_per_pass(H);
    for (std::int64_t a = r0; a < r1; a += per) {
      decode_pass pass;
      pass.row_begin = a;
      pass.row_end = std::min(r1, a + per);
      const std::int64_t P = (pass.row_end - a) * H;
      const int p = static_cast<int>(P);
      pass.qt = c_.sbuf("Q^T", operand_type, 128, P);
      if constexpr (mx) pass.qt_exp = c_.sbuf("Q^T scales", dtype::u8, sb, P);
      pass.w = c_.sbuf("weights", dtype::fp32, P, 1);
      {
        tile raw = c_.sbuf("Q rows", dtype::u8, P, db), exp = c_.sbuf("Q scales", dtype::u8, P, sb);
        load_q_rows(raw, exp, a * H, P, 1);
        to_operand(window(pass.qt), window(raw, 0, p, 0, db), window(exp, 0, p, 0, sb),
                   mx ? window(pass.qt_exp) : window(), q_.scales != nullptr);
      }
      // Weights of row r, head h onto partition (r - a) x H + h: one descriptor per partition.
      for (std::int64_t r = a; r < pass.row_end; ++r)
        for (std::int64_t h = 0; h < H; ++h)
          c_.dma_values_in(window(pass.w), (r - a) * H + h, 0, w_.row(r) + h, 1);
      passes_.push_back(std::move(pass));
    }
  }

  void decode(const work_item& item, std::int64_t k0, std::int64_t n) {
    load_decode_q(item.row_begin, item.row_end);
    const std::int64_t H = heads_;
    for (decode_pass& pass : passes_) {
      const int P = static_cast<int>(pass.qt.free());
      const window s(scores_, 0, P, 0, n), relu(relu_, 0, P, 0, n);
      score(s, window(pass.qt), mx ? window(pass.qt_exp) : window(), n);
      c_.activation(relu, s, activation_fn::relu);
      for (std::int64_t r = pass.row_begin; r < pass.row_end; ++r) {
        const int p0 = static_cast<int>((r - pass.row_begin) * H), h = static_cast<int>(H);
        tile sum = c_.template psum<shape<dtype::fp32, 1, key_tile>>("head sum");
        const window out(sum, 0, 1, 0, n);
        c_.matmul(out, window(pass.w, p0, h, 0, 1), window(relu_, p0, h, 0, n), false, true);
        store(out, r, 1, k0, n);
      }
    }
  }

  // ---- shared steps ----

  // S = Q^T' K^T for n keys: a bf16 matmul (trn1 / trn2) or an MX matmul (trn3).
  void score(const window& s, const window& qt, const window& qt_exp, std::int64_t n) {
    const window kt(kt_, 0, 128, 0, n);
    if constexpr (mx)
      c_.matmul_mx(s, qt, qt_exp, kt, window(kt_exp_, 0, sb, 0, n), false);
    else
      c_.matmul(s, qt, kt, false);
  }

  // fp32 logits [R, n] of rows [r0, r0 + R), keys [k0, k0 + n): cast (RNE for bf16), -inf on
  // masked keys when clean, then one DMA row per output row over its candidate columns.
  void store(const window& logits, std::int64_t r0, std::int64_t R, std::int64_t k0,
             std::int64_t n) {
    const window o(logits_, 0, static_cast<int>(R), 0, n);
    if (clean_)
      c_.select(o, logits, valid_, -std::numeric_limits<float>::infinity());
    else
      c_.copy(o, logits);
    for (std::int64_t r = 0; r < R; ++r) {
      const row_keys rk = plan_.row(r0 + r);
      const std::int64_t lo = std::max(k0, rk.key_begin), hi = std::min(k0 + n, rk.key_end);
      if (lo < hi) c_.dma_values_out(out_.row(r0 + r) - rk.col_offset + lo, o, r, lo - k0, hi - lo);
    }
  }

  // -inf in every column outside a row's candidate range: a DMA from a constant SBUF row.
  void fill_outside() {
    const O minus_inf = from_float<O>(-std::numeric_limits<float>::infinity());
    for (std::int64_t r = 0; r < out_.rows; ++r) {
      const row_keys k = plan_.row(r);
      const std::int64_t c0 = k.empty() ? out_.cols : k.key_begin - k.col_offset;
      const std::int64_t c1 = k.empty() ? out_.cols : k.key_end - k.col_offset;
      if (c0 > 0) c_.dma_fill_out(out_.row(r), c0, minus_inf);
      if (out_.cols > c1) c_.dma_fill_out(out_.row(r) + c1, out_.cols - c1, minus_inf);
    }
  }

  core<Gen>& c_;
  const rows_view<Format>& q_;
  const Plan& plan_;
  const matrix_view<const W>& w_;
  const matrix_view<O>& out_;
  bool clean_;
  std::int64_t heads_;
  tile kt_, kt_exp_, k_raw_, k_exp_, k_rows_, transposed_, scores_, relu_, logits_, acc_;
  std::vector<key_ref> keys_;
  std::vector<unsigned char> valid_;
  prefill_q pq_;
  std::vector<decode_pass> passes_;
  std::int64_t dq_row_begin_ = -1, dq_row_end_ = -1;
};

}  // namespace neuron_backend

template <class Gen>
struct backend_kernels<backend::neuron<Gen>> {
  // Arguments are validated by the caller. The model runs one NeuronCore's schedule on the
  // calling thread (options.executor is not used) and adds its cost to the thread's open
  // neuron_backend::capture, if any.
  template <class Format, class Plan, class W, class O>
  static void run(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
                  logits_row_output<O>& output, const options&) {
    neuron_backend::core<Gen> c;
    {
      neuron_backend::kernel<Gen, Format, Plan, W, O> k(c, q, plan, w, output.view(),
                                                        output.clean());
      k.run();
    }
    if (neuron_backend::report* r = neuron_backend::current_report())
      neuron_backend::accumulate(*r, c.counters());
  }
};

MQALOGITS_NAMESPACE_END
