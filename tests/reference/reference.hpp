// The test reference: the behaviour contract computed the obvious way, one output element at a
// time, in double. It shares nothing with the library but its view types: its own code decoders
// (plain formulas with std::ldexp), its own column-to-key rules written from the contract, no
// plans, no schedule, no driver. It reads only what the contract says is read (block-table slots
// past a context are never touched) and throws std::logic_error when a slot it must read is not a
// page, so a test that builds bad inputs by mistake fails loudly instead of reading out of bounds.
//
// value[r, c] is the exact logit (-inf where the column is invalid, NaN where a NaN code or
// scale reaches a valid column); magnitude[r, c] is the accuracy bound's M (0 where invalid).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ref {

namespace ml = mqalogits;

struct result {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> value, magnitude;  // [rows, cols]

  double at(std::int64_t r, std::int64_t c) const {
    return value[static_cast<std::size_t>(r * cols + c)];
  }
  double mag(std::int64_t r, std::int64_t c) const {
    return magnitude[static_cast<std::size_t>(r * cols + c)];
  }
};

// The head dim of a call is its views' (Q's; K and the cache must agree, or the reference
// throws): 128 unless a view was given a head_dim_t.
inline constexpr int default_dim = 128;

// ---- decoders (the OCP bit layouts), written from the bit layouts, not from the library's tables
// ----

// e4m3fn: s eeee mmm, bias 7; e = 0 is subnormal m/8 * 2^-6; 0x7F / 0xFF are NaN.
inline double e4m3(std::uint8_t code) {
  const int e = (code >> 3) & 0xF, m = code & 0x7;
  if (e == 0xF && m == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (code & 0x80) ? -v : v;
}

// The e4m3fn code nearest to x (ties to the even code), saturating at 448 as a GPU's
// satfinite conversion does; NaN -> 0x7F. A search over every code, through e4m3 above.
inline std::uint8_t satfinite_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const double a = std::fabs(static_cast<double>(x));
  int best = 0x7E;  // 448
  if (a < 448) {
    best = 0;
    for (int c = 1; c <= 0x7E; ++c) {
      const double d = std::fabs(e4m3(static_cast<std::uint8_t>(c)) - a);
      const double bd = std::fabs(e4m3(static_cast<std::uint8_t>(best)) - a);
      if (d < bd || (d == bd && (c & 1) == 0)) best = c;
    }
  }
  return static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

// e2m1: s ee m, bias 1; e = 0 is subnormal m/2 (so 0 or 0.5).
inline double e2m1(std::uint8_t nibble) {
  const int e = (nibble >> 1) & 0x3, m = nibble & 0x1;
  const double v = e == 0 ? m / 2.0 : std::ldexp(1.0 + m / 2.0, e - 1);
  return (nibble & 0x8) ? -v : v;
}

// UE8M0: 2^(e - 127); 255 is NaN.
inline double ue8m0(std::uint8_t e) {
  return e == 255 ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int{e} - 127);
}

// bf16 bits are the top half of an fp32.
inline double weight(float w) {
  return w;
}
inline double weight(ml::bf16 w) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(w.bits) << 16);
}
// fp16 from its fields: sign, 5 exponent bits (bias 15, 0 = subnormal, 31 = inf / NaN), 10
// mantissa bits.
inline double weight(ml::fp16 w) {
  const int e = (w.bits >> 10) & 0x1F, m = w.bits & 0x3FF;
  const double sign = (w.bits & 0x8000) ? -1.0 : 1.0;
  if (e == 31)
    return m ? std::numeric_limits<double>::quiet_NaN()
             : sign * std::numeric_limits<double>::infinity();
  return sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// Formats by what they are (any head-dim binding of each): the data codec, and the scale codec's
// element (one fp32, a UE8M0 byte, an e4m3fn byte), with the format's scale block.
template <class Format>
inline constexpr bool is_fp4 = std::is_same_v<typename Format::data_type, ml::float_e2m1>;
template <class Format>
inline constexpr bool is_per_token =
    std::is_same_v<typename Format::scale_type, ml::fp32_row_scale>;

// Element i of a row, before scaling.
template <class Format>
double code(const std::uint8_t* data, int i) {
  if constexpr (!is_fp4<Format>) {
    return e4m3(data[i]);
  } else {
    const std::uint8_t byte = data[i / 2];
    return e2m1(static_cast<std::uint8_t>(i % 2 == 0 ? byte & 0xF : byte >> 4));
  }
}

// Scale b of a row's scale field: a float32 assembled byte by byte (little-endian; a null field,
// Q whose scale upstream folds into the weights, is 1), a UE8M0 byte, or an e4m3fn byte.
template <class Format>
double scale(const std::uint8_t* scales, int b) {
  using codec = typename Format::scale_type::codec;
  if constexpr (std::is_same_v<codec, float>) {
    if (!scales) return 1.0;
    const std::uint8_t* s = scales + 4 * b;
    return std::bit_cast<float>(std::uint32_t{s[0]} | std::uint32_t{s[1]} << 8 |
                                std::uint32_t{s[2]} << 16 | std::uint32_t{s[3]} << 24);
  } else if constexpr (std::is_same_v<codec, ml::float_ue8m0>) {
    return ue8m0(scales[b]);
  } else {
    static_assert(std::is_same_v<codec, ml::float_e4m3>, "ref: no decoder for this scale codec");
    return e4m3(scales[b]);
  }
}

// One dequantised row of `dim` elements: code(i) x scale(i / block), block the format's (32 for
// MX, the whole row for fp8_per_token).
template <class Format>
std::vector<double> row(const std::uint8_t* data, const std::uint8_t* scales,
                        int dim = default_dim) {
  constexpr int block = Format::scale_block == Format::head_dim ? 0 : Format::scale_block;
  std::vector<double> out(static_cast<std::size_t>(dim));
  for (int i = 0; i < dim; ++i)
    out[i] = code<Format>(data, i) * scale<Format>(scales, block ? i / block : 0);
  return out;
}

namespace detail {

// All of Q decoded once: [q.rows, q.head_dim].
template <class Format>
std::vector<double> decode_all(const ml::rows_view<Format>& q) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(q.rows * q.head_dim));
  for (std::int64_t r = 0; r < q.rows; ++r) {
    const auto v = row<Format>(q.data + r * q.data_stride,
                               q.scales ? q.scales + r * q.scale_stride : nullptr, q.head_dim);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Computes one output row: for every valid column, key_of(c) gives the key's decoded values.
template <class W, class KeyFn>
void fill_row(result& res, std::int64_t r, const std::vector<double>& qd,
              const ml::matrix_view<const W>& w, KeyFn&& key_of) {
  const std::int64_t H = w.cols;
  const auto dim = static_cast<std::int64_t>(qd.size()) / std::max<std::int64_t>(1, res.rows * H);
  for (std::int64_t c = 0; c < res.cols; ++c) {
    const std::size_t o = static_cast<std::size_t>(r * res.cols + c);
    std::vector<double> k;
    if (!key_of(c, k)) {
      res.value[o] = -std::numeric_limits<double>::infinity();
      res.magnitude[o] = 0.0;
      continue;
    }
    double value = 0.0, magnitude = 0.0;
    for (std::int64_t h = 0; h < H; ++h) {
      const double* qh = qd.data() + (r * H + h) * dim;
      double dot = 0.0, abs_dot = 0.0;
      if (static_cast<std::int64_t>(k.size()) != dim)
        throw std::logic_error("ref: a key of " + std::to_string(k.size()) + " elements, Q has " +
                               std::to_string(dim));
      for (std::int64_t i = 0; i < dim; ++i) {
        dot += qh[i] * k[i];
        abs_dot += std::fabs(qh[i] * k[i]);
      }
      const double wh = weight(w(r, h));
      const double relu = std::isnan(dot) ? dot : (dot > 0.0 ? dot : 0.0);  // relu(NaN) = NaN
      value += relu * wh;
      magnitude += std::fabs(wh) * abs_dot;
    }
    res.value[o] = value;
    res.magnitude[o] = magnitude;
  }
}

inline result make(std::int64_t rows, std::int64_t cols) {
  result res;
  res.rows = rows;
  res.cols = cols;
  res.value.assign(static_cast<std::size_t>(rows * cols), 0.0);
  res.magnitude.assign(static_cast<std::size_t>(rows * cols), 0.0);
  return res;
}

template <class Format, class W>
void check_q(const char* where, const ml::rows_view<Format>& q, const ml::matrix_view<const W>& w,
             int k_head_dim) {
  if (q.head_dim != k_head_dim)
    throw std::logic_error(std::string(where) + ": q head_dim " + std::to_string(q.head_dim) +
                           ", keys " + std::to_string(k_head_dim));
  if (q.rows != w.rows * w.cols)
    throw std::logic_error(std::string(where) + ": q has " + std::to_string(q.rows) +
                           " rows, weights are [" + std::to_string(w.rows) + ", " +
                           std::to_string(w.cols) + "]");
}

template <class Format>
std::int32_t read_page(const char* where, const ml::paged_cache_view<Format>& cache,
                       const ml::matrix_view<const std::int32_t>& table, std::int64_t row,
                       std::int64_t slot) {
  const std::int32_t page = table(row, slot);
  if (page < 0 || page >= cache.num_pages)
    throw std::logic_error(std::string(where) + ": block_table[" + std::to_string(row) + "][" +
                           std::to_string(slot) + "] = " + std::to_string(page) +
                           " is read and is not a page");
  return page;
}

// Decoded key at context position p of a paged cache, through block-table row `trow`.
template <class Format>
std::vector<double> paged_key(const char* where, const ml::paged_cache_view<Format>& cache,
                              const ml::matrix_view<const std::int32_t>& table, std::int64_t trow,
                              std::int64_t p) {
  const std::int64_t page = read_page(where, cache, table, trow, p / cache.page_kv);
  const std::int64_t slot = p % cache.page_kv;
  const std::uint8_t* base = cache.base + page * cache.page_stride;
  const std::int64_t data_bytes = cache.head_dim * Format::data_type::bits / 8;
  return row<Format>(base + slot * data_bytes,
                     base + std::int64_t{cache.page_kv} * data_bytes + slot * Format::scale_bytes,
                     cache.head_dim);
}

inline std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  return ((a % b) + b) % b;
}
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace detail

// fp8_fp4_mqa_logits. max_seqlen_k > 0: column j is token ks + j, valid iff 0 <= token <
// min(ke, N). max_seqlen_k == 0 (full width): [num_q, N], column j is token j, valid iff
// ks <= j < min(ke, N).
template <class Format, class W>
result dense(const ml::rows_view<Format>& q, const ml::rows_view<Format>& kv,
             ml::matrix_view<const W> w, std::span<const std::int32_t> ks,
             std::span<const std::int32_t> ke, std::int64_t max_seqlen_k) {
  detail::check_q("ref::dense", q, w, kv.head_dim);
  const std::int64_t N = kv.rows;
  const bool full = max_seqlen_k == 0;
  result res = detail::make(w.rows, full ? N : max_seqlen_k);
  const auto qd = detail::decode_all(q);
  for (std::int64_t r = 0; r < w.rows; ++r) {
    const std::int64_t s = ks[r], e = std::min<std::int64_t>(ke[r], N);
    detail::fill_row(res, r, qd, w, [&](std::int64_t c, std::vector<double>& k) {
      const std::int64_t t = full ? c : s + c;
      if (t < 0 || t < s || t >= e) return false;
      k = row<Format>(kv.data + t * kv.data_stride, kv.scales + t * kv.scale_stride, kv.head_dim);
      return true;
    });
  }
  return res;
}

// fp8_fp4_paged_mqa_logits. Row (b, j) = b * next_n + j; column c is context position c, valid
// iff c < context_lens[b][j] and c < max_blocks * page_kv; its page is block_table[b][c / page_kv].
template <class Format, class W>
result paged(const ml::rows_view<Format>& q, const ml::paged_cache_view<Format>& cache,
             ml::matrix_view<const W> w, ml::matrix_view<const std::int32_t> context_lens,
             ml::matrix_view<const std::int32_t> block_table, std::int64_t max_context_len) {
  detail::check_q("ref::paged", q, w, cache.head_dim);
  const std::int64_t next_n = context_lens.cols;
  result res = detail::make(context_lens.rows * next_n, max_context_len);
  const auto qd = detail::decode_all(q);
  const std::int64_t capacity = block_table.cols * std::int64_t{cache.page_kv};
  for (std::int64_t r = 0; r < res.rows; ++r) {
    const std::int64_t b = r / next_n, len = context_lens(b, r % next_n);
    detail::fill_row(res, r, qd, w, [&](std::int64_t c, std::vector<double>& k) {
      if (c >= len || c >= capacity) return false;
      k = detail::paged_key("ref::paged", cache, block_table, b, c);
      return true;
    });
  }
  return res;
}

// fp8_fp4_sparse_mqa_logits, ke' = min(ke, num_kv_tokens). Column b*B + o is token
// idx[q][b] * B + o (aligned, the default), or idx[q][b] * B + ks % B + o (ks % B the
// non-negative remainder) when `unaligned`; valid iff b < nb, idx >= 0 and ks <= token < ke'.
// nb = min(cap, number of B-blocks overlapping [ks, ke')): ceil(max(0, ke' - ks) / B) unaligned,
// ceil(ke' / B) - floor(ks / B) aligned (0 when ke' <= ks).
template <class Format, class W>
result sparse(const ml::rows_view<Format>& q, const ml::rows_view<Format>& kv,
              ml::matrix_view<const W> w, std::span<const std::int32_t> ks,
              std::span<const std::int32_t> ke, std::int64_t num_kv_tokens,
              ml::matrix_view<const std::int32_t> idx, std::int64_t B, bool unaligned = false) {
  detail::check_q("ref::sparse", q, w, kv.head_dim);
  const std::int64_t cap = idx.cols;
  result res = detail::make(idx.rows, cap * B);
  const auto qd = detail::decode_all(q);
  for (std::int64_t r = 0; r < res.rows; ++r) {
    const std::int64_t s = ks[r], e = std::min<std::int64_t>(ke[r], num_kv_tokens);
    std::int64_t nb = 0;
    if (unaligned)
      nb = detail::ceil_div(std::max<std::int64_t>(0, e - s), B);
    else if (e > s)
      nb = static_cast<std::int64_t>(std::ceil(static_cast<double>(e) / B) -
                                     std::floor(static_cast<double>(s) / B));
    nb = std::min(cap, nb);
    const std::int64_t shift = unaligned ? detail::floor_mod(s, B) : 0;
    detail::fill_row(res, r, qd, w, [&](std::int64_t c, std::vector<double>& k) {
      const std::int64_t blk = c / B;
      if (blk >= nb || idx(r, blk) < 0) return false;
      const std::int64_t t = std::int64_t{idx(r, blk)} * B + shift + c % B;
      if (t < s || t >= e) return false;
      k = row<Format>(kv.data + t * kv.data_stride, kv.scales + t * kv.scale_stride, kv.head_dim);
      return true;
    });
  }
  return res;
}

// fp8_fp4_paged_sparse_mqa_logits. Column b*B + o is context position p = idx[q][b] * B + o,
// valid iff b < nb (nb = min(cap, ceil(max(0, len) / B))), idx >= 0, p < len and p < max_blocks
// * page_kv; its page is table[q][p / page_kv].
template <class Format, class W>
result paged_sparse(const ml::rows_view<Format>& q, const ml::paged_cache_view<Format>& cache,
                    ml::matrix_view<const W> w, std::span<const std::int32_t> lens,
                    ml::matrix_view<const std::int32_t> table,
                    ml::matrix_view<const std::int32_t> idx, std::int64_t B) {
  detail::check_q("ref::paged_sparse", q, w, cache.head_dim);
  const std::int64_t cap = idx.cols;
  result res = detail::make(idx.rows, cap * B);
  const auto qd = detail::decode_all(q);
  const std::int64_t capacity = table.cols * std::int64_t{cache.page_kv};
  for (std::int64_t r = 0; r < res.rows; ++r) {
    const std::int64_t len = lens[r];
    const std::int64_t nb = std::min(cap, detail::ceil_div(std::max<std::int64_t>(0, len), B));
    detail::fill_row(res, r, qd, w, [&](std::int64_t c, std::vector<double>& k) {
      const std::int64_t blk = c / B;
      if (blk >= nb || idx(r, blk) < 0) return false;
      const std::int64_t p = std::int64_t{idx(r, blk)} * B + c % B;
      if (p >= len || p >= capacity) return false;
      k = detail::paged_key("ref::paged_sparse", cache, table, r, p);
      return true;
    });
  }
  return res;
}

// Round-to-nearest-even of a double to bf16 / fp32, for tests that check exact rounding.
inline double round_to_bf16(double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1; bf16 keeps 8 significant bits
  const double scaled = std::ldexp(x, 8 - e);
  const double rounded = scaled - std::remainder(scaled, 1.0);  // ties to even
  const double v = std::ldexp(rounded, e - 8);
  return std::fabs(v) > 0x1.FEp127 ? std::copysign(std::numeric_limits<double>::infinity(), x) : v;
}

}  // namespace ref
