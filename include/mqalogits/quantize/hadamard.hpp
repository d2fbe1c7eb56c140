// The Walsh-Hadamard rotation DeepSeek-V4 applies to the indexer's Q and K rows after RoPE and
// before quantising: y = H_D x / sqrt(D), H_D the Sylvester-ordered Hadamard matrix (entry (i, j)
// = (-1)^popcount(i & j), the order of scipy.linalg.hadamard). The rotation spreads an outlier
// over the whole row, so one scale per row (or per 32 elements) loses less to it. The quantisers
// take it as an option (row_rotation::hadamard): each row is read once into an fp32 scratch row,
// rotated there, and quantised from it.
//
// The transform is computed in fp32 and never rounded to the input's type: an engine whose
// rotation returns bf16 (a bf16 in / bf16 out kernel) quantises that rounding as well, and
// matches this only when given its own rotated rows with the option off.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../config.hpp"
#include "../error.hpp"
#include "../format/bf16.hpp"
#include "../format/fp16.hpp"

MQALOGITS_NAMESPACE_BEGIN

// What a quantiser does to a row before choosing its scales.
enum class row_rotation : std::uint8_t {
  none,      // quantise the row as given
  hadamard,  // quantise H_D x / sqrt(D) (DeepSeek-V4's indexer Q and K)
};

// Element types the rotation reads (the quantisers' inputs, and fp16).
template <class T>
concept hadamard_input =
    std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;

namespace detail {
// One butterfly stage of the transform: in every block of 2H elements, the two contiguous halves
// become their sum and difference. H is a compile-time constant, so each stage is a loop of
// fixed bounds the compiler unrolls (small H) or vectorises over the halves (H >= the vector
// width), with no branch per element.
template <int D, int H>
inline void hadamard_stage(float* __restrict x) {
  for (int i = 0; i < D; i += 2 * H)
    for (int j = i; j < i + H; ++j) {
      const float a = x[j], b = x[j + H];
      x[j] = a + b;
      x[j + H] = a - b;
    }
}
template <int D, int... S>
inline void hadamard_stages([[maybe_unused]] float* x, std::integer_sequence<int, S...>) {
  (hadamard_stage<D, (1 << S)>(x), ...);
}
}  // namespace detail

// x[0, D) <- H_D x / sqrt(D) in place, D a power of two: log2(D) butterfly stages, the last one
// (the two halves of the row) with the scale. Each output is a sum of D terms before its one
// multiply by fp32(D^-0.5): a row whose sums are exact in fp32 (small integers times one power of
// two) rotates exactly up to that last rounding.
template <int D>
inline void hadamard_rotate(float* __restrict x) {
  static_assert(D >= 2 && (D & (D - 1)) == 0, "mqalogits: the Hadamard dim must be a power of two");
  detail::hadamard_stages<D>(x,
                             std::make_integer_sequence<int, std::countr_zero(unsigned{D}) - 1>{});
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int j = 0; j < D / 2; ++j) {
    const float a = x[j], b = x[j + D / 2];
    x[j] = (a + b) * scale;
    x[j + D / 2] = (a - b) * scale;
  }
}

// Converts the row x[0, D) to fp32 into out[0, D) and rotates it there (x is read once).
template <int D, class T>
requires hadamard_input<T>
inline void load_hadamard_rotated(const T* __restrict x, float* __restrict out) {
  for (int i = 0; i < D; ++i) out[i] = to_float(x[i]);
  hadamard_rotate<D>(out);
}

// The same for a head dim known at run time: d is 128, 64 or 32, else mqalogits::error.
inline void hadamard_rotate(float* x, int d) {
  switch (d) {
    case 128:
      return hadamard_rotate<128>(x);
    case 64:
      return hadamard_rotate<64>(x);
    case 32:
      return hadamard_rotate<32>(x);
    default:
      detail::require(false, "hadamard_rotate", [&](auto& m) {
        m << "rows of " << d << " elements; the Hadamard rotation takes 128, 64 or 32";
      });
  }
}
template <class T>
requires hadamard_input<T>
inline void load_hadamard_rotated(const T* x, int d, float* out) {
  switch (d) {
    case 128:
      return load_hadamard_rotated<128>(x, out);
    case 64:
      return load_hadamard_rotated<64>(x, out);
    case 32:
      return load_hadamard_rotated<32>(x, out);
    default:
      detail::require(false, "load_hadamard_rotated", [&](auto& m) {
        m << "rows of " << d << " elements; the Hadamard rotation takes 128, 64 or 32";
      });
  }
}

namespace detail {
// A quantiser's rotation argument names one of row_rotation's values.
inline void check_rotation(const char* where, row_rotation rotation) {
  require(
      rotation == row_rotation::none || rotation == row_rotation::hadamard, where, [&](auto& m) {
        m << "row_rotation value " << static_cast<int>(rotation) << " is neither none nor hadamard";
      });
}

// Calls fn(p) with p the row to quantise: x itself (row_rotation::none), or scratch (>= d floats)
// holding x rotated. d is a head dim the caller has checked (128, 64 or 32).
template <class T, class Fn>
inline void with_rotated_row(const T* x, int d, row_rotation rotation, float* scratch, Fn&& fn) {
  if (rotation == row_rotation::none) return fn(x);
  load_hadamard_rotated(x, d, scratch);
  fn(static_cast<const float*>(scratch));
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
