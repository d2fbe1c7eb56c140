// Random valid inputs that own their bytes, for the kernel tests, the fuzzers and the benches.
//
//   std::mt19937_64 rng(seed);
//   auto q = ref::rand::rows<ml::mxfp8>(rng, num_q * H);          // q.view(): rows_view
//   auto kv = ref::rand::rows<ml::mxfp8>(rng, N, {.nan_codes = 2});
//   auto w = ref::rand::weights<ml::bf16>(rng, num_q, H);         // w.view(): matrix_view<const>
//   auto cache = ref::rand::paged_cache<ml::mxfp4>(rng, pages, 64, /*page_stride=*/0);
//   auto lens = ref::rand::context_lens(rng, B, next_n, max_len);
//   auto table = ref::rand::block_table(rng, lens, max_blocks, 64, pages);  // garbage past context
//   auto idx = ref::rand::sparse_indices(rng, rows, cap, max_block, {.pad = 0.25});
//
// Codes are uniform over every non-NaN code (so subnormals, both zeros and the extremes occur);
// NaN codes and NaN scales only where asked for. Scales are UE8M0 exponents in a sane range
// (118..130 by default, or scales of those exponents in the format's scale codec) and weights are
// exact bf16 values, so fp32 and bf16 weights agree. The namespace is ref::rand (a global `rand`
// would clash with ::rand from <cstdlib>).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ref::rand {

namespace ml = mqalogits;
using engine = std::mt19937_64;

// Uniform integer in [lo, hi].
inline std::int64_t uniform(engine& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}
inline bool chance(engine& rng, double p) {
  return p > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}

struct code_options {
  int scale_lo = 118, scale_hi = 130;  // UE8M0 exponents, inclusive
  int nan_codes = 0;                   // NaN data codes sprinkled at random positions
  int nan_scales = 0;                  // 255 scale bytes sprinkled at random positions
  // fp32 scales (fp8_per_token) with a full 24-bit mantissa, times 2^[-10, -2], as a real
  // quantiser writes them, instead of the few-bit scales below (scale_lo/hi do not apply).
  bool full_mantissa_scales = false;
};

namespace detail {
// A random non-NaN data byte of the format (MXFP4: two random nibbles, FP4 has no NaN).
template <class Format>
std::uint8_t data_byte(engine& rng) {
  for (;;) {
    const auto b = static_cast<std::uint8_t>(uniform(rng, 0, 255));
    if constexpr (Format::data_type::bits == 8)
      if ((b & 0x7F) == 0x7F) continue;
    return b;
  }
}
inline std::uint8_t scale_byte(engine& rng, const code_options& o) {
  return static_cast<std::uint8_t>(uniform(rng, o.scale_lo, o.scale_hi));
}
// One row's scale field, by what one scale of the format's scale codec is: UE8M0 exponents in
// [scale_lo, scale_hi] (every byte of the field, unused ones too); e4m3fn codes of value
// (1 + m/8) x 2^(e - 127) with e in the same range (clamped to e4m3fn's normal exponents); or a
// float (1 + m/16) x 2^(e - 127), few enough bits that code x scale is exact (or a full-mantissa
// one, code_options::full_mantissa_scales).
template <class Format>
void scale_field(engine& rng, const code_options& o, std::uint8_t* field) {
  using codec = typename Format::scale_type::codec;
  if constexpr (std::is_same_v<codec, ml::float_ue8m0>) {
    for (int i = 0; i < Format::scale_bytes; ++i) field[i] = scale_byte(rng, o);
  } else if constexpr (std::is_same_v<codec, ml::float_e4m3>) {
    for (int b = 0; b < Format::blocks; ++b) {
      const int e = std::clamp(static_cast<int>(scale_byte(rng, o)) - 127 + 7, 1, 15);
      const int m = static_cast<int>(uniform(rng, 0, e == 15 ? 6 : 7));  // 0x7F is NaN
      field[b] = static_cast<std::uint8_t>(e << 3 | m);
    }
  } else {
    static_assert(std::is_same_v<codec, float>, "ref::rand: no generator for this scale codec");
    const float s = o.full_mantissa_scales
                        ? std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                                     static_cast<int>(uniform(rng, -10, -2)))
                        : std::ldexp(1.0f + static_cast<float>(uniform(rng, 0, 15)) / 16.0f,
                                     static_cast<int>(scale_byte(rng, o)) - 127);
    for (int b = 0; b < Format::blocks; ++b) std::memcpy(field + 4 * b, &s, sizeof s);
  }
}
// Makes a row's scale NaN: block b's UE8M0 byte 255 or e4m3fn byte 0x7F (b < 4), or the row's
// fp32 scale.
template <class Format>
void set_nan_scale(std::uint8_t* field, int block) {
  using codec = typename Format::scale_type::codec;
  if constexpr (std::is_same_v<codec, ml::float_ue8m0>) {
    field[block] = 255;
  } else if constexpr (std::is_same_v<codec, ml::float_e4m3>) {
    field[block] = 0x7F;
  } else {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(field, &nan, sizeof nan);
  }
}
// Whether the data codec has NaN codes (e4m3 does; e2m1 has none).
template <class Format>
inline constexpr bool has_nan_code = Format::data_type::bits == 8;
}  // namespace detail

// Token-major rows with their own byte strides (padding bytes are random garbage).
template <class Format>
struct owned_rows {
  std::int64_t n = 0, data_stride = Format::data_bytes, scale_stride = Format::scale_bytes;
  std::vector<std::uint8_t> data, scales;

  ml::rows_view<Format> view() const {
    return ml::rows_view<Format>(data.data(), scales.data(), n, data_stride, scale_stride);
  }
  std::uint8_t* row(std::int64_t r) { return data.data() + r * data_stride; }
  std::uint8_t* scale(std::int64_t r) { return scales.data() + r * scale_stride; }
  // Makes element i of row r a NaN (formats with NaN codes only: FP4 has none).
  void set_nan_code(std::int64_t r, int i) {
    static_assert(detail::has_nan_code<Format>, "e2m1 has no NaN code");
    row(r)[i] = (i % 2) ? 0xFF : 0x7F;
  }
  void set_nan_scale(std::int64_t r, int block) { detail::set_nan_scale<Format>(scale(r), block); }
};

template <class Format>
owned_rows<Format> rows(engine& rng, std::int64_t n, const code_options& o = {},
                        std::int64_t data_stride = Format::data_bytes,
                        std::int64_t scale_stride = Format::scale_bytes) {
  owned_rows<Format> out;
  out.n = n;
  out.data_stride = data_stride;
  out.scale_stride = scale_stride;
  out.data.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1) * data_stride));
  out.scales.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1) * scale_stride));
  for (auto& b : out.data) b = detail::data_byte<Format>(rng);
  for (auto& b : out.scales) b = detail::scale_byte(rng, o);  // padding too
  for (std::int64_t r = 0; r < n; ++r) detail::scale_field<Format>(rng, o, out.scale(r));
  if (n > 0) {
    if constexpr (detail::has_nan_code<Format>)
      for (int i = 0; i < o.nan_codes; ++i)
        out.set_nan_code(uniform(rng, 0, n - 1),
                         static_cast<int>(uniform(rng, 0, Format::head_dim - 1)));
    for (int i = 0; i < o.nan_scales; ++i)
      out.set_nan_scale(uniform(rng, 0, n - 1), static_cast<int>(uniform(rng, 0, 3)));
  }
  return out;
}

// Logits of -inf on MXFP8 keys [first, last): their codes 1.0 at scale 2^127 against Q codes 1.0
// at 2^0 make every dot 128 x 2^127, which overflows to +inf; relu keeps it, and every weight made
// negative turns the head's term to -inf. (Every Q row is overwritten; W is any weight matrix.)
template <class W>
void minus_inf_keys(owned_rows<ml::mxfp8>& q, owned_rows<ml::mxfp8>& kv, W& weights,
                    std::int64_t first, std::int64_t last) {
  for (std::int64_t t = first; t < last; ++t) {
    std::fill(kv.row(t), kv.row(t) + ml::mxfp8::data_bytes, std::uint8_t{0x38});
    std::fill(kv.scale(t), kv.scale(t) + ml::mxfp8::scale_bytes, std::uint8_t{254});
  }
  for (std::int64_t r = 0; r < q.n; ++r) {
    std::fill(q.row(r), q.row(r) + ml::mxfp8::data_bytes, std::uint8_t{0x38});
    std::fill(q.scale(r), q.scale(r) + ml::mxfp8::scale_bytes, std::uint8_t{127});
  }
  for (auto& v : weights.data) v = -std::abs(v) - 0.25f;
}

// A row-major matrix that owns its elements; stride >= cols (padding is filled too).
template <class T>
struct owned_matrix {
  std::int64_t rows = 0, cols = 0, stride = 0;
  std::vector<T> data;

  ml::matrix_view<const T> view() const { return {data.data(), rows, cols, stride}; }
  ml::matrix_view<T> mut() { return {data.data(), rows, cols, stride}; }
  T& operator()(std::int64_t r, std::int64_t c) { return data[r * stride + c]; }
  const T& operator()(std::int64_t r, std::int64_t c) const { return data[r * stride + c]; }
  std::span<const T> row(std::int64_t r) const {
    return {data.data() + r * stride, static_cast<std::size_t>(cols)};
  }
};

template <class T>
owned_matrix<T> matrix(std::int64_t rows, std::int64_t cols, std::int64_t stride = 0, T fill = {}) {
  owned_matrix<T> m;
  m.rows = rows;
  m.cols = cols;
  m.stride = stride ? stride : cols;
  m.data.assign(static_cast<std::size_t>(std::max<std::int64_t>(rows * m.stride, 1)), fill);
  return m;
}

// A random weight, exactly representable in bf16, in [-range, range].
inline float bf16_exact_weight(engine& rng, float range = 1.0f) {
  const float f = std::uniform_real_distribution<float>(-range, range)(rng);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) & 0xFFFF0000u);
}

// Weights [rows, H] of element type W: float or ml::bf16, every value bf16-exact; ml::fp16,
// random codes below `range` (subnormals included).
template <class W>
owned_matrix<W> weights(engine& rng, std::int64_t rows, std::int64_t H, std::int64_t stride = 0,
                        float range = 1.0f) {
  auto m = matrix<W>(rows, H, stride);
  if constexpr (std::is_same_v<W, ml::fp16>) {
    // Random fp16 fields below `range`, subnormals included (exponent field 0).
    const int top = std::clamp(14 + std::ilogb(range), 0, 30);
    for (auto& v : m.data)
      v = ml::fp16::from_bits(static_cast<std::uint16_t>(
          (chance(rng, 0.5) ? 0x8000 : 0) | (uniform(rng, 0, top) << 10) | uniform(rng, 0, 1023)));
  } else {
    for (auto& v : m.data) {
      const float f = bf16_exact_weight(rng, range);
      if constexpr (std::is_same_v<W, ml::bf16>)
        v = ml::bf16::from_bits(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16));
      else
        v = f;
    }
  }
  return m;
}

// A paged cache [num_pages, page_stride] bytes: every slot random valid codes and scales, the
// padding past page_kv * token_bytes random garbage. page_stride 0 = unpadded.
template <class Format>
struct owned_paged_cache {
  std::int64_t num_pages = 0, page_stride = 0;
  std::int32_t page_kv = 0;
  std::vector<std::uint8_t> bytes;

  ml::paged_cache_view<Format> view() const {
    return ml::paged_cache_view<Format>(bytes.data(), num_pages, page_kv, page_stride);
  }
  std::uint8_t* data(std::int64_t page, std::int64_t slot) {
    return bytes.data() + page * page_stride + slot * Format::data_bytes;
  }
  std::uint8_t* scale(std::int64_t page, std::int64_t slot) {
    return bytes.data() + page * page_stride + std::int64_t{page_kv} * Format::data_bytes +
           slot * Format::scale_bytes;
  }
};

template <class Format>
owned_paged_cache<Format> paged_cache(engine& rng, std::int64_t num_pages, std::int32_t page_kv,
                                      std::int64_t page_stride = 0, const code_options& o = {}) {
  owned_paged_cache<Format> c;
  c.num_pages = num_pages;
  c.page_kv = page_kv;
  const std::int64_t used = std::int64_t{page_kv} * (Format::data_bytes + Format::scale_bytes);
  c.page_stride = page_stride ? page_stride : used;
  c.bytes.resize(static_cast<std::size_t>(std::max<std::int64_t>(num_pages * c.page_stride, 1)));
  for (std::int64_t p = 0; p < num_pages; ++p) {
    for (std::int64_t s = 0; s < page_kv; ++s) {
      for (int i = 0; i < Format::data_bytes; ++i) c.data(p, s)[i] = detail::data_byte<Format>(rng);
      detail::scale_field<Format>(rng, o, c.scale(p, s));
    }
    for (std::int64_t i = used; i < c.page_stride; ++i)
      c.bytes[static_cast<std::size_t>(p * c.page_stride + i)] =
          static_cast<std::uint8_t>(uniform(rng, 0, 255));
  }
  if (num_pages > 0) {
    if constexpr (detail::has_nan_code<Format>)
      for (int i = 0; i < o.nan_codes; ++i)
        c.data(uniform(rng, 0, num_pages - 1),
               uniform(rng, 0, page_kv - 1))[uniform(rng, 0, Format::head_dim - 1)] = 0x7F;
    for (int i = 0; i < o.nan_scales; ++i)
      detail::set_nan_scale<Format>(
          c.scale(uniform(rng, 0, num_pages - 1), uniform(rng, 0, page_kv - 1)),
          static_cast<int>(uniform(rng, 0, 3)));
  }
  return c;
}

// context_lens [B, next_n], each uniform in [min_len, max_len].
inline owned_matrix<std::int32_t> context_lens(engine& rng, std::int64_t B, std::int64_t next_n,
                                               std::int64_t max_len, std::int64_t min_len = 0) {
  auto m = matrix<std::int32_t>(B, next_n);
  for (auto& v : m.data) v = static_cast<std::int32_t>(uniform(rng, min_len, max_len));
  return m;
}

// A value that is not a page: negative, num_pages itself, or far out of range.
inline std::int32_t garbage_page(engine& rng, std::int64_t num_pages) {
  switch (uniform(rng, 0, 3)) {
    case 0:
      return -1;
    case 1:
      return std::numeric_limits<std::int32_t>::min();
    case 2:
      return static_cast<std::int32_t>(num_pages);
    default:
      return static_cast<std::int32_t>(num_pages + 90210);
  }
}

// Block table [rows, max_blocks] for per-row lengths `keys[r]` (a request's longest context):
// slots that cover [0, min(keys, max_blocks * page_kv)) hold random pages in [0, num_pages);
// every slot past that holds garbage (not a page) when `garbage` is set, so a kernel that reads
// it fails or walks out of the cache.
inline owned_matrix<std::int32_t> block_table(engine& rng, std::span<const std::int64_t> keys,
                                              std::int64_t max_blocks, std::int32_t page_kv,
                                              std::int64_t num_pages, bool garbage = true,
                                              std::int64_t stride = 0) {
  auto m = matrix<std::int32_t>(static_cast<std::int64_t>(keys.size()), max_blocks, stride);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const std::int64_t used = std::min(max_blocks, (keys[r] + page_kv - 1) / page_kv);
    for (std::int64_t s = 0; s < m.stride; ++s)
      m(r, s) = s < used ? static_cast<std::int32_t>(uniform(rng, 0, num_pages - 1))
                         : (garbage ? garbage_page(rng, num_pages) : 0);
  }
  return m;
}

// The same for paged context_lens [B, next_n]: request b reads up to its longest row.
inline owned_matrix<std::int32_t> block_table(engine& rng, const owned_matrix<std::int32_t>& lens,
                                              std::int64_t max_blocks, std::int32_t page_kv,
                                              std::int64_t num_pages, bool garbage = true,
                                              std::int64_t stride = 0) {
  std::vector<std::int64_t> keys(static_cast<std::size_t>(lens.rows), 0);
  for (std::int64_t b = 0; b < lens.rows; ++b)
    for (std::int64_t j = 0; j < lens.cols; ++j)
      keys[b] = std::max<std::int64_t>(keys[b], lens(b, j));
  return block_table(rng, keys, max_blocks, page_kv, num_pages, garbage, stride);
}

struct index_options {
  double pad = 0.2;           // chance of a -1 entry
  double out_of_range = 0.0;  // chance of an index >= max_block (must be masked, never read)
  bool tail_padding = true;   // also pad every row's tail past a random length with -1
};

// Sparse block indices [rows, cap]: entries uniform in [0, max_block), with -1 padding.
inline owned_matrix<std::int32_t> sparse_indices(engine& rng, std::int64_t rows, std::int64_t cap,
                                                 std::int64_t max_block,
                                                 const index_options& o = {},
                                                 std::int64_t stride = 0) {
  auto m = matrix<std::int32_t>(rows, cap, stride, -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t used = o.tail_padding ? uniform(rng, 0, cap) : cap;
    for (std::int64_t b = 0; b < used; ++b) {
      if (chance(rng, o.pad)) continue;
      m(r, b) = chance(rng, o.out_of_range)
                    ? static_cast<std::int32_t>(max_block + uniform(rng, 0, 1000))
                    : static_cast<std::int32_t>(
                          uniform(rng, 0, std::max<std::int64_t>(max_block, 1) - 1));
    }
  }
  return m;
}

// ks / ke spans of n entries.
inline std::vector<std::int32_t> ints(engine& rng, std::int64_t n, std::int64_t lo,
                                      std::int64_t hi) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<std::int32_t>(uniform(rng, lo, hi));
  return v;
}

}  // namespace ref::rand
