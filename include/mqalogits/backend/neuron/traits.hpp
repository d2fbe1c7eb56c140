// Per-generation NeuronCore constants, one traits struct per generation. Every number names its
// source in AWS's Neuron documentation or AWS's own NKI kernels:
//   [arch-v2] nki/guides/architecture/trainium_inferentia2_arch (NeuronCore-v2: trn1, inf2)
//   [arch-v3] nki/guides/architecture/trainium2_arch (NeuronCore-v3: trn2)
//   [arch-v4] nki/guides/architecture/trainium3_arch (NeuronCore-v4: trn3)
//   [isa]     the nki.isa API reference (nc_matmul, nc_matmul_mx, nc_transpose, topk)
//   [dma-bw]  nki/deep-dives/nki-dma-bandwidth-guide ("Guideline to Avoid Under-Utilizing DMA
//             Bandwidth") and nki/about/nki-dma-overview
//   [perf]    nki/deep-dives/nki_perf_guide
//   [indexer] aws-neuron/nki-library experimental/sparse_attention_indexer
//   [tkg]     aws-neuron/nki-library core/attention/attention_tkg.py (paged decode)
//   [mx-tkg]  aws-neuron/nki-library experimental/attention_mxfp8/attention_mxfp8_tkg.py
// "derived" marks a choice of this model that no document states, with the reason.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../config.hpp"
#include "../backend.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// What every generation shares.
struct common_traits {
  static constexpr int partitions = 128;  // SBUF / PSUM partitions [arch-v2, arch-v3, arch-v4]
  // PSUM: 16 KiB per partition in 8 banks of 2 KiB; one bank holds 512 fp32 [arch-v2, arch-v3].
  static constexpr std::int64_t psum_partition_bytes = 16 * 1024;
  static constexpr int psum_banks = 8;
  static constexpr std::int64_t psum_bank_bytes = 2 * 1024;
  // TensorE matmul(stationary [K, M], moving [K, N]) -> PSUM [M, N]: K (contraction) on
  // partitions, K <= 128, M <= 128 [isa nc_matmul].
  static constexpr int pe_max_contraction = 128;
  static constexpr int pe_max_stationary = 128;
  // A matmul costs about max(N, 64) TensorE cycles: MM_INIT_LATENCY = 64 [arch-v2, "TensorE"].
  static constexpr std::int64_t pe_min_cycles = 64;
  // fp32 operands run at 1/4 of the bf16 rate [arch-v2, "TensorE"].
  static constexpr std::int64_t pe_fp32_passes = 4;
  // fp8 "double row" (v3 and later) doubles the contraction of one matmul to 256 ([128, 2, N]
  // operands) at the time of a bf16 matmul of contraction 128 [arch-v3, "Double FP8 Matmul
  // Performance"]. This model's matmuls contract over one head dimension (<= 128), so an fp8
  // matmul costs what a bf16 one does on every generation.
  // ~60 cycles of fixed overhead per SBUF access of an ScalarE / VectorE / GpSimd instruction
  // [arch-v2, perf]; the model charges it once per instruction.
  static constexpr std::int64_t engine_fixed_cycles = 60;
  // Two-input VectorE / GpSimd instructions (tensor_tensor, scalar_tensor_tensor) take ~2N
  // cycles for N elements per partition [arch-v2, isa].
  static constexpr std::int64_t two_input_cycle_factor = 2;
  // DMA: one descriptor per partition row; rows of >= 4 KiB reach the full bandwidth, rows
  // below 256 B are "severely overhead-bound" [dma-bw].
  static constexpr std::int64_t dma_efficient_row_bytes = 4 * 1024;
  static constexpr std::int64_t dma_small_row_bytes = 256;
  // Each descriptor costs the time of this many extra bytes (derived: a per-descriptor
  // overhead of 512 B gives 89% of the bandwidth at 4 KiB rows and 33% at 256 B rows, the shape
  // of [dma-bw]'s curve).
  static constexpr std::int64_t dma_descriptor_overhead_bytes = 512;
  // 16 DMA engines per NeuronCore, each transfer spread over them [dma-bw, nki-dma-overview];
  // the fixed cost of a transfer overlaps with up to this many others in flight (derived).
  static constexpr int dma_queues = 16;
  // nisa.topk on GpSimd: 8 query rows per call, ~4n + K cycles for n candidates and K outputs
  // [isa topk, indexer].
  static constexpr int topk_rows_per_call = 8;
  static constexpr std::int64_t topk_cycles_per_element = 4;
  // Software DGE (descriptor generation on GpSimd, the only form of indirect DMA): cycles per
  // descriptor written (derived: GpSimd writes one 16-byte descriptor per partition row; the
  // documents give no rate).
  static constexpr std::int64_t gpsimd_cycles_per_descriptor = 16;
  // ~1.3 us of fixed cost per DMA transfer when it is overhead-bound [dma-bw]; one
  // hardware-DGE instruction issues in ~0.6 us on v3 [arch-v3]. The fixed cost of a transfer
  // overlaps with up to dma_queues others in flight (derived).
  static constexpr double dma_fixed_s = 1.3e-6;
  // VectorE / ScalarE elements per partition per cycle (the data-path widths / 128 partitions),
  // for 16-bit float (bf16 / fp16, and fp8 where a table lists it) and for every other type
  // (fp32, integers, raw bytes). `vector_fast_16bit_rate` applies to one-input instructions
  // (tensor_copy, tensor_scalar) whose 16-bit operands are all in SBUF; `vector_16bit_rate` to the
  // other 16-bit instructions.
};

template <class Gen>
struct traits {
  static_assert(dependent_false<Gen>,
                "mqalogits: unknown NeuronCore generation (trn1, trn2, trn3)");
};

// trn1 / inf2, NeuronCore-v2.
template <>
struct traits<backend::trn1> : common_traits {
  static constexpr const char* name = "trn1";
  // SBUF 24 MiB = 128 partitions x 192 KiB [arch-v2].
  static constexpr std::int64_t sbuf_partition_bytes = 192 * 1024;
  // Clocks: TensorE 2.8 GHz, VectorE 1.12 GHz, ScalarE 1.4 GHz, GpSimd 1.4 GHz [arch-v2, the
  // engine table].
  static constexpr double tensor_hz = 2.8e9;
  static constexpr double scalar_hz = 1.4e9;
  static constexpr double vector_hz = 1.12e9;
  static constexpr double gpsimd_hz = 1.4e9;
  // 128 elements per cycle for every type: one per partition [arch-v2, the engine table].
  static constexpr double vector_other_rate = 1, vector_16bit_rate = 1, vector_fast_16bit_rate = 1;
  static constexpr double scalar_other_rate = 1, scalar_16bit_rate = 1;
  static constexpr bool vector_fp8_is_16bit = false;
  // Moving free size of one matmul: one 2 KiB PSUM bank of fp32 [isa nc_matmul].
  static constexpr std::int64_t pe_max_moving_fp32 = 512;
  static constexpr std::int64_t pe_max_moving_bf16 = 512;
  // Column tiling: 2 x 64 PE columns, so a matmul of stationary free size <= 64 may write PSUM
  // partitions from 64 [isa nc_matmul, "Tiling mode"].
  static constexpr int pe_column_tile = 64;
  static constexpr bool psum_bf16_output = false;  // PSUM holds fp32 only [arch-v2]
  // 32-bit TensorE transposes take the fp32 matmul's 4 passes (no transpose mode) [arch-v2].
  static constexpr std::int64_t pe_fp32_transpose_passes = 4;
  // OCP e4m3fn (max 448) is not a usable dtype (compiler error EVRF051), and there is no fp4
  // type: codes are decoded with integer instructions on VectorE [isa, EVRF051].
  static constexpr bool native_e4m3fn = false;
  static constexpr bool mx_matmul = false;
  // TensorE transposes are not bit-accurate on NaN / Inf inputs [isa nc_transpose].
  static constexpr bool exact_pe_transpose = false;
  // VectorE and ScalarE cannot read PSUM at the same time; VectorE and GpSimd cannot access SBUF
  // at the same time [arch-v2, "engine contention"].
  static constexpr bool psum_read_exclusive = true;
  static constexpr bool sbuf_vector_gpsimd_exclusive = true;
  // Per-core DMA aggregate ~272 GB/s (device HBM 820 GB/s, 2 cores) [dma-bw].
  static constexpr double dma_bytes_per_s = 272e9;
  // No indirect DMA: software DGE arrives with v3 [arch-v3]. A gather is one DMA per block,
  // its address from a register the sequencer loads, each with a transfer's fixed cost.
  static constexpr bool indirect_dma = false;
  static constexpr bool gather_on_gpsimd = false;
  static constexpr int max_logical_cores = 1;  // one NeuronCore per logical core [arch-v2]
};

// What NeuronCore-v3 (trn2) and NeuronCore-v4 (trn3) share.
struct v3_traits : common_traits {
  // Clocks: TensorE 2.4 GHz, ScalarE 1.2 GHz, GpSimd 1.2 GHz [arch-v3, arch-v4, the engine
  // tables] (VectorE differs).
  static constexpr double tensor_hz = 2.4e9;
  static constexpr double scalar_hz = 1.2e9;
  static constexpr double gpsimd_hz = 1.2e9;
  // VectorE "256 input/output for other data types" than 16-bit floats (fp32, integers, raw
  // bytes) [arch-v3 and arch-v4, the compute engine tables], and 4x NeuronCore-v2 for
  // tensor_copy / tensor_scalar with 16-bit operands all in SBUF [arch-v3 "Vector Engine
  // Performance Mode"]; ScalarE 128 per cycle for non-16-bit types [arch-v4, the same table].
  static constexpr double vector_other_rate = 2, vector_fast_16bit_rate = 4;
  static constexpr double scalar_other_rate = 1;
  // Column tiling: 4 x 32 PE columns, so a matmul of stationary free size <= 32 may write PSUM
  // partitions from 32, 64 or 96 [isa nc_matmul, "Tiling mode"].
  static constexpr int pe_column_tile = 32;
  // Transpose mode: 2x speedup in fp32 transposes [arch-v3, "Built-in Transpose Support"].
  static constexpr std::int64_t pe_fp32_transpose_passes = 2;
  static constexpr bool exact_pe_transpose = true;    // [isa nc_transpose]
  static constexpr bool psum_read_exclusive = false;  // lifted on v3 [arch-v3]
  static constexpr bool sbuf_vector_gpsimd_exclusive = false;
  // Hardware DGE has no indirect DMA: gathers are software DGE on GpSimd [arch-v3]; AWS's trn3
  // MXFP8 decode gathers its cache blocks that way [mx-tkg].
  static constexpr bool indirect_dma = true;
  static constexpr bool gather_on_gpsimd = true;
  static constexpr int max_logical_cores = 2;  // LNC = 2: two physical cores [arch-v3, arch-v4]
};

// trn2, NeuronCore-v3.
template <>
struct traits<backend::trn2> : v3_traits {
  static constexpr const char* name = "trn2";
  // SBUF 28 MiB = 128 partitions x 224 KiB [arch-v3].
  static constexpr std::int64_t sbuf_partition_bytes = 224 * 1024;
  static constexpr double vector_hz = 0.96e9;  // [arch-v3, the engine table]
  // VectorE: 512 bf16 / fp16 elements per cycle in the performance mode above, 2x NeuronCore-v2
  // for those reading PSUM and for bf16 tensor_tensor [arch-v3, "Vector Engine Performance
  // Mode"]; ScalarE 128 per cycle for every type.
  static constexpr double vector_16bit_rate = 2;
  static constexpr double scalar_16bit_rate = 1;
  static constexpr bool vector_fp8_is_16bit = false;
  static constexpr std::int64_t pe_max_moving_fp32 = 512;  // one PSUM bank [isa nc_matmul]
  static constexpr std::int64_t pe_max_moving_bf16 = 512;
  static constexpr bool psum_bf16_output = false;  // only transposes may write bf16 [arch-v3]
  static constexpr bool native_e4m3fn = false;     // EVRF051: e4m3fn not usable on v3 [isa]
  static constexpr bool mx_matmul = false;
  static constexpr double dma_bytes_per_s = 368e9;  // per-core DMA ~368 GB/s [dma-bw]
};

// trn3, NeuronCore-v4.
template <>
struct traits<backend::trn3> : v3_traits {
  static constexpr const char* name = "trn3";
  // SBUF 32 MiB [arch-v4]; 128 partitions x 256 KiB is its arithmetic split (derived; AWS's
  // indexer budgets ~245 KB per partition [indexer]).
  static constexpr std::int64_t sbuf_partition_bytes = 256 * 1024;
  static constexpr double vector_hz = 1.2e9;  // [arch-v4, the engine table]
  // VectorE 512 bf16 / fp16 / fp8 elements per cycle; ScalarE 256 [arch-v4, the engine table]
  // (no condition is stated for the 16-bit width).
  static constexpr double vector_16bit_rate = 4;
  static constexpr double scalar_16bit_rate = 2;
  static constexpr bool vector_fp8_is_16bit = true;
  // Moving free size up to 4096 fp32 / 8192 bf16 of PSUM output [isa nc_matmul].
  static constexpr std::int64_t pe_max_moving_fp32 = 4096;
  static constexpr std::int64_t pe_max_moving_bf16 = 8192;
  static constexpr bool psum_bf16_output = true;  // matmul may write bf16 to PSUM [arch-v4]
  // e4m3fn is native; fp4 exists only as the x4-packed MX type of nc_matmul_mx [arch-v4, isa].
  static constexpr bool native_e4m3fn = true;
  static constexpr bool mx_matmul = true;
  static constexpr double dma_bytes_per_s = 528e9;  // per-core DMA ~528 GB/s [dma-bw]
};

// A generation with constants replaced (backend::what_if): its traits are the caller's, which
// must derive from the generation's own.
template <class Gen, class Replaced>
struct traits<backend::what_if<Gen, Replaced>> : Replaced {
  static_assert(
      std::is_base_of_v<traits<Gen>, Replaced>,
      "mqalogits: backend::what_if<Gen, T> needs T derived from neuron_backend::traits<Gen>");
};

// nc_matmul_mx (trn3): the contraction is packed 4 codes per partition element, so a 128-wide
// head dimension occupies 32 partitions; one UE8M0 scale per 32 contraction elements, 4 scale
// rows per 32-partition quadrant; four 32-row matmuls on distinct quadrants run concurrently
// (row tiling) [isa nc_matmul_mx, arch-v4, mx-tkg].
inline constexpr int mx_pack = 4;
inline constexpr int mx_quadrant = 32;

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
