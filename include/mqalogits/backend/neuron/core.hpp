// A small NeuronCore model: SBUF / PSUM tiles with their budgets enforced, and the engines the
// indexer schedule uses (DMA, TensorE, ScalarE, VectorE), each counting what it would cost.
//
// It runs on the host in fp32, one instruction at a time (no cycle simulation). Values in a
// tile are held as fp32; every element type used here (bytes, e4m3 / e2m1 codes, bf16, fp32) is
// exact in fp32, and a write to a bf16 tile rounds to nearest even, as VectorE / ScalarE do.
//
// Budgets: a tile whose shape is a compile-time constant is checked by static_assert
// (fits_sbuf_v / fits_psum_v); one known only at run time is checked when allocated and throws
// mqalogits::error naming the tile, its size, what is in use and the budget.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "report.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Element types of on-chip tiles. u8: raw bytes (codes as stored, UE8M0 scales); fp8 / fp4:
// e4m3 / e2m1 code values (the MX matmul operands on trn3).
enum class dtype : std::uint8_t { u8, fp8, fp4, bf16, fp32 };

constexpr int dtype_bits(dtype t) {
  return t == dtype::fp4 ? 4 : t == dtype::bf16 ? 16 : t == dtype::fp32 ? 32 : 8;
}
constexpr const char* dtype_name(dtype t) {
  return t == dtype::u8     ? "u8"
         : t == dtype::fp8  ? "fp8"
         : t == dtype::fp4  ? "fp4"
         : t == dtype::bf16 ? "bf16"
                            : "fp32";
}
// Bytes one partition of a tile with `free` elements occupies.
constexpr std::int64_t partition_bytes(dtype t, std::int64_t free) {
  return (free * dtype_bits(t) + 7) / 8;
}
// The value an engine stores into a tile of type t: bf16 rounds to nearest even; the other
// types receive values that are already exact in them.
inline float store_as(dtype t, float v) {
  return t == dtype::bf16 ? bf16::from_float(v).to_float() : v;
}

enum class memory : std::uint8_t { sbuf, psum };

// Compile-time budget checks for constexpr tile shapes.
template <class Gen, dtype T, int P, std::int64_t F, int Buffers = 1>
inline constexpr bool fits_sbuf_v =
    P >= 1 && P <= traits<Gen>::partitions&& F >= 1 &&
    Buffers* partition_bytes(T, F) <= traits<Gen>::sbuf_partition_bytes;
// A PSUM tile is fp32 and lives in one 2 KiB bank (a matmul writes at most one bank).
template <class Gen, int P, std::int64_t F>
inline constexpr bool fits_psum_v = P >= 1 && P <= traits<Gen>::partitions&& F >= 1 &&
                                    partition_bytes(dtype::fp32, F) <= traits<Gen>::psum_bank_bytes;

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
  float& at(std::int64_t p, std::int64_t i) {
    return values_[static_cast<std::size_t>(p * free_ + i)];
  }
  float at(std::int64_t p, std::int64_t i) const {
    return values_[static_cast<std::size_t>(p * free_ + i)];
  }
  float* row(std::int64_t p) { return values_.data() + p * free_; }
  const float* row(std::int64_t p) const { return values_.data() + p * free_; }

 private:
  friend class pool;
  dtype type_ = dtype::fp32;
  memory space_ = memory::sbuf;
  int partitions_ = 0;
  std::int64_t free_ = 0;
  std::int64_t reserved_ = 0;  // bytes per partition held in the pool
  pool* owner_ = nullptr;
  std::vector<float> values_;
};

// A window of a tile: partitions [p0, p0 + np), elements [c0, c0 + nc). Engines read and write
// through windows, the way an NKI instruction names an access pattern.
struct window {
  tile* t = nullptr;
  int p0 = 0, np = 0;
  std::int64_t c0 = 0, nc = 0;

  window() = default;
  window(tile& x) : t(&x), np(x.partitions()), nc(x.free()) {}  // NOLINT: the whole tile
  window(tile& x, int p0_, int np_, std::int64_t c0_, std::int64_t nc_)
      : t(&x), p0(p0_), np(np_), c0(c0_), nc(nc_) {}
  dtype type() const { return t->type(); }
  memory space() const { return t->space(); }
  float& at(std::int64_t p, std::int64_t c) const { return t->at(p0 + p, c0 + c); }
  float* row(std::int64_t p) const { return t->row(p0 + p) + c0; }
};

// One memory (SBUF or PSUM): a per-partition byte budget and its peak use. PSUM is handed out in
// whole 2 KiB banks.
class pool {
 public:
  pool(memory space, std::int64_t budget, std::int64_t granule, const char* generation)
      : space_(space), budget_(budget), granule_(granule), generation_(generation) {}
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  std::int64_t in_use() const { return used_; }
  std::int64_t peak() const { return peak_; }
  std::int64_t budget() const { return budget_; }

  // Runtime-shaped allocation: throws mqalogits::error when the tile cannot fit.
  tile allocate(const char* name, dtype type, std::int64_t partitions, std::int64_t free,
                int buffers = 1) {
    const char* mem = space_ == memory::sbuf ? "SBUF" : "PSUM";
    const auto where = std::string("neuron model (") + generation_ + ")";
    detail::require(partitions >= 1 && partitions <= common_traits::partitions && free >= 1, where,
                    [&](auto& m) {
                      m << mem << " tile " << name << " [" << partitions << " x " << free
                        << "] needs 1..128 partitions and a non-empty free size";
                    });
    detail::require(space_ == memory::sbuf || type == dtype::fp32, where, [&](auto& m) {
      m << "PSUM tile " << name << " must be fp32, not " << dtype_name(type);
    });
    const std::int64_t bytes = partition_bytes(type, free);
    detail::require(
        space_ == memory::sbuf || bytes <= common_traits::psum_bank_bytes, where, [&](auto& m) {
          m << "PSUM tile " << name << " [" << partitions << " x " << free << " fp32] needs "
            << bytes << " B per partition, more than one 2 KiB bank (512 fp32)";
        });
    const std::int64_t reserve = (bytes + granule_ - 1) / granule_ * granule_ * buffers;
    detail::require(used_ + reserve <= budget_, where, [&](auto& m) {
      m << mem << " budget exceeded: tile " << name << " [" << partitions << " x " << free << " "
        << dtype_name(type) << "] x " << buffers << " buffer(s) needs " << reserve
        << " B per partition, " << used_ << " B are in use, the budget is " << budget_
        << " B per partition";
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
    t.values_.assign(static_cast<std::size_t>(partitions * free), 0.0f);
    return t;
  }
  void release(std::int64_t bytes) { used_ -= bytes; }

 private:
  memory space_;
  std::int64_t budget_, granule_;
  const char* generation_;
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

enum class activation_fn : std::uint8_t { identity, relu };

// One NeuronCore of generation Gen: its two memories and its engines. Every engine call checks
// the rules NEURON.md lists, computes its result and adds its cost to the counters.
template <class Gen>
class core {
 public:
  using traits_type = traits<Gen>;

  core()
      : sbuf_(memory::sbuf, traits_type::sbuf_partition_bytes, 64, traits_type::name),
        psum_(memory::psum, traits_type::psum_partition_bytes, traits_type::psum_bank_bytes,
              traits_type::name) {
    report_.generation = traits_type::name;
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
  template <class Shape>
  tile psum(const char* name) {
    static_assert(Shape::type == dtype::fp32, "mqalogits neuron model: PSUM tiles are fp32");
    static_assert(fits_psum_v<Gen, Shape::partitions, Shape::free>,
                  "mqalogits neuron model: this PSUM tile does not fit one 2 KiB bank");
    return psum_.allocate(name, dtype::fp32, Shape::partitions, Shape::free);
  }
  tile psum(const char* name, std::int64_t partitions, std::int64_t free) {
    return psum_.allocate(name, dtype::fp32, partitions, free);
  }
  const pool& sbuf_pool() const { return sbuf_; }
  const pool& psum_pool() const { return psum_; }

  // ---- DMA (HBM <-> SBUF): one descriptor per partition row ----

  // Copies `bytes` bytes from HBM into partition p of a u8 tile, from element c0.
  void dma_bytes_in(const window& dst, std::int64_t p, std::int64_t c0, const std::uint8_t* src,
                    std::int64_t bytes) {
    check(dst.type() == dtype::u8 && dst.space() == memory::sbuf, "DMA bytes go to a u8 SBUF tile");
    check(c0 + bytes <= dst.nc && p < dst.np, "DMA row past the end of its tile");
    float* out = dst.row(p) + c0;
    for (std::int64_t i = 0; i < bytes; ++i) out[i] = src[i];
    descriptor(bytes);
  }
  // Copies n values (of `element_bytes` bytes each in HBM) into partition p of an SBUF tile.
  template <class T>
  void dma_values_in(const window& dst, std::int64_t p, std::int64_t c0, const T* src,
                     std::int64_t n) {
    check(dst.space() == memory::sbuf && c0 + n <= dst.nc && p < dst.np,
          "DMA row past the end of its tile");
    float* out = dst.row(p) + c0;
    for (std::int64_t i = 0; i < n; ++i) out[i] = store_as(dst.type(), to_float(src[i]));
    descriptor(n * static_cast<std::int64_t>(sizeof(T)));
  }
  // Writes partition p, elements [c0, c0 + n) of an SBUF tile to HBM as T.
  template <class T>
  void dma_values_out(T* dst, const window& src, std::int64_t p, std::int64_t c0, std::int64_t n) {
    check(src.space() == memory::sbuf && c0 + n <= src.nc && p < src.np,
          "DMA row past the end of its tile");
    const float* in = src.row(p) + c0;
    for (std::int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(in[i]);
    descriptor(n * static_cast<std::int64_t>(sizeof(T)));
  }
  // One indirect read (a block-table entry, a sparse block index) resolved by the DMA queue.
  void dma_gather() { ++report_.dma_gathers; }
  // A DMA of a constant (e.g. -inf) SBUF row into `n` elements of T in HBM.
  template <class T>
  void dma_fill_out(T* dst, std::int64_t n, T value) {
    std::fill(dst, dst + n, value);
    descriptor(n * static_cast<std::int64_t>(sizeof(T)));
  }

  // ---- TensorE ----

  // out [M, N] (PSUM) = stationary [K, M]^T @ moving [K, N], contraction K on partitions; fp32
  // accumulation; accumulate = false overwrites (the first matmul into a tile), true adds.
  // bf16 x bf16 runs at the full rate, fp32 x fp32 in 4 passes.
  void matmul(const window& out, const window& stationary, const window& moving, bool accumulate,
              bool head_sum = false) {
    const std::int64_t K = stationary.np, M = stationary.nc, N = moving.nc;
    check_matmul(out, stationary, moving);
    check(stationary.type() == moving.type() &&
              (stationary.type() == dtype::bf16 || stationary.type() == dtype::fp32),
          "matmul operands are both bf16 or both fp32 (fp8 / fp4 go through matmul_mx on trn3)");
    std::vector<float> acc(static_cast<std::size_t>(M * N), 0.0f);
    for (std::int64_t k = 0; k < K; ++k) {
      const float* s = stationary.row(k);
      const float* v = moving.row(k);
      for (std::int64_t m = 0; m < M; ++m) {
        const float a = s[m];
        float* o = acc.data() + m * N;
        for (std::int64_t n = 0; n < N; ++n) o[n] += a * v[n];
      }
    }
    write_psum(out, acc, accumulate);
    const std::int64_t passes = stationary.type() == dtype::fp32 ? traits_type::pe_fp32_passes : 1;
    tensor_instruction(N * passes);
    (head_sum ? report_.matmul_head_sum : report_.matmul_score) += 1;
    report_.matmul_flops += 2 * K * M * N;
  }

  // The MX matmul of trn3 (nc_matmul_mx): e4m3 / e2m1 code operands, one UE8M0 scale per 32
  // contraction elements on each side. codes: [128, M] and [128, N]; scales: [4, M] and [4, N]
  // (u8 exponents). Each 32-block's code products are summed in fp32, scaled by both block
  // scales and accumulated in fp32. The model keeps the contraction unpacked on 128 partitions;
  // the device packs it 4 per partition (32 partitions), which changes the layout, not the
  // result or the N columns per instruction (derived).
  void matmul_mx(const window& out, const window& st_codes, const window& st_scales,
                 const window& mv_codes, const window& mv_scales, bool accumulate) {
    static_assert(traits_type::mx_matmul || dependent_false<Gen>,
                  "mqalogits neuron model: the MX matmul exists on trn3 only");
    const std::int64_t K = st_codes.np, M = st_codes.nc, N = mv_codes.nc;
    check_matmul(out, st_codes, mv_codes);
    check(K == head_dim, "matmul_mx contracts one 128-wide row (4 scale blocks)");
    check((st_codes.type() == dtype::fp8 || st_codes.type() == dtype::fp4) &&
              st_codes.type() == mv_codes.type(),
          "matmul_mx operands are both fp8 or both fp4 codes");
    check(st_scales.type() == dtype::u8 && mv_scales.type() == dtype::u8 &&
              st_scales.np == K / scale_block && mv_scales.np == K / scale_block &&
              st_scales.nc == M && mv_scales.nc == N,
          "matmul_mx scales are [4, M] and [4, N] u8 exponents");
    std::vector<float> acc(static_cast<std::size_t>(M * N), 0.0f), block(acc.size());
    for (std::int64_t b = 0; b < K / scale_block; ++b) {
      std::fill(block.begin(), block.end(), 0.0f);
      for (std::int64_t k = b * scale_block; k < (b + 1) * scale_block; ++k) {
        const float* s = st_codes.row(k);
        const float* v = mv_codes.row(k);
        for (std::int64_t m = 0; m < M; ++m) {
          const float a = s[m];
          float* o = block.data() + m * N;
          for (std::int64_t n = 0; n < N; ++n) o[n] += a * v[n];
        }
      }
      const float* sm = st_scales.row(b);
      const float* sn = mv_scales.row(b);
      for (std::int64_t m = 0; m < M; ++m) {
        const float a = ue8m0_values[static_cast<std::uint8_t>(sm[m])];
        for (std::int64_t n = 0; n < N; ++n)
          acc[static_cast<std::size_t>(m * N + n)] +=
              block[static_cast<std::size_t>(m * N + n)] *
              (a * ue8m0_values[static_cast<std::uint8_t>(sn[n])]);
      }
    }
    write_psum(out, acc, accumulate);
    tensor_instruction(N);
    ++report_.matmul_score;
    report_.matmul_flops += 2 * K * M * N;
  }

  // out [F, P] (PSUM) = in [P, F]^T: a matmul against the identity (in stationary, P <= 128,
  // F <= 128). Exact: every value passes through fp32 unchanged.
  void transpose(const window& out, const window& in) {
    check(in.np <= traits_type::pe_max_contraction && in.nc <= traits_type::pe_max_stationary,
          "transpose input is at most [128 x 128]");
    check(out.space() == memory::psum && out.np == in.nc && out.nc == in.np,
          "transpose writes a [F, P] PSUM tile");
    check_partition_start(in);
    check_partition_start(out);
    for (std::int64_t p = 0; p < in.np; ++p)
      for (std::int64_t f = 0; f < in.nc; ++f) out.at(f, p) = in.at(p, f);
    tensor_instruction(in.np);
    ++report_.matmul_transpose;
  }

  // ---- ScalarE ----

  // out = fn(in * scale[p]) for every partition p (scale: a [P, 1] tile, or null for 1), fp32
  // inside; the usual way to evacuate PSUM. relu keeps NaN.
  void activation(const window& out, const window& in, activation_fn fn,
                  const window* scale = nullptr) {
    check_same_shape(out, in);
    check(!scale || (scale->np == in.np && scale->nc == 1), "activation scale is [P, 1]");
    for (std::int64_t p = 0; p < in.np; ++p) {
      const float s = scale ? scale->at(p, 0) : 1.0f;
      const float* x = in.row(p);
      float* y = out.row(p);
      for (std::int64_t i = 0; i < in.nc; ++i) {
        float v = scale ? x[i] * s : x[i];
        if (fn == activation_fn::relu && v < 0.0f) v = 0.0f;
        y[i] = store_as(out.type(), v);
      }
    }
    engine_instruction(report_.scalar, traits_type::scalar_hz, in.nc);
  }

  // ---- VectorE (fp32 inside, round to nearest even when writing bf16) ----

  void memset(const window& out, float value) {
    check_partition_start(out);
    for (std::int64_t p = 0; p < out.np; ++p)
      std::fill(out.row(p), out.row(p) + out.nc, store_as(out.type(), value));
    engine_instruction(report_.vector, traits_type::vector_hz, out.nc);
  }
  // out = in (PSUM -> SBUF evacuation or a cast).
  void copy(const window& out, const window& in) {
    check_same_shape(out, in);
    for (std::int64_t p = 0; p < in.np; ++p) {
      const float* x = in.row(p);
      float* y = out.row(p);
      for (std::int64_t i = 0; i < in.nc; ++i) y[i] = store_as(out.type(), x[i]);
    }
    engine_instruction(report_.vector, traits_type::vector_hz, in.nc);
  }
  // acc = in * scalar[p] + (first ? 0 : acc), the per-partition scalar a [P, 1] tile (NKI's
  // scalar_tensor_tensor).
  void scale_add(const window& acc, const window& in, const window& scalar, bool first) {
    check_same_shape(acc, in);
    check(scalar.np == in.np && scalar.nc == 1, "scale_add scalar is [P, 1]");
    for (std::int64_t p = 0; p < in.np; ++p) {
      const float s = scalar.at(p, 0);
      const float* x = in.row(p);
      float* y = acc.row(p);
      for (std::int64_t i = 0; i < in.nc; ++i)
        y[i] = store_as(acc.type(), first ? 0.0f + x[i] * s : y[i] + x[i] * s);
    }
    engine_instruction(report_.vector, traits_type::vector_hz, in.nc);
  }
  // out[p, i] = valid[i] ? in[p, i] : fill (a column mask shared by all partitions).
  void select(const window& out, const window& in, const std::vector<unsigned char>& valid,
              float fill) {
    check_same_shape(out, in);
    check(static_cast<std::int64_t>(valid.size()) >= in.nc, "select mask shorter than the tile");
    for (std::int64_t p = 0; p < in.np; ++p) {
      const float* x = in.row(p);
      float* y = out.row(p);
      for (std::int64_t i = 0; i < in.nc; ++i)
        y[i] = store_as(out.type(), valid[static_cast<std::size_t>(i)] ? x[i] : fill);
    }
    engine_instruction(report_.vector, traits_type::vector_hz, in.nc);
  }
  // Dequantises rows of raw Format bytes ([P, data_bytes] u8 and [P, scale_bytes] u8) into
  // [P, 128] values of out's type: bf16 (MX formats on trn1 / trn2: exact for every code times
  // a power of two inside bf16's range) or fp32 (fp8_per_token, whose fp32 scale is not a power
  // of two). has_scales = false: a format whose rows may come without scales (scale 1).
  template <class Format>
  void dequantise(const window& out, const window& data, const window& scales,
                  bool has_scales = true) {
    check(data.type() == dtype::u8 && data.np == out.np && data.nc >= Format::data_bytes &&
              out.nc == head_dim &&
              (!has_scales || (scales.type() == dtype::u8 && scales.np == out.np &&
                               scales.nc >= Format::scale_bytes)),
          "dequantise reads [P, data_bytes] and [P, scale_bytes] u8 into [P, 128]");
    check_partition_start(out);
    std::uint8_t bytes[Format::data_bytes], exps[Format::scale_bytes];
    float row[head_dim];
    for (std::int64_t p = 0; p < out.np; ++p) {
      for (int i = 0; i < Format::data_bytes; ++i)
        bytes[i] = static_cast<std::uint8_t>(data.at(p, i));
      if (has_scales)
        for (int i = 0; i < Format::scale_bytes; ++i)
          exps[i] = static_cast<std::uint8_t>(scales.at(p, i));
      Format::decode_row(bytes, has_scales ? exps : nullptr, row);
      for (int i = 0; i < head_dim; ++i) out.at(p, i) = store_as(out.type(), row[i]);
    }
    engine_instruction(report_.vector, traits_type::vector_hz, head_dim);
  }
  // Unpacks raw Format bytes [P, data_bytes] into their code values [P, 128] (unscaled), the MX
  // operand layout before its transpose (trn3).
  template <class Format>
  void unpack_codes(const window& out, const window& data) {
    check(data.type() == dtype::u8 && data.np == out.np && out.nc == head_dim,
          "unpack_codes reads [P, data_bytes] u8 into [P, 128]");
    check_partition_start(out);
    std::uint8_t bytes[Format::data_bytes];
    for (std::int64_t p = 0; p < out.np; ++p) {
      for (int i = 0; i < Format::data_bytes; ++i)
        bytes[i] = static_cast<std::uint8_t>(data.at(p, i));
      for (int i = 0; i < head_dim; ++i) out.at(p, i) = Format::element(bytes, i);
    }
    engine_instruction(report_.vector, traits_type::vector_hz, head_dim);
  }

  // ---- the report ----
  report& counters() {
    report_.peak_sbuf_bytes = sbuf_.peak();
    report_.peak_psum_bytes = psum_.peak();
    return report_;
  }

 private:
  void check(bool ok, const char* what) const {
    detail::require(ok, std::string("neuron model (") + traits_type::name + ")",
                    [&](auto& m) { m << what; });
  }
  // An instruction's partition range: more than 64 partitions start at 0; 33..64 at 0 or 64;
  // up to 32 at 0, 32, 64 or 96 (NKI access-pattern rules).
  void check_partition_start(const window& w) const {
    const bool ok = w.np > 64 ? w.p0 == 0 : w.np > 32 ? (w.p0 == 0 || w.p0 == 64) : w.p0 % 32 == 0;
    detail::require(ok && w.p0 + w.np <= traits_type::partitions,
                    std::string("neuron model (") + traits_type::name + ")", [&](auto& m) {
                      m << "an access of " << w.np << " partitions cannot start at partition "
                        << w.p0;
                    });
  }
  void check_same_shape(const window& a, const window& b) const {
    check(a.np == b.np && a.nc == b.nc, "engine operands have different shapes");
    check_partition_start(a);
    check_partition_start(b);
  }
  void check_matmul(const window& out, const window& st, const window& mv) const {
    const std::int64_t K = st.np, M = st.nc, N = mv.nc;
    detail::require(K == mv.np && K <= traits_type::pe_max_contraction &&
                        M <= traits_type::pe_max_stationary && N <= traits_type::pe_max_moving,
                    std::string("neuron model (") + traits_type::name + ")", [&](auto& m) {
                      m << "matmul stationary [" << K << " x " << M << "], moving [" << mv.np
                        << " x " << N
                        << "]: contraction must match and be <= 128, stationary free <= 128, "
                           "moving free <= 512";
                    });
    check(st.space() == memory::sbuf && mv.space() == memory::sbuf,
          "matmul operands are read from SBUF");
    check(out.space() == memory::psum && out.np == M && out.nc == N,
          "matmul writes a [M, N] PSUM tile");
    check_partition_start(st);
    check_partition_start(mv);
    check_partition_start(out);
  }
  void write_psum(const window& out, const std::vector<float>& acc, bool accumulate) {
    for (std::int64_t m = 0; m < out.np; ++m) {
      float* o = out.row(m);
      const float* a = acc.data() + m * out.nc;
      for (std::int64_t n = 0; n < out.nc; ++n) o[n] = accumulate ? o[n] + a[n] : a[n];
    }
  }
  void descriptor(std::int64_t bytes) {
    ++report_.dma_descriptors;
    report_.dma_bytes += bytes;
    if (bytes < traits_type::dma_efficient_row_bytes) ++report_.dma_small_descriptors;
    report_.dma_seconds = static_cast<double>(report_.dma_bytes) / traits_type::hbm_bytes_per_s;
  }
  void tensor_instruction(std::int64_t columns) {
    report_.tensor.instructions += 1;
    report_.tensor.cycles += traits_type::pe_fixed_cycles + columns;
    report_.tensor.seconds = static_cast<double>(report_.tensor.cycles) / traits_type::tensor_hz;
  }
  void engine_instruction(engine_count& e, double hz, std::int64_t elements) {
    e.instructions += 1;
    e.cycles += traits_type::engine_fixed_cycles +
                static_cast<std::int64_t>(static_cast<double>(elements) /
                                          traits_type::engine_elements_per_cycle);
    e.seconds = static_cast<double>(e.cycles) / hz;
  }

  pool sbuf_, psum_;
  report report_;
};

// Adds one call's counters into an accumulated report (peaks are maxima, the rest sums).
inline void accumulate(report& into, const report& call) {
  into.generation = call.generation;
  into.calls += 1;
  into.dma_bytes += call.dma_bytes;
  into.dma_descriptors += call.dma_descriptors;
  into.dma_small_descriptors += call.dma_small_descriptors;
  into.dma_gathers += call.dma_gathers;
  into.dma_seconds += call.dma_seconds;
  into.matmul_score += call.matmul_score;
  into.matmul_head_sum += call.matmul_head_sum;
  into.matmul_transpose += call.matmul_transpose;
  into.matmul_flops += call.matmul_flops;
  for (auto [a, b] : {std::pair{&into.tensor, &call.tensor}, std::pair{&into.scalar, &call.scalar},
                      std::pair{&into.vector, &call.vector}}) {
    a->instructions += b->instructions;
    a->cycles += b->cycles;
    a->seconds += b->seconds;
  }
  into.peak_sbuf_bytes = std::max(into.peak_sbuf_bytes, call.peak_sbuf_bytes);
  into.peak_psum_bytes = std::max(into.peak_psum_bytes, call.peak_psum_bytes);
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
