// The one error type every entry point throws for bad input.
#pragma once

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

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

// Builds "<where>: <what>" messages without iostreams.
class message {
 public:
  explicit message(std::string_view where) : text_(where) { text_ += ": "; }
  message& operator<<(std::string_view s) {
    text_ += s;
    return *this;
  }
  message& operator<<(const char* s) { return *this << std::string_view(s); }
  template <class I>
    requires std::is_integral_v<I>
  message& operator<<(I v) {
    text_ += std::to_string(v);
    return *this;
  }
  [[noreturn]] void raise() const { throw error(text_); }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// Checks one condition; the message is only built when it fails.
template <class Fn>
inline void require(bool ok, std::string_view where, Fn&& describe) {
  if (ok) [[likely]]
    return;
  message m(where);
  describe(m);
  m.raise();
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
