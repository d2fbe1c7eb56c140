// Fuzzes the fused top-k output (ml::topk) and the candidate blocks (ml::candidate_blocks, alone
// and beside a top-k) on fp8_fp4_mqa_logits (MXFP8, fp32 weights): rows,
// keys, ks / ke, k (1 to more than a row's columns), index and value strides, values or not, and
// the executor (serial, a pool, or one that breaks the contract on the scoring pass or on the
// padding pass) from the input; plus at most one deliberate defect: indices or values that
// overlap each other, the weights, ks / ke or Q, that sit misaligned, or have a wrong shape.
//
// Valid input: the selection equals a stable descending sort of the same kernel's fp32 logits
// (NaN first, ties to the lower column, -1 / -inf padding), bit for bit. A defect: an
// mqalogits::error naming the function, nothing written. A broken executor: an error naming the
// executor (the output is then unspecified, but nothing outside it is written: ASan).
#include "fuzz_common.hpp"

namespace {

using namespace fuzz;
using F = ml::mxfp8;

enum class defect {
  none,
  indices_over_values,
  indices_over_weights,
  values_over_ke,
  indices_over_q_scales,
  misaligned_indices,
  misaligned_values,
  values_shape,
  k_zero,
  broken_executor,
  count
};

// Correct on every parallel_for of a call but the `faulty`-th, where it skips the last index,
// passes -1 (outside [0, n)) or runs index 0 twice instead of the last.
// `broke`: whether it did (the call may run fewer passes, and with n = 1 "index 0 twice instead
// of the last" is a correct run).
struct faulty_executor {
  int faulty = -1, how = 0, calls = 0;
  bool broke = false;
  void parallel_for(i64 n, ml::task_ref task) {
    const bool bad = calls++ == faulty && n >= 1 && (how != 2 || n >= 2);
    broke = broke || bad;
    for (i64 i = 0; i < n; ++i) {
      if (bad && i == n - 1) {
        if (how == 1) task(-1);
        if (how == 2) task(0);
        continue;
      }
      task(i);
    }
  }
  int concurrency() const { return 1; }
};

bool ranks_above(float a, float b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// The candidate blocks of the same call, alone and beside a top-k (the inputs' last bytes pick B,
// N, the order, the padding and whether B is a bad one): each row's blocks of request-local
// positions (token - ks) by block max, NaN propagating, the newest pinned, ties to the lower
// id, -inf dropped; or, for a bad B, a named error and nothing written.
template <class Call>
void check_candidates(input& in, const std::string& context, const std::vector<float>& logits,
                      i64 rows, i64 width, i64 cols, std::span<const i32> ks, Call&& call) {
  constexpr std::uint32_t sentinel = 0xFFA5A5A5u;
  const bool bad_block = in.one_in(8);
  const i64 B = bad_block ? in.range(0, 2) * 3 : i64{1} << in.range(0, 5);
  const i64 n = in.range(1, 40);
  const auto order = in.one_in(2) ? ml::candidate_order::score : ml::candidate_order::ascending;
  const auto pad =
      in.one_in(2) ? ml::candidate_padding::repeat_last : ml::candidate_padding::minus_one;
  const bool with_topk = in.one_in(2);
  const std::string where = context + " candidates B=" + std::to_string(B) +
                            " N=" + std::to_string(n) + " topk=" + std::to_string(with_topk);
  guarded<i32> blocks(rows * n), top(rows * 3);
  for (i64 i = 0; i < blocks.n; ++i) blocks[i] = 0x5A5A5A5A;
  const ml::matrix_view<i32> bv(blocks.data(), rows, n);
  const auto cand = ml::candidate_blocks(bv, B, order, pad);
  const std::string err = outcome(
      [&] {
        if (with_topk)
          call(ml::topk_and_candidates(ml::topk(ml::matrix_view<i32>(top.data(), rows, 3)), cand));
        else
          call(cand);
      },
      where);
  if (bad_block) {
    if (err.rfind("fp8_fp4_mqa_logits", 0) != 0) finding(where + ": bad block size accepted");
    for (i64 i = 0; i < blocks.n; ++i)
      if (blocks[i] != 0x5A5A5A5A) finding(where + ": a rejected call wrote the blocks");
    return;
  }
  if (!err.empty()) finding(where + ": valid input was rejected: " + err);
  for (i64 r = 0; r < rows; ++r) {
    // Column -> request-local position: token - ks (full width: column = token).
    const i64 first = cols == 0 ? 0 : ks[static_cast<std::size_t>(r)];
    std::vector<std::pair<i64, float>> best;  // (block, max), by block
    for (i64 c = 0; c < width; ++c) {
      const float v = logits[static_cast<std::size_t>(r * width + c)];
      if (std::bit_cast<std::uint32_t>(v) == sentinel) continue;
      const i64 b = (first + c - ks[static_cast<std::size_t>(r)]) / B;
      if (best.empty() || best.back().first != b)
        best.emplace_back(b, -std::numeric_limits<float>::infinity());
      float& m = best.back().second;
      m = std::isnan(m) || std::isnan(v) ? std::numeric_limits<float>::quiet_NaN() : std::max(m, v);
    }
    if (!best.empty()) best.back().second = std::numeric_limits<float>::infinity();
    std::stable_sort(best.begin(), best.end(),
                     [](const auto& a, const auto& b) { return ranks_above(a.second, b.second); });
    std::vector<i32> want;
    for (std::size_t i = 0; i < best.size() && static_cast<i64>(i) < n; ++i)
      if (best[i].second != -std::numeric_limits<float>::infinity())
        want.push_back(static_cast<i32>(best[i].first));
    if (order == ml::candidate_order::ascending) std::sort(want.begin(), want.end());
    want.resize(static_cast<std::size_t>(n),
                pad == ml::candidate_padding::repeat_last && !want.empty() ? want.back() : -1);
    for (i64 i = 0; i < n; ++i)
      if (bv(r, i) != want[static_cast<std::size_t>(i)])
        finding(where + ": row " + std::to_string(r) + " entry " + std::to_string(i) + ": got " +
                std::to_string(bv(r, i)) + ", expected " +
                std::to_string(want[static_cast<std::size_t>(i)]));
  }
}

void run(input& in) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  const i64 rows = in.range(1, 9), N = in.range(1, 600), H = in.range(1, 6);
  const i64 cols = in.one_in(3) ? 0 : in.range(1, 640);  // 0: full width
  const i64 width = cols == 0 ? N : cols;
  i64 k = in.one_in(4) ? in.range(1, width + 8) : in.range(1, 24);
  const i64 ki_stride = pick_stride(in, k, 4), kv_stride = pick_stride(in, k, 4);
  const bool with_values = !in.one_in(3);
  defect d = pick_defect<defect>(in);
  if (d == defect::values_over_ke || d == defect::misaligned_values || d == defect::values_shape ||
      d == defect::indices_over_values)
    if (!with_values) d = defect::none;

  guarded<i32> ks(rows), ke(rows + (d == defect::values_over_ke ? rows * kv_stride + 1 : 0));
  for (i64 r = 0; r < rows; ++r) {
    ks[r] = static_cast<i32>(in.range(-4, N));
    ke[r] = static_cast<i32>(in.one_in(8) ? in.range(-4, N + 4) : ks[r] + in.range(0, N + 4));
  }
  content c(in);
  const rows_buf<F> q(c, rows * H), kv(c, N);
  // Weights with room after them, so indices can start inside them.
  guarded<float> w(rows * H + rows * ki_stride + 1);
  for (i64 i = 0; i < rows * H; ++i) w[i] = c.weight();
  const ml::matrix_view<const float> wv(w.data(), rows, H);

  // The selection's buffers: exact size unless a defect carves a view out of another buffer.
  guarded<i32> idx(rows * ki_stride + (d == defect::indices_over_values ? rows * kv_stride : 0));
  guarded<float> val(with_values ? rows * kv_stride : 0);
  guarded<std::uint8_t> raw(rows * (ki_stride + kv_stride + H) * 4 + 16);
  for (i64 i = 0; i < idx.n; ++i) idx[i] = 0x5A5A5A5A;
  for (i64 i = 0; i < val.n; ++i) val[i] = std::bit_cast<float>(0x7FA5A5A5u);
  ml::matrix_view<std::int32_t> iv(idx.data(), rows, k, ki_stride);
  ml::matrix_view<float> vv = with_values ? ml::matrix_view<float>(val.data(), rows, k, kv_stride)
                                          : ml::matrix_view<float>();
  auto qv = q.view();
  switch (d) {
    case defect::indices_over_values:  // values start inside the indices' written rows (not in
                                       // the last row's padding, past the last index written)
      vv.data = reinterpret_cast<float*>(idx.data() + in.range(0, (rows - 1) * ki_stride + k - 1));
      break;
    case defect::indices_over_weights:
      iv.data = reinterpret_cast<std::int32_t*>(w.data() + in.range(0, rows * H - 1));
      break;
    case defect::values_over_ke:
      vv.data = reinterpret_cast<float*>(ke.data() + in.range(0, rows - 1));
      break;
    case defect::indices_over_q_scales: {
      // Q's scales as a copy inside the indices' buffer (4-byte aligned).
      const i64 at = in.range(0, rows * ki_stride - 1);
      std::memcpy(raw.data(), qv.scales, static_cast<std::size_t>(q.scales.n));
      qv.scales = raw.data();
      iv.data = reinterpret_cast<std::int32_t*>(raw.data()) + at % (q.scales.n / 4);
      break;
    }
    case defect::misaligned_indices:
      iv.data = reinterpret_cast<std::int32_t*>(raw.data() + in.range(1, 3));
      break;
    case defect::misaligned_values:
      vv.data = reinterpret_cast<float*>(raw.data() + in.range(1, 3));
      break;
    case defect::values_shape:
      vv.cols = k + (in.one_in(2) ? 1 : -1);
      if (vv.cols < 1) vv.cols = k + 1;
      break;
    case defect::k_zero:
      iv.cols = 0;
      break;
    default:
      break;
  }
  faulty_executor bad{.faulty = static_cast<int>(in.range(0, 1)),
                      .how = static_cast<int>(in.range(0, 2))};
  faulty_executor good;
  ml::options opt;
  opt.truncate_long_contexts = true;  // rows past N or past cols: clamped, as the two-pass result
  if (d == defect::broken_executor)
    opt.executor = bad;
  else if (in.one_in(2))
    opt.executor = shared_pool();
  else if (in.one_in(2))
    opt.executor = good;

  const std::string context = "topk: rows=" + std::to_string(rows) + " N=" + std::to_string(N) +
                              " H=" + std::to_string(H) + " cols=" + std::to_string(cols) +
                              " k=" + std::to_string(k) + " values=" + std::to_string(with_values) +
                              " defect=" + std::to_string(static_cast<int>(d));
  const std::vector<i32> idx_before(idx.data(), idx.data() + idx.n);
  const std::vector<float> val_before(val.data(), val.data() + val.n);
  const std::span<const i32> ks_span(ks.data(), static_cast<std::size_t>(rows));
  const std::span<const i32> ke_span(ke.data(), static_cast<std::size_t>(rows));
  const std::string err = outcome(
      [&] {
        ml::fp8_fp4_mqa_logits(qv, kv.view(), wv, ks_span, ke_span, cols,
                               with_values ? ml::topk(iv, vv) : ml::topk(iv), opt);
      },
      context);
  if (d == defect::broken_executor) {
    if (bad.broke && err.rfind("executor", 0) != 0)
      finding(context + ": broken executor not reported: " + err);
    if (!bad.broke && !err.empty()) finding(context + ": a correct run was rejected: " + err);
    return;
  }
  if (d != defect::none) {
    if (err.rfind(where, 0) != 0)
      finding(context + ": defect not rejected by " + where + ": " + err);
    if (!std::equal(idx_before.begin(), idx_before.end(), idx.data()) ||
        (!val_before.empty() &&
         std::memcmp(val_before.data(), val.data(), val_before.size() * sizeof(float)) != 0))
      finding(context + ": a rejected call wrote the selection (" + err + ")");
    return;
  }
  if (!err.empty()) finding(context + ": valid input was rejected: " + err);

  // The two-pass result: the kernel's fp32 logits (sentinel where it wrote nothing: the masked
  // columns with clean_logits off), each row stable-sorted.
  constexpr std::uint32_t sentinel = 0xFFA5A5A5u;
  std::vector<float> logits(static_cast<std::size_t>(rows * width), std::bit_cast<float>(sentinel));
  ml::fp8_fp4_mqa_logits(qv, kv.view(), wv, ks_span, ke_span, cols,
                         ml::matrix_view<float>(logits.data(), rows, width),
                         ml::options{.clean_logits = false, .truncate_long_contexts = true});
  for (i64 r = 0; r < rows; ++r) {
    std::vector<std::pair<float, i32>> row;
    for (i64 col = 0; col < width; ++col) {
      const float v = logits[static_cast<std::size_t>(r * width + col)];
      if (std::bit_cast<std::uint32_t>(v) != sentinel) row.emplace_back(v, static_cast<i32>(col));
    }
    std::stable_sort(row.begin(), row.end(),
                     [](const auto& a, const auto& b) { return ranks_above(a.first, b.first); });
    for (i64 i = 0; i < k; ++i) {
      const bool pad = i >= static_cast<i64>(row.size());
      const i32 want_i = pad ? -1 : row[static_cast<std::size_t>(i)].second;
      const float want_v =
          pad ? -std::numeric_limits<float>::infinity() : row[static_cast<std::size_t>(i)].first;
      if (iv(r, i) != want_i || (with_values && !same_bits(vv(r, i), want_v)))
        finding(context + ": row " + std::to_string(r) + " rank " + std::to_string(i) + ": got " +
                std::to_string(iv(r, i)) + ", expected " + std::to_string(want_i));
    }
    // Stride padding between rows is never written.
    for (i64 i = k; r + 1 < rows && i < ki_stride; ++i)
      if (iv.data[r * ki_stride + i] != 0x5A5A5A5A) finding(context + ": index padding written");
  }
  check_candidates(in, context, logits, rows, width, cols, ks_span, [&](auto out) {
    ml::fp8_fp4_mqa_logits(qv, kv.view(), wv, ks_span, ke_span, cols, out, opt);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  run(in);
  return 0;
}
