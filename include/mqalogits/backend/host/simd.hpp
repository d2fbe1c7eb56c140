// The vector instruction sets of the host backend, each as a small traits struct of the few
// operations the micro-kernels need. Which ones exist is decided at compile time from the
// compiler's target macros (-march), never at run time: a header-only library gets its
// consumer's flags. The portable one compiles anywhere (ARM included) and stays tested.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../config.hpp"  // target.hpp: MQALOGITS_HOST_AVX2 / _AVX512
#if defined(MQALOGITS_HOST_AVX2) || defined(MQALOGITS_HOST_AVX512)
// GCC 12's AVX-512 intrinsics seed results with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the pragma covers the header's lines only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#if defined(__clang__)
#define MQALOGITS_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define MQALOGITS_UNROLL _Pragma("GCC unroll 16")
#else
#define MQALOGITS_UNROLL
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Plain C++: 8-lane "vectors" the compiler may vectorise. Every operation is lane-wise, in a
// fixed order, so results only depend on the code, never on the data's position.
struct isa_portable {
  static constexpr const char* name = "portable";
  static constexpr int lanes = 8;
  struct vf {
    float v[lanes];
  };
  struct vi {
    std::int32_t v[lanes];
  };
  using mask = int;  // number of live lanes

  static vf zero() { return vf{}; }
  static vf load(const float* p) {
    vf r;
    for (int l = 0; l < lanes; ++l) r.v[l] = p[l];
    return r;
  }
  static void store(float* p, vf a) {
    for (int l = 0; l < lanes; ++l) p[l] = a.v[l];
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
  // acc + sum of the 4 products u8(u) * s8(s) in each 32-bit lane (vpdpbusd).
  static vi dot4(vi acc, vi u, vi s) {
    for (int l = 0; l < lanes; ++l)
      for (int b = 0; b < 4; ++b) {
        const int ub = (static_cast<std::uint32_t>(u.v[l]) >> (8 * b)) & 0xFF;
        const int sb =
            static_cast<std::int8_t>((static_cast<std::uint32_t>(s.v[l]) >> (8 * b)) & 0xFF);
        acc.v[l] += ub * sb;
      }
    return acc;
  }
  static vf to_float(vi a) {
    vf r;
    for (int l = 0; l < lanes; ++l) r.v[l] = static_cast<float>(a.v[l]);
    return r;
  }
};

#if defined(MQALOGITS_HOST_AVX2)
// AVX2 + FMA, 8 fp32 lanes; int8 dot products through AVX-VNNI when the target has it, else
// vpmaddubsw + vpmaddwd (exact here: |u8 * s8| pairs stay far below int16 saturation).
struct isa_avx2 {
  static constexpr const char* name = "avx2";
  static constexpr int lanes = 8;
  using vf = __m256;
  using vi = __m256i;
  using mask = __m256;  // all-ones bits on live lanes

  static vf zero() { return _mm256_setzero_ps(); }
  static vf load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vf a) { _mm256_storeu_ps(p, a); }
  static vf broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static mask live(int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
  }
  // max(0, a) returns its second operand, a, when a is NaN: relu(NaN) stays NaN.
  static vf relu(vf a, mask m) { return _mm256_and_ps(_mm256_max_ps(_mm256_setzero_ps(), a), m); }
  static float reduce(vf a) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }

  static vi loadi(const std::int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static vi broadcast4(const std::uint8_t* p) {
    std::int32_t x;
    std::memcpy(&x, p, 4);
    return _mm256_set1_epi32(x);
  }
  static vi dot4(vi acc, vi u, vi s) {
#if defined(MQALOGITS_HOST_VNNI256)
#if defined(MQALOGITS_HOST_VNNI512)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
#else
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
  }
  static vf to_float(vi a) {
    return _mm256_cvtepi32_ps(a);
  }
};
#endif

#if defined(MQALOGITS_HOST_AVX512)
// AVX-512, 16 fp32 lanes; int8 dot products through VNNI when the target has it.
struct isa_avx512 {
  static constexpr const char* name = "avx512";
  static constexpr int lanes = 16;
  using vf = __m512;
  using vi = __m512i;
  using mask = __mmask16;

  static vf zero() { return _mm512_setzero_ps(); }
  static vf load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vf a) { _mm512_storeu_ps(p, a); }
  static vf broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static mask live(int n) {
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  }
  // max(0, a) returns its second operand, a, when a is NaN: relu(NaN) stays NaN.
  static vf relu(vf a, mask m) { return _mm512_maskz_max_ps(m, _mm512_setzero_ps(), a); }
  static float reduce(vf a) {
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(a),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 q = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }

  static vi loadi(const std::int32_t* p) { return _mm512_loadu_si512(p); }
  static vi broadcast4(const std::uint8_t* p) {
    std::int32_t x;
    std::memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
  }
  static vi dot4(vi acc, vi u, vi s) {
#if defined(__AVX512VNNI__)
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    const __m512i pairs = _mm512_maddubs_epi16(u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
#endif
  }
  static vf to_float(vi a) {
    return _mm512_cvtepi32_ps(a);
  }
};
#endif

// The widest instruction set this translation unit was compiled for.
#if defined(MQALOGITS_HOST_AVX512)
using isa_best = isa_avx512;
#elif defined(MQALOGITS_HOST_AVX2)
using isa_best = isa_avx2;
#else
using isa_best = isa_portable;
#endif

}  // namespace host_backend

// The host path the calling translation unit was compiled for: "avx512", "avx2", "neon" or
// "portable" (its own, even when other units of the program were built with other flags).
inline const char* host_isa_name() {
  return host_backend::isa_best::name;
}
MQALOGITS_NAMESPACE_END
