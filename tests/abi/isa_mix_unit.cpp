// One unit of the instruction-set mix test, compiled three times into one program (baseline,
// -mavx2 -mfma, -march=native) at -O2, as engines ship: each copy runs every kernel (dense,
// paged, sparse, paged-sparse) on MXFP8, MXFP4 and FP8 per-token rows, to logits and to the fused
// top-k, on the host backend and on the NeuronCore model, with the quantizers, the metadata
// functions, the model's top-k and report, and one refused call, and checks the results against
// a scalar reference computed here. If the linker kept one unit's copy of any symbol for another
// unit, a unit would run code for the wrong instruction set: a wrong path name, or SIGILL on a
// CPU without it (the CI runs the program under qemu-x86_64 -cpu Nehalem and -cpu Haswell).
//
// This file's own code has internal linkage and uses no std:: template with a name of its own
// (no std::vector, std::string, std::sort...): those would be instantiated by each unit under
// one name, and the test would test itself.
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

#include <mqalogits/neuron.hpp>

#include "isa_mix.hpp"

#if !defined(ISA_MIX_ENTRY) || !defined(ISA_MIX_EXPECT)
#error "define ISA_MIX_ENTRY (the entry's name) and ISA_MIX_EXPECT (its ISA tag, e.g. \"avx2\")"
#endif
#define ISA_MIX_STR_(x) #x
#define ISA_MIX_STR(x) ISA_MIX_STR_(x)

namespace ml = mqalogits;

namespace {

constexpr std::int64_t num_q = 4, heads = 8, dim = 128, num_kv = 256;
constexpr std::int64_t page_kv = 64, pages = num_kv / page_kv;
constexpr std::int64_t sparse_b = 16, cap = 6, top = 8;
using trn2 = ml::backend::neuron<ml::backend::trn2>;

// A value-initialised heap array (not std::vector: see above).
template <class T>
class array {
 public:
  explicit array(std::int64_t n) : p_(new T[static_cast<std::size_t>(n)]()), n_(n) {}
  ~array() { delete[] p_; }
  array(const array&) = delete;
  array& operator=(const array&) = delete;
  T* data() { return p_; }
  const T* data() const { return p_; }
  T& operator[](std::int64_t i) { return p_[i]; }
  const T& operator[](std::int64_t i) const { return p_[i]; }
  std::span<const T> span() const { return {p_, static_cast<std::size_t>(n_)}; }

 private:
  T* p_;
  std::int64_t n_;
};

class recorder {
 public:
  explicit recorder(isa_mix_result& r) : r_(r) {}
  // Counts one check; records its failure (the first few in detail).
  bool check(bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    ++r_.checks;
    if (ok) return true;
    if (++r_.failures <= 8) {
      const std::size_t used = std::strlen(r_.detail);
      std::va_list args;
      va_start(args, fmt);
      std::vsnprintf(r_.detail + used, sizeof r_.detail - used, fmt, args);
      va_end(args);
      const std::size_t now = std::strlen(r_.detail);
      std::snprintf(r_.detail + now, sizeof r_.detail - now, "; ");
    }
    return false;
  }

 private:
  isa_mix_result& r_;
};

// Deterministic inputs (an LCG: std::mt19937 would be a shared name too).
struct lcg {
  std::uint64_t s;
  float next() {  // uniform in [-1, 1)
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<std::int32_t>(s >> 32)) * 0x1p-31f;
  }
};

// What every format shares: the fp32 rows, weights, lengths, block table and selections.
struct problem {
  array<float> qf{num_q * heads * dim}, kf{num_kv * dim}, w{num_q * heads};
  array<std::int32_t> ks{num_q}, ke{num_q}, lens{num_q}, table{num_q * pages}, slots{num_kv},
      idx{num_q * cap};
  static constexpr std::int32_t page_of_block[pages] = {2, 0, 3, 1};

  problem() {
    lcg g{7};
    for (std::int64_t i = 0; i < num_q * heads * dim; ++i) qf[i] = g.next();
    for (std::int64_t i = 0; i < num_kv * dim; ++i) kf[i] = g.next();
    for (std::int64_t i = 0; i < num_q * heads; ++i) w[i] = g.next();
    const std::int32_t s[num_q] = {0, 5, 17, 100}, e[num_q] = {256, 40, 200, 101},
                       l[num_q] = {256, 100, 177, 64};
    const std::int32_t picks[num_q][cap] = {
        {15, 0, 7, -1, 3, 9}, {1, 2, -1, 0, 5, 6}, {4, 11, 8, 2, 10, 1}, {6, 3, 4, 5, 0, 2}};
    for (std::int64_t r = 0; r < num_q; ++r) {
      ks[r] = s[r];
      ke[r] = e[r];
      lens[r] = l[r];
      for (std::int64_t b = 0; b < pages; ++b) table[r * pages + b] = page_of_block[b];
      for (std::int64_t b = 0; b < cap; ++b) idx[r * cap + b] = picks[r][b];
    }
    for (std::int64_t t = 0; t < num_kv; ++t)
      slots[t] = static_cast<std::int32_t>(page_of_block[t / page_kv] * page_kv + t % page_kv);
  }
  ml::matrix_view<const float> weights() const { return {w.data(), num_q, heads}; }
  ml::matrix_view<const std::int32_t> lens_matrix() const { return {lens.data(), num_q, 1}; }
  ml::matrix_view<const std::int32_t> table_view() const { return {table.data(), num_q, pages}; }
  ml::matrix_view<const std::int32_t> idx_view() const { return {idx.data(), num_q, cap}; }

  // The token each kernel's column (r, c) reads, or -1 where the column is masked (the contract
  // of tests/reference/reference.hpp).
  std::int64_t dense_token(std::int64_t r, std::int64_t c) const {
    return ks[r] <= c && c < ke[r] && c < num_kv ? c : -1;
  }
  std::int64_t paged_token(std::int64_t r, std::int64_t c) const { return c < lens[r] ? c : -1; }
  std::int64_t sparse_token(std::int64_t r, std::int64_t c) const {
    const std::int64_t s = ks[r], e = ke[r] < num_kv ? ke[r] : num_kv;
    std::int64_t nb = e > s ? (e + sparse_b - 1) / sparse_b - s / sparse_b : 0;
    nb = nb < cap ? nb : cap;
    const std::int64_t blk = c / sparse_b;
    if (blk >= nb || idx[r * cap + blk] < 0) return -1;
    const std::int64_t t = idx[r * cap + blk] * sparse_b + c % sparse_b;
    return s <= t && t < e ? t : -1;
  }
  std::int64_t paged_sparse_token(std::int64_t r, std::int64_t c) const {
    std::int64_t nb = (lens[r] + sparse_b - 1) / sparse_b;
    nb = nb < cap ? nb : cap;
    const std::int64_t blk = c / sparse_b;
    if (blk >= nb || idx[r * cap + blk] < 0) return -1;
    const std::int64_t p = idx[r * cap + blk] * sparse_b + c % sparse_b;
    return p < lens[r] && p < num_kv ? p : -1;
  }
  std::int64_t slot_of(std::int64_t r, std::int64_t pos) const {
    return table[r * pages + pos / page_kv] * page_kv + pos % page_kv;
  }
};

// logit[r, t] = sum_h relu(dot(Q[r, h], K[t])) w[r, h] in double from the decoded rows, and the
// accuracy bound's M = sum_h |w| sum_i |q k|.
struct reference {
  array<double> exact{num_q * num_kv}, mag{num_q * num_kv};

  template <class Format>
  reference(const ml::rows_view<Format>& q, const ml::rows_view<Format>& kv, const problem& p) {
    float qd[dim], kd[dim];
    for (std::int64_t t = 0; t < num_kv; ++t) {
      Format::decode_row(kv.row(t), kv.scale(t), kd);
      for (std::int64_t r = 0; r < num_q; ++r) {
        double e = 0, m = 0;
        for (std::int64_t h = 0; h < heads; ++h) {
          Format::decode_row(q.row(r * heads + h), q.scale(r * heads + h), qd);
          double dot = 0, abs_dot = 0;
          for (std::int64_t i = 0; i < dim; ++i) {
            dot += double{qd[i]} * kd[i];
            abs_dot += std::fabs(double{qd[i]} * kd[i]);
          }
          e += (dot > 0 ? dot : 0.0) * p.w[r * heads + h];
          m += std::fabs(double{p.w[r * heads + h]}) * abs_dot;
        }
        exact[r * num_kv + t] = e;
        mag[r * num_kv + t] = m;
      }
    }
  }
};

// Every column of a logits output against the reference: within the accuracy bound where the
// column reads a token, exactly -inf where it is masked.
template <class TokenOf>
void check_logits(recorder& rec, const char* what, const char* format, const reference& ref,
                  const ml::logits_buffer<float>& out, TokenOf&& token_of) {
  bool ok = true;
  for (std::int64_t r = 0; r < out.rows() && ok; ++r)
    for (std::int64_t c = 0; c < out.cols() && ok; ++c) {
      const double got = out(r, c);
      const std::int64_t t = token_of(r, c);
      if (t < 0) {
        ok = rec.check(std::isinf(got) && got < 0, "%s %s [%lld][%lld] = %g, expected -inf", format,
                       what, static_cast<long long>(r), static_cast<long long>(c), got);
        continue;
      }
      const double e = ref.exact[r * num_kv + t], m = ref.mag[r * num_kv + t];
      ok = rec.check(std::fabs(got - e) <= std::ldexp(std::fabs(e), -7) + std::ldexp(m, -14),
                     "%s %s [%lld][%lld] = %g, exact %g", format, what, static_cast<long long>(r),
                     static_cast<long long>(c), got, e);
    }
}

// A fused top-k output against the same kernel's logits: the `top` best valid columns of each
// row in descending order (ties to the lower column), -1 / -inf padding, values bitwise the
// logits; `slot_of` turns a column into what the output holds (the column, or a cache slot).
template <class SlotOf>
void check_topk(recorder& rec, const char* what, const char* format,
                const ml::logits_buffer<float>& logits, const array<std::int32_t>& indices,
                const array<float>& values, SlotOf&& slot_of) {
  bool ok = true;
  for (std::int64_t r = 0; r < logits.rows() && ok; ++r) {
    std::int64_t prev = -1;  // the column ranked just above, or -1 at the first
    for (std::int64_t j = 0; j < top && ok; ++j) {
      // The best valid column ranked below prev (a selection sort of the row, one pick per j).
      std::int64_t best = -1;
      for (std::int64_t c = 0; c < logits.cols(); ++c) {
        const float v = logits(r, c);
        if (std::isinf(v) && v < 0) continue;
        if (prev >= 0) {
          const float pv = logits(r, prev);
          if (v > pv || (v == pv && c <= prev)) continue;
        }
        if (best < 0 || v > logits(r, best)) best = c;
      }
      const std::int32_t got = indices[r * top + j];
      const std::int64_t want = best < 0 ? -1 : slot_of(r, best);
      ok = rec.check(got == want, "%s %s top-k [%lld][%lld] = %d, expected %lld", format, what,
                     static_cast<long long>(r), static_cast<long long>(j), got,
                     static_cast<long long>(want));
      const float wv = best < 0 ? -std::numeric_limits<float>::infinity() : logits(r, best);
      ok = ok && rec.check(std::memcmp(&values[r * top + j], &wv, sizeof wv) == 0,
                           "%s %s top-k value [%lld][%lld] = %g, logits %g", format, what,
                           static_cast<long long>(r), static_cast<long long>(j),
                           double{values[r * top + j]}, double{wv});
      if (best < 0) {  // the rest of the row is padding
        for (std::int64_t k = j + 1; k < top && ok; ++k)
          ok = rec.check(indices[r * top + k] == -1, "%s %s top-k [%lld][%lld] = %d, expected -1",
                         format, what, static_cast<long long>(r), static_cast<long long>(k),
                         indices[r * top + k]);
        break;
      }
      prev = best;
    }
  }
}

template <class Format>
void run_format(recorder& rec, const problem& p, ml::thread_pool& pool) {
  const char* name = Format::name;
  // The NeuronCore model's kernels for one format (the model's compile time is a third of this
  // file's; its code and the standard templates it uses are the same for every format).
  constexpr bool with_model = std::is_same_v<Format, ml::mxfp8>;
  const ml::options opt{.executor = pool};
  const ml::options neuron_opt{};

  // Quantizers: Q and K rows, and the paged cache filled from the fp32 rows through the slots.
  const auto q =
      ml::quantize_rows<Format>(ml::matrix_view<const float>(p.qf.data(), num_q * heads, dim));
  const auto kv = ml::quantize_rows<Format>(p.kf.span());
  const std::int64_t page_bytes = ml::page_bytes<Format>(static_cast<std::int32_t>(page_kv));
  array<std::uint8_t> cache_bytes(pages * page_bytes);
  const ml::mutable_paged_cache<Format> cache_out(cache_bytes.data(), pages,
                                                  static_cast<std::int32_t>(page_kv));
  ml::store_into_pages(ml::matrix_view<const float>(p.kf.data(), num_kv, dim), p.slots.span(),
                       cache_out);
  const ml::paged_cache_view<Format> cache = cache_out.view();
  const reference ref(q.view(), kv.view(), p);

  // FP8 per-token Q goes in without its scales, folded into the weights (as engines do).
  array<float> wq(num_q * heads);
  for (std::int64_t i = 0; i < num_q * heads; ++i) wq[i] = p.w[i];
  ml::rows_view<Format> qv = q.view();
  if constexpr (std::is_same_v<Format, ml::fp8_per_token>) {
    const auto s = ml::token_scales(q);
    ml::fold_q_scales(std::span<const float>(s.data(), s.size()),
                      ml::matrix_view<float>(wq.data(), num_q, heads));
    qv = q.unscaled_view();
  }
  const ml::matrix_view<const float> w(wq.data(), num_q, heads);

  // Metadata.
  const auto schedule =
      ml::get_paged_mqa_logits_metadata(p.lens_matrix(), static_cast<std::int32_t>(page_kv), 3);
  const auto sparse_meta =
      ml::get_sparse_mqa_logits_metadata(p.ks.span(), p.ke.span(), num_kv, p.idx_view(), sparse_b);
  const auto reread = ml::get_paged_sparse_mqa_logits_metadata(
      p.lens.span(), p.table_view(), static_cast<std::int32_t>(page_kv), p.idx_view(), sparse_b);
  const auto snapshot = ml::get_paged_sparse_mqa_logits_metadata(
      p.lens.span(), p.table_view(), static_cast<std::int32_t>(page_kv), p.idx_view(), sparse_b,
      ml::paged_sparse_protocol::snapshot);

  const auto dense_token = [&](std::int64_t r, std::int64_t c) { return p.dense_token(r, c); };
  const auto paged_token = [&](std::int64_t r, std::int64_t c) { return p.paged_token(r, c); };
  const auto sparse_token = [&](std::int64_t r, std::int64_t c) { return p.sparse_token(r, c); };
  const auto ps_token = [&](std::int64_t r, std::int64_t c) { return p.paged_sparse_token(r, c); };
  const auto column = [](std::int64_t, std::int64_t c) { return c; };
  const auto slot = [&](std::int64_t r, std::int64_t c) { return p.slot_of(r, c); };

  array<std::int32_t> ti(num_q * top);
  array<float> tv(num_q * top);
  const ml::matrix_view<std::int32_t> iv(ti.data(), num_q, top);
  const ml::matrix_view<float> vv(tv.data(), num_q, top);

  // Dense, host: logits and top-k; the model's top-k over those logits; the NeuronCore model.
  ml::logits_buffer<float> dense(num_q, num_kv), other(num_q, num_kv);
  ml::fp8_fp4_mqa_logits(ml::backend::host{}, qv, kv.view(), w, p.ks.span(), p.ke.span(), 0,
                         dense.view(), opt);
  check_logits(rec, "dense", name, ref, dense, dense_token);
  ml::fp8_fp4_mqa_logits(ml::backend::host{}, qv, kv.view(), w, p.ks.span(), p.ke.span(), 0,
                         ml::topk(iv, vv), opt);
  check_topk(rec, "dense", name, dense, ti, tv, column);
  {
    array<std::uint8_t> valid(num_q * num_kv);
    for (std::int64_t r = 0; r < num_q; ++r)
      for (std::int64_t c = 0; c < num_kv; ++c)
        valid[r * num_kv + c] = !(std::isinf(dense(r, c)) && dense(r, c) < 0);
    ml::neuron_backend::topk<ml::backend::trn2>(
        ml::matrix_view<const float>(dense.view().data, num_q, num_kv, dense.view().stride),
        ml::matrix_view<const std::uint8_t>(valid.data(), num_q, num_kv), top, iv, vv);
    check_topk(rec, "neuron_backend::topk", name, dense, ti, tv, column);
  }
  ml::neuron_backend::report rep;
  if constexpr (with_model) {
    {
      ml::neuron_backend::capture capture(rep);
      ml::fp8_fp4_mqa_logits(trn2{}, qv, kv.view(), w, p.ks.span(), p.ke.span(), 0, other.view(),
                             neuron_opt);
    }
    check_logits(rec, "dense (neuron model)", name, ref, other, dense_token);
  }

  // Paged: logits, top-k of cache slots, the model.
  ml::logits_buffer<float> paged(num_q, num_kv);
  ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, qv, cache, w, p.lens_matrix(), p.table_view(),
                               schedule, num_kv, paged.view(), opt);
  check_logits(rec, "paged", name, ref, paged, paged_token);
  ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, qv, cache, w, p.lens_matrix(), p.table_view(),
                               schedule, num_kv, ml::topk(iv, vv, ml::topk_index::slot), opt);
  check_topk(rec, "paged", name, paged, ti, tv, slot);
  if constexpr (with_model) {
    {
      ml::neuron_backend::capture capture(rep);
      ml::fp8_fp4_paged_mqa_logits(trn2{}, qv, cache, w, p.lens_matrix(), p.table_view(), schedule,
                                   num_kv, other.view(), neuron_opt);
    }
    check_logits(rec, "paged (neuron model)", name, ref, other, paged_token);
  }

  // Sparse.
  ml::logits_buffer<float> sparse(num_q, cap * sparse_b), other_s(num_q, cap * sparse_b);
  ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, qv, kv.view(), w, sparse_meta, sparse.view(),
                                opt);
  check_logits(rec, "sparse", name, ref, sparse, sparse_token);
  ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, qv, kv.view(), w, sparse_meta,
                                ml::topk(iv, vv), opt);
  check_topk(rec, "sparse", name, sparse, ti, tv, column);
  if constexpr (with_model) {
    {
      ml::neuron_backend::capture capture(rep);
      ml::fp8_fp4_sparse_mqa_logits(trn2{}, qv, kv.view(), w, sparse_meta, other_s.view(),
                                    neuron_opt);
    }
    check_logits(rec, "sparse (neuron model)", name, ref, other_s, sparse_token);
  }

  // Paged sparse, both protocols (the snapshot's first call gathers, its second reads that).
  ml::logits_buffer<float> ps(num_q, cap * sparse_b);
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, qv, cache, w, reread, ps.view(), opt);
  check_logits(rec, "paged_sparse", name, ref, ps, ps_token);
  for (int call = 0; call < 2; ++call) {
    ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, qv, cache, w, snapshot, other_s.view(),
                                        opt);
    check_logits(rec, "paged_sparse (snapshot)", name, ref, other_s, ps_token);
  }
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, qv, cache, w, reread, ml::topk(iv, vv),
                                      opt);
  check_topk(rec, "paged_sparse", name, ps, ti, tv, column);
  if constexpr (with_model) {
    {
      ml::neuron_backend::capture capture(rep);
      ml::fp8_fp4_paged_sparse_mqa_logits(trn2{}, qv, cache, w, reread, other_s.view(), neuron_opt);
    }
    check_logits(rec, "paged_sparse (neuron model)", name, ref, other_s, ps_token);
  }

  // The model's report (text built by the library).
  if constexpr (with_model) {
    const auto summary = rep.summary();
    rec.check(rep.calls == 4 && std::strstr(summary.c_str(), "neuron model (trn2)") != nullptr,
              "%s neuron report: %lld calls, summary '%.60s'", name,
              static_cast<long long>(rep.calls), summary.c_str());
    const auto line = rep.line("kernels", "4x256");
    rec.check(std::strstr(line.c_str(), "neuron trn2 kernels 4x256 estimate") != nullptr,
              "%s neuron report line '%.80s'", name, line.c_str());
  }
}

// A refused call: the library's error message, built in this unit.
void run_error(recorder& rec, const problem& p) {
  const auto q = ml::quantize_rows<ml::mxfp8>(p.qf.span());
  const auto kv = ml::quantize_rows<ml::mxfp8>(p.kf.span());
  ml::logits_buffer<float> out(num_q, num_kv);
  const char* what = "";
  try {
    ml::fp8_fp4_mqa_logits(ml::backend::host{}, q.view(), kv.view(), p.weights(),
                           p.ks.span().first(num_q - 1), p.ke.span(), 0, out.view());
  } catch (const ml::error& e) {
    static char text[512];
    std::snprintf(text, sizeof text, "%s", e.what());
    what = text;
  }
  rec.check(std::strstr(what, "fp8_fp4_mqa_logits: ") == what && std::strstr(what, "cu_seq_len_k_start") &&
                std::strstr(what, "3"),
            "error message '%s'", what);
}

}  // namespace

void ISA_MIX_ENTRY(isa_mix_result& result) {
  result.isa = ml::host_isa_name();
  result.tag = ISA_MIX_STR(MQALOGITS_ISA_TAG);
  recorder rec(result);
  rec.check(
      std::strcmp(result.tag, ISA_MIX_EXPECT) == 0 && isa_mix_same_path(result.isa, ISA_MIX_EXPECT),
      "host path %s, namespace tag %s, built for %s", result.isa, result.tag, ISA_MIX_EXPECT);
  const problem p;
  ml::thread_pool pool(3);
  run_format<ml::mxfp8>(rec, p, pool);
  run_format<ml::mxfp4>(rec, p, pool);
  run_format<ml::fp8_per_token>(rec, p, pool);
  run_error(rec, p);
}
