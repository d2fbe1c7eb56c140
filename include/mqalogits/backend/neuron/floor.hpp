// The floor of a call: the engine time that no schedule meeting the library's accuracy contract
// can avoid, at the documented rates, per engine and term (floor_work.hpp counts the terms of
// each call from its plan). Engines run concurrently, so the floor is the least time at which
// every engine can have finished its share of the terms: some work may run on one of several
// engines (the head sum on TensorE, VectorE or GpSimd, the relu's read of PSUM on ScalarE or
// VectorE, the integer decode on VectorE or GpSimd), and the floor splits it between them as well
// as any schedule could. It is a lower bound of the model's estimate (the modelled schedule does
// all of this work, at no better rate) and it leaves out fixed per-instruction costs, which a
// schedule can amortise; the gap between the two is what a better schedule could still win.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <utility>

#include "../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The unavoidable work of the calls, in seconds of each engine.
struct floor_terms {
  // DMA: the bytes every schedule moves (the roofline's), one descriptor per contiguous range of
  // a cache block row read and per output row, and the fixed cost of the transfers a gather needs.
  double dma_bytes_s = 0, dma_descriptors_s = 0, dma_fixed_s = 0;
  // TensorE: the score matmuls at the peak rate of their operands, and the transposes that put a
  // token-major K cache's head dimension on partitions (none for the native MX layout).
  double tensor_scores_s = 0, tensor_transposes_s = 0;
  // GpSimd: the software-DGE descriptors of the gathered block rows (trn2 / trn3; the codes and
  // the scales of a split cache layout are two) and nisa.topk over every logit a top-k call
  // selects from.
  double gpsimd_descriptors_s = 0, gpsimd_topk_s = 0;
  // Work with a choice of engine, its time on each: the relu of every fp32 score as it leaves
  // PSUM, with trn3's transposed MX scales (ScalarE or VectorE); the fp32 head sum of relu(score) x
  // w (TensorE fp32 matmuls, or a two-input pass on VectorE or GpSimd); the integer decode of the
  // codes (GpSimd or VectorE; trn1 / trn2).
  double relu_scalar_s = 0, relu_vector_s = 0;
  double head_sum_tensor_s = 0, head_sum_vector_s = 0, head_sum_gpsimd_s = 0;
  double decode_gpsimd_s = 0, decode_vector_s = 0;
  // VectorE: the copies of transposed MX code words out of PSUM into the matmul's SBUF operand.
  double vector_copies_s = 0;
  // trn1: ScalarE and VectorE share the PSUM read port, VectorE and GpSimd the SBUF port.
  bool psum_port_shared = false, sbuf_port_shared = false;

  floor_terms& operator+=(const floor_terms& o) {
    for (auto [a, b] : {std::pair{&dma_bytes_s, o.dma_bytes_s},
                        {&dma_descriptors_s, o.dma_descriptors_s},
                        {&dma_fixed_s, o.dma_fixed_s},
                        {&tensor_scores_s, o.tensor_scores_s},
                        {&tensor_transposes_s, o.tensor_transposes_s},
                        {&gpsimd_descriptors_s, o.gpsimd_descriptors_s},
                        {&gpsimd_topk_s, o.gpsimd_topk_s},
                        {&relu_scalar_s, o.relu_scalar_s},
                        {&relu_vector_s, o.relu_vector_s},
                        {&head_sum_tensor_s, o.head_sum_tensor_s},
                        {&head_sum_vector_s, o.head_sum_vector_s},
                        {&head_sum_gpsimd_s, o.head_sum_gpsimd_s},
                        {&decode_gpsimd_s, o.decode_gpsimd_s},
                        {&decode_vector_s, o.decode_vector_s},
                        {&vector_copies_s, o.vector_copies_s}})
      *a += b;
    psum_port_shared = psum_port_shared || o.psum_port_shared;
    sbuf_port_shared = sbuf_port_shared || o.sbuf_port_shared;
    return *this;
  }

  // The floor's split at time t: the share of each movable term on its engines other than VectorE
  // (as much as they have room for: VectorE is the other engine of every choice), and each
  // engine's busy time. Such a split is the best one: any work left to VectorE only adds to it.
  // TensorE and ScalarE take only the head sum and the relu; GpSimd's room goes first to the term
  // that saves VectorE the most per GpSimd second (the decode or the rest of the head sum), as
  // a fractional knapsack is filled.
  struct split {
    double relu_on_scalar = 1, head_sum_on_tensor = 1, decode_on_gpsimd = 1;
    double head_sum_on_gpsimd = 0;  // of the whole head sum, beside head_sum_on_tensor
    double dma = 0, tensor = 0, scalar = 0, vector = 0, gpsimd = 0, psum_port = 0, sbuf_port = 0;
    double busiest() const {
      return std::max({dma, tensor, scalar, vector, gpsimd, psum_port, sbuf_port});
    }
  };
  split split_at(double t) const {
    split s;
    const auto share = [&](double room, double work) {
      return work > 0 ? std::clamp(room / work, 0.0, 1.0) : 1.0;
    };
    s.dma = dma_bytes_s + dma_descriptors_s + dma_fixed_s;
    const double tensor_fixed = tensor_scores_s + tensor_transposes_s;
    const double gpsimd_fixed = gpsimd_descriptors_s + gpsimd_topk_s;
    s.head_sum_on_tensor = share(t - tensor_fixed, head_sum_tensor_s);
    s.relu_on_scalar = share(t, relu_scalar_s);
    const double head_left = 1 - s.head_sum_on_tensor;
    // GpSimd's room, to the head sum TensorE leaves and to the decode, best saving first.
    double room = std::max(t - gpsimd_fixed, 0.0);
    const auto give = [&](double work, double most) {
      const double taken = work > 0 ? std::min(most, room / work) : 0.0;
      room -= taken * work;
      return taken;
    };
    const bool head_first =
        head_sum_gpsimd_s > 0 && (decode_gpsimd_s <= 0 || head_sum_vector_s * decode_gpsimd_s >
                                                              decode_vector_s * head_sum_gpsimd_s);
    if (head_first) s.head_sum_on_gpsimd = give(head_sum_gpsimd_s, head_left);
    s.decode_on_gpsimd = decode_gpsimd_s > 0 ? give(decode_gpsimd_s, 1.0) : 1.0;
    if (!head_first) s.head_sum_on_gpsimd = give(head_sum_gpsimd_s, head_left);
    s.tensor = tensor_fixed + s.head_sum_on_tensor * head_sum_tensor_s;
    s.scalar = s.relu_on_scalar * relu_scalar_s;
    s.gpsimd = gpsimd_fixed + s.decode_on_gpsimd * decode_gpsimd_s +
               s.head_sum_on_gpsimd * head_sum_gpsimd_s;
    const double relu_vector = (1 - s.relu_on_scalar) * relu_vector_s;
    s.vector = vector_copies_s + relu_vector +
               (head_left - s.head_sum_on_gpsimd) * head_sum_vector_s +
               (1 - s.decode_on_gpsimd) * decode_vector_s;
    // On trn1 ScalarE is the faster reader of PSUM and GpSimd the faster decoder, so the split
    // above also leaves the least on each shared port.
    if (psum_port_shared) s.psum_port = s.scalar + relu_vector;
    if (sbuf_port_shared) s.sbuf_port = s.vector + s.gpsimd;
    return s;
  }

  // Whether every engine fits its share in time t (an engine given a share of a movable term is
  // filled to t exactly, so the comparison allows for rounding).
  bool fits(double t) const {
    const split s = split_at(t);
    const double tol = t * (1 + 1e-12);
    return s.dma <= tol && s.tensor <= tol && s.scalar <= tol && s.vector <= tol &&
           s.gpsimd <= tol && s.psum_port <= tol && s.sbuf_port <= tol;
  }

  // The least time t at which every engine fits its share, by bisection on t: `first` a time
  // that does not fit (or 0), `second` one that does, 1e-12 apart relative to the total.
  std::pair<double, double> bracket() const {
    const double hi0 = split_at(0.0).busiest() + head_sum_tensor_s + relu_scalar_s +
                       decode_gpsimd_s;  // fits: every term on either engine
    double lo = 0, hi = hi0;
    for (int i = 0; i < 100 && hi - lo > 1e-12 * hi0; ++i) {
      const double mid = 0.5 * (lo + hi);
      (fits(mid) ? hi : lo) = mid;
    }
    return {lo, hi};
  }
  // The floor, never above the least time.
  double seconds() const { return bracket().first; }

  // The engine (or shared port) whose share makes the floor, its largest term, and the other
  // engines busy up to the floor with it (a movable term split between them: "TensorE+ScalarE",
  // empty when none).
  struct binding {
    const char* engine = "";
    const char* term = "";
    char with[96] = {};
  };
  binding bound() const {
    const split s = split_at(bracket().second);
    struct part {
      const char* engine;
      const char* term;
      double seconds;
    };
    const double relu_v = (1 - s.relu_on_scalar) * relu_vector_s;
    const double head_v = (1 - s.head_sum_on_tensor - s.head_sum_on_gpsimd) * head_sum_vector_s;
    const double decode_v = (1 - s.decode_on_gpsimd) * decode_vector_s;
    const part parts[] = {
        {"DMA", "bytes", dma_bytes_s},
        {"DMA", "descriptors", dma_descriptors_s},
        {"DMA", "transfer fixed costs", dma_fixed_s},
        {"TensorE", "score matmuls", tensor_scores_s},
        {"TensorE", "K transposes", tensor_transposes_s},
        {"TensorE", "fp32 head sum", s.head_sum_on_tensor * head_sum_tensor_s},
        {"ScalarE", "psum-read relu", s.relu_on_scalar * relu_scalar_s},
        {"VectorE", "psum-read relu", relu_v},
        {"VectorE", "fp32 head sum", head_v},
        {"VectorE", "code decode", decode_v},
        {"VectorE", "transposed K copies", vector_copies_s},
        {"GpSimd", "gather descriptors", gpsimd_descriptors_s},
        {"GpSimd", "topk", gpsimd_topk_s},
        {"GpSimd", "code decode", s.decode_on_gpsimd * decode_gpsimd_s},
        {"GpSimd", "fp32 head sum", s.head_sum_on_gpsimd * head_sum_gpsimd_s},
    };
    const std::pair<const char*, double> engines[] = {{"DMA", s.dma},
                                                      {"TensorE", s.tensor},
                                                      {"ScalarE", s.scalar},
                                                      {"VectorE", s.vector},
                                                      {"GpSimd", s.gpsimd},
                                                      {"PSUM-read(ScalarE+VectorE)", s.psum_port},
                                                      {"SBUF(VectorE+GpSimd)", s.sbuf_port}};
    const auto* e = std::max_element(std::begin(engines), std::end(engines),
                                     [](auto& a, auto& b) { return a.second < b.second; });
    const bool psum = e->first[0] == 'P', sbuf = e->first[0] == 'S' && e->first[1] == 'B';
    const part* best = nullptr;
    for (const part& p : parts) {
      const std::string_view en(p.engine);
      const bool on = psum   ? (en == "ScalarE" || en == "VectorE") && p.term[0] == 'p'
                      : sbuf ? en == "VectorE" || en == "GpSimd"
                             : en == e->first;
      if (on && (!best || p.seconds > best->seconds)) best = &p;
    }
    binding b;
    b.engine = e->first;
    b.term = best ? best->term : "none";
    std::size_t n = 0;
    for (const auto& o : engines)
      if (&o != e && o.second > 0 && o.second >= e->second * (1 - 1e-9)) {
        const std::string_view name(o.first);
        if (n + name.size() + 2 > sizeof b.with) break;
        if (n > 0) b.with[n++] = '+';
        name.copy(b.with + n, name.size());
        n += name.size();
      }
    return b;
  }
};

// Why trn1's estimates stay over twice their floor: the rule the modelled trn1 schedule follows
// that the floor does not count, since a schedule outside this model could avoid it.
inline constexpr const char* trn1_floor_rule =
    "trn1's TensorE is not bit-accurate on NaN / Inf [isa nc_transpose], so codes and UE8M0 "
    "exponents cross the transpose and the matmul that spreads a scale over the head dimension's "
    "partitions as integers, and each code's scale is decoded after the spread, per code (the "
    "floor decodes a scale once per 32 codes); GpSimd cannot read PSUM, so those scale steps and "
    "the copies out of PSUM run on VectorE, which shares the SBUF port with GpSimd and the PSUM "
    "port with ScalarE [arch-v2]. Spreading decoded scales by DMA (not modelled) would lift it";

// Why trn3's MX prefill stays over 1.25x its floor: what the modelled schedule spends that the
// floor does not, and the layouts that would remove it (not modelled yet).
inline constexpr const char* trn3_mx_prefill_floor_rule =
    "trn3's MX matmul runs as four row tiles, each reading its own quadrant of the stationary "
    "and the moving operand, and the schedule keeps four keys per K^T column (one per quadrant), "
    "so every Q row's words and scales go into all four quadrants: one transpose row per Q row "
    "(3 TensorE cycles with the words' two passes, where the floor counts the transposed words "
    "once, 0.5), and a copy of each out of PSUM per pass of two rows. K^T in all four quadrants "
    "with four Q rows per transpose row instead would cut Q's transposes and copies "
    "fourfold. And the floor's GpSimd share of the head sum takes ScalarE's relu "
    "into SBUF and a GpSimd multiply and reduce, where the schedule's keys-on-partitions passes "
    "put the relu x w on VectorE and only the reduce on GpSimd";

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
