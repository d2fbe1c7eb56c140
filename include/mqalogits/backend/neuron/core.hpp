// A small NeuronCore model: SBUF / PSUM tiles with their budgets enforced, and the engines the
// indexer schedule uses (DMA, TensorE, ScalarE, VectorE, GpSimd), each counting what it costs
// under the rules of its generation (traits.hpp).
//
// It runs on the host in fp32, one instruction at a time (no cycle simulation). Values in a
// tile are held as fp32; every element type used here (bytes, e4m3 / e2m1 codes, bf16, fp32) is
// exact in fp32, and a write to a bf16 tile rounds to nearest even, as VectorE / ScalarE do.
// The x4 types are nc_matmul_mx's packed operands (trn3): one element holds four codes.
//
// A core built with compute = false counts every instruction exactly as it would otherwise but
// computes no value (tiles hold no storage): the cost-only mode of a capture.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "decode_steps.hpp"
#include "dtype.hpp"
#include "memory.hpp"
#include "report.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

enum class activation_fn : std::uint8_t { identity, relu };

// The engine of an elementwise instruction that more than one engine executes: a relu or
// identity evacuation (ScalarE's activation, or VectorE's tensor_scalar / tensor_copy), a
// weighted accumulation (VectorE's or GpSimd's scalar_tensor_tensor; GpSimd reads SBUF only).
enum class elementwise_engine : std::uint8_t { scalar, vector, gpsimd };

// Where decode_codes finds each code's block scale: `exps`, UE8M0 exponents (integers) of the
// codes' own shape (e.g. spread into PSUM), or `values`, the 2^(e - 127) values of decode_scales
// in the layout the scales arrive in: per partition, row j of `row` codes reads the `per_row`
// columns from j x per_row, code i of the row column i / 32 (a broadcast access pattern).
// Neither: no scales.
struct block_scales {
  const window* exps = nullptr;
  const window* values = nullptr;
  std::int64_t row = 0, per_row = 0;
};

// Which counter a matmul adds to.
enum class matmul_kind : std::uint8_t { score, head_sum, broadcast };

// One NeuronCore of generation Gen: its two memories and its engines. Every engine call checks
// the rules its instruction has, computes its result (unless cost-only) and adds its cost.
template <class Gen>
class core {
 public:
  using traits_type = traits<Gen>;

  explicit core(bool compute = true)
      : compute_(compute),
        sbuf_(memory::sbuf, traits_type::sbuf_partition_bytes, 64,
              traits_type::sbuf_partition_bytes, traits_type::name, compute),
        psum_(memory::psum, traits_type::psum_partition_bytes, traits_type::psum_bank_bytes,
              max_psum_tile_bytes<Gen>, traits_type::name, compute, traits_type::psum_bf16_output) {
    report_.generation = traits_type::name;
    report_.psum_read_exclusive = traits_type::psum_read_exclusive;
    report_.sbuf_vector_gpsimd_exclusive = traits_type::sbuf_vector_gpsimd_exclusive;
  }
  bool computes() const { return compute_; }

  // ---- allocation ----
  template <class Shape, int Buffers = 1>
  tile sbuf(const char* name) {
    static_assert(fits_sbuf_v<Gen, Shape::type, Shape::partitions, Shape::free, Buffers>,
                  "mqalogits neuron model: this SBUF tile does not fit one partition's budget");
    return sbuf_.allocate(name, Shape::type, Shape::partitions, Shape::free, Buffers);
  }
  tile sbuf(const char* name, dtype type, std::int64_t partitions, std::int64_t free,
            int buffers = 1) {
    return sbuf_.allocate(name, type, partitions, free, buffers);
  }
  // Buffers = 2: a streaming tile double-buffered (TensorE fills one bank set while ScalarE /
  // VectorE drain the other), so it holds twice its banks of the 8.
  template <class Shape, int Buffers = 1>
  tile psum(const char* name) {
    static_assert(Shape::type == dtype::fp32, "mqalogits neuron model: PSUM tiles are fp32");
    static_assert(fits_psum_v<Gen, Shape::partitions, Shape::free>,
                  "mqalogits neuron model: this PSUM tile is larger than one matmul output");
    static_assert(Buffers * psum_banks_of(Shape::free) <= traits_type::psum_banks,
                  "mqalogits neuron model: these PSUM buffers need more banks than exist");
    return psum_.allocate(name, dtype::fp32, Shape::partitions, Shape::free, Buffers);
  }
  tile psum(const char* name, std::int64_t partitions, std::int64_t free, dtype type = dtype::fp32,
            int buffers = 1) {
    return psum_.allocate(name, type, partitions, free, buffers);
  }
  const pool& sbuf_pool() const { return sbuf_; }
  const pool& psum_pool() const { return psum_; }

  // ---- DMA (HBM <-> SBUF) ----

  // One DMA instruction: its rows are its descriptors (one per partition row). The transfer is
  // charged when it ends: a fixed cost (overlapping with the other queues) plus its bytes and a
  // per-descriptor overhead at the per-core bandwidth. A gather is an indirect transfer reading
  // `blocks` blocks, one per partition row; on trn2 its descriptors are written by GpSimd.
  class transfer {
   public:
    transfer(core& c, std::int64_t gathered_blocks = 0) : c_(c), blocks_(gathered_blocks) {}
    ~transfer() { c_.finish_transfer(descriptors_, bytes_, blocks_); }
    transfer(const transfer&) = delete;
    transfer& operator=(const transfer&) = delete;

    // `bytes` raw bytes from HBM into partition p of a u8 tile, from element c0 (src null: the
    // row is read but its bytes are not kept, e.g. slots past the context).
    // dma_row::part_of_block: part of a row counted by row() (a block read as one descriptor).
    void bytes_in(const window& dst, std::int64_t p, std::int64_t c0, const std::uint8_t* src,
                  std::int64_t bytes, dma_row counted = dma_row::own_descriptor) {
      c_.check(dst.type() == dtype::u8 && dst.space() == memory::sbuf,
               "DMA bytes go to a u8 SBUF tile");
      c_.check(c0 + bytes <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      if (c_.compute_)
        for (std::int64_t i = 0; i < bytes; ++i) dst.at(p, c0 + i) = src ? src[i] : 0.0f;
      if (counted == dma_row::own_descriptor) row(bytes);
    }
    // n e4m3fn codes of Format rows into partition p of an fp8 tile (trn3, where e4m3fn is a
    // native type; the tile holds the code values).
    template <class Format>
    void codes_in(const window& dst, std::int64_t p, std::int64_t c0, const std::uint8_t* src,
                  std::int64_t n, dma_row counted = dma_row::own_descriptor) {
      c_.check(dst.type() == dtype::fp8 && dst.space() == memory::sbuf,
               "DMA codes go to an fp8 SBUF tile");
      c_.check(c0 + n <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      if (c_.compute_)
        for (std::int64_t i = 0; i < n; ++i)
          dst.at(p, c0 + i) =
              src ? Format::element(src + (i / Format::head_dim) * Format::data_bytes,
                                    static_cast<int>(i % Format::head_dim))
                  : 0.0f;
      if (counted == dma_row::own_descriptor) row(n);
    }
    // `words` packed x4 elements of Format rows (consecutive data rows of head_dim / 4 words, src
    // null: read, not kept) into partition p of an x4 tile, from element c0.
    template <class Format>
    void words_in(const window& dst, std::int64_t p, std::int64_t c0, const std::uint8_t* src,
                  std::int64_t words, dma_row counted = dma_row::own_descriptor) {
      c_.check(dtype_lanes(dst.type()) == 4 && dst.space() == memory::sbuf,
               "DMA words go to an x4 SBUF tile");
      c_.check(c0 + words <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      constexpr int per_row = Format::head_dim / mx_pack;
      if (c_.compute_)
        for (std::int64_t w = 0; w < words; ++w)
          for (int j = 0; j < mx_pack; ++j)
            dst.at(p, c0 + w, j) =
                src ? Format::element(src + (w / per_row) * Format::data_bytes,
                                      static_cast<int>((w % per_row) * mx_pack + j))
                    : 0.0f;
      if (counted == dma_row::own_descriptor) row(partition_bytes(dst.type(), words));
    }
    // n packed x4 words (consecutive, 4 or 2 bytes each) into partition p of an x4 tile.
    template <class Format>
    void packed_words_in(const window& dst, std::int64_t p, std::int64_t c0,
                         const std::uint8_t* src, std::int64_t n,
                         dma_row counted = dma_row::own_descriptor) {
      c_.check(dtype_lanes(dst.type()) == 4 && dst.space() == memory::sbuf,
               "DMA words go to an x4 SBUF tile");
      c_.check(c0 + n <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      constexpr int word_bytes = mx_pack * Format::data_type::bits / 8;
      if (c_.compute_)
        for (std::int64_t w = 0; w < n; ++w)
          for (int j = 0; j < mx_pack; ++j)
            dst.at(p, c0 + w, j) = Format::element(src + w * word_bytes, j);
      if (counted == dma_row::own_descriptor) row(n * word_bytes);
    }
    // n values of T into partition p of an SBUF tile.
    template <class T>
    void values_in(const window& dst, std::int64_t p, std::int64_t c0, const T* src, std::int64_t n,
                   dma_row counted = dma_row::own_descriptor) {
      c_.check(dst.space() == memory::sbuf && c0 + n <= dst.nc && p < dst.np,
               "DMA row past the end of its tile");
      if (c_.compute_)
        for (std::int64_t i = 0; i < n; ++i)
          dst.at(p, c0 + i) = src ? store_as(dst.type(), to_float(src[i])) : 0.0f;
      if (counted == dma_row::own_descriptor) row(n * static_cast<std::int64_t>(sizeof(T)));
    }
    // Partition p, elements [c0, c0 + n) of an SBUF tile to HBM as T.
    template <class T>
    void values_out(T* dst, const window& src, std::int64_t p, std::int64_t c0, std::int64_t n) {
      c_.check(src.space() == memory::sbuf && c0 + n <= src.nc && p < src.np,
               "DMA row past the end of its tile");
      if (c_.compute_)
        for (std::int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(src.at(p, c0 + i));
      row(n * static_cast<std::int64_t>(sizeof(T)));
    }
    // A constant SBUF row (e.g. -inf) into n elements of T in HBM.
    template <class T>
    void fill_out(T* dst, std::int64_t n, T value) {
      if (c_.compute_) std::fill(dst, dst + n, value);
      row(n * static_cast<std::int64_t>(sizeof(T)));
    }

    // One descriptor (partition row) of `bytes` bytes.
    void row(std::int64_t bytes) {
      ++descriptors_;
      bytes_ += bytes;
      if (bytes < traits_type::dma_small_row_bytes) ++c_.report_.dma_small_descriptors;
      if (bytes < traits_type::dma_efficient_row_bytes) ++c_.report_.dma_inefficient_descriptors;
    }

   private:
    core& c_;
    std::int64_t blocks_, descriptors_ = 0, bytes_ = 0;
  };
  transfer dma() { return transfer(*this); }
  transfer gather(std::int64_t blocks) { return transfer(*this, blocks); }

  // ---- TensorE ----

  // out [M, N] (PSUM) = stationary [K, M]^T @ moving [K, N], contraction K on partitions; fp32
  // accumulation; write_mode::overwrite (the default: the first matmul into a tile) or accumulate.
  // `out` may start past partition 0 where the stationary fits a column tile (see check_matmul).
  // Operands both bf16, both fp32 (4 passes) or both fp8 (e4m3fn codes, where native; double
  // row: two moving rows per cycle on trn2 / trn3). Cost: max(N, 64) cycles per pass.
  void matmul(const window& out, const window& stationary, const window& moving,
              matmul_kind kind = matmul_kind::score, write_mode mode = write_mode::overwrite) {
    const std::int64_t K = stationary.np, M = stationary.nc, N = moving.nc;
    const dtype t = stationary.type();
    check_matmul(out, stationary, moving,
                 out.type() == dtype::bf16 ? traits_type::pe_max_moving_bf16
                                           : traits_type::pe_max_moving_fp32);
    check(t == moving.type() && (t == dtype::bf16 || t == dtype::fp32 ||
                                 (t == dtype::fp8 && traits_type::native_e4m3fn)),
          "matmul operands are both bf16, both fp32 or both fp8 (e4m3fn is native on trn3 only; "
          "MX codes go through matmul_mx)");
    if (compute_) {
      detail::vector<float> acc(static_cast<std::size_t>(M * N), 0.0f);
      for (std::int64_t k = 0; k < K; ++k)
        for (std::int64_t m = 0; m < M; ++m) {
          const float a = stationary.at(k, m);
          float* o = acc.data() + m * N;
          for (std::int64_t n = 0; n < N; ++n) o[n] += a * moving.at(k, n);
        }
      write_psum(out, acc, mode);
    }
    // fp8 costs what bf16 does: double row would need a contraction above 128 (traits).
    const std::int64_t cycles = (t == dtype::fp32 ? traits_type::pe_fp32_passes : 1) *
                                std::max(N, traits_type::pe_min_cycles);
    tensor_instruction(cycles);
    if (kind == matmul_kind::broadcast) {
      ++report_.matmul_broadcast;  // a partition broadcast, not arithmetic
    } else {
      (kind == matmul_kind::head_sum ? report_.matmul_head_sum : report_.matmul_score) += 1;
      report_.matmul_flops += 2 * K * M * N;
    }
  }

  // nc_matmul_mx (trn3): x4-packed fp8 / fp4 code operands on a multiple of 32 partitions (a
  // 128-wide contraction is 32 partitions), starting at a quadrant; stationary free size even;
  // one UE8M0 scale per 32 contraction elements in the quadrant's scale rows (4 per 32
  // partitions) of [np / 8, M] and [np / 8, N] u8 windows at the operands' partition start.
  // Per scale block the code products are summed in fp32, scaled by both block scales and
  // accumulated in fp32. Four 32-partition matmuls on distinct quadrants run at once (row
  // tiling), so one costs np / 128 of max(N, 64) cycles (derived: the schedule issues them four
  // at a time).
  void matmul_mx(const window& out, const window& st, const window& st_scales, const window& mv,
                 const window& mv_scales, write_mode mode = write_mode::overwrite) {
    static_assert(traits_type::mx_matmul || dependent_false<Gen>,
                  "mqalogits neuron model: the MX matmul exists on trn3 only");
    const std::int64_t P = st.np, M = st.nc, N = mv.nc;
    check_matmul(out, st, mv, traits_type::pe_max_moving_fp32);
    check((st.type() == dtype::fp8x4 || st.type() == dtype::fp4x4) && st.type() == mv.type(),
          "matmul_mx operands are both fp8x4 or both fp4x4 packed codes");
    check(P % mx_quadrant == 0 && st.p0 % mx_quadrant == 0,
          "matmul_mx operands span a multiple of 32 partitions from a quadrant");
    check(M % 2 == 0, "matmul_mx stationary free size must be even");
    const int rows = static_cast<int>(P * mx_pack / scale_block);  // scale rows: 4 per quadrant
    check(st_scales.type() == dtype::u8 && mv_scales.type() == dtype::u8 && st_scales.np == rows &&
              mv_scales.np == rows && st_scales.p0 == st.p0 && mv_scales.p0 == mv.p0 &&
              st_scales.nc == M && mv_scales.nc == N,
          "matmul_mx scales are u8 [np / 8, M] and [np / 8, N] in the operands' quadrant rows");
    if (compute_) {
      detail::vector<float> acc(static_cast<std::size_t>(M * N), 0.0f), block(acc.size());
      constexpr int parts_per_block = scale_block / mx_pack;  // 8 partitions per scale block
      for (int b = 0; b < rows; ++b) {
        std::fill(block.begin(), block.end(), 0.0f);
        for (int k = b * parts_per_block; k < (b + 1) * parts_per_block; ++k)
          for (int j = 0; j < mx_pack; ++j)
            for (std::int64_t m = 0; m < M; ++m) {
              const float a = st.at(k, m, j);
              float* o = block.data() + m * N;
              for (std::int64_t n = 0; n < N; ++n) o[n] += a * mv.at(k, n, j);
            }
        for (std::int64_t m = 0; m < M; ++m) {
          const float a = ue8m0_values[static_cast<std::uint8_t>(st_scales.at(b, m))];
          for (std::int64_t n = 0; n < N; ++n)
            acc[static_cast<std::size_t>(m * N + n)] +=
                block[static_cast<std::size_t>(m * N + n)] *
                (a * ue8m0_values[static_cast<std::uint8_t>(mv_scales.at(b, n))]);
        }
      }
      write_psum(out, acc, mode);
    }
    tensor_instruction((std::max(N, traits_type::pe_min_cycles) * P + 127) / 128);
    ++report_.matmul_score;
    report_.matmul_flops += 2 * P * mx_pack * M * N;
  }

  // out [F, P] (PSUM) = in [P, F]^T on TensorE: a matmul of `in` (stationary, P <= 128,
  // F <= 128) against the identity (moving, N = P), so max(P, 64) cycles, for 32-bit elements
  // (fp32, fp8x4 words) 4 passes on trn1 and 2 in the transpose mode of trn2 / trn3. trn1's TensorE
  // transpose is not bit-accurate on NaN / Inf, so there it refuses them (the schedule uses
  // VectorE's transpose for such data).
  void transpose(const window& out, const window& in) {
    check(in.np <= traits_type::pe_max_contraction && in.nc <= traits_type::pe_max_stationary,
          "transpose input is at most [128 x 128]");
    check(out.space() == memory::psum && out.np == in.nc && out.nc == in.np &&
              dtype_lanes(out.type()) == dtype_lanes(in.type()),
          "transpose writes a [F, P] PSUM tile of the input's lanes");
    check_partition_start(in);
    check_partition_start(out);
    const int lanes = dtype_lanes(in.type());
    if (compute_) {
      if constexpr (!traits_type::exact_pe_transpose)
        for (std::int64_t p = 0; p < in.np; ++p)
          for (std::int64_t f = 0; f < in.nc; ++f)
            check(std::isfinite(in.at(p, f)),
                  "TensorE transposes are not bit-accurate on NaN / Inf on trn1");
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t f = 0; f < in.nc; ++f)
          for (int j = 0; j < lanes; ++j) out.at(f, p, j) = in.at(p, f, j);
    }
    const std::int64_t passes =
        dtype_bits(in.type()) == 32 ? traits_type::pe_fp32_transpose_passes : 1;
    tensor_instruction(passes * std::max<std::int64_t>(in.np, traits_type::pe_min_cycles));
    ++report_.matmul_transpose;
  }

  // ---- ScalarE ----

  // out = fn(in * scale[p]) for every partition p (scale: a [P, 1] tile, or null for 1), fp32
  // inside; the usual way to evacuate PSUM. relu keeps NaN.
  void activation(const window& out, const window& in, activation_fn fn,
                  const window* scale = nullptr,
                  elementwise_engine on = elementwise_engine::scalar) {
    check_same_shape(out, in);
    check(!scale || (scale->np == in.np && scale->nc == 1), "activation scale is [P, 1]");
    if (compute_)
      for (std::int64_t p = 0; p < in.np; ++p) {
        const float s = scale ? scale->at(p, 0) : 1.0f;
        for (std::int64_t i = 0; i < in.nc; ++i) {
          float v = scale ? in.at(p, i) * s : in.at(p, i);
          if (fn == activation_fn::relu && v < 0.0f) v = 0.0f;
          out.at(p, i) = store_as(out.type(), v);
        }
      }
    evacuation_cost(in.nc, is_narrow(in.type()) && is_narrow(out.type()),
                    in.space() == memory::psum, on);
  }

  // fn over `groups` blocks of n columns of `in` (block j from in.c0 + j x in_stride) into
  // `out`, element c of block j at out.c0 + c x out_step + j x out_group: one instruction with a
  // two-dimensional access pattern on each side (NKI access patterns have several free
  // dimensions), e.g. the four MX quadrant outputs of a tile evacuated in key order at once.
  void activation_2d(const window& out, std::int64_t out_step, std::int64_t out_group,
                     const window& in, std::int64_t in_stride, int groups, std::int64_t n,
                     activation_fn fn, elementwise_engine on = elementwise_engine::scalar) {
    check(out.np == in.np && groups >= 1 && n >= 1 && out_step >= 1 && out_group >= 0 &&
              in_stride >= n,
          "activation_2d keeps partitions; blocks of n columns");
    check(in.c0 + (groups - 1) * in_stride + n <= in.t->free() &&
              out.c0 + (n - 1) * out_step + (groups - 1) * out_group < out.t->free(),
          "activation_2d access pattern reaches past the end of its tile");
    check_partition_start(window(*in.t, in.p0, in.np, in.c0, 1));
    check_partition_start(window(*out.t, out.p0, out.np, out.c0, 1));
    if (compute_)
      for (std::int64_t p = 0; p < in.np; ++p)
        for (int j = 0; j < groups; ++j)
          for (std::int64_t c = 0; c < n; ++c) {
            float v = in.t->at(in.p0 + p, in.c0 + j * in_stride + c);
            if (fn == activation_fn::relu && v < 0.0f) v = 0.0f;
            out.t->at(out.p0 + p, out.c0 + c * out_step + j * out_group) = store_as(out.type(), v);
          }
    evacuation_cost(groups * n, is_narrow(in.type()) && is_narrow(out.type()),
                    in.space() == memory::psum, on);
  }

  // ---- VectorE (fp32 inside, round to nearest even when writing bf16) ----

  void memset(const window& out, float value) {
    check_partition_start(out);
    if (compute_)
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i) out.at(p, i) = store_as(out.type(), value);
    vector_instruction(out.nc, 1, is_narrow(out.type()), false);
  }
  // out = in (PSUM -> SBUF evacuation or a cast), lane by lane for x4 elements: VectorE's
  // tensor_copy, or (`on`) ScalarE's identity activation, whose fp32 data path carries one value
  // per element, not x4 words.
  void copy(const window& out, const window& in,
            elementwise_engine on = elementwise_engine::vector) {
    check_same_shape(out, in);
    check(dtype_lanes(out.type()) == dtype_lanes(in.type()), "copy keeps the lanes");
    const int lanes = dtype_lanes(in.type());
    check(on == elementwise_engine::vector || (on == elementwise_engine::scalar && lanes == 1),
          "a copy runs on VectorE, or on ScalarE for one value per element");
    if (compute_)
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t i = 0; i < in.nc; ++i)
          for (int j = 0; j < lanes; ++j) out.at(p, i, j) = store_as(out.type(), in.at(p, i, j));
    const std::int64_t before = report_.scalar.cycles;
    evacuation_cost(in.nc, is_narrow(in.type()) && is_narrow(out.type()),
                    in.space() == memory::psum, on);
    if (on == elementwise_engine::scalar) {
      ++report_.scalar_copies;
      report_.scalar_copy_cycles += report_.scalar.cycles - before;
    }
  }
  // acc = in * scalar[p] + (first ? 0 : acc), the per-partition scalar a [P, 1] tile (NKI's
  // scalar_tensor_tensor: two tensor inputs).
  // On GpSimd (`on`): one element per lane per cycle, 2N for two inputs, SBUF operands only.
  void scale_add(const window& acc, const window& in, const window& scalar, write_mode mode,
                 elementwise_engine on = elementwise_engine::vector) {
    const bool first = mode == write_mode::overwrite;
    check_same_shape(acc, in);
    check(scalar.np == in.np && scalar.nc == 1, "scale_add scalar is [P, 1]");
    check(on != elementwise_engine::scalar, "scale_add runs on VectorE or GpSimd");
    check(on != elementwise_engine::gpsimd ||
              (in.space() == memory::sbuf && acc.space() == memory::sbuf),
          "GpSimd reads and writes SBUF only");
    if (compute_)
      for (std::int64_t p = 0; p < in.np; ++p) {
        const float s = scalar.at(p, 0);
        for (std::int64_t i = 0; i < in.nc; ++i) {
          const float v = in.at(p, i) * s;
          acc.at(p, i) = store_as(acc.type(), first ? 0.0f + v : acc.at(p, i) + v);
        }
      }
    if (on == elementwise_engine::gpsimd)
      gpsimd_elementwise(in.nc, first ? 1 : 2);
    else
      vector_instruction(in.nc, first ? 1 : 2, is_narrow(in.type()) && is_narrow(acc.type()),
                         in.space() == memory::psum);
  }
  // out[p, i] = valid[i] ? in[p, src[i]] : fill, lane by lane: a predicated copy reading its
  // input through an access pattern (src: a column map, null for the identity) with a column
  // mask shared by all partitions (null: every column valid). The epilogue's cast and -inf,
  // and the staging copies of the MX layout. Two inputs when masked.
  void select(const window& out, const window& in, const std::int32_t* src,
              const unsigned char* valid, float fill) {
    check(out.np == in.np && dtype_lanes(out.type()) == dtype_lanes(in.type()),
          "select keeps partitions and lanes");
    check_partition_start(out);
    check_partition_start(in);
    const int lanes = dtype_lanes(in.type());
    if (compute_)
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          for (int j = 0; j < lanes; ++j)
            out.at(p, i, j) =
                store_as(out.type(), !valid || valid[i] ? in.at(p, src ? src[i] : i, j) : fill);
    vector_instruction(out.nc, valid ? 2 : 1, is_narrow(in.type()) && is_narrow(out.type()),
                       in.space() == memory::psum);
  }
  // out[p, i] = mask[p, i] ? in[p, i] : fill, lane by lane: a predicated copy with a u8 mask
  // tile of the same shape (tensor_tensor: two inputs).
  void select_where(const window& out, const window& in, const window& mask, float fill) {
    check_same_shape(out, in);
    check_same_shape(out, mask);
    check(mask.type() == dtype::u8 && dtype_lanes(out.type()) == dtype_lanes(in.type()),
          "select_where takes a u8 mask and keeps the lanes");
    const int lanes = dtype_lanes(in.type());
    if (compute_)
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          for (int j = 0; j < lanes; ++j)
            out.at(p, i, j) = store_as(out.type(), mask.at(p, i) != 0.0f ? in.at(p, i, j) : fill);
    vector_instruction(out.nc, 2, is_narrow(in.type()) && is_narrow(out.type()),
                       in.space() == memory::psum);
  }
  // out = a * |b| elementwise (tensor_tensor; b read through its access pattern).
  void multiply_abs(const window& out, const window& a, const window& b) {
    check_same_shape(out, a);
    check_same_shape(out, b);
    if (compute_)
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          out.at(p, i) = store_as(out.type(), a.at(p, i) * std::fabs(b.at(p, i)));
    vector_instruction(out.nc, 2, false, a.space() == memory::psum || b.space() == memory::psum);
  }
  // Flips the sign of the codes of every row whose fp32 scale is negative: codes [P, S x per]
  // (u8 bytes: bit 7; fp8 values: negated), scales [P, S], one scale per `per` codes (a
  // tensor_tensor XOR with the scales' sign bits broadcast along each row).
  void flip_signs(const window& codes, const window& scales, std::int64_t per) {
    check(scales.np == codes.np && scales.nc * per == codes.nc, "flip_signs scales are [P, S]");
    check_partition_start(codes);
    if (compute_)
      for (std::int64_t p = 0; p < codes.np; ++p)
        for (std::int64_t i = 0; i < codes.nc; ++i)
          if (std::signbit(scales.at(p, i / per))) {
            float& c = codes.at(p, i);
            c = codes.type() == dtype::u8 ? static_cast<float>(static_cast<int>(c) ^ 0x80) : -c;
          }
    vector_instruction(codes.nc, 2, is_narrow(codes.type()), false);
  }
  // Low and high nibbles of [P, m] bytes into [P, 2m] e2m1 codes, each in the high half of its
  // byte, where a signed read puts its sign bit (x << 4 to the even elements, x & 0xF0 to the odd
  // ones: two one-input integer steps, integer_step).
  void unpack_nibbles(const window& out, const window& in) {
    check(
        in.type() == dtype::u8 && out.type() == dtype::u8 && out.np == in.np && out.nc == 2 * in.nc,
        "unpack_nibbles reads [P, m] bytes into [P, 2m] codes");
    check_partition_start(out);
    check_partition_start(in);
    if (compute_)
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t i = 0; i < in.nc; ++i) {
          const int b = static_cast<int>(in.at(p, i));
          out.at(p, 2 * i) = static_cast<float>((b << 4) & 0xF0);
          out.at(p, 2 * i + 1) = static_cast<float>(b & 0xF0);
        }
    integer_step(in.nc);
    integer_step(in.nc);
  }
  // Decodes codes (e4m3fn bytes, or e2m1 codes in the high half of a byte when Format is MXFP4)
  // held as integers into their values in out's type, times their block scales (`scales`; none:
  // times 1). Charged as the format's instruction sequence (e4m3_decode_steps / e2m1_decode_steps;
  // the nibble split is unpack_nibbles'), the NaN codes' predicated copy only where a code is NaN
  // (cost-only runs see none), plus the exponents' decode when `scales` holds exponents.
  template <class Format>
  void decode_codes(const window& out, const window& codes, const block_scales& scales = {}) {
    check_same_shape(out, codes);
    const window* const sw = scales.exps ? scales.exps : scales.values;
    if (scales.exps) check_same_shape(out, *scales.exps);
    if (scales.values)
      check(scales.row > 0 && scales.values->np == out.np &&
                scales.values->nc * scales.row == out.nc * scales.per_row,
            "decode_codes reads [P, rows x per_row] scale values for [P, rows x row] codes");
    constexpr bool fp4 = Format::data_type::bits == 4;
    bool nan_code = false;
    if (compute_)
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i) {
          const auto c = static_cast<std::uint8_t>(codes.at(p, i));
          nan_code = nan_code || (!fp4 && (c & 0x7F) == 0x7F);
          const float v = fp4 ? e2m1_values[c >> 4] : e4m3_values[c];
          float s = 1.0f;
          if (scales.exps)
            s = ue8m0_values[static_cast<std::uint8_t>(scales.exps->at(p, i))];
          else if (scales.values)
            s = scales.values->at(
                p, i / scales.row * scales.per_row + i % scales.row / mx_scale_block);
          out.at(p, i) = store_as(out.type(), v * s);
        }
    const bool narrow = is_narrow(out.type());
    const std::span<const decode_step> steps =
        fp4 ? std::span<const decode_step>(e2m1_decode_steps)
            : std::span<const decode_step>(e4m3_decode_steps);
    for (const decode_step& st : steps) {
      if ((st.applies_scale && !sw) || (st.nan_only && !nan_code)) continue;
      const bool in_psum = st.applies_scale && sw->space() == memory::psum;
      if (in_psum)
        vector_instruction(out.nc, st.inputs, narrow && st.bf16_arith, true);
      else
        sbuf_step(out.nc, st.inputs, narrow && st.bf16_arith);
    }
    if (scales.exps)  // 2^(e - 127) from the exponents: e << 7, fixes of 0 and 255
      for (int i = 0; i < scale_decode_instructions; ++i) {
        if (i > 0 || scales.exps->space() == memory::sbuf)
          integer_step(out.nc);
        else
          vector_instruction(out.nc, 1, false, true);
      }
  }
  // UE8M0 exponents (integers) into their values 2^(e - 127) in out's type (bf16 holds every one
  // exactly: 2^-127 as a subnormal, e = 255 as NaN): the exponent steps of decode_codes, here over
  // the exponents' own layout (a row's few bytes per partition, not one per code).
  void decode_scales(const window& out, const window& exps) {
    check_same_shape(out, exps);
    check_partition_start(out);
    if (compute_)
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          out.at(p, i) =
              store_as(out.type(), ue8m0_values[static_cast<std::uint8_t>(exps.at(p, i))]);
    for (int i = 0; i < scale_decode_instructions; ++i) integer_step(out.nc);
  }
  // A one-input integer step over n elements per partition (a mask, shift or compare) reading
  // and writing SBUF.
  void integer_step(std::int64_t n) { sbuf_step(n, 1, false); }
  // An instruction over n elements per partition of `inputs` SBUF tiles (16-bit data when
  // narrow), writing SBUF: where GpSimd does not share VectorE's SBUF port (trn2 on), whichever
  // of the two would finish it first given what each has queued, else VectorE.
  void sbuf_step(std::int64_t n, int inputs, bool narrow) {
    if constexpr (!traits_type::sbuf_vector_gpsimd_exclusive) {
      const std::int64_t factor = inputs > 1 ? common_traits::two_input_cycle_factor : 1;
      const double on_gpsimd =
          report_.gpsimd.seconds +
          static_cast<double>(common_traits::engine_fixed_cycles + n * factor) /
              traits_type::gpsimd_hz;
      const double on_vector =
          report_.vector.seconds +
          static_cast<double>(vector_cycles(n, inputs, narrow, false)) / traits_type::vector_hz;
      if (on_gpsimd <= on_vector) {
        gpsimd_elementwise(n, inputs);
        return;
      }
    }
    vector_instruction(n, inputs, narrow, false);
  }
  // Whether every element of `in` is finite (a tensor_reduce to one flag per partition, read
  // back by the schedule). Cost-only runs have no values: they take the finite path.
  bool all_finite(const window& in) {
    check_partition_start(in);
    bool ok = true;
    if (compute_)
      for (std::int64_t p = 0; p < in.np && ok; ++p)
        for (std::int64_t i = 0; i < in.nc && ok; ++i) ok = std::isfinite(in.at(p, i));
    vector_instruction(in.nc, 1, false, in.space() == memory::psum);
    return ok;
  }
  // VectorE's 32 x 32 transpose: out [F, P] = in [P, F]^T with P, F <= 32, within one
  // quadrant; exact for every value (NaN and Inf included).
  void transpose32(const window& out, const window& in) {
    check(in.np <= 32 && in.nc <= 32 && out.np == in.nc && out.nc == in.np,
          "VectorE transposes [<= 32 x <= 32] into [F, P]");
    check(in.p0 / 32 == out.p0 / 32 && in.p0 % 32 == 0 && out.p0 % 32 == 0,
          "VectorE transposes within one 32-partition quadrant");
    if (compute_)
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t f = 0; f < in.nc; ++f) out.at(f, p) = in.at(p, f);
    vector_instruction(32, 1, is_narrow(in.type()) && is_narrow(out.type()),
                       in.space() == memory::psum);
    ++report_.vector_transposes;
  }
  // ---- GpSimd ----

  // nisa.topk cost: one call per 8 rows, ~4n + K cycles for n candidates and K outputs.
  void topk_cost(std::int64_t rows, std::int64_t n, std::int64_t k) {
    const std::int64_t calls =
        (rows + traits_type::topk_rows_per_call - 1) / traits_type::topk_rows_per_call;
    for (std::int64_t c = 0; c < calls; ++c)
      gpsimd_instruction(traits_type::topk_cycles_per_element * n + k);
    report_.topk_calls += calls;
  }
  // A VectorE instruction of `elements` per partition and `inputs` inputs whose result the
  // caller computes (a compare whose outcome feeds a host-side selection, e.g. top-k).
  void vector_elementwise(std::int64_t elements, int inputs) {
    vector_instruction(elements, inputs, false, false);
  }
  // A GpSimd instruction of `elements` per partition (one per lane per cycle), `inputs` inputs.
  void gpsimd_elementwise(std::int64_t elements, int inputs) {
    gpsimd_instruction(elements * (inputs > 1 ? traits_type::two_input_cycle_factor : 1));
  }

  // ---- the report ----
  report& counters() {
    report_.peak_sbuf_bytes = sbuf_.peak();
    report_.peak_psum_bytes = psum_.peak();
    return report_;
  }

 private:
  void check(bool ok, const char* what) const {
    detail::require(ok, detail::where3{"neuron model (", traits_type::name, ")"},
                    [&](auto& m) { m << what; });
  }
  // An instruction's partition range: more than 64 partitions start at 0; 33..64 at 0 or 64;
  // up to 32 at 0, 32, 64 or 96 (NKI access-pattern rules).
  void check_partition_start(const window& w) const {
    check(w.inside(), "an access pattern reaches past the end of its tile");
    const bool ok = w.np > 64 ? w.p0 == 0 : w.np > 32 ? (w.p0 == 0 || w.p0 == 64) : w.p0 % 32 == 0;
    detail::require(ok && w.p0 + w.np <= traits_type::partitions,
                    detail::where3{"neuron model (", traits_type::name, ")"}, [&](auto& m) {
                      m << "an access of " << w.np << " partitions cannot start at partition "
                        << w.p0;
                    });
  }
  void check_same_shape(const window& a, const window& b) const {
    check(a.np == b.np && a.nc == b.nc, "engine operands have different shapes");
    check_partition_start(a);
    check_partition_start(b);
  }
  void check_matmul(const window& out, const window& st, const window& mv,
                    std::int64_t max_moving) const {
    const std::int64_t K = st.np, M = st.nc, N = mv.nc;
    detail::require(K == mv.np && K <= traits_type::pe_max_contraction &&
                        M <= traits_type::pe_max_stationary && N <= max_moving,
                    detail::where3{"neuron model (", traits_type::name, ")"}, [&](auto& m) {
                      m << "matmul stationary [" << K << " x " << M << "], moving [" << mv.np
                        << " x " << N
                        << "]: contraction must match and be <= 128, stationary free <= 128, "
                           "moving free <= "
                        << max_moving;
                    });
    check(st.space() == memory::sbuf && mv.space() == memory::sbuf,
          "matmul operands are read from SBUF");
    check(out.space() == memory::psum &&
              (out.type() == dtype::fp32 ||
               (out.type() == dtype::bf16 && traits_type::psum_bf16_output)) &&
              out.np == M && out.nc == N,
          "matmul writes a [M, N] fp32 PSUM tile (bf16 on trn3)");
    check_partition_start(st);
    check_partition_start(mv);
    check_partition_start(out);
    // Output partitions are PE columns: a stationary of free size <= 64 (<= 32 on v3 and later)
    // may sit in a later column tile (nc_matmul's tile_position) and write from its partition.
    check(out.p0 % traits_type::pe_column_tile == 0,
          "a matmul writes PSUM from the first partition of a PE column tile (a multiple of 64 "
          "on trn1, of 32 on trn2 / trn3)");
  }
  void write_psum(const window& out, const detail::vector<float>& acc, write_mode mode) {
    for (std::int64_t m = 0; m < out.np; ++m)
      for (std::int64_t n = 0; n < out.nc; ++n) {
        const float a = acc[static_cast<std::size_t>(m * out.nc + n)];
        out.at(m, n) = store_as(out.type(), mode == write_mode::accumulate ? out.at(m, n) + a : a);
      }
  }
  void finish_transfer(std::int64_t descriptors, std::int64_t bytes, std::int64_t blocks) {
    if (descriptors == 0) return;
    ++report_.dma_transfers;
    report_.dma_descriptors += descriptors;
    report_.dma_bytes += bytes;
    // Without indirect DMA (trn1) every gathered block is a DMA of its own.
    const std::int64_t starts = blocks > 0 && !traits_type::indirect_dma ? blocks : 1;
    report_.dma_seconds +=
        static_cast<double>(starts) * traits_type::dma_fixed_s / traits_type::dma_queues +
        static_cast<double>(bytes + descriptors * traits_type::dma_descriptor_overhead_bytes) /
            traits_type::dma_bytes_per_s;
    if (blocks > 0) {
      ++report_.dma_gathers;
      report_.dma_gathered_blocks += blocks;
      if constexpr (traits_type::gather_on_gpsimd)
        gpsimd_instruction(descriptors * traits_type::gpsimd_cycles_per_descriptor);
    }
  }
  void tensor_instruction(std::int64_t cycles) {
    report_.tensor.instructions += 1;
    report_.tensor.cycles += cycles;
    report_.tensor.seconds = static_cast<double>(report_.tensor.cycles) / traits_type::tensor_hz;
  }
  static std::int64_t engine_cycles(std::int64_t elements, int inputs, double rate) {
    const std::int64_t factor = inputs > 1 ? common_traits::two_input_cycle_factor : 1;
    return common_traits::engine_fixed_cycles +
           static_cast<std::int64_t>(std::ceil(static_cast<double>(elements * factor) / rate));
  }
  void scalar_instruction(std::int64_t elements, double rate, bool reads_psum) {
    const std::int64_t c = engine_cycles(elements, 1, rate);
    add(report_.scalar, c, traits_type::scalar_hz);
    if (reads_psum) report_.scalar_psum_seconds += static_cast<double>(c) / traits_type::scalar_hz;
  }
  // An evacuation of `elements` per partition: ScalarE's activation at its width, or VectorE's
  // one-input tensor_scalar / tensor_copy.
  void evacuation_cost(std::int64_t elements, bool narrow, bool reads_psum, elementwise_engine on) {
    check(on != elementwise_engine::gpsimd,
          "GpSimd cannot read PSUM: evacuations run on ScalarE "
          "or VectorE");
    if (on == elementwise_engine::vector)
      vector_instruction(elements, 1, narrow, reads_psum);
    else
      scalar_instruction(elements,
                         narrow ? traits_type::scalar_16bit_rate : traits_type::scalar_other_rate,
                         reads_psum);
  }
  static std::int64_t vector_cycles(std::int64_t elements, int inputs, bool narrow,
                                    bool reads_psum) {
    // 16-bit: the fast mode for one-input instructions within SBUF, else the 16-bit width.
    const double rate = !narrow                      ? traits_type::vector_other_rate
                        : inputs == 1 && !reads_psum ? traits_type::vector_fast_16bit_rate
                                                     : traits_type::vector_16bit_rate;
    return engine_cycles(elements, inputs, rate);
  }
  void vector_instruction(std::int64_t elements, int inputs, bool narrow, bool reads_psum) {
    const std::int64_t c = vector_cycles(elements, inputs, narrow, reads_psum);
    add(report_.vector, c, traits_type::vector_hz);
    if (reads_psum) report_.vector_psum_seconds += static_cast<double>(c) / traits_type::vector_hz;
  }
  void gpsimd_instruction(std::int64_t cycles) {
    add(report_.gpsimd, traits_type::engine_fixed_cycles + cycles, traits_type::gpsimd_hz);
  }
  static void add(engine_count& e, std::int64_t cycles, double hz) {
    e.instructions += 1;
    e.cycles += cycles;
    e.seconds = static_cast<double>(e.cycles) / hz;
  }

  bool compute_;
  pool sbuf_, psum_;
  report report_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
