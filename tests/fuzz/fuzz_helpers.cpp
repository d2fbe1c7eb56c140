// Fuzzes the public helpers the kernels rely on: store_into_pages (fp32 k and quantised rows,
// int64 and int32 slot mappings), quantize_rows_into, fold_q_scales, the MXFP4 Q quantiser with
// its weights (quantize_q_mxfp4_scale_weights), logits_row_stride / logits_buffer /
// aligned_page_stride, and the three metadata functions (the paged one's array form too). Sizes,
// strides, slots, alignments and aliasing come from the input. Each case states its expected
// outcome first: valid input gives the exact result (the bytes quantize_rows gives, the folded
// weights, an aligned buffer of the right stride, metadata of the right shape); input with a defect
// gives an mqalogits::error naming the helper, with nothing written. Every buffer is exact size, so
// ASan sees the first byte read or written past a view.
#include "fuzz_common.hpp"

namespace {

using namespace fuzz;

// Runs `call`, which must throw mqalogits::error starting with `where` (reject) or return.
template <class Fn>
std::string run_case(const std::string& context, Fn&& call) {
  return outcome(call, context);
}

// ---- store_into_pages ----

enum class store_defect {
  none,
  slot_past_cache,
  misaligned_slots,
  k_stride,
  misaligned_k,
  k_over_cache,
  slots_over_cache,
  slot_count,
  count
};

template <class Slot>
void store(input& in, content& c) {
  using Fmt = ml::mxfp8;
  constexpr const char* where = "store_into_pages";
  const i64 pages = in.range(1, 4);
  const i32 page_kv = in.one_in(2) ? 16 : 64;
  const i64 stride = ml::page_bytes<Fmt>(page_kv) + (in.one_in(3) ? in.range(1, 64) : 0);
  const i64 tokens = in.range(0, 12), capacity = pages * page_kv;
  const i64 k_stride = pick_stride(in, Fmt::head_dim, 8);
  const bool quantised = in.one_in(3);
  auto d = pick_defect<store_defect>(in);
  if (tokens == 0 && d != store_defect::slot_count) d = store_defect::none;
  if (quantised && (d == store_defect::misaligned_k || d == store_defect::k_over_cache))
    d = store_defect::none;

  guarded<std::uint8_t> cache((pages - 1) * stride + i64{page_kv} * cache_buf<Fmt>::token_bytes);
  for (i64 i = 0; i < cache.n; ++i) cache[i] = c.raw();
  guarded<float> k(matrix_extent(tokens, Fmt::head_dim, k_stride));
  for (i64 i = 0; i < k.n; ++i) k[i] = c.weight();
  guarded<Slot> slots(tokens);
  for (i64 i = 0; i < tokens; ++i)
    slots[i] =
        static_cast<Slot>(std::is_signed_v<Slot> && in.one_in(6) ? -1 : in.range(0, capacity - 1));
  // Quantised rows of the same tokens (store_into_pages' second overload).
  const auto rows = ml::quantize_rows<Fmt>(
      ml::matrix_view<const float>(k.data(), tokens, Fmt::head_dim, k_stride));
  guarded<std::uint8_t> raw(static_cast<i64>(sizeof(Slot)) * (tokens + 1) + 4 * k.n + 16);

  ml::matrix_view<const float> kv(k.data(), tokens, Fmt::head_dim, k_stride);
  std::span<const Slot> sv(slots.data(), static_cast<std::size_t>(tokens));
  const ml::mutable_paged_cache<Fmt> mc(cache.data(), pages, page_kv, stride);
  switch (d) {
    case store_defect::slot_past_cache:
      slots[in.range(0, tokens - 1)] = static_cast<Slot>(
          in.one_in(2) ? capacity : static_cast<i64>(std::numeric_limits<Slot>::max()));
      break;
    case store_defect::misaligned_slots: {
      auto* p = raw.data() + in.range(1, sizeof(Slot) - 1);
      std::memcpy(p, slots.data(), static_cast<std::size_t>(tokens) * sizeof(Slot));
      sv = std::span<const Slot>(reinterpret_cast<const Slot*>(p), sv.size());
      break;
    }
    case store_defect::k_stride:
      if (quantised || tokens < 2)
        d = store_defect::none;
      else
        kv.stride = in.range(-Fmt::head_dim, Fmt::head_dim - 1);
      break;
    case store_defect::misaligned_k:
      kv.data = reinterpret_cast<const float*>(raw.data() + in.range(1, 3));
      break;
    case store_defect::k_over_cache:  // the rows to store are bytes of the cache itself
      kv.data = reinterpret_cast<const float*>(cache.data() + 4 * in.range(0, cache.n / 4 - 1));
      break;
    case store_defect::slots_over_cache:
      sv = std::span<const Slot>(
          reinterpret_cast<const Slot*>(cache.data() +
                                        sizeof(Slot) * in.range(0, cache.n / sizeof(Slot) - 1)),
          sv.size());
      break;
    case store_defect::slot_count:
      sv = std::span<const Slot>(slots.data(), static_cast<std::size_t>(tokens + 1));
      break;
    default:
      break;
  }
  const std::vector<std::uint8_t> before(cache.data(), cache.data() + cache.n);
  const std::string context = std::string("store_into_pages ") + (quantised ? "rows" : "k") +
                              " slots=" + std::to_string(sizeof(Slot) * 8) +
                              " tokens=" + std::to_string(tokens) +
                              " defect=" + std::to_string(static_cast<int>(d));
  const std::string err = run_case(context, [&] {
    if (quantised)
      ml::store_into_pages(rows.view(), sv, mc);
    else
      ml::store_into_pages(kv, sv, mc);
  });
  if (d != store_defect::none) {
    expect_error(err, where, context);
    if (!std::equal(before.begin(), before.end(), cache.data()))
      finding(context + ": a rejected store wrote the cache");
    return;
  }
  if (!err.empty()) finding(context + ": valid store rejected: " + err);
  // Expected: the old bytes, then each token's quantised bytes at its slot, in token order.
  std::vector<std::uint8_t> want = before;
  for (i64 t = 0; t < tokens; ++t) {
    const i64 slot = static_cast<i64>(slots[t]);
    if (slot < 0) continue;
    const i64 page = slot / page_kv, off = slot % page_kv;
    std::memcpy(want.data() + page * stride + off * Fmt::data_bytes, rows.view().row(t),
                Fmt::data_bytes);
    std::memcpy(
        want.data() + page * stride + i64{page_kv} * Fmt::data_bytes + off * Fmt::scale_bytes,
        rows.view().scale(t), Fmt::scale_bytes);
  }
  if (!std::equal(want.begin(), want.end(), cache.data()))
    finding(context + ": stored bytes differ from quantize_rows'");
}

// ---- quantize_rows_into ----

enum class quantize_defect {
  none,
  misaligned_x,
  x_over_data,
  data_over_scales,
  data_stride,
  count
};

void quantize(input& in, content& c) {
  using Fmt = ml::mxfp8;
  constexpr const char* where = "quantize_rows";
  const i64 rows = in.range(1, 8), x_stride = pick_stride(in, Fmt::head_dim, 8);
  const i64 ds = pick_stride(in, Fmt::data_bytes, 16), ss = pick_stride(in, Fmt::scale_bytes, 8);
  const auto d = pick_defect<quantize_defect>(in);
  guarded<float> x(matrix_extent(rows, Fmt::head_dim, x_stride) + rows * ds);
  for (i64 i = 0; i < x.n; ++i) x[i] = c.weight();
  guarded<std::uint8_t> data((rows - 1) * ds + Fmt::data_bytes + (rows - 1) * ss + 4);
  guarded<std::uint8_t> scales((rows - 1) * ss + Fmt::scale_bytes);
  guarded<std::uint8_t> raw(4 * x.n + 16);
  for (i64 i = 0; i < data.n; ++i) data[i] = 0xEE;
  for (i64 i = 0; i < scales.n; ++i) scales[i] = 0xEE;
  ml::matrix_view<const float> xv(x.data(), rows, Fmt::head_dim, x_stride);
  std::uint8_t* dp = data.data();
  std::uint8_t* sp = scales.data();
  i64 data_stride = ds;
  switch (d) {
    case quantize_defect::misaligned_x:
      xv.data = reinterpret_cast<const float*>(raw.data() + in.range(1, 3));
      break;
    case quantize_defect::x_over_data:  // the codes written over the source rows
      dp = reinterpret_cast<std::uint8_t*>(x.data()) +
           in.range(0, 4 * matrix_extent(rows, Fmt::head_dim, x_stride) - 1);
      break;
    case quantize_defect::data_over_scales:
      sp = data.data() + in.range(0, (rows - 1) * ds + Fmt::data_bytes - 1);
      break;
    case quantize_defect::data_stride:
      data_stride = in.range(-8, Fmt::data_bytes - 1);
      if (data_stride == 0) data_stride = -1;  // 0 means "packed"
      break;
    default:
      break;
  }
  const std::vector<float> x_before(x.data(), x.data() + x.n);
  const std::vector<std::uint8_t> d_before(data.data(), data.data() + data.n),
      s_before(scales.data(), scales.data() + scales.n);
  const std::string context = "quantize_rows_into rows=" + std::to_string(rows) +
                              " defect=" + std::to_string(static_cast<int>(d));
  const std::string err =
      run_case(context, [&] { ml::quantize_rows_into<Fmt>(xv, dp, sp, data_stride, ss); });
  if (d != quantize_defect::none) {
    expect_error(err, where, context);
    if (!std::equal(d_before.begin(), d_before.end(), data.data()) ||
        !std::equal(s_before.begin(), s_before.end(), scales.data()) ||
        std::memcmp(x_before.data(), x.data(), x_before.size() * sizeof(float)) != 0)
      finding(context + ": a rejected call wrote a byte");
    return;
  }
  if (!err.empty()) finding(context + ": valid input rejected: " + err);
  const auto want = ml::quantize_rows<Fmt>(xv);
  for (i64 r = 0; r < rows; ++r)
    if (std::memcmp(data.data() + r * ds, want.view().row(r), Fmt::data_bytes) != 0 ||
        std::memcmp(scales.data() + r * ss, want.view().scale(r), Fmt::scale_bytes) != 0)
      finding(context + ": row " + std::to_string(r) + " differs from quantize_rows");
}

// ---- fold_q_scales ----

enum class fold_defect {
  none,
  misaligned_scales,
  scales_over_weights,
  size,
  weights_stride,
  count
};

void fold(input& in, content& c) {
  constexpr const char* where = "fold_q_scales";
  const i64 rows = in.range(1, 6), H = in.range(1, 16), stride = pick_stride(in, H, 3);
  const auto d = pick_defect<fold_defect>(in);
  guarded<float> w(matrix_extent(rows, H, stride)), qs(rows * H);
  guarded<std::uint8_t> raw(4 * rows * H + 8);
  for (i64 i = 0; i < w.n; ++i) w[i] = c.weight();
  for (i64 i = 0; i < qs.n; ++i) qs[i] = c.weight();
  std::span<const float> sv(qs.data(), static_cast<std::size_t>(qs.n));
  ml::matrix_view<float> wv(w.data(), rows, H, stride);
  switch (d) {
    case fold_defect::misaligned_scales:
      sv = std::span<const float>(reinterpret_cast<const float*>(raw.data() + in.range(1, 3)),
                                  sv.size());
      break;
    case fold_defect::scales_over_weights:  // starting inside the weights they scale
      sv = std::span<const float>(w.data() + in.range(0, w.n - 1), sv.size());
      break;
    case fold_defect::size:
      sv = sv.first(sv.size() - 1);
      break;
    case fold_defect::weights_stride:
      if (rows < 2) return;
      wv.stride = in.range(-2, H - 1);
      break;
    default:
      break;
  }
  const std::vector<float> before(w.data(), w.data() + w.n);
  const std::string context = "fold_q_scales rows=" + std::to_string(rows) +
                              " H=" + std::to_string(H) +
                              " defect=" + std::to_string(static_cast<int>(d));
  const std::string err = run_case(context, [&] { ml::fold_q_scales(sv, wv); });
  if (d != fold_defect::none) {
    expect_error(err, where, context);
    if (std::memcmp(before.data(), w.data(), before.size() * sizeof(float)) != 0)
      finding(context + ": a rejected call wrote the weights");
    return;
  }
  if (!err.empty()) finding(context + ": valid input rejected: " + err);
  for (i64 r = 0; r < rows; ++r)
    for (i64 h = 0; h < H; ++h) {
      const float want = before[static_cast<std::size_t>(r * stride + h)] * qs[r * H + h];
      if (std::bit_cast<std::uint32_t>(w[r * stride + h]) != std::bit_cast<std::uint32_t>(want) &&
          !(std::isnan(want) && std::isnan(w[r * stride + h])))
        finding(context + ": weight differs");
    }
}

// ---- sizes: logits_row_stride, logits_buffer, aligned_page_stride ----

i64 edge_size(input& in) {
  switch (in.byte() % 8) {
    case 0:
      return std::numeric_limits<i64>::max() - in.range(0, 1024);
    case 1:
      return -in.range(1, 1024);
    case 2:
      return std::numeric_limits<i64>::min();
    case 3:
      return std::numeric_limits<i64>::max() / in.range(1, 4096);
    default:
      return in.range(0, 3000);
  }
}

void sizes(input& in) {
  const i64 rows = edge_size(in), cols = edge_size(in);
  const i64 align = in.one_in(3) ? edge_size(in) : i64{1} << in.range(0, 22);
  const std::string context = "sizes rows=" + std::to_string(rows) +
                              " cols=" + std::to_string(cols) + " align=" + std::to_string(align);
  // logits_row_stride<float>: cols >= 0, align a positive multiple of 4, no overflow.
  const i64 per = align / 4;
  const bool stride_ok = cols >= 0 && align >= 1 && align % 4 == 0 &&
                         (per <= 1 || cols <= std::numeric_limits<i64>::max() - (per - 1));
  i64 stride = -1;
  const std::string err =
      run_case(context, [&] { stride = ml::logits_row_stride<float>(cols, align); });
  if (stride_ok != err.empty()) finding(context + ": logits_row_stride: " + err);
  if (stride_ok &&
      (stride < cols || (per > 1 && stride % per != 0) || stride - cols >= std::max<i64>(per, 1)))
    finding(context + ": logits_row_stride returned " + std::to_string(stride));
  if (!stride_ok) expect_error(err, "logits_row_stride", context);
  // logits_buffer<float>: also a power-of-two alignment up to 2 MiB and a byte size in int64.
  // Only small valid buffers are allocated.
  const bool pow2 = align >= 1 && align <= (i64{1} << 21) && (align & (align - 1)) == 0;
  const i64 bstride =
      pow2 && cols >= 0 &&
              (align / 4 <= 1 || cols <= std::numeric_limits<i64>::max() - (align / 4 - 1))
          ? (align / 4 <= 1 ? cols : (cols + (align / 4 - 1)) / (align / 4) * (align / 4))
          : -1;
  i64 bytes = 0;
  const bool buffer_ok = rows >= 0 && cols >= 0 && pow2 && bstride >= 0 &&
                         !__builtin_mul_overflow(rows, bstride, &bytes) &&
                         !__builtin_mul_overflow(bytes, i64{4}, &bytes);
  if (!buffer_ok || bytes <= (i64{1} << 22)) {
    const std::string berr = run_case(context, [&] {
      ml::logits_buffer<float> b(rows, cols, align);
      if (b.stride() != bstride)
        finding(context + ": logits_buffer stride " + std::to_string(b.stride()));
      if (b.data() &&
          reinterpret_cast<std::uintptr_t>(b.data()) % static_cast<std::uintptr_t>(align))
        finding(context + ": logits_buffer misaligned");
      if (rows > 0 && cols > 0) b(rows - 1, cols - 1) = 1.0f;  // the last element exists
    });
    if (buffer_ok != berr.empty()) finding(context + ": logits_buffer: " + berr);
  }
  // aligned_page_stride<mxfp8>(page_kv, head dim, alignment).
  const i32 page_kv = static_cast<i32>(in.one_in(2) ? in.range(-2, 300) : in.int_near(1, 64));
  const int dim = static_cast<int>(in.pick({128, 64, 32, 96, 0, -128}));
  const std::string perr = run_case(context, [&] {
    (void)ml::aligned_page_stride<ml::mxfp8>(page_kv, ml::head_dim_t{dim}, align);
  });
  const bool page_ok = (dim == 128 || dim == 64 || dim == 32) && page_kv >= 1 && align >= 1;
  if (!page_ok) expect_error(perr, "aligned_page_stride", context);
}

// ---- quantize_q_mxfp4_scale_weights: any output over any input or another output ----

enum class q_defect {
  none,
  data_over_q,
  scales_over_q,
  data_over_weights,
  scales_over_weights,
  out_over_data,
  out_over_scales,
  out_over_q,
  out_inside_weights,
  data_over_scales,
  misaligned_out,
  count
};

void q_mxfp4(input& in, content& c) {
  constexpr const char* where = "quantize_q_mxfp4_scale_weights";
  const i64 T = in.range(0, 3), H = in.range(1, 4), d = in.one_in(2) ? 128 : 64, rows = T * H;
  auto def = pick_defect<q_defect>(in);
  if (rows == 0) def = q_defect::none;
  // One float arena: q, weights, codes (rows x d / 2 bytes), scale fields (4 bytes a row) and
  // weights_out, apart; a defect moves one region's start into another's.
  const i64 len[5] = {rows * d, rows, rows * d / 8, rows, rows};
  i64 at[5] = {0};
  for (int i = 1; i < 5; ++i) at[i] = at[i - 1] + len[i - 1];
  guarded<float> arena(at[4] + len[4] + 1);
  for (i64 i = 0; i < arena.n; ++i) arena[i] = c.weight();
  enum { Q, W, DATA, SCALES, OUT };
  auto move_into = [&](int region, int target) {
    const i64 start = at[target] + in.range(0, std::max<i64>(len[target] - 1, 0));
    at[region] = std::min(start, arena.n - len[region]);
  };
  bool misaligned = false;
  switch (def) {
    case q_defect::data_over_q:
      move_into(DATA, Q);
      break;
    case q_defect::scales_over_q:
      move_into(SCALES, Q);
      break;
    case q_defect::data_over_weights:
      move_into(DATA, W);
      break;
    case q_defect::scales_over_weights:
      move_into(SCALES, W);
      break;
    case q_defect::out_over_data:
      move_into(OUT, DATA);
      break;
    case q_defect::out_over_scales:
      move_into(OUT, SCALES);
      break;
    case q_defect::out_over_q:
      move_into(OUT, Q);
      break;
    case q_defect::out_inside_weights:
      at[OUT] = at[W] + (rows > 1 ? in.range(1, rows - 1) : 1);  // never the weights themselves
      break;
    case q_defect::data_over_scales:
      move_into(DATA, SCALES);
      break;
    case q_defect::misaligned_out:
      misaligned = true;
      break;
    default:
      break;
  }
  auto* bytes = reinterpret_cast<std::uint8_t*>(arena.data());
  float* out = arena.data() + at[OUT];
  if (misaligned)
    out = reinterpret_cast<float*>(reinterpret_cast<std::uint8_t*>(out) + in.range(1, 3));
  const std::vector<float> before(arena.data(), arena.data() + arena.n);
  const ml::matrix_view<const float> q(arena.data() + at[Q], rows, d);
  const ml::matrix_view<const float> w(arena.data() + at[W], T, H);
  const std::string context = "q_mxfp4 T=" + std::to_string(T) + " H=" + std::to_string(H) +
                              " d=" + std::to_string(d) +
                              " defect=" + std::to_string(static_cast<int>(def));
  // Expected, from the parts on copies: codes and scale bytes as quantize_rows_vllm_mxfp4
  // writes them (the field's unused bytes 0), weights as scale_weights computes them.
  std::vector<float> qcopy(before.begin() + at[Q], before.begin() + at[Q] + rows * d);
  std::vector<std::uint8_t> want_data(static_cast<std::size_t>(rows * d / 2)),
      want_scales(static_cast<std::size_t>(rows * 4), 0);
  std::vector<float> want_w(static_cast<std::size_t>(rows));
  if (def == q_defect::none && rows > 0) {
    ml::quantize_rows_vllm_mxfp4(ml::matrix_view<const float>(qcopy.data(), rows, d),
                                 want_data.data(), want_scales.data(), 0, 4);
    std::vector<float> wcopy(before.begin() + at[W], before.begin() + at[W] + rows);
    ml::scale_weights(ml::matrix_view<const float>(wcopy.data(), T, H),
                      ml::matrix_view<float>(want_w.data(), T, H), 0.5f, 0.125f);
  }
  const std::string err = run_case(context, [&] {
    ml::quantize_q_mxfp4_scale_weights(q, w, bytes + 4 * at[DATA], 0, bytes + 4 * at[SCALES], 4,
                                       ml::matrix_view<float>(out, T, H), 0.5f, 0.125f);
  });
  if (def != q_defect::none) {
    expect_error(err, where, context);
    if (std::memcmp(before.data(), arena.data(), before.size() * sizeof(float)) != 0)
      finding(context + ": a refused call wrote");
    return;
  }
  if (!err.empty()) finding(context + ": valid call rejected: " + err);
  if (rows == 0) return;
  if (std::memcmp(want_data.data(), bytes + 4 * at[DATA], want_data.size()) != 0 ||
      std::memcmp(want_scales.data(), bytes + 4 * at[SCALES], want_scales.size()) != 0 ||
      std::memcmp(want_w.data(), out, want_w.size() * sizeof(float)) != 0)
    finding(context + ": wrong codes, scales or weights");
}

// ---- metadata functions: misaligned, short, aliasing arrays ----

void metadata(input& in) {
  const i64 rows = in.range(0, 6), cap = in.range(1, 6), cols = in.range(1, 4);
  const bool misaligned = in.one_in(4), short_table = in.one_in(5);
  guarded<std::uint8_t> raw(4 * (rows * cap + rows * cols + 2 * rows + 8) + 8);
  const i64 shift = misaligned ? in.range(1, 3) : 0;
  auto* ints = reinterpret_cast<i32*>(raw.data() + shift);
  const i64 n = (raw.n - shift) / 4;
  for (i64 i = 0; i < n; ++i) {
    const i32 v = in.int_near(-2, 70);
    std::memcpy(reinterpret_cast<std::uint8_t*>(ints + i), &v, 4);
  }
  // Every array is a window of one buffer: they may overlap (the functions only read them).
  auto at = [&](i64 len) { return ints + in.range(0, std::max<i64>(n - len, 0)); };
  const std::span<const i32> lens(at(rows), static_cast<std::size_t>(rows));
  const std::span<const i32> ke(at(rows), static_cast<std::size_t>(rows));
  const ml::matrix_view<const i32> idx(at(rows * cap), rows, cap);
  const i64 table_rows = short_table && rows > 0 ? rows - 1 : rows;
  const ml::matrix_view<const i32> table(at(table_rows * cols), table_rows, cols);
  const std::span<const i32> req(at(rows), in.one_in(2) ? static_cast<std::size_t>(rows) : 0);
  const std::string context = "metadata rows=" + std::to_string(rows) +
                              " misaligned=" + std::to_string(misaligned) +
                              " short_table=" + std::to_string(short_table);
  const bool aligned = !misaligned || rows == 0;
  const std::string e1 = run_case(context, [&] {
    (void)ml::get_sparse_mqa_logits_metadata(lens, ke, in.range(-1, 80), idx,
                                             in.one_in(2) ? 8 : in.range(-1, 17));
  });
  if (!aligned && rows > 0) expect_error(e1, "get_sparse_mqa_logits_metadata", context);
  const std::string e2 = run_case(context, [&] {
    (void)ml::get_paged_sparse_mqa_logits_metadata(lens, table, req, in.one_in(2) ? 64 : 16, idx,
                                                   in.one_in(2) ? 16 : 8);
  });
  if ((!aligned || short_table) && rows > 0)
    expect_error(e2, "get_paged_sparse_mqa_logits_metadata", context);
  const ml::matrix_view<const i32> lens2(lens.data(), rows, 1);
  const std::string e3 = run_case(context, [&] {
    (void)ml::get_paged_mqa_logits_metadata(lens2, in.one_in(2) ? 64 : 32,
                                            static_cast<int>(in.range(0, 5)));
  });
  if (!aligned && rows > 0) expect_error(e3, "get_paged_mqa_logits_metadata", context);
  // The array form into a window of the same buffer: refused when it shares a byte with the
  // lengths, written (and nothing else) when it does not.
  if (!aligned || rows == 0) return;
  const int workers = static_cast<int>(in.range(1, 4));
  const i64 out_rows = ml::paged_mqa_schedule_array_rows(workers);
  if (2 * out_rows > n) return;
  i32* out = ints + in.range(0, n - 2 * out_rows);
  const auto b = reinterpret_cast<std::uintptr_t>(out),
             e = b + 8 * static_cast<std::uintptr_t>(out_rows);
  const auto lb = reinterpret_cast<std::uintptr_t>(lens.data()),
             le = lb + 4 * static_cast<std::uintptr_t>(rows);
  const bool overlaps = b < le && lb < e;
  const std::vector<std::uint8_t> before(raw.data(), raw.data() + raw.n);
  const std::string e4 = run_case(context, [&] {
    ml::get_paged_mqa_logits_metadata(lens2, 64, workers,
                                      ml::matrix_view<std::int32_t>(out, out_rows, 2));
  });
  if (overlaps) {
    expect_error(e4, "get_paged_mqa_logits_metadata", context);
    if (!std::equal(before.begin(), before.end(), raw.data()))
      finding(context + ": a refused metadata array was written");
  }
  if (!e4.empty() && !std::equal(before.begin(), before.end(), raw.data()))
    finding(context + ": a refused metadata array was written");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  const std::uint8_t which = in.byte();
  fuzz::content c(in);
  switch (which % 8) {
    case 0:
      store<std::int64_t>(in, c);
      break;
    case 1:
      store<std::int32_t>(in, c);
      break;
    case 2:
      quantize(in, c);
      break;
    case 3:
      fold(in, c);
      break;
    case 4:
      sizes(in);
      break;
    case 7:
      q_mxfp4(in, c);
      break;
    default:
      metadata(in);
  }
  return 0;
}
