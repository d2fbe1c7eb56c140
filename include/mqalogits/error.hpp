// The one error type every entry point throws for bad input.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "config.hpp"

// The formats are byte layouts read through multi-byte loads (int16 / int32 scale words, fp32
// per-token scales, the SIMD decoders' wide loads) that assume the bytes of a word are in
// little-endian order, as on x86-64, AArch64 and every accelerator host the engines run on.
static_assert(std::endian::native == std::endian::little,
              "mqalogits needs a little-endian target: its formats (UE8M0 scale words, fp32 "
              "per-token scales, packed FP4 bytes) are read with little-endian multi-byte loads");

MQALOGITS_NAMESPACE_BEGIN

// Thrown before any output is written; the message names the function, the argument and the
// offending value, e.g. "fp8_fp4_paged_mqa_logits: block_table[3][17] = 90210 is not a page
// (num_pages = 512)". The one exception: an executor that breaks its contract (executor.hpp) is
// only seen once it returns, so that error comes after the output was written.
class error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

// Builds "<where>: <what>" messages in a buffer of its own: no std::string, no std::to_string
// (their instantiations would be names shared by units built for other instruction sets: see
// std_abi.hpp). A message longer than the buffer ends in "...".
class message {
 public:
  template <class Where>
  explicit message(const Where& where) {
    text_[0] = '\0';
    *this << where << ": ";
  }
  message& operator<<(std::string_view s) {
    append(s.data(), s.size());
    return *this;
  }
  message& operator<<(const char* s) { return *this << std::string_view(s); }
  template <class I>
  requires std::is_integral_v<I> message& operator<<(I v) {
    char digits[24];  // 20 digits of 2^64 - 1, a sign
    char* const end = digits + sizeof digits;
    char* p = end;
    // |v| as unsigned (the negation in unsigned arithmetic is exact for the smallest value too).
    auto u = static_cast<unsigned long long>(v);
    bool negative = false;
    if constexpr (std::is_signed_v<I>) {
      negative = v < 0;
      if (negative) u = 0ULL - u;
    }
    do {
      *--p = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative) *--p = '-';
    append(p, static_cast<std::size_t>(end - p));
    return *this;
  }
  // Anything that writes itself (e.g. head_dims_text<F>(), where()).
  template <class T>
  requires requires(const T& t, message& m) { t.write_to(m); }
  message& operator<<(const T& t) {
    t.write_to(*this);
    return *this;
  }
  [[noreturn]] void raise() const { throw error(text_); }
  const char* str() const { return text_; }

 private:
  void append(const char* s, std::size_t n) {
    constexpr std::size_t room = sizeof text_ - 1;
    const std::size_t fits = size_ < room ? room - size_ : 0;
    // What fits, less room for "..." when the text is cut; never more than s has. (The bounds
    // in the loops are for the compiler's overflow warnings: size_ < room always.)
    std::size_t take = n <= fits ? n : (fits > 3 ? fits - 3 : 0);
    if (take > n) take = n;
    for (std::size_t i = 0; i < take && size_ < room; ++i) text_[size_++] = s[i];
    if (n > fits)
      while (size_ < room) text_[size_++] = '.';
    text_[size_ < room ? size_ : room] = '\0';
  }
  char text_[1024];
  std::size_t size_ = 0;
};

// A "where" of three parts, e.g. where("neuron model (", name, ")"): written only when a check
// fails.
struct where3 {
  const char* a;
  const char* b;
  const char* c;
  template <class M>
  void write_to(M& m) const {
    m << a << b << c;
  }
};

// Checks one condition; the message is only built when it fails.
template <class Where, class Fn>
inline void require(bool ok, const Where& where, Fn&& describe) {
  if (ok) [[likely]]
    return;
  message m(where);
  describe(m);
  m.raise();
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
