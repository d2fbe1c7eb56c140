// A small NeuronCore model: SBUF / PSUM tiles with their budgets enforced, and the engines the
// indexer schedule uses (dma_engine, tensor_engine, scalar_engine, vector_engine with its
// code_decoding, gpsimd_engine), each counting what it costs under the rules of its generation
// (traits.hpp) in the core's instruction ledger.
//
// It runs on the host in fp32, one instruction at a time (no cycle simulation). Values in a
// tile are held as fp32; every element type used here (bytes, e4m3 / e2m1 codes, bf16, fp32) is
// exact in fp32, and a write to a bf16 tile rounds to nearest even, as VectorE / ScalarE do.
// The x4 types are nc_matmul_mx's packed operands (trn3): one element holds four codes.
//
// A core built with compute = false counts every instruction exactly as it would otherwise but
// computes no value (tiles hold no storage): the cost-only mode of a capture.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "code_decoding.hpp"
#include "dma_engine.hpp"
#include "dtype.hpp"
#include "engine_rules.hpp"
#include "gpsimd_engine.hpp"
#include "instruction_ledger.hpp"
#include "memory.hpp"
#include "report.hpp"
#include "scalar_engine.hpp"
#include "tensor_engine.hpp"
#include "traits.hpp"
#include "vector_engine.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The ledger a core's engines share, built before them (a base, so it exists when they bind).
template <class Gen>
struct core_ledger {
  explicit core_ledger(bool compute) : ledger(compute) {}
  instruction_ledger<Gen> ledger;
};

// One NeuronCore of generation Gen: its two memories and its engines. Every engine call checks
// the rules its instruction has, computes its result (unless cost-only) and adds its cost.
template <class Gen>
class core : private core_ledger<Gen>,
             public dma_engine<Gen>,
             public tensor_engine<Gen>,
             public scalar_engine<Gen>,
             public vector_engine<Gen>,
             public code_decoding<Gen>,
             public gpsimd_engine<Gen> {
  using core_ledger<Gen>::ledger;

 public:
  using traits_type = traits<Gen>;

  explicit core(bool compute = true)
      : core_ledger<Gen>(compute),
        dma_engine<Gen>(ledger),
        tensor_engine<Gen>(ledger),
        scalar_engine<Gen>(ledger),
        vector_engine<Gen>(ledger),
        code_decoding<Gen>(ledger),
        gpsimd_engine<Gen>(ledger),
        sbuf_(memory::sbuf, traits_type::sbuf_partition_bytes, 64,
              traits_type::sbuf_partition_bytes, traits_type::name, compute),
        psum_(memory::psum, traits_type::psum_partition_bytes, traits_type::psum_bank_bytes,
              max_psum_tile_bytes<Gen>, traits_type::name, compute, traits_type::psum_bf16_output) {
  }
  bool computes() const { return ledger.computes(); }
  // GpSimd and VectorE seconds this core runs after the kernel (instruction_ledger::queue_after).
  void queue_after(double gpsimd_s, double vector_s) { ledger.queue_after(gpsimd_s, vector_s); }
  double later_gpsimd_seconds() const { return ledger.later_gpsimd_seconds(); }
  double later_vector_seconds() const { return ledger.later_vector_seconds(); }
  // Takes the counts of a cost-only run of the same schedule on a core in this one's state (a
  // layout trial): what running it again here would count.
  void adopt(const report& ran) {
    ledger.counts() = ran;
    sbuf_.raise_peak(ran.peak_sbuf_bytes);
    psum_.raise_peak(ran.peak_psum_bytes);
  }
  // The core's report with that work added (single_core_seconds: when the call ends).
  report with_work_after() {
    report r = counters();
    r.gpsimd.seconds += ledger.later_gpsimd_seconds();
    r.vector.seconds += ledger.later_vector_seconds();
    return r;
  }

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

  // The report: every engine's counts and the memories' peaks.
  report& counters() {
    report& r = ledger.counts();
    r.peak_sbuf_bytes = sbuf_.peak();
    r.peak_psum_bytes = psum_.peak();
    return r;
  }

 private:
  pool sbuf_, psum_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
