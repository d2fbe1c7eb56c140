// Per-generation NeuronCore constants, in one traits struct per generation. Every number cites
// its source (shared/NEURON.md, which quotes AWS's NKI architecture guides); "derived" marks an
// assumption of this model, not a published figure.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../backend.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// What every generation shares (NKI docs: trainium_inferentia2_arch, trainium2_arch,
// trainium3_arch; nki.isa reference).
struct common_traits {
  static constexpr int partitions = 128;  // SBUF / PSUM partitions (all generations)
  // PSUM: 16 KiB per partition in 8 banks of 2 KiB; one bank holds 512 fp32 (all generations).
  static constexpr std::int64_t psum_partition_bytes = 16 * 1024;
  static constexpr int psum_banks = 8;
  static constexpr std::int64_t psum_bank_bytes = 2 * 1024;
  // TensorE matmul(stationary [K, M], moving [K, N]) -> PSUM [M, N]: K (contraction) on
  // partitions, K <= 128, M <= 128, N <= 512 (one fp32 PSUM bank) (nki.isa.nc_matmul).
  static constexpr int pe_max_contraction = 128;
  static constexpr int pe_max_stationary = 128;
  static constexpr int pe_max_moving = 512;
  // ~64 cycles of start-up per matmul instruction (NKI performance guide).
  static constexpr std::int64_t pe_fixed_cycles = 64;
  // fp32 matmul runs 4x slower than bf16 (trainium_inferentia2_arch: fp32 at 1/4 the bf16 rate).
  static constexpr std::int64_t pe_fp32_passes = 4;
  // DMA: one descriptor per partition row; below 4 KiB per row transfers are inefficient
  // (NKI performance guide, DMA efficiency).
  static constexpr std::int64_t dma_efficient_row_bytes = 4 * 1024;
  // Engine clocks: ScalarE 1.4 GHz, VectorE 1.12 GHz, both 128 lanes (trainium_inferentia2_arch).
  static constexpr double scalar_hz = 1.4e9;
  static constexpr double vector_hz = 1.12e9;
  // ~60 cycles of fixed overhead per SBUF access of an engine instruction (NKI performance guide);
  // the model charges it once per ScalarE / VectorE instruction (derived).
  static constexpr std::int64_t engine_fixed_cycles = 60;
  // Elements per partition per cycle on ScalarE / VectorE: one (derived: 128 lanes, one
  // element each per cycle).
  static constexpr double engine_elements_per_cycle = 1.0;
  // TensorE streams one moving column per cycle at 2.8 GHz (trainium_inferentia2_arch: 128x128
  // systolic array, 2.8 GHz; 2 x 128 x 128 x 2.8e9 = 92 TFLOPS bf16). The model uses the same
  // clock for trn2 and trn3 (derived).
  static constexpr double tensor_hz = 2.8e9;
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
  // SBUF 24 MiB = 128 partitions x 192 KiB (trainium_inferentia2_arch).
  static constexpr std::int64_t sbuf_partition_bytes = 192 * 1024;
  // e4m3fn is not native (its fp8 is IEEE-like e4m3, max 240): dequantise to bf16 on chip.
  static constexpr bool mx_matmul = false;
  // HBM 820 GB/s per device of 2 cores; the model gives each core an even share (derived).
  static constexpr double hbm_bytes_per_s = 820e9 / 2;
};

// trn2, NeuronCore-v3.
template <>
struct traits<backend::trn2> : common_traits {
  static constexpr const char* name = "trn2";
  // SBUF 28 MiB = 128 partitions x 224 KiB (trainium2_arch).
  static constexpr std::int64_t sbuf_partition_bytes = 224 * 1024;
  // e4m3fn is not native: dequantise to bf16 on chip (trainium2_arch).
  static constexpr bool mx_matmul = false;
  // HBM 3 TB/s per device of 8 cores, an even share per core (derived).
  static constexpr double hbm_bytes_per_s = 3e12 / 8;
};

// trn3, NeuronCore-v4.
template <>
struct traits<backend::trn3> : common_traits {
  static constexpr const char* name = "trn3";
  // SBUF 32 MiB; 128 partitions x 256 KiB is derived (trainium3_arch gives the total).
  static constexpr std::int64_t sbuf_partition_bytes = 256 * 1024;
  // Native MXFP8 / MXFP4 matmul (nki.isa.nc_matmul_mx): contraction packed 4 elements per
  // partition, one UE8M0 scale per 32 elements (trainium3_arch).
  static constexpr bool mx_matmul = true;
  // HBM 4.7 TB/s per device of 8 cores, an even share per core (derived).
  static constexpr double hbm_bytes_per_s = 4.7e12 / 8;
};

// MX matmul layout (trn3): the contraction is packed 4 elements per partition, so head_dim = 128
// spans 32 partitions; one scale group is 8 partitions x 4 elements = 32 elements (trainium3_arch).
inline constexpr int mx_pack = 4;

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
