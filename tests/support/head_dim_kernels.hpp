// The head-dim tests' shared part: rows and caches generated for a format rebound to head dim D,
// seen with a run-time head dim as an engine holding [.., D] tensors passes them, and the four
// kernels at each head dim against the reference on a backend (the host in head_dim_test.cpp,
// the NeuronCore model in neuron_head_dim_test.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace head_dims {

namespace ml = mqalogits;
namespace rnd = ref::rand;

using trn1 = ml::backend::neuron<ml::backend::trn1>;
using trn2 = ml::backend::neuron<ml::backend::trn2>;
using trn3 = ml::backend::neuron<ml::backend::trn3>;

// Rows generated for the binding G (its row size), seen as the named format F with a run-time
// head dim, as an engine holding [.., D] tensors would pass them.
template <class F, class G>
ml::rows_view<F> as_rows(const rnd::owned_rows<G>& r) {
  return ml::rows_view<F>(r.data.data(), r.scales.data(), r.n, ml::head_dim_t{G::head_dim},
                          r.data_stride, r.scale_stride);
}
template <class F, class G>
ml::paged_cache_view<F> as_cache(const rnd::owned_paged_cache<G>& c) {
  return ml::paged_cache_view<F>(c.bytes.data(), c.num_pages, c.page_kv,
                                 ml::head_dim_t{G::head_dim}, c.page_stride);
}

// The bytes of a row's 4-byte MX scale field past its D/32 blocks are not part of the row: NaN
// exponents there must not reach a logit.
template <class G>
void poison_unused_scales(std::uint8_t* field) {
  if constexpr (G::power_of_two_scales)
    for (int b = G::blocks; b < G::scale_bytes; ++b) field[b] = 255;
}
template <class G>
void poison_unused_scales(rnd::owned_rows<G>& r) {
  for (std::int64_t i = 0; i < r.n; ++i) poison_unused_scales<G>(r.scale(i));
}
template <class G>
void poison_unused_scales(rnd::owned_paged_cache<G>& c) {
  for (std::int64_t p = 0; p < c.num_pages; ++p)
    for (std::int64_t s = 0; s < c.page_kv; ++s) poison_unused_scales<G>(c.scale(p, s));
}

template <class Backend>
std::string backend_label() {
  if constexpr (std::is_same_v<Backend, trn1>) return "trn1 model";
  if constexpr (std::is_same_v<Backend, trn2>) return "trn2 model";
  if constexpr (std::is_same_v<Backend, trn3>) return "trn3 model";
  return "host";
}

// The four kernels for format F at head dim D on Backend, against the reference.
template <class F, int D, class Backend>
void check_kernels() {
  using G = typename F::template with_head_dim<D>;
  INFO(F::name << " D = " << D << " on " << backend_label<Backend>());
  std::mt19937_64 rng(1000 + D);
  const std::int64_t H = 8;

  {  // dense
    const std::int64_t num_q = 5, N = 70;
    auto q = rnd::rows<G>(rng, num_q * H);
    auto kv = rnd::rows<G>(rng, N);
    poison_unused_scales(q);
    poison_unused_scales(kv);
    const auto w = rnd::weights<float>(rng, num_q, H);
    const auto ks = rnd::ints(rng, num_q, -2, 20);
    std::vector<std::int32_t> ke(static_cast<std::size_t>(num_q));
    for (std::int64_t r = 0; r < num_q; ++r)
      ke[r] = static_cast<std::int32_t>(rnd::uniform(rng, ks[r] + 1, N + 3));
    const auto expected = ref::dense(as_rows<F>(q), as_rows<F>(kv), w.view(), std::span(ks),
                                     std::span<const std::int32_t>(ke), 0);
    CHECK(check::valid_count(expected) > 0);
    ml::logits_buffer<float> out(num_q, N);
    check::fill_sentinel(out);
    // Some rows end past N: clamped to it, as the reference does.
    ml::fp8_fp4_mqa_logits(Backend{}, as_rows<F>(q), as_rows<F>(kv), w.view(), ks, ke, 0,
                           out.view(), {.truncate_long_contexts = true});
    INFO("dense");
    CHECK(check::against(out, expected) == "");
    // The rebound format's own views run the same kernel.
    ml::logits_buffer<float> same(num_q, N);
    ml::fp8_fp4_mqa_logits(Backend{}, q.view(), kv.view(), w.view(), ks, ke, 0, same.view(),
                           {.truncate_long_contexts = true});
    CHECK(check::bitwise_equal(out, same));
  }
  {  // paged decode
    const std::int64_t B = 3, next_n = 2, pages = 9, max_blocks = 4;
    const std::int32_t page_kv = 16;
    auto cache = rnd::paged_cache<G>(rng, pages, page_kv);
    poison_unused_scales(cache);
    const auto lens = rnd::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
    const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
    auto q = rnd::rows<G>(rng, B * next_n * H);
    poison_unused_scales(q);
    const auto w = rnd::weights<ml::bf16>(rng, B * next_n, H);
    const std::int64_t max_len = max_blocks * page_kv;
    const auto expected =
        ref::paged(as_rows<F>(q), as_cache<F>(cache), w.view(), lens.view(), table.view(), max_len);
    CHECK(check::valid_count(expected) > 0);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
    ml::logits_buffer<ml::bf16> out(B * next_n, max_len);
    check::fill_sentinel(out);
    ml::fp8_fp4_paged_mqa_logits(Backend{}, as_rows<F>(q), as_cache<F>(cache), w.view(),
                                 lens.view(), table.view(), schedule, max_len, out.view());
    INFO("paged");
    CHECK(check::against(out, expected) == "");
  }
  {  // sparse
    const std::int64_t rows = 4, N = 90, blk = 8, cap = 5;
    auto q = rnd::rows<G>(rng, rows * H);
    auto kv = rnd::rows<G>(rng, N);
    poison_unused_scales(q);
    poison_unused_scales(kv);
    const auto w = rnd::weights<float>(rng, rows, H);
    const auto ks = rnd::ints(rng, rows, 0, 30);
    std::vector<std::int32_t> ke(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r)
      ke[r] = static_cast<std::int32_t>(rnd::uniform(rng, ks[r] + 10, N));
    const auto idx = rnd::sparse_indices(rng, rows, cap, N / blk, {.pad = 0.1});
    const auto meta = ml::get_sparse_mqa_logits_metadata(
        std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), N, idx.view(), blk);
    const auto expected = ref::sparse(as_rows<F>(q), as_rows<F>(kv), w.view(), std::span(ks),
                                      std::span<const std::int32_t>(ke), N, idx.view(), blk);
    CHECK(check::valid_count(expected) > 0);
    ml::logits_buffer<float> out(rows, cap * blk);
    check::fill_sentinel(out);
    ml::fp8_fp4_sparse_mqa_logits(Backend{}, as_rows<F>(q), as_rows<F>(kv), w.view(), meta,
                                  out.view());
    INFO("sparse");
    CHECK(check::against(out, expected) == "");
  }
  {  // paged sparse, both protocols
    const std::int64_t rows = 4, pages = 6, max_blocks = 4, blk = 8, cap = 6;
    const std::int32_t page_kv = 16;
    auto cache = rnd::paged_cache<G>(rng, pages, page_kv);
    poison_unused_scales(cache);
    const auto lens = rnd::ints(rng, rows, 10, max_blocks * page_kv);
    const std::vector<std::int64_t> keys(lens.begin(), lens.end());
    const auto table = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
    const auto idx = rnd::sparse_indices(rng, rows, cap, max_blocks * page_kv / blk, {.pad = 0.1});
    auto q = rnd::rows<G>(rng, rows * H);
    poison_unused_scales(q);
    const auto w = rnd::weights<float>(rng, rows, H);
    const auto expected = ref::paged_sparse(as_rows<F>(q), as_cache<F>(cache), w.view(),
                                            std::span(lens), table.view(), idx.view(), blk);
    CHECK(check::valid_count(expected) > 0);
    for (const auto protocol :
         {ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot}) {
      INFO("paged sparse, protocol " << static_cast<int>(protocol));
      const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
          std::span<const std::int32_t>(lens), table.view(), page_kv, idx.view(), blk, protocol);
      ml::logits_buffer<float> out(rows, cap * blk);
      for (int call = 0; call < 2; ++call) {  // the snapshot's second call reads the snapshot
        check::fill_sentinel(out);
        ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, as_rows<F>(q), as_cache<F>(cache), w.view(),
                                            meta, out.view());
        CHECK(check::against(out, expected) == "");
      }
    }
  }
}

template <class F, class Backend>
void check_every_head_dim() {
  if constexpr (F::supports_head_dim(32)) check_kernels<F, 32, Backend>();
  check_kernels<F, 64, Backend>();
  check_kernels<F, 128, Backend>();
}

}  // namespace head_dims
