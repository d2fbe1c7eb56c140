// The portable path: plain C++ over 8-lane "vectors" the compiler may vectorise. It compiles
// anywhere (it is the path of a build without -march, on any CPU) and stays tested everywhere.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "base.hpp"
#include "paths.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Every operation is lane-wise, in a fixed order, so results only depend on the code, never on
// the data's position.
struct isa_portable : plain_decoders, scalar_topk {
  static constexpr const char* name = "portable";
  // The path's full name (target.hpp's tag).
  static constexpr const char* path = isa_path_name(isa_path_id::portable);
  static constexpr int lanes = 8;
  struct vf {
    float v[lanes];
  };
  struct vi {
    std::int32_t v[lanes];
  };
  using mask = int;  // number of live lanes

  // Sized like AVX2's: 8-lane accumulators, 16 of them at most.
  static constexpr register_block f32_blocks[] = {{2, 2, 4}, {1, 1, 6}};
  static constexpr register_block i8_blocks[] = {{2, 2, 4}, {1, 1, 6}};
  static constexpr register_block i8_fold_blocks[] = {{2, 2, 4}, {1, 1, 6}};
  // Products of folded codes (|k|, |q| <= 96) are exact in plain int arithmetic.
  static constexpr int fold_query_spread = fold_spread;
  static constexpr bool fold_rows = true;  // the driver takes the folded kernel for rows that fold
  // Plain integer multiplies take signed bytes as they are: no key offset.
  using int8 = int8_signed_keys;

  static vf zero() { return vf{}; }
  static vf load(const float* p) {
    vf r;
    for (int l = 0; l < lanes; ++l) r.v[l] = p[l];
    return r;
  }
  static vf broadcast(const float* p) {
    vf r;
    for (int l = 0; l < lanes; ++l) r.v[l] = *p;
    return r;
  }
  static vf fma(vf a, vf b, vf c) {  // a * b + c
    for (int l = 0; l < lanes; ++l) c.v[l] = a.v[l] * b.v[l] + c.v[l];
    return c;
  }
  static vf mul(vf a, vf b) {
    for (int l = 0; l < lanes; ++l) a.v[l] *= b.v[l];
    return a;
  }
  // +inf lowered to the largest float, NaN kept (a false comparison keeps it).
  static vf cap_infinity(vf a) {
    constexpr float top = std::numeric_limits<float>::max();
    for (int l = 0; l < lanes; ++l) a.v[l] = a.v[l] > top ? top : a.v[l];
    return a;
  }
  static mask live(int n) { return n; }
  // relu keeping NaN, zero on dead lanes (padding heads, whatever they hold).
  static vf relu(vf a, mask m) {
    for (int l = 0; l < lanes; ++l) a.v[l] = l >= m ? 0.0f : (a.v[l] < 0.0f ? 0.0f : a.v[l]);
    return a;
  }
  static float reduce(vf a) {
    float s = 0.0f;
    for (int l = 0; l < lanes; ++l) s += a.v[l];
    return s;
  }

  static vi zeroi() { return vi{}; }
  static vi loadi(const std::int32_t* p) {
    vi r;
    for (int l = 0; l < lanes; ++l) r.v[l] = p[l];
    return r;
  }
  static vi broadcast4(const std::uint8_t* p) {  // 4 bytes into every lane
    std::int32_t x;
    std::memcpy(&x, p, 4);
    vi r;
    for (int l = 0; l < lanes; ++l) r.v[l] = x;
    return r;
  }
  // acc + the sum of the 4 products s8(k) * s8(q) in each 32-bit lane.
  static vi dot4(vi acc, vi k, vi q) {
    for (int l = 0; l < lanes; ++l)
      for (int b = 0; b < 4; ++b) {
        const auto kb = static_cast<std::int8_t>(static_cast<std::uint32_t>(k.v[l]) >> (8 * b));
        const auto qb = static_cast<std::int8_t>(static_cast<std::uint32_t>(q.v[l]) >> (8 * b));
        acc.v[l] += kb * qb;
      }
    return acc;
  }
  static vf to_float(vi a) {
    vf r;
    for (int l = 0; l < lanes; ++l) r.v[l] = static_cast<float>(a.v[l]);
    return r;
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
