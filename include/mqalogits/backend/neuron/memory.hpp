// On-chip memory: SBUF / PSUM tiles, the windows (access patterns) engines read and write
// through, and the pools that hand tiles out under each generation's budgets.
//
// Budgets: a tile whose shape is a compile-time constant is checked by static_assert
// (fits_sbuf_v / fits_psum_v); one known only at run time is checked when allocated and throws
// mqalogits::error naming the tile, its size, what is in use and the budget.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../std_abi.hpp"
#include "dtype.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

enum class memory : std::uint8_t { sbuf, psum };

// The largest PSUM tile of a generation: the matmul output of its largest fp32 moving free size
// (one 2 KiB bank on trn1 / trn2, 8 banks on trn3).
template <class Gen>
inline constexpr std::int64_t max_psum_tile_bytes = traits<Gen>::pe_max_moving_fp32 * 4;

// Compile-time budget checks for constexpr tile shapes.
template <class Gen, dtype T, int P, std::int64_t F, int Buffers = 1>
inline constexpr bool fits_sbuf_v =
    P >= 1 && P <= traits<Gen>::partitions&& F >= 1 &&
    Buffers* partition_bytes(T, F) <= traits<Gen>::sbuf_partition_bytes;
template <class Gen, int P, std::int64_t F>
inline constexpr bool fits_psum_v = P >= 1 && P <= traits<Gen>::partitions&& F >= 1 &&
                                    partition_bytes(dtype::fp32, F) <= max_psum_tile_bytes<Gen>;

// PSUM banks (2 KiB per partition each) that a fp32 PSUM tile of F elements per partition holds.
constexpr std::int64_t psum_banks_of(std::int64_t F) {
  return (partition_bytes(dtype::fp32, F) + common_traits::psum_bank_bytes - 1) /
         common_traits::psum_bank_bytes;
}

template <dtype T, int P, std::int64_t F>
struct shape {
  static constexpr dtype type = T;
  static constexpr int partitions = P;
  static constexpr std::int64_t free = F;
};

class pool;

// partitions x free elements of one type in SBUF or PSUM, released when destroyed.
class tile {
 public:
  tile() = default;
  tile(tile&& o) noexcept { *this = std::move(o); }
  tile& operator=(tile&& o) noexcept;
  ~tile();

  dtype type() const { return type_; }
  memory space() const { return space_; }
  int partitions() const { return partitions_; }
  std::int64_t free() const { return free_; }
  bool holds_values() const { return !values_.empty(); }
  // Element (p, i); lane j of a packed x4 element.
  float& at(std::int64_t p, std::int64_t i, int j = 0) {
    return values_[static_cast<std::size_t>((p * free_ + i) * dtype_lanes(type_) + j)];
  }
  float at(std::int64_t p, std::int64_t i, int j = 0) const {
    return values_[static_cast<std::size_t>((p * free_ + i) * dtype_lanes(type_) + j)];
  }

 private:
  friend class pool;
  dtype type_ = dtype::fp32;
  memory space_ = memory::sbuf;
  int partitions_ = 0;
  std::int64_t free_ = 0;
  std::int64_t reserved_ = 0;  // bytes per partition held in the pool
  pool* owner_ = nullptr;
  detail::vector<float> values_;
};

// A window of a tile: partitions [p0, p0 + np), elements [c0, c0 + nc). Engines read and write
// through windows, the way an NKI instruction names an access pattern.
// `step` != 1 is a strided access pattern along the free dimension (element c at c0 + c x step;
// 0 broadcasts one element).
struct window {
  tile* t = nullptr;
  int p0 = 0, np = 0;
  std::int64_t c0 = 0, nc = 0, step = 1;
  // A two-level pattern (run > 0): runs of `run` elements `step` apart, run r starting at
  // c0 + r x run_step (a second free dimension of the access pattern).
  std::int64_t run = 0, run_step = 0;

  window() = default;
  window(tile& x) : t(&x), np(x.partitions()), nc(x.free()) {}  // NOLINT: the whole tile
  window(tile& x, int p0_, int np_, std::int64_t c0_, std::int64_t nc_, std::int64_t step_ = 1)
      : t(&x), p0(p0_), np(np_), c0(c0_), nc(nc_), step(step_) {}
  window(tile& x, int p0_, int np_, std::int64_t c0_, std::int64_t nc_, std::int64_t step_,
         std::int64_t run_, std::int64_t run_step_)
      : t(&x), p0(p0_), np(np_), c0(c0_), nc(nc_), step(step_), run(run_), run_step(run_step_) {}
  dtype type() const { return t->type(); }
  memory space() const { return t->space(); }
  std::int64_t column(std::int64_t c) const {
    return run > 0 ? c0 + c % run * step + c / run * run_step : c0 + c * step;
  }
  float& at(std::int64_t p, std::int64_t c, int j = 0) const { return t->at(p0 + p, column(c), j); }
  bool inside() const {  // strides are non-negative: the first and last elements bound it
    const bool shape = run == 0 || (run_step >= 0 && nc % run == 0);
    return t && np >= 1 && nc >= 1 && step >= 0 && shape && p0 + np <= t->partitions() &&
           column(0) >= 0 && column(nc - 1) < t->free();
  }
};

// One memory (SBUF or PSUM): a per-partition byte budget and its peak use. PSUM is handed out in
// whole 2 KiB banks.
class pool {
 public:
  pool(memory space, std::int64_t budget, std::int64_t granule, std::int64_t max_tile,
       const char* generation, bool compute, bool psum_bf16 = false)
      : psum_bf16_(psum_bf16),
        space_(space),
        budget_(budget),
        granule_(granule),
        max_tile_(max_tile),
        generation_(generation),
        compute_(compute) {}
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  std::int64_t in_use() const { return used_; }
  std::int64_t peak() const { return peak_; }
  std::int64_t budget() const { return budget_; }

  // Runtime-shaped allocation: throws mqalogits::error when the tile cannot fit.
  tile allocate(const char* name, dtype type, std::int64_t partitions, std::int64_t free,
                int buffers = 1) {
    const char* mem = space_ == memory::sbuf ? "SBUF" : "PSUM";
    const detail::where3 where{"neuron model (", generation_, ")"};
    detail::require(partitions >= 1 && partitions <= common_traits::partitions && free >= 1, where,
                    [&](auto& m) {
                      m << mem << " tile " << name << " [" << partitions << " x " << free
                        << "] needs 1..128 partitions and a non-empty free size";
                    });
    // PSUM holds fp32 (and, for transposed MX operands, packed 32 / 16-bit words; bf16 matmul
    // output where the generation writes it).
    detail::require(space_ == memory::sbuf || type == dtype::fp32 || dtype_lanes(type) == 4 ||
                        (type == dtype::bf16 && psum_bf16_),
                    where, [&](auto& m) {
                      m << "PSUM tile " << name << " must be fp32, not " << dtype_name(type);
                    });
    const std::int64_t bytes = partition_bytes(type, free);
    detail::require(space_ == memory::sbuf || bytes <= max_tile_, where, [&](auto& m) {
      m << "PSUM tile " << name << " [" << partitions << " x " << free << " " << dtype_name(type)
        << "] needs " << bytes << " B per partition, more than "
        << (max_tile_ == common_traits::psum_bank_bytes ? "one 2 KiB bank (512 fp32)"
                                                        : "one matmul output");
    });
    const std::int64_t reserve = (bytes + granule_ - 1) / granule_ * granule_ * buffers;
    detail::require(used_ + reserve <= budget_, where, [&](auto& m) {
      m << mem << " budget exceeded: tile " << name << " [" << partitions << " x " << free << " "
        << dtype_name(type) << "] x " << buffers << " buffer(s) needs " << reserve
        << " B per partition, " << used_ << " B are in use, the budget is " << budget_
        << " B per partition";
      if (space_ == memory::psum)
        m << " (" << reserve / granule_ << " more of the " << budget_ / granule_ << " PSUM banks, "
          << used_ / granule_ << " taken: a double-buffered schedule needs "
          << "two banks per streaming tile)";
    });
    used_ += reserve;
    peak_ = std::max(peak_, used_);
    tile t;
    t.type_ = type;
    t.space_ = space_;
    t.partitions_ = static_cast<int>(partitions);
    t.free_ = free;
    t.reserved_ = reserve;
    t.owner_ = this;
    if (compute_)
      t.values_.assign(static_cast<std::size_t>(partitions * free * dtype_lanes(type)), 0.0f);
    return t;
  }
  void release(std::int64_t bytes) { used_ -= bytes; }
  // A peak reached elsewhere on the same schedule (a cost-only trial this call adopts).
  void raise_peak(std::int64_t bytes) { peak_ = std::max(peak_, bytes); }

 private:
  bool psum_bf16_;
  memory space_;
  std::int64_t budget_, granule_, max_tile_;
  const char* generation_;
  bool compute_;
  std::int64_t used_ = 0, peak_ = 0;
};

inline tile& tile::operator=(tile&& o) noexcept {
  if (this != &o) {
    if (owner_) owner_->release(reserved_);
    type_ = o.type_;
    space_ = o.space_;
    partitions_ = o.partitions_;
    free_ = o.free_;
    reserved_ = o.reserved_;
    owner_ = std::exchange(o.owner_, nullptr);
    values_ = std::move(o.values_);
  }
  return *this;
}
inline tile::~tile() {
  if (owner_) owner_->release(reserved_);
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
