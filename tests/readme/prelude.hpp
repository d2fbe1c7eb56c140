// The names README.md's C++ fragments use without declaring them, with the types the README
// gives them. check_readme.py pastes each ```cpp block into the body of its own function, inside
// namespace readme::<section> (the slug of the "## " heading it sits under, up to any " ("), so
// unqualified lookup finds a section's own declarations first and the shared ones below after.
// Only declarations: the fragments are compiled, never run, so nothing here is defined.
#pragma once

#include <cstdint>
#include <cstdio>  // std::puts in the Neuron fragment
#include <span>
#include <vector>

#include <mqalogits/neuron.hpp>

namespace ml = mqalogits;

namespace readme {

// Shared by the "Kernels and API" and "Top-k" fragments: the inputs of the four kernels.
extern ml::rows_view<ml::mxfp8> q;
extern ml::rows_view<ml::mxfp8> kv;
extern ml::paged_cache_view<ml::mxfp8> cache;
extern ml::matrix_view<float> weights;  // fp32 weights, also what fold_q_scales updates
extern std::span<const std::int32_t> ks, ke;
extern std::int64_t max_seqlen_k, max_context_len, num_kv_tokens, sparse_block_kv;
extern std::int32_t page_kv;
extern int num_workers;
extern ml::matrix_view<const std::int32_t> block_table, sparse_kv_block_indices;
extern ml::matrix_view<float> out;
extern ml::options opt;

// context_lens [B, next_n] of the paged kernel; row_lens [num_q] of the paged-sparse metadata.
extern ml::matrix_view<const std::int32_t> context_lens;
extern std::span<const std::int32_t> row_lens;

namespace kernels_and_api {
extern std::span<const std::int32_t> indices;  // paged sparse: the request of each row
}  // namespace kernels_and_api

namespace a_minimal_call {
// The engine's own buffers (the fragment makes its views over them).
extern const std::uint8_t *q_bytes, *kv_bytes;
extern const std::int32_t *q_scale_bytes, *kv_scale_bytes;  // upstream's int32 scales
extern const float* weights;
extern std::int64_t num_q, num_heads, num_kv;
}  // namespace a_minimal_call

namespace formats_and_byte_layouts {
// Source activations of the quantizers, and the engine's buffers they write.
extern std::vector<float> q, x;
extern const ml::bf16* k;
extern std::int64_t N, n;
extern std::uint8_t *data, *scales, *bytes;
extern std::int64_t data_stride, scale_stride, num_pages, page_stride;
extern const float* k_new;
extern std::vector<std::int64_t> slot_mapping;  // vLLM's slot_mapping (int64)
extern bool use_ue8m0;                          // vLLM's scale_fmt == "ue8m0"
}  // namespace formats_and_byte_layouts

namespace top_k {
extern std::int64_t rows, k;
extern ml::matrix_view<std::int32_t> indices;  // the fragment's [rows, k] outputs
extern ml::matrix_view<float> values;
extern ml::paged_mqa_schedule schedule;
}  // namespace top_k

namespace backends {
extern ml::matrix_view<const float> w;
extern ml::logits_buffer<float> out;
}  // namespace backends

namespace neuron_backend {
extern ml::matrix_view<const float> w;
extern ml::matrix_view<const std::int32_t> lens, table;  // [B, next_n], [B, max_blocks]
extern ml::paged_mqa_schedule schedule;
extern ml::logits_buffer<float> out;
}  // namespace neuron_backend

}  // namespace readme
