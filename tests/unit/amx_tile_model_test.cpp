// The C++ model of the AMX instructions (backend/host/amx/tile_model.hpp) against results
// computed by hand from Intel's instruction reference: TDPBF16PS's order of additions, rounding
// and subnormal handling, TDPBSSD's signed products and int32 wrap-around, loads and stores with
// a stride, and the configurations and operand shapes the hardware faults on. Where this CPU
// has AMX and the OS grants the tiles, the instructions themselves must give the model's bits.
#include <catch2/catch.hpp>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <mqalogits/backend/host/amx/tile_model.hpp>
#include <mqalogits/backend/host/amx/tile_native.hpp>
#include <mqalogits/backend/host/amx/tile_permission.hpp>

namespace {

namespace amx = mqalogits::host_backend::amx;
using model = amx::tile_model;

std::uint16_t bf16_bits(float x) {  // x must be a bf16 value
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  REQUIRE((b & 0xFFFFu) == 0);
  return static_cast<std::uint16_t>(b >> 16);
}
std::uint32_t pair(float lo, float hi) {
  return bf16_bits(lo) | std::uint32_t{bf16_bits(hi)} << 16;
}
std::uint32_t pair_bits(std::uint16_t lo, std::uint16_t hi) {
  return lo | std::uint32_t{hi} << 16;
}
std::uint32_t bytes4(int a, int b, int c, int d) {
  return static_cast<std::uint8_t>(a) |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(b)) << 8 |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(c)) << 16 |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(d)) << 24;
}

// C = tile 0 (M x N fp32/int32), A = tile 4 (M x K dwords), B = tile 5 (K x N dwords).
amx::tile_config shapes(int m, int n, int k) {
  amx::tile_config c;
  c.shape(0, m, 4 * n).shape(4, m, 4 * k).shape(5, k, 4 * n);
  return c;
}

// One TDPBF16PS (or TDPBSSD) on the model: returns C after C0 + A.B.
template <class Acc>
std::vector<Acc> run_dot(bool bf16, int m, int n, int k, const std::vector<Acc>& c0,
                         const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  model::configure(shapes(m, n, k));
  model::load<0>(c0.data(), 4 * n);
  model::load<4>(a.data(), 4 * k);
  model::load<5>(b.data(), 4 * n);
  if (bf16)
    model::dot_bf16<0, 4, 5>();
  else
    model::dot_s8<0, 4, 5>();
  std::vector<Acc> c(static_cast<std::size_t>(m * n));
  model::store<0>(c.data(), 4 * n);
  model::release();
  return c;
}

}  // namespace

TEST_CASE("amx tile model: tdpbf16ps by hand", "[amx]") {
  // A 2 x 2 pairs, B 2 pairs x 3 columns: C[m][n] = C0 + sum_k a.lo b.lo + a.hi b.hi.
  const std::vector<std::uint32_t> a = {pair(1, 2), pair(3, 4), pair(-1, 0.5f), pair(2, -2)};
  const std::vector<std::uint32_t> b = {pair(1, 1),  pair(2, 0),     pair(0, 3),  //
                                        pair(1, -1), pair(0.25f, 8), pair(-4, 1)};
  const std::vector<float> c0 = {10, 20, 30, -1, -2, -3};
  const auto c = run_dot<float>(true, 2, 3, 2, c0, a, b);
  // Row 0: (1*1 + 2*1) + (3*1 + 4*-1) = 2; (1*2 + 2*0) + (3*0.25 + 4*8) = 34.75;
  //        (1*0 + 2*3) + (3*-4 + 4*1) = -2.
  // Row 1: (-1 + 0.5) + (2 + 2) = 3.5; (-2 + 0) + (0.5 - 16) = -17.5; (0 + 1.5) + (-8 - 2) = -8.5.
  const std::vector<float> want = {12, 54.75f, 28, 2.5f, -19.5f, -11.5f};
  CHECK(c == want);
}

TEST_CASE("amx tile model: tdpbf16ps sums even and odd products apart, then adds them", "[amx]") {
  // Even products 2^24 then -2^24, odd products 1 then 0. Instruction reference order: even sum
  // 0, odd sum 1, C = 1. (Adding each product to C in turn would round 2^24 + 1 to 2^24: C = 0.)
  const float big = 0x1p24f;
  const std::vector<std::uint32_t> a = {pair(big, 1), pair(-big, 0)};
  const std::vector<std::uint32_t> b = {pair(1, 1), pair(1, 1)};
  CHECK(run_dot<float>(true, 1, 1, 2, {0.0f}, a, b) == std::vector<float>{1.0f});
  // The pair's sum is added to C with one rounding to nearest even: 1 + 2^-24 ties to 1,
  // 1 + 3 x 2^-24 rounds up to 1 + 2^-22.
  CHECK(run_dot<float>(true, 1, 1, 1, {1.0f}, {pair(0x1p-24f, 0)}, {pair(1, 0)}) ==
        std::vector<float>{1.0f});
  CHECK(run_dot<float>(true, 1, 1, 1, {1.0f}, {pair(0x1p-24f, 0x1p-23f)}, {pair(1, 1)}) ==
        std::vector<float>{1.0f + 0x1p-22f});
}

TEST_CASE("amx tile model: tdpbf16ps reads subnormals as zero and flushes subnormal results",
          "[amx]") {
  // bf16 0x0001 is 2^-133: times 2^100 it would be 2^-33, but it reads as 0.
  const std::uint16_t tiny = 0x0001;
  CHECK(run_dot<float>(true, 1, 1, 1, {0.0f}, {pair_bits(tiny, 0)}, {pair(0x1p100f, 0)}) ==
        std::vector<float>{0.0f});
  // 2^-70 x 2^-70 = 2^-140, a subnormal fp32 result: flushed to zero.
  CHECK(run_dot<float>(true, 1, 1, 1, {0.0f}, {pair(0x1p-70f, 0)}, {pair(0x1p-70f, 0)}) ==
        std::vector<float>{0.0f});
  // A subnormal accumulator reads as zero too: 2^-127 + 2^-126 would be 1.5 x 2^-126.
  CHECK(run_dot<float>(true, 1, 1, 1, {0x1p-127f}, {pair(0x1p-63f, 0)}, {pair(0x1p-63f, 0)}) ==
        std::vector<float>{0x1p-126f});
  // NaN and infinity propagate.
  const auto inf = run_dot<float>(true, 1, 1, 1, {0.0f}, {pair(0x1p100f, 0)}, {pair(0x1p100f, 0)});
  CHECK((std::isinf(inf[0]) && inf[0] > 0));
  CHECK(std::isnan(run_dot<float>(true, 1, 1, 1, {0.0f}, {pair_bits(0x7FC0, 0)}, {pair(1, 0)})[0]));
}

TEST_CASE("amx tile model: tdpbssd by hand, wrapping around", "[amx]") {
  // A 2 x 2 dwords, B 2 dwords x 2 columns, signed bytes.
  const std::vector<std::uint32_t> a = {bytes4(1, -2, 3, -4), bytes4(5, 6, -7, 8),
                                        bytes4(-128, -128, -128, -128), bytes4(127, 0, 0, 0)};
  const std::vector<std::uint32_t> b = {bytes4(1, 1, 1, 1), bytes4(-1, 2, -3, 4),
                                        bytes4(2, 0, 0, 1), bytes4(0, 0, 0, -128)};
  const auto c = run_dot<std::int32_t>(false, 2, 2, 2, {100, -100, 0, INT_MIN}, a, b);
  // Row 0: (1 - 2 + 3 - 4) + (10 + 0 + 0 + 8) = 16; (-1 - 4 - 9 - 16) + (0 + 0 + 0 - 1024) = -1054.
  // Row 1: (-512) + 254 = -258; (128 - 256 + 384 - 512) + 0 = -256, added to INT_MIN: wraps.
  CHECK(c[0] == 116);
  CHECK(c[1] == -1154);
  CHECK(c[2] == -258);
  CHECK(c[3] == INT_MAX - 255);
  const auto wrap =
      run_dot<std::int32_t>(false, 1, 1, 1, {INT_MAX}, {bytes4(1, 0, 0, 0)}, {bytes4(1, 0, 0, 0)});
  CHECK(wrap[0] == INT_MIN);
}

TEST_CASE("amx tile model: loads and stores rows of a stride, zeroing past the shape", "[amx]") {
  amx::tile_config cfg;
  cfg.shape(1, 3, 8).shape(2, 3, 8);
  model::configure(cfg);
  std::vector<std::uint8_t> src(64 * 4);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i + 1);
  model::load<1>(src.data() + 5, 40);  // rows at 5, 45, 85: 8 bytes each
  std::vector<std::uint8_t> dst(3 * 16, 0xEE);
  model::store<1>(dst.data(), 16);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 16; ++i) {
      INFO("row " << r << " byte " << i);
      CHECK(dst[static_cast<std::size_t>(r * 16 + i)] ==
            (i < 8 ? src[static_cast<std::size_t>(5 + r * 40 + i)] : 0xEE));
    }
  model::zero<1>();
  model::store<1>(dst.data(), 16);
  CHECK(dst[0] == 0);
  CHECK(dst[16 + 7] == 0);
  model::release();
}

TEST_CASE("amx tile model: faults where the hardware does", "[amx]") {
  using fault = amx::tile_fault;
  auto loads = [](const amx::tile_config& c) { model::configure(c); };
  amx::tile_config ok;
  ok.shape(0, 16, 64);
  CHECK(amx::config_fault(ok) == nullptr);
  amx::tile_config bad = ok;
  bad.rows[0] = 17;
  CHECK_THROWS_AS(loads(bad), fault);
  bad = ok;
  bad.colsb[0] = 65;
  CHECK_THROWS_AS(loads(bad), fault);
  bad = ok;
  bad.palette = 2;
  CHECK_THROWS_AS(loads(bad), fault);
  bad = ok;
  bad.reserved[3] = 1;
  CHECK_THROWS_AS(loads(bad), fault);
  bad = ok;
  bad.shape(8, 1, 4);  // palette 1 has 8 tiles
  CHECK_THROWS_AS(loads(bad), fault);
  bad = ok;
  bad.colsb[0] = 0;  // rows without bytes
  CHECK_THROWS_AS(loads(bad), fault);

  std::vector<std::uint8_t> mem(16 * 64);
  // No configuration, or a tile the configuration leaves out.
  model::release();
  CHECK_THROWS_WITH(model::load<0>(mem.data(), 64), Catch::Contains("no tile configuration"));
  model::configure(ok);
  CHECK_THROWS_WITH(model::zero<3>(), Catch::Contains("tile not configured"));
  model::load<0>(mem.data(), 64);
  // Shapes that do not multiply: M, N, K, and bytes that are not whole dwords.
  const auto dot_faults = [](const amx::tile_config& c) {
    model::configure(c);
    model::dot_bf16<0, 4, 5>();
  };
  CHECK_NOTHROW(dot_faults(shapes(4, 3, 2)));
  amx::tile_config m = shapes(4, 3, 2);
  m.rows[4] = 5;
  CHECK_THROWS_WITH(dot_faults(m), Catch::Contains("(M)"));
  amx::tile_config n = shapes(4, 3, 2);
  n.colsb[5] = 16;
  CHECK_THROWS_WITH(dot_faults(n), Catch::Contains("(N)"));
  amx::tile_config k = shapes(4, 3, 2);
  k.rows[5] = 3;
  CHECK_THROWS_WITH(dot_faults(k), Catch::Contains("(K)"));
  amx::tile_config x4 = shapes(4, 3, 2);
  x4.colsb[4] = 6;
  CHECK_THROWS_WITH(dot_faults(x4), Catch::Contains("x4"));
  model::release();
}

// The instructions against the model, bit for bit, on random operands (this build and CPU
// permitting).
#if defined(MQALOGITS_TARGET_AMX)
TEST_CASE("amx tile model: the instructions give the model's bits", "[amx]") {
  if (const char* why = amx::tile_refusal()) {
    INFO("no AMX here: " << why);
    CHECK(std::strlen(why) > 0);
    return;
  }
  using native = amx::tile_native;
  std::mt19937 rng(5);
  amx::tile_config cfg;
  cfg.shape(0, 16, 64).shape(1, 16, 64).shape(4, 16, 64).shape(5, 16, 64);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::uint32_t> a(256), b(256), c0(256), got(256), want(256);
    for (auto& x : a) x = rng() & 0xBFFFBFFFu;  // exponents below the top: few infinities
    for (auto& x : b) x = rng() & 0xBFFFBFFFu;
    for (auto& x : c0) x = rng() & 0xBFFFFFFFu;
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      native::configure(cfg);
      native::load<0>(c0.data(), 64);
      native::load<4>(a.data(), 64);
      native::load<5>(b.data(), 64);
      bf16 ? native::dot_bf16<0, 4, 5>() : native::dot_s8<0, 4, 5>();
      native::store<0>(got.data(), 64);
      native::release();
      model::configure(cfg);
      model::load<0>(c0.data(), 64);
      model::load<4>(a.data(), 64);
      model::load<5>(b.data(), 64);
      bf16 ? model::dot_bf16<0, 4, 5>() : model::dot_s8<0, 4, 5>();
      model::store<0>(want.data(), 64);
      model::release();
      INFO("round " << round << (bf16 ? " tdpbf16ps" : " tdpbssd"));
      CHECK(got == want);
    }
  }
}
#endif
