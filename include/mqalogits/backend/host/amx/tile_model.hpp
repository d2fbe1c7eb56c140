// A plain C++ model of the AMX instructions the AMX path uses, with the same interface as the
// intrinsics (tile_native.hpp): LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TILERELEASE,
// TDPBF16PS and TDPBSSD. The AMX path's kernels run on it in every build, on any CPU, so their
// tiling, layouts and edges are tested against the scalar reference where no AMX CPU is.
//
// It follows Intel's instruction reference: a tile holds up to 16 rows of 64 bytes; a load or a
// dot product writes a tile's configured rows and bytes and zeroes the rest. TDPBF16PS keeps,
// per row of the result, two fp32 sums per column (the even and the odd element of each pair)
// over the whole K dimension, adds the two, then adds that to the accumulator; each step rounds
// to nearest even, inputs that are subnormal read as zero and subnormal results are flushed to
// zero, whatever MXCSR says. (The intrinsics guide describes the same sums added to C one product
// at a time; the two orders differ only in fp32 rounding, and on an AMX CPU the tile tests
// compare this model with the instruction bit for bit.) TDPBSSD adds the four signed byte products
// of each dword pair to the int32 accumulator, wrapping around. Whatever the hardware would fault
// on (#GP on a bad configuration, #UD on an unconfigured tile, tiles that are not distinct or whose
// shapes do not match) throws tile_fault.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "../../../config.hpp"
#include "tile_config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend::amx {

// What the hardware would fault on.
struct tile_fault : std::logic_error {
  using std::logic_error::logic_error;
};

struct tile_model {
  static constexpr const char* path = "amx_model";

  // Instructions executed by every thread (the tests check that a kernel went through tiles).
  struct counts {
    std::atomic<std::int64_t> bf16_dots{0}, int8_dots{0};
  };
  static counts& executed() {
    static counts c;
    return c;
  }

  static void configure(const tile_config& c) {
    if (const char* why = config_fault(c)) fault("LDTILECFG", why);
    state& s = this_thread();
    s.config = c;
    s.configured = true;
    std::memset(s.data, 0, sizeof s.data);
  }
  static void release() {
    state& s = this_thread();
    s.configured = false;
    s.config = tile_config{};
    std::memset(s.data, 0, sizeof s.data);
  }
  template <int T>
  static void zero() {
    std::memset(tile<T>("TILEZERO").bytes, 0, tile_bytes);
  }
  template <int T>
  static void load(const void* base, std::int64_t stride) {
    const view t = tile<T>("TILELOADD");
    std::memset(t.bytes, 0, tile_bytes);
    for (int r = 0; r < t.rows; ++r)
      std::memcpy(t.bytes + r * max_row_bytes, static_cast<const std::uint8_t*>(base) + r * stride,
                  static_cast<std::size_t>(t.colsb));
  }
  template <int T>
  static void store(void* base, std::int64_t stride) {
    const view t = tile<T>("TILESTORED");
    for (int r = 0; r < t.rows; ++r)
      std::memcpy(static_cast<std::uint8_t*>(base) + r * stride, t.bytes + r * max_row_bytes,
                  static_cast<std::size_t>(t.colsb));
  }

  // C[m][n] += sum over k of A[m][k].lo * B[k][n].lo + A[m][k].hi * B[k][n].hi (bf16 pairs).
  template <int C, int A, int B>
  static void dot_bf16() {
    const auto [c, a, b] = operands<C, A, B>("TDPBF16PS");
    const int n_count = c.colsb / 4, k_count = a.colsb / 4;
    for (int m = 0; m < c.rows; ++m) {
      float even[16] = {}, odd[16] = {};
      for (int k = 0; k < k_count; ++k)
        for (int n = 0; n < n_count; ++n) {
          even[n] = ftz(std::fma(bf16(a, m, 2 * k), bf16(b, k, 2 * n), even[n]));
          odd[n] = ftz(std::fma(bf16(a, m, 2 * k + 1), bf16(b, k, 2 * n + 1), odd[n]));
        }
      for (int n = 0; n < n_count; ++n) {
        float acc;
        std::memcpy(&acc, c.bytes + m * max_row_bytes + 4 * n, 4);
        acc = ftz(daz(acc) + ftz(even[n] + odd[n]));
        std::memcpy(c.bytes + m * max_row_bytes + 4 * n, &acc, 4);
      }
    }
    clear_past_shape(c);
    ++executed().bf16_dots;
  }

  // C[m][n] += sum over k of the 4 products s8(A[m][k].byte[i]) * s8(B[k][n].byte[i]), int32
  // wrapping around.
  template <int C, int A, int B>
  static void dot_s8() {
    const auto [c, a, b] = operands<C, A, B>("TDPBSSD");
    const int n_count = c.colsb / 4, k_count = a.colsb / 4;
    for (int m = 0; m < c.rows; ++m)
      for (int n = 0; n < n_count; ++n) {
        std::uint32_t acc;
        std::memcpy(&acc, c.bytes + m * max_row_bytes + 4 * n, 4);
        for (int k = 0; k < k_count; ++k)
          for (int i = 0; i < 4; ++i) {
            const int x = static_cast<std::int8_t>(a.bytes[m * max_row_bytes + 4 * k + i]);
            const int y = static_cast<std::int8_t>(b.bytes[k * max_row_bytes + 4 * n + i]);
            acc += static_cast<std::uint32_t>(x * y);
          }
        std::memcpy(c.bytes + m * max_row_bytes + 4 * n, &acc, 4);
      }
    clear_past_shape(c);
    ++executed().int8_dots;
  }

 private:
  static constexpr int tile_bytes = max_rows * max_row_bytes;
  struct state {
    bool configured = false;
    tile_config config{};
    std::uint8_t data[tile_count][tile_bytes] = {};
  };
  static state& this_thread() {
    thread_local state s;
    return s;
  }
  struct view {
    std::uint8_t* bytes;
    int rows, colsb;
  };

  [[noreturn]] static void fault(const char* instruction, const char* why) {
    throw tile_fault(std::string("AMX tile model: ") + instruction + " faults: " + why);
  }
  template <int T>
  static view tile(const char* instruction) {
    static_assert(T >= 0 && T < tile_count, "palette 1 has tiles 0 to 7");
    state& s = this_thread();
    if (!s.configured) fault(instruction, "no tile configuration loaded");
    if (s.config.rows[T] == 0) fault(instruction, "tile not configured");
    return {s.data[T], s.config.rows[T], s.config.colsb[T]};
  }
  struct three {
    view c, a, b;
  };
  // The three tiles of a dot product, with the shape checks of its #UD conditions.
  template <int C, int A, int B>
  static three operands(const char* instruction) {
    static_assert(C != A && C != B && A != B, "a dot product's three tiles must be distinct");
    const three t{tile<C>(instruction), tile<A>(instruction), tile<B>(instruction)};
    if (t.c.colsb % 4 || t.a.colsb % 4 || t.b.colsb % 4) fault(instruction, "bytes per row not x4");
    if (t.c.rows != t.a.rows) fault(instruction, "C and A rows differ (M)");
    if (t.c.colsb != t.b.colsb) fault(instruction, "C and B bytes per row differ (N)");
    if (t.a.colsb / 4 != t.b.rows) fault(instruction, "A's dwords per row are not B's rows (K)");
    return t;
  }
  static void clear_past_shape(const view& t) {
    for (int r = 0; r < max_rows; ++r)
      for (int i = r < t.rows ? t.colsb : 0; i < max_row_bytes; ++i)
        t.bytes[r * max_row_bytes + i] = 0;
  }
  // bf16 element e of row r, as fp32, subnormals read as zero.
  static float bf16(const view& t, int r, int e) {
    std::uint16_t h;
    std::memcpy(&h, t.bytes + r * max_row_bytes + 2 * e, 2);
    const std::uint32_t bits = std::uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return daz(f);
  }
  static float daz(float x) {
    return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
  }
  static float ftz(float x) { return daz(x); }
};

}  // namespace host_backend::amx
MQALOGITS_NAMESPACE_END
