// What the four fuzz targets share: a reader that turns the fuzz input into a case, exact-size
// buffers (so ASan flags the first byte read or written past a view), an output buffer with a
// sentinel, the value generators and the two oracles (valid: equal to ref:: within the accuracy
// bound and nothing outside the columns written; invalid: mqalogits::error and the output
// bit-for-bit unchanged). A finding prints what it saw and aborts, which libFuzzer records as a
// crash.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/reference.hpp"
#include "support/accuracy.hpp"

namespace fuzz {

namespace ml = mqalogits;
using i32 = std::int32_t;
using i64 = std::int64_t;

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Reads the input's front part front to back (past its end every read is 0, so every input is
// a case); its last third (up to 512 bytes) is kept for the content bytes.
class input {
 public:
  input(const std::uint8_t* data, std::size_t size)
      : p_(data), n_(size - std::min<std::size_t>(size / 3, 512)), tail_n_(size - n_) {}

  std::uint8_t byte() { return i_ < n_ ? p_[i_++] : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }
  // In [lo, hi]; hi - lo < 2^32.
  i64 range(i64 lo, i64 hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    const std::uint64_t raw = span <= 256 ? byte() : u32();
    return lo + static_cast<i64>(raw % span);
  }
  // True with probability about 1 / one_in.
  bool one_in(int n) { return byte() % n == 0; }
  template <class T, std::size_t N>
  T pick(const T (&options)[N]) {
    return options[range(0, N - 1)];
  }
  // A 32-bit value that is usually in [lo, hi] and sometimes an edge of the int32 range.
  i32 int_near(i64 lo, i64 hi) {
    switch (byte() % 16) {
      case 0:
        return std::numeric_limits<i32>::max();
      case 1:
        return std::numeric_limits<i32>::min();
      case 2:
        return static_cast<i32>(u32());
      default:
        return static_cast<i32>(range(lo, hi));
    }
  }
  // The tail kept for content bytes.
  const std::uint8_t* tail() const { return p_ + n_; }
  std::size_t tail_size() const { return tail_n_; }
  std::uint64_t seed() {
    std::uint64_t s = u32();
    return s << 32 | u32();
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t tail_n_;
  std::size_t i_ = 0;
};

template <class Format>
inline constexpr bool per_token = std::is_same_v<Format, ml::fp8_per_token>;

// Content bytes: the input's tail first, then a splitmix64 stream seeded from the input.
class content {
 public:
  explicit content(input& in) : state_(in.seed()), lead_(in.tail()), lead_n_(in.tail_size()) {
    nan_codes_ = in.one_in(4);
    nan_scales_ = in.one_in(6);
    nan_weights_ = in.one_in(8);
  }
  std::uint8_t raw() {
    if (lead_n_) {
      --lead_n_;
      return *lead_++;
    }
    state_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<std::uint8_t>(z ^ (z >> 31));
  }
  // A data byte: any code, NaN codes only in cases that allow them (e2m1 has none).
  template <class Format>
  std::uint8_t data() {
    const std::uint8_t b = raw();
    constexpr bool e4m3 = std::is_same_v<Format, ml::mxfp8> || per_token<Format>;
    if (e4m3 && !nan_codes_ && (b & 0x7F) == 0x7F) return b ^ 1;
    return b;
  }
  // A UE8M0 scale in 2^-10..2^10 so no fp32 sum over- or underflows (the accuracy bound holds for
  // values fp32 represents), 255 (NaN) in cases that allow it.
  std::uint8_t scale() {
    const std::uint8_t b = raw();
    if (nan_scales_ && b >= 252) return 255;
    return static_cast<std::uint8_t>(117 + b % 21);
  }
  // One row's scale bytes: 4 UE8M0 bytes, or for FP8 per-token one little-endian fp32 of either
  // sign with |s| in 2^-10..2^10 and a random significand (NaN in cases that allow it).
  template <class Format>
  void scale_row(std::uint8_t* dst) {
    if constexpr (per_token<Format>) {
      const std::uint32_t m = std::uint32_t{raw()} << 16 | std::uint32_t{raw()} << 8 | raw();
      const std::uint8_t e = raw();
      std::uint32_t bits =
          (e & 0x80u) << 24 | static_cast<std::uint32_t>(127 + e % 21 - 10) << 23 | (m & 0x7FFFFFu);
      if (nan_scales_ && e % 64 == 63) bits = 0x7FC00000u;
      std::memcpy(dst, &bits, 4);
    } else {
      for (int i = 0; i < Format::scale_bytes; ++i) dst[i] = scale();
    }
  }
  // A bf16-exact weight, |w| in 2^-8..2^8 or 0; NaN in cases that allow it.
  float weight() {
    const std::uint8_t a = raw(), b = raw();
    if (nan_weights_ && a == 0xFF) return std::numeric_limits<float>::quiet_NaN();
    if (a % 32 == 0) return 0.0f;
    const int exponent = 127 + (b % 17) - 8;
    const std::uint32_t bits = (a & 0x80u) << 24 | static_cast<std::uint32_t>(exponent) << 23 |
                               static_cast<std::uint32_t>(a & 0x7F) << 16;
    return std::bit_cast<float>(bits);
  }

 private:
  std::uint64_t state_;
  const std::uint8_t* lead_;
  std::size_t lead_n_;
  bool nan_codes_ = false, nan_scales_ = false, nan_weights_ = false;
};

// An exact-size heap buffer: ASan's redzones sit right before and after it.
template <class T>
struct guarded {
  std::unique_ptr<T[]> p;
  i64 n = 0;
  explicit guarded(i64 count)
      : p(count > 0 ? new T[static_cast<std::size_t>(count)]() : nullptr), n(count) {}
  T* data() const { return p.get(); }
  T& operator[](i64 i) const { return p[static_cast<std::size_t>(i)]; }
};

// Elements a [rows, cols] matrix with `stride` spans: the last row ends at its last column.
inline i64 matrix_extent(i64 rows, i64 cols, i64 stride) {
  return rows > 0 && cols > 0 ? (rows - 1) * stride + cols : 0;
}

// Quantised rows in exact-size buffers with the given strides (padding bytes are content too).
// no_scales (formats with optional scales only): the view carries a null scale pointer, read as
// scale 1; ref_view() then hands the reference explicit 1.0f scales (it needs a pointer).
template <class Format>
struct rows_buf {
  i64 rows, data_stride, scale_stride;
  bool no_scales;
  guarded<std::uint8_t> data, scales;
  std::vector<float> ones;
  rows_buf(content& c, i64 n, i64 ds = Format::data_bytes, i64 ss = Format::scale_bytes,
           bool without_scales = false)
      : rows(n),
        data_stride(ds),
        scale_stride(ss),
        no_scales(without_scales && ml::scales_optional_v<Format>),
        data(n > 0 ? (n - 1) * ds + Format::data_bytes : 0),
        scales(n > 0 && !no_scales ? (n - 1) * ss + Format::scale_bytes : 0) {
    for (i64 i = 0; i < data.n; ++i) data[i] = c.data<Format>();
    for (i64 i = 0; i < scales.n; ++i) scales[i] = c.raw();  // padding: any bytes
    for (i64 r = 0; r < rows && !no_scales; ++r) c.scale_row<Format>(&scales[r * ss]);
    if (no_scales) ones.assign(static_cast<std::size_t>(std::max<i64>(n, 1)), 1.0f);
  }
  ml::rows_view<Format> view() const {
    ml::rows_view<Format> v;
    v.data = data.data();
    v.scales = no_scales ? nullptr : scales.data();
    v.rows = rows;
    v.data_stride = data_stride;
    v.scale_stride = no_scales ? Format::scale_bytes : scale_stride;
    return v;
  }
  ml::rows_view<Format> ref_view() const {
    ml::rows_view<Format> v = view();
    if (no_scales) {
      v.scales = reinterpret_cast<const std::uint8_t*>(ones.data());
      v.scale_stride = sizeof(float);
    }
    return v;
  }
};

// Weights [rows, H] with a row stride, exact size.
template <class W>
struct weights_buf {
  i64 rows, cols, stride;
  guarded<W> data;
  weights_buf(content& c, i64 r, i64 h, i64 s)
      : rows(r), cols(h), stride(s), data(matrix_extent(r, h, s)) {
    for (i64 i = 0; i < data.n; ++i) {
      const float f = c.weight();
      if constexpr (std::is_same_v<W, ml::bf16>)
        data[i] =
            ml::bf16::from_bits(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16));
      else
        data[i] = f;
    }
  }
  ml::matrix_view<const W> view() const { return {data.data(), rows, cols, stride}; }
};

// An int32 matrix (block table, sparse indices, context lengths), exact size.
struct ints_buf {
  i64 rows, cols, stride;
  guarded<i32> data;
  ints_buf(i64 r, i64 c, i64 s) : rows(r), cols(c), stride(s), data(matrix_extent(r, c, s)) {}
  i32& operator()(i64 r, i64 c) const { return data[r * stride + c]; }
  ml::matrix_view<const i32> view() const { return {data.data(), rows, cols, stride}; }
};

// A paged cache [num_pages, page_stride] bytes, the last page cut right after its scales.
template <class Format>
struct cache_buf {
  static constexpr i64 token_bytes = Format::data_bytes + Format::scale_bytes;
  i64 num_pages, page_stride;
  i32 page_kv;
  guarded<std::uint8_t> bytes;
  cache_buf(content& c, i64 pages, i32 kv, i64 stride)
      : num_pages(pages),
        page_stride(stride),
        page_kv(kv),
        bytes(pages > 0 ? (pages - 1) * stride + i64{kv} * token_bytes : 0) {
    for (i64 p = 0; p < num_pages; ++p) {
      for (i64 i = 0; i < page_stride && p * page_stride + i < bytes.n; ++i)
        bytes[p * page_stride + i] =
            i < i64{page_kv} * Format::data_bytes ? c.data<Format>() : c.raw();
      for (i64 s = 0; s < page_kv; ++s)
        c.scale_row<Format>(
            &bytes[p * page_stride + i64{page_kv} * Format::data_bytes + s * Format::scale_bytes]);
    }
  }
  ml::paged_cache_view<Format> view() const {
    ml::paged_cache_view<Format> v;
    v.base = bytes.data();
    v.num_pages = num_pages;
    v.page_kv = page_kv;
    v.page_stride = page_stride;
    return v;
  }
};

// The output: exact size, every element (stride padding included) a sentinel NaN pattern.
template <class O>
struct out_buf {
  i64 rows, cols, stride;
  guarded<O> data;
  out_buf(i64 r, i64 c, i64 s) : rows(r), cols(c), stride(s), data(matrix_extent(r, c, s)) {
    for (i64 i = 0; i < data.n; ++i) std::memcpy(&data[i], &sentinel_bits, sizeof(O));
  }
  ml::matrix_view<O> view() const { return {data.data(), rows, cols, stride}; }
  static constexpr std::uint32_t sentinel_bits = 0x7FA5A5A5u;  // a NaN in fp32 and in bf16
  bool untouched(i64 i) const { return std::memcmp(&data[i], &sentinel_bits, sizeof(O)) == 0; }
  bool all_untouched() const {
    for (i64 i = 0; i < data.n; ++i)
      if (!untouched(i)) return false;
    return true;
  }
};

inline std::string format_name(const char* format, bool bf16_w, bool bf16_o) {
  return std::string(format) + (bf16_w ? " bf16 weights" : " fp32 weights") +
         (bf16_o ? ", bf16 logits" : ", fp32 logits");
}

// Runs `call`; returns the error message, or "" when the call returned.
template <class Fn>
std::string outcome(Fn&& call, const std::string& context) {
  try {
    call();
    return {};
  } catch (const ml::error& e) {
    const std::string what = e.what();
    if (what.empty()) finding(context + ": empty error message");
    return what;
  } catch (const std::exception& e) {
    finding(context + ": threw a non-mqalogits exception: " + e.what());
  } catch (...) {
    finding(context + ": threw a non-exception");
  }
}

// An input with a defect: err, its outcome, must be an error naming the function `where`.
inline void expect_error(const std::string& err, const char* where, const std::string& context) {
  if (err.empty()) finding(context + ": invalid input was accepted");
  if (err.rfind(where, 0) != 0) finding(context + ": error does not name " + where + ": " + err);
}

// Invalid input: an error naming the function, and the output bit-for-bit unchanged.
template <class O, class Fn>
void expect_rejected(const out_buf<O>& out, const std::string& context, const char* where,
                     Fn&& call) {
  const std::string err = outcome(call, context);
  expect_error(err, where, context);
  if (!out.all_untouched()) finding(context + ": rejected call wrote the output (" + err + ")");
}

// Valid input: no error, every column equal to the reference within the accuracy bound (invalid
// columns -inf when clean_logits, otherwise unspecified), stride padding untouched.
template <class O>
void expect_matches(const out_buf<O>& out, const ref::result& exact, bool clean,
                    const std::string& context) {
  if (exact.rows != out.rows || exact.cols != out.cols)
    finding(context + ": reference shape differs from the output shape");
  for (i64 r = 0; r < out.rows; ++r) {
    for (i64 c = 0; c < out.cols; ++c) {
      const i64 i = r * out.stride + c;
      const double want = exact.at(r, c);
      const bool masked = std::isinf(want) && want < 0;
      if (masked && !clean) continue;
      const double got = ml::to_float(out.data[i]);
      if (!masked && out.untouched(i))
        finding(context + ": valid column [" + std::to_string(r) + "][" + std::to_string(c) +
                "] was never written");
      if (!accuracy::within(got, want, exact.mag(r, c)))
        finding(context + ": [" + std::to_string(r) + "][" + std::to_string(c) + "] got " +
                std::to_string(got) + ", expected " + std::to_string(want) +
                " (M = " + std::to_string(exact.mag(r, c)) + ")");
    }
    for (i64 c = out.cols; out.data.n > 0 && c < out.stride && r + 1 < out.rows; ++c)
      if (!out.untouched(r * out.stride + c))
        finding(context + ": stride padding [" + std::to_string(r) + "][" + std::to_string(c) +
                "] was written");
  }
}

template <class O>
void expect_ok(const out_buf<O>& out, const std::string& context, const std::string& err) {
  if (!err.empty()) finding(context + ": valid input was rejected: " + err);
  (void)out;
}

// Executors the targets pick from: serial (default), and a small pool for the threaded driver.
inline ml::thread_pool& shared_pool() {
  static ml::thread_pool pool(3);
  return pool;
}
inline ml::options pick_options(input& in) {
  ml::options opt;
  const std::uint8_t b = in.byte();
  if (b & 1) opt.executor = shared_pool();
  opt.clean_logits = (b & 6) != 0;  // 3 in 4 clean
  return opt;
}

// A defect enumerator (0 = none): none for about 5 in 8 inputs, else one of the others.
template <class Defect>
Defect pick_defect(input& in) {
  const std::uint8_t b = in.byte();
  constexpr int n = static_cast<int>(Defect::count);
  return b < 160 ? Defect{} : static_cast<Defect>(1 + (b - 160) % (n - 1));
}

// A stride: the minimum, usually, or a little more (padding the kernel must skip).
inline i64 pick_stride(input& in, i64 minimum, i64 max_pad) {
  return in.one_in(3) ? minimum + in.range(1, max_pad) : minimum;
}

// Q of `rows` query rows (one more or one fewer when `wrong`: a target's q_rows defect), its
// strides the minimum or a little more, its scales left out now and then where Q may have none.
template <class Format>
rows_buf<Format> q_buf(input& in, content& c, i64 rows, bool wrong) {
  const i64 n = rows + (wrong ? (in.one_in(2) ? -1 : 1) : 0);
  return rows_buf<Format>(c, n, pick_stride(in, Format::data_bytes, 40),
                          pick_stride(in, Format::scale_bytes, 4), in.one_in(2));
}

// The huge byte stride a rejected view claims: with 2+ rows its extent overflows int64.
inline constexpr i64 overflowing_stride = std::numeric_limits<i64>::max() / 2 + 1;

// The output of a rows x cols call, one row / one column off when wrong_rows / wrong_cols (the
// out_rows / out_cols defects), with an aligned row stride or a padded one.
template <class O>
out_buf<O> output_for(input& in, i64 rows, i64 cols, bool wrong_rows, bool wrong_cols) {
  const auto off = [&](i64 n, bool wrong) { return wrong ? (n > 0 && in.one_in(2) ? -1 : 1) : 0; };
  const i64 r = rows + off(rows, wrong_rows), c = cols + off(cols, wrong_cols);
  const i64 stride =
      in.one_in(2) ? ml::logits_row_stride<O>(c, in.one_in(2) ? 512 : 1024) : pick_stride(in, c, 5);
  return out_buf<O>(r, c, stride);
}

// A value that is not a page of a cache with num_pages pages.
inline i32 not_a_page(input& in, i64 num_pages) {
  switch (in.byte() % 4) {
    case 0:
      return -1;
    case 1:
      return std::numeric_limits<i32>::min();
    case 2:
      return static_cast<i32>(num_pages);
    default:
      return static_cast<i32>(num_pages + in.range(1, 1 << 20));
  }
}

// A metadata function given a defect: its error must name it.
inline void expect_metadata_rejected(const std::string& err, const char* meta_where,
                                     const std::string& context) {
  if (err.rfind(meta_where, 0) != 0)
    finding(context + ": metadata accepted a defect or named another function: " + err);
}

// ---- Broken views: the ways every kernel's views can be wrong, applied by every target ----
//
// Each break_* function breaks its view as `how` says and returns true, or returns false with
// the view untouched when the view is too small to be wrong that way (no column for a stride
// to fall short of, no element behind a pointer, fewer than two rows for a stride to overflow):
// the target then runs the case as a valid one.

// Any enumerator of E except its `count`, from the next input byte.
template <class E>
E pick_how(input& in) {
  return static_cast<E>(in.byte() % static_cast<int>(E::count));
}

// Weights, output, block table, sparse indices, context lengths.
enum class matrix_defect { short_stride, null, overflow, count };
template <class T>
bool break_matrix(input& in, ml::matrix_view<T>& v, matrix_defect how) {
  switch (how) {
    case matrix_defect::short_stride:
      if (v.cols < 1) return false;
      v.stride = in.range(-1, v.cols - 1);
      return true;
    case matrix_defect::null:
      if (v.rows < 1 || v.cols < 1) return false;
      v.data = nullptr;
      return true;
    default:  // the last row's offset overflows int64
      if (v.rows < 2 || v.cols < 1) return false;
      v.stride = std::numeric_limits<i64>::max() - in.range(0, 8);
      return true;
  }
}

// The weights or the output (the two matrices every kernel takes), as the next input byte says.
template <class W, class O>
bool break_weights_or_output(input& in, ml::matrix_view<W>& weights, ml::matrix_view<O>& out) {
  const auto how = pick_how<matrix_defect>(in);
  return in.one_in(2) ? break_matrix(in, weights, how) : break_matrix(in, out, how);
}

// Quantised rows (Q, KV).
enum class rows_defect { null, data_stride, scale_stride, overflow, count };
template <class Format>
bool break_rows(input& in, ml::rows_view<Format>& v, rows_defect how) {
  switch (how) {
    case rows_defect::null:
      if (v.rows < 1) return false;
      // Formats whose rows may come without scales accept a null scale pointer.
      (in.one_in(2) || ml::scales_optional_v<Format> ? v.data : v.scales) = nullptr;
      return true;
    case rows_defect::data_stride:
      v.data_stride = in.range(-2, Format::data_bytes - 1);
      return true;
    case rows_defect::scale_stride:
      if (ml::scales_optional_v<Format> && !v.scales) return false;
      v.scale_stride = in.range(-2, Format::scale_bytes - 1);
      return true;
    default:  // the last row's data or scale bytes end past INT64_MAX
      if (v.rows < 2) return false;
      if (in.one_in(2) || !v.scales)
        v.data_stride = std::numeric_limits<i64>::max() - in.range(0, Format::data_bytes - 1);
      else
        v.scale_stride = std::numeric_limits<i64>::max() - in.range(0, Format::scale_bytes - 1);
      return true;
  }
}

// The paged cache.
enum class cache_defect { null, short_stride, overflow, negative_pages, count };
template <class Format>
bool break_cache(input& in, ml::paged_cache_view<Format>& v, cache_defect how) {
  switch (how) {
    case cache_defect::null:
      if (v.num_pages < 1) return false;
      v.base = nullptr;
      return true;
    case cache_defect::short_stride:
      v.page_stride = in.range(-1, i64{v.page_kv} * cache_buf<Format>::token_bytes - 1);
      return true;
    case cache_defect::overflow:
      if (v.num_pages < 2) return false;
      v.page_stride = std::numeric_limits<i64>::max() - in.range(0, 1000);
      return true;
    default:
      v.num_pages = -static_cast<i64>(in.range(1, 100));
      return true;
  }
}

// ---- Applying them: each target names, for defects of its own enum, the view each one breaks ----

// The two matrices break_weights_or_output picks from.
template <class W, class O>
struct weights_and_output {
  ml::matrix_view<W>& weights;
  ml::matrix_view<O>& out;
};

template <class T>
bool break_view(input& in, ml::matrix_view<T>& v) {
  return break_matrix(in, v, pick_how<matrix_defect>(in));
}
template <class Format>
bool break_view(input& in, ml::rows_view<Format>& v) {
  return break_rows(in, v, pick_how<rows_defect>(in));
}
template <class Format>
bool break_view(input& in, ml::paged_cache_view<Format>& v) {
  return break_cache(in, v, pick_how<cache_defect>(in));
}
template <class W, class O>
bool break_view(input& in, weights_and_output<W, O> v) {
  return break_weights_or_output(in, v.weights, v.out);
}

// Defect `when` of a target breaks `view` (a view, or weights_and_output).
template <class Defect, class View>
struct view_defect {
  Defect when;
  View view;
};
template <class Defect, class View>
view_defect<Defect, View&> breaks(Defect when, View& view) {
  return {when, view};
}
template <class Defect, class W, class O>
view_defect<Defect, weights_and_output<W, O>> breaks(Defect when, ml::matrix_view<W>& weights,
                                                     ml::matrix_view<O>& out) {
  return {when, {weights, out}};
}

// Breaks the view that d names among `defects`, if any; d becomes Defect::none when that view is
// too small to break that way (the target then runs the case as a valid one).
template <class Defect, class... Views>
void break_named_view(input& in, Defect& d, view_defect<Defect, Views>... defects) {
  bool broken = true;
  (void)((d == defects.when && (broken = break_view(in, defects.view), true)) || ...);
  if (!broken) d = Defect::none;
}

// Picks one format x weight x logit type combination from the next input byte and calls
// fn.template operator()<Format, W, O>(name): the dispatch every fuzz target shares.
template <class Fn>
void for_one_combination(input& in, Fn&& fn) {
  switch (in.byte() % 12) {
    case 0:
      fn.template operator()<ml::mxfp8, ml::bf16, ml::bf16>("MXFP8 bf16->bf16");
      break;
    case 1:
      fn.template operator()<ml::mxfp8, float, float>("MXFP8 fp32->fp32");
      break;
    case 2:
      fn.template operator()<ml::mxfp8, ml::bf16, float>("MXFP8 bf16->fp32");
      break;
    case 3:
      fn.template operator()<ml::mxfp8, float, ml::bf16>("MXFP8 fp32->bf16");
      break;
    case 4:
      fn.template operator()<ml::mxfp4, ml::bf16, ml::bf16>("MXFP4 bf16->bf16");
      break;
    case 5:
      fn.template operator()<ml::mxfp4, float, float>("MXFP4 fp32->fp32");
      break;
    case 6:
      fn.template operator()<ml::mxfp4, ml::bf16, float>("MXFP4 bf16->fp32");
      break;
    case 7:
      fn.template operator()<ml::mxfp4, float, ml::bf16>("MXFP4 fp32->bf16");
      break;
    case 8:
      fn.template operator()<ml::fp8_per_token, ml::bf16, ml::bf16>("FP8 per-token bf16->bf16");
      break;
    case 9:
      fn.template operator()<ml::fp8_per_token, float, float>("FP8 per-token fp32->fp32");
      break;
    case 10:
      fn.template operator()<ml::fp8_per_token, ml::bf16, float>("FP8 per-token bf16->fp32");
      break;
    default:
      fn.template operator()<ml::fp8_per_token, float, ml::bf16>("FP8 per-token fp32->bf16");
  }
}

}  // namespace fuzz

// The libFuzzer entry point of a target: one format x weight x logit type combination, then the
// target's run<Format, W, O>(input, combination name).
#define MQALOGITS_FUZZ_TARGET(run)                                                    \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    input in(data, size);                                                             \
    for_one_combination(in, [&]<class Format, class W, class O>(const char* what) {   \
      run<Format, W, O>(in, what);                                                    \
    });                                                                               \
    return 0;                                                                         \
  }
