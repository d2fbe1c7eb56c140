// The neuron backend's cost report for DeepSeek-V3.2's indexer shapes (H = 64, D = 128, page
// 64): a paged decode step and a dense prefill chunk, on each NeuronCore generation. The
// numbers describe the modelled schedule (tiles, DMA descriptors, engine instructions and an
// estimate from documented rates); nothing here runs on a Neuron device.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

namespace {

constexpr std::int64_t heads = 64;
constexpr std::int32_t page_kv = 64;

// Random MXFP8 rows: codes that are not NaN, scales near 1.
struct rows {
  std::vector<std::uint8_t> data, scales;
  rows(std::mt19937& rng, std::int64_t n)
      : data(static_cast<std::size_t>(n) * ml::mxfp8::data_bytes),
        scales(static_cast<std::size_t>(n) * ml::mxfp8::scale_bytes) {
    for (auto& b : data) b = static_cast<std::uint8_t>(rng() % 0x7F);
    for (auto& s : scales) s = static_cast<std::uint8_t>(124 + rng() % 6);
  }
  ml::rows_view<ml::mxfp8> view(std::int64_t n) const { return {data.data(), scales.data(), n}; }
};

template <class Gen>
void decode(std::mt19937& rng) {
  // B = 4 requests x next_n = 2 tokens, contexts of 4096 positions.
  constexpr std::int64_t B = 4, next_n = 2, context = 4096, blocks = context / page_kv;
  const rows q(rng, B * next_n * heads);
  const std::int64_t token_bytes = ml::paged_cache_view<ml::mxfp8>::token_bytes;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(B * blocks * page_kv * token_bytes));
  for (auto& b : cache) b = static_cast<std::uint8_t>(rng() % 0x7F);
  for (std::int64_t p = 0; p < B * blocks; ++p)  // scale bytes sane
    for (std::int64_t i = 0; i < page_kv * ml::mxfp8::scale_bytes; ++i)
      cache[static_cast<std::size_t>(p * page_kv * token_bytes + page_kv * 128 + i)] = 127;
  std::vector<float> w(static_cast<std::size_t>(B * next_n * heads), 0.125f);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(B * next_n));
  for (std::int64_t r = 0; r < B * next_n; ++r)
    lens[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(context - 1 + r % next_n);
  std::vector<std::int32_t> table(static_cast<std::size_t>(B * blocks));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);

  const ml::paged_cache_view<ml::mxfp8> cv(cache.data(), B * blocks, page_kv);
  const ml::matrix_view<const std::int32_t> lv(lens.data(), B, next_n), tv(table.data(), B, blocks);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lv, page_kv, 1);
  ml::logits_buffer<ml::bf16> out(B * next_n, context);
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, q.view(B * next_n * heads), cv,
                                 ml::matrix_view<const float>(w.data(), B * next_n, heads), lv, tv,
                                 schedule, context, out.view());
  }
  std::printf("decode: B = %lld x next_n = %lld, context %lld, H = %lld, page %d, MXFP8\n%s\n",
              static_cast<long long>(B), static_cast<long long>(next_n),
              static_cast<long long>(context), static_cast<long long>(heads), page_kv,
              rep.summary().c_str());
}

template <class Gen>
void prefill(std::mt19937& rng) {
  // A chunk of 128 query tokens (one partition tile) against 2048 keys, causal ranges.
  constexpr std::int64_t num_q = 128, N = 2048;
  const rows q(rng, num_q * heads), kv(rng, N);
  std::vector<float> w(static_cast<std::size_t>(num_q * heads), 0.125f);
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q);
  for (std::int64_t i = 0; i < num_q; ++i)
    ke[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(N - num_q + 1 + i);
  ml::logits_buffer<ml::bf16> out(num_q, N);
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, q.view(num_q * heads), kv.view(N),
                           ml::matrix_view<const float>(w.data(), num_q, heads), ks, ke, N,
                           out.view());
  }
  std::printf("prefill: %lld query tokens x %lld keys, H = %lld, MXFP8\n%s\n",
              static_cast<long long>(num_q), static_cast<long long>(N),
              static_cast<long long>(heads), rep.summary().c_str());
}

}  // namespace

int main() {
  std::mt19937 rng(2025);
  std::puts(
      "mqalogits neuron backend: cost of the modelled NeuronCore schedule (not a device run)\n");
  decode<ml::backend::trn1>(rng);
  decode<ml::backend::trn2>(rng);
  decode<ml::backend::trn3>(rng);
  prefill<ml::backend::trn1>(rng);
  prefill<ml::backend::trn2>(rng);
  prefill<ml::backend::trn3>(rng);
}
