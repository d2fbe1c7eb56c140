// TensorE: the matmuls (bf16, fp32, trn3's fp8 and MX) and transposes, which contract over the
// partitions into PSUM at a cost of max(N, 64) cycles per pass.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "dtype.hpp"
#include "engine_rules.hpp"
#include "instruction_ledger.hpp"
#include "memory.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Which counter a matmul adds to.
enum class matmul_kind : std::uint8_t { score, head_sum, broadcast };

template <class Gen>
class tensor_engine {
  using traits_type = traits<Gen>;
  using rules = engine_rules<Gen>;

 public:
  explicit tensor_engine(instruction_ledger<Gen>& ledger) : ledger_(ledger) {}

  // out [M, N] (PSUM) = stationary [K, M]^T @ moving [K, N], contraction K on partitions; fp32
  // accumulation; write_mode::overwrite (the default: the first matmul into a tile) or accumulate.
  // `out` may start past partition 0 where the stationary fits a column tile (see check_matmul).
  // Operands both bf16, both fp32 (4 passes) or both fp8 (e4m3fn codes, where native; double
  // row: two moving rows per cycle on trn2 / trn3). Cost: max(N, 64) cycles per pass.
  // `column_tiles`: matmuls of this shape issued together, each in a PE column tile of its own
  // (see column_share).
  void matmul(const window& out, const window& stationary, const window& moving,
              matmul_kind kind = matmul_kind::score, write_mode mode = write_mode::overwrite,
              int column_tiles = 1) {
    const std::int64_t K = stationary.np, M = stationary.nc, N = moving.nc;
    const dtype t = stationary.type();
    check_matmul(out, stationary, moving,
                 out.type() == dtype::bf16 ? traits_type::pe_max_moving_bf16
                                           : traits_type::pe_max_moving_fp32);
    check_column_tiles(M, column_tiles);
    rules::check(
        t == moving.type() && (t == dtype::bf16 || t == dtype::fp32 ||
                               (t == dtype::fp8 && traits_type::native_e4m3fn)),
        "matmul operands are both bf16, both fp32 or both fp8 (e4m3fn is native on trn3 only; "
        "MX codes go through matmul_mx)");
    if (ledger_.computes()) {
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
    const std::int64_t cycles = column_share((t == dtype::fp32 ? traits_type::pe_fp32_passes : 1) *
                                                 std::max(N, traits_type::pe_min_cycles),
                                             column_tiles);
    ledger_.tensor_instruction(cycles);
    if (kind == matmul_kind::head_sum) ledger_.counts().tensor_head_sum_cycles += cycles;
    if (kind == matmul_kind::broadcast) {
      ++ledger_.counts().matmul_broadcast;  // a partition broadcast, not arithmetic
    } else {
      (kind == matmul_kind::head_sum ? ledger_.counts().matmul_head_sum
                                     : ledger_.counts().matmul_score) += 1;
      ledger_.counts().matmul_flops += 2 * K * M * N;
    }
  }

  // nc_matmul_mx (trn3): x4-packed fp8 / fp4 code operands on a multiple of 32 partitions (a
  // 128-wide contraction is 32 partitions), starting at a quadrant; stationary free size even;
  // one UE8M0 scale per 32 contraction elements in the quadrant's scale rows (4 per 32
  // partitions) of [np / 8, M] and [np / 8, N] u8 windows at the operands' partition start.
  // Per scale block the code products are summed in fp32, scaled by both block scales and
  // accumulated in fp32. Four 32-partition matmuls on distinct quadrants run at once (row
  // tiling), so one costs np / 128 of max(N, 64) cycles (derived: the schedule issues them four
  // at a time); `column_tiles` as for matmul.
  void matmul_mx(const window& out, const window& st, const window& st_scales, const window& mv,
                 const window& mv_scales, write_mode mode = write_mode::overwrite,
                 int column_tiles = 1) {
    static_assert(traits_type::mx_matmul || dependent_false<Gen>,
                  "mqalogits neuron model: the MX matmul exists on trn3 only");
    const std::int64_t P = st.np, M = st.nc, N = mv.nc;
    check_matmul(out, st, mv, traits_type::pe_max_moving_fp32);
    rules::check((st.type() == dtype::fp8x4 || st.type() == dtype::fp4x4) && st.type() == mv.type(),
                 "matmul_mx operands are both fp8x4 or both fp4x4 packed codes");
    rules::check(P % mx_quadrant == 0 && st.p0 % mx_quadrant == 0,
                 "matmul_mx operands span a multiple of 32 partitions from a quadrant");
    rules::check(M % 2 == 0, "matmul_mx stationary free size must be even");
    const int rows = static_cast<int>(P * mx_pack / scale_block);  // scale rows: 4 per quadrant
    rules::check(
        st_scales.type() == dtype::u8 && mv_scales.type() == dtype::u8 && st_scales.np == rows &&
            mv_scales.np == rows && st_scales.p0 == st.p0 && mv_scales.p0 == mv.p0 &&
            st_scales.nc == M && mv_scales.nc == N,
        "matmul_mx scales are u8 [np / 8, M] and [np / 8, N] in the operands' quadrant rows");
    check_column_tiles(M, column_tiles);
    if (ledger_.computes()) {
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
    ledger_.tensor_instruction(
        column_share((std::max(N, traits_type::pe_min_cycles) * P + 127) / 128, column_tiles));
    ++ledger_.counts().matmul_score;
    ledger_.counts().matmul_flops += 2 * P * mx_pack * M * N;
  }

  // out [F, P] (PSUM) = in [P, F]^T on TensorE: a matmul of `in` (stationary, P <= 128,
  // F <= 128) against the identity (moving, N = P), so max(P, 64) cycles, for 32-bit elements
  // (fp32, fp8x4 words) 4 passes on trn1 and 2 in the transpose mode of trn2 / trn3. trn1's TensorE
  // transpose is not bit-accurate on NaN / Inf, so there it refuses them (the schedule uses
  // VectorE's transpose for such data).
  void transpose(const window& out, const window& in) {
    rules::check(
        in.np <= traits_type::pe_max_contraction && in.nc <= traits_type::pe_max_stationary,
        "transpose input is at most [128 x 128]");
    rules::check(out.space() == memory::psum && out.np == in.nc && out.nc == in.np &&
                     dtype_lanes(out.type()) == dtype_lanes(in.type()),
                 "transpose writes a [F, P] PSUM tile of the input's lanes");
    rules::check_partition_start(in);
    rules::check_partition_start(out);
    const int lanes = dtype_lanes(in.type());
    if (ledger_.computes()) {
      if constexpr (!traits_type::exact_pe_transpose)
        for (std::int64_t p = 0; p < in.np; ++p)
          for (std::int64_t f = 0; f < in.nc; ++f)
            rules::check(std::isfinite(in.at(p, f)),
                         "TensorE transposes are not bit-accurate on NaN / Inf on trn1");
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t f = 0; f < in.nc; ++f)
          for (int j = 0; j < lanes; ++j) out.at(f, p, j) = in.at(p, f, j);
    }
    const std::int64_t passes =
        dtype_bits(in.type()) == 32 ? traits_type::pe_fp32_transpose_passes : 1;
    const std::int64_t cycles = passes * std::max<std::int64_t>(in.np, traits_type::pe_min_cycles);
    ledger_.tensor_instruction(cycles);
    ledger_.counts().tensor_transpose_cycles += cycles;
    ++ledger_.counts().matmul_transpose;
  }

 private:
  static void check_matmul(const window& out, const window& st, const window& mv,
                           std::int64_t max_moving) {
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
    rules::check(st.space() == memory::sbuf && mv.space() == memory::sbuf,
                 "matmul operands are read from SBUF");
    rules::check(out.space() == memory::psum &&
                     (out.type() == dtype::fp32 ||
                      (out.type() == dtype::bf16 && traits_type::psum_bf16_output)) &&
                     out.np == M && out.nc == N,
                 "matmul writes a [M, N] fp32 PSUM tile (bf16 on trn3)");
    rules::check_partition_start(st);
    rules::check_partition_start(mv);
    rules::check_partition_start(out);
    // Output partitions are PE columns: a stationary of free size <= 64 (<= 32 on v3 and later)
    // may sit in a later column tile (nc_matmul's tile_position) and write from its partition.
    rules::check(
        out.p0 % traits_type::pe_column_tile == 0,
        "a matmul writes PSUM from the first partition of a PE column tile (a multiple of 64 "
        "on trn1, of 32 on trn2 / trn3)");
  }
  // Column tiling: matmuls whose stationaries take distinct PE column tiles run in parallel
  // [isa nc_matmul, "Tiling mode"], so each of `tiles` issued together (of one shape) is charged
  // 1 / tiles of its cycles; their column tiles must fit the 128 PE columns.
  static std::int64_t column_share(std::int64_t cycles, int tiles) {
    return (cycles + tiles - 1) / tiles;
  }
  static void check_column_tiles(std::int64_t M, int tiles) {
    constexpr std::int64_t w = traits_type::pe_column_tile;
    rules::check(tiles >= 1 && (tiles == 1 || (M + w - 1) / w * w * tiles <= 128),
                 "matmuls issued together in column tiles fit the 128 PE columns");
  }
  void write_psum(const window& out, const detail::vector<float>& acc, write_mode mode) {
    for (std::int64_t m = 0; m < out.np; ++m)
      for (std::int64_t n = 0; n < out.nc; ++n) {
        const float a = acc[static_cast<std::size_t>(m * out.nc + n)];
        out.at(m, n) = store_as(out.type(), mode == write_mode::accumulate ? out.at(m, n) + a : a);
      }
  }
  instruction_ledger<Gen>& ledger_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
