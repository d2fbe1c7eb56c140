// The DMA queues between HBM and SBUF: one transfer per DMA instruction, its rows its
// descriptors, charged when it ends (a fixed cost overlapping with the other queues, plus its
// bytes and a per-descriptor overhead at the per-core bandwidth).
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "dtype.hpp"
#include "engine_rules.hpp"
#include "instruction_ledger.hpp"
#include "memory.hpp"
#include "report.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen>
class dma_engine {
  using traits_type = traits<Gen>;
  using rules = engine_rules<Gen>;

 public:
  explicit dma_engine(instruction_ledger<Gen>& ledger) : ledger_(ledger) {}

  // One DMA instruction: its rows are its descriptors (one per partition row). The transfer is
  // charged when it ends: a fixed cost (overlapping with the other queues) plus its bytes and a
  // per-descriptor overhead at the per-core bandwidth. A gather is an indirect transfer reading
  // `blocks` blocks, one per partition row; on trn2 its descriptors are written by GpSimd.
  class transfer {
   public:
    transfer(dma_engine& e, std::int64_t gathered_blocks = 0) : e_(e), blocks_(gathered_blocks) {}
    ~transfer() { e_.finish_transfer(descriptors_, bytes_, blocks_); }
    transfer(const transfer&) = delete;
    transfer& operator=(const transfer&) = delete;

    // `bytes` raw bytes from HBM into partition p of a u8 tile, from element c0 (src null: the
    // row is read but its bytes are not kept, e.g. slots past the context).
    // dma_row::part_of_block: part of a row counted by row() (a block read as one descriptor).
    void bytes_in(const window& dst, std::int64_t p, std::int64_t c0, const std::uint8_t* src,
                  std::int64_t bytes, dma_row counted = dma_row::own_descriptor) {
      rules::check(dst.type() == dtype::u8 && dst.space() == memory::sbuf,
                   "DMA bytes go to a u8 SBUF tile");
      rules::check(c0 + bytes <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      if (e_.ledger_.computes())
        for (std::int64_t i = 0; i < bytes; ++i) dst.at(p, c0 + i) = src ? src[i] : 0.0f;
      if (counted == dma_row::own_descriptor) row(bytes);
    }
    // n e4m3fn codes of Format rows into partition p of an fp8 tile (trn3, where e4m3fn is a
    // native type; the tile holds the code values).
    template <class Format>
    void codes_in(const window& dst, std::int64_t p, std::int64_t c0, const std::uint8_t* src,
                  std::int64_t n, dma_row counted = dma_row::own_descriptor) {
      rules::check(dst.type() == dtype::fp8 && dst.space() == memory::sbuf,
                   "DMA codes go to an fp8 SBUF tile");
      rules::check(c0 + n <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      if (e_.ledger_.computes())
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
      rules::check(dtype_lanes(dst.type()) == 4 && dst.space() == memory::sbuf,
                   "DMA words go to an x4 SBUF tile");
      rules::check(c0 + words <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      constexpr int per_row = Format::head_dim / mx_pack;
      if (e_.ledger_.computes())
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
      rules::check(dtype_lanes(dst.type()) == 4 && dst.space() == memory::sbuf,
                   "DMA words go to an x4 SBUF tile");
      rules::check(c0 + n <= dst.nc && p < dst.np, "DMA row past the end of its tile");
      constexpr int word_bytes = mx_pack * Format::data_type::bits / 8;
      if (e_.ledger_.computes())
        for (std::int64_t w = 0; w < n; ++w)
          for (int j = 0; j < mx_pack; ++j)
            dst.at(p, c0 + w, j) = Format::element(src + w * word_bytes, j);
      if (counted == dma_row::own_descriptor) row(n * word_bytes);
    }
    // n values of T into partition p of an SBUF tile.
    template <class T>
    void values_in(const window& dst, std::int64_t p, std::int64_t c0, const T* src, std::int64_t n,
                   dma_row counted = dma_row::own_descriptor) {
      rules::check(dst.space() == memory::sbuf && c0 + n <= dst.nc && p < dst.np,
                   "DMA row past the end of its tile");
      if (e_.ledger_.computes())
        for (std::int64_t i = 0; i < n; ++i)
          dst.at(p, c0 + i) = src ? store_as(dst.type(), to_float(src[i])) : 0.0f;
      if (counted == dma_row::own_descriptor) row(n * static_cast<std::int64_t>(sizeof(T)));
    }
    // Partition p, elements [c0, c0 + n) of an SBUF tile to HBM as T.
    template <class T>
    void values_out(T* dst, const window& src, std::int64_t p, std::int64_t c0, std::int64_t n) {
      rules::check(src.space() == memory::sbuf && c0 + n <= src.nc && p < src.np,
                   "DMA row past the end of its tile");
      if (e_.ledger_.computes())
        for (std::int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(src.at(p, c0 + i));
      row(n * static_cast<std::int64_t>(sizeof(T)));
    }
    // A constant SBUF row (e.g. -inf) into n elements of T in HBM.
    template <class T>
    void fill_out(T* dst, std::int64_t n, T value) {
      if (e_.ledger_.computes()) std::fill(dst, dst + n, value);
      row(n * static_cast<std::int64_t>(sizeof(T)));
    }

    // One descriptor (partition row) of `bytes` bytes.
    void row(std::int64_t bytes) {
      ++descriptors_;
      bytes_ += bytes;
      if (bytes < traits_type::dma_small_row_bytes) ++e_.ledger_.counts().dma_small_descriptors;
      if (bytes < traits_type::dma_efficient_row_bytes)
        ++e_.ledger_.counts().dma_inefficient_descriptors;
    }

   private:
    dma_engine& e_;
    std::int64_t blocks_, descriptors_ = 0, bytes_ = 0;
  };
  transfer dma() { return transfer(*this); }
  transfer gather(std::int64_t blocks) { return transfer(*this, blocks); }

 private:
  void finish_transfer(std::int64_t descriptors, std::int64_t bytes, std::int64_t blocks) {
    if (descriptors == 0) return;
    report& r = ledger_.counts();
    ++r.dma_transfers;
    r.dma_descriptors += descriptors;
    r.dma_bytes += bytes;
    // Without indirect DMA (trn1) every gathered block is a DMA of its own.
    const std::int64_t starts = blocks > 0 && !traits_type::indirect_dma ? blocks : 1;
    r.dma_seconds +=
        static_cast<double>(starts) * traits_type::dma_fixed_s / traits_type::dma_queues +
        static_cast<double>(bytes + descriptors * traits_type::dma_descriptor_overhead_bytes) /
            traits_type::dma_bytes_per_s;
    if (blocks > 0) {
      ++r.dma_gathers;
      r.dma_gathered_blocks += blocks;
      r.dma_gathered_rows += descriptors;
      if constexpr (traits_type::gather_on_gpsimd)
        ledger_.gpsimd_instruction(descriptors * traits_type::gpsimd_cycles_per_descriptor);
    }
  }

  instruction_ledger<Gen>& ledger_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
