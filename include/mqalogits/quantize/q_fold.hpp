// Quantising an indexer's Q to FP8 per (token, head) row with the row's scale folded into the
// weights, as vLLM's fused_indexer_q_rope_quant does after its RoPE: the kernels then read Q's
// codes without scales (fp8_per_token rows with null scales) and the folded fp32 weights.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../format/fp8_per_token.hpp"
#include "../view/matrix_view.hpp"
#include "encode.hpp"
#include "gather_pages.hpp"  // detail::check_out_rows
#include "hadamard.hpp"
#include "rows.hpp"

MQALOGITS_NAMESPACE_BEGIN

// How a Q row's scale s comes from its largest magnitude amax (fp32 throughout):
// s = max(amax, amax_floor) / 448, or max(amax, amax_floor) * fp32(1 / 448) with
// multiply_by_reciprocal, then 2^ceil(log2(s)) with power_of_two (UE8M0). The two products differ
// in the last bit for some amax, which moves a power-of-two scale now and then: pick the engine's.
// rotation = row_rotation::hadamard quantises each row's Walsh-Hadamard rotation (DeepSeek-V4
// rotates its indexer Q after RoPE, hadamard.hpp) in the same pass.
struct q_fold_scaling {
  float amax_floor = 1e-10f;
  bool power_of_two = true;
  bool multiply_by_reciprocal = true;
  row_rotation rotation = row_rotation::none;
};
// vLLM's DeepSeek-V3.2 indexer (fused_indexer_q_rope_quant in sparse_attn_indexer.py): floor
// 1e-10, times fp32(1/448), UE8M0.
constexpr q_fold_scaling vllm_v32_q_scaling() {
  return {1e-10f, true, true};
}
// vLLM's DeepSeek-V4 indexer (fused_indexer_q.py): floor 1e-4, divided by 448, UE8M0. With
// .rotation = row_rotation::hadamard, the Hadamard rotation V4 applies to Q before quantising.
constexpr q_fold_scaling vllm_v4_q_scaling() {
  return {1e-4f, true, false};
}

// The scale of a Q row whose largest magnitude is amax.
inline float q_fold_scale(float amax, const q_fold_scaling& s) {
  const float a = amax > s.amax_floor ? amax : s.amax_floor;  // NaN amax: the floor
  constexpr float reciprocal = static_cast<float>(1.0 / 448.0);
  float scale = s.multiply_by_reciprocal ? a * reciprocal : a / 448.0f;
  if (s.power_of_two) scale = std::exp2(std::ceil(std::log2(scale)));
  return scale;
}

namespace detail {

// q's rows are the (token, head) rows of weights [T, H] (>= 1 head), and weights_out is [T, H]:
// the shapes every Q quantiser that folds or scales the weights checks first.
template <class T, class W>
void check_q_rows_and_weights(const char* where, const matrix_view<T>& q,
                              const matrix_view<W>& weights,
                              const matrix_view<float>& weights_out) {
  require(weights.rows >= 0 && weights.cols >= 1, where, [&](auto& m) {
    m << "weights shape [" << weights.rows << ", " << weights.cols << "] needs >= 1 head";
  });
  check_matrix(where, "weights", weights, weights.rows, weights.cols);
  std::int64_t rows = 0;
  require(!__builtin_mul_overflow(weights.rows, weights.cols, &rows) && rows == q.rows, where,
          [&](auto& m) {
            m << "q has " << q.rows << " rows, but weights [" << weights.rows << ", "
              << weights.cols << "] need tokens x heads = " << weights.rows * weights.cols;
          });
  check_matrix(where, "weights_out", weights_out, weights.rows, weights.cols);
}

// weights_out shares no byte with weights, unless it is the same float array (scaled in place).
template <class W>
void check_weights_out_in_place_or_apart(const char* where, const matrix_view<W>& weights,
                                         const matrix_view<float>& weights_out) {
  const byte_range in = range_of("weights", weights), out = range_of("weights_out", weights_out);
  const bool same = static_cast<const void*>(weights.data) == weights_out.data &&
                    weights.stride == weights_out.stride &&
                    std::is_same_v<std::remove_const_t<W>, float>;
  require(same || disjoint(in, out), where, [&](auto& m) {
    m << "weights_out [" << static_cast<std::uint64_t>(out.begin) << ", "
      << static_cast<std::uint64_t>(out.end) << ") overlap weights ["
      << static_cast<std::uint64_t>(in.begin) << ", " << static_cast<std::uint64_t>(in.end)
      << ") without being the same array";
  });
}

}  // namespace detail

// q [T * H, D]: the roped Q, row (t, h) at t * H + h (fp32, or bf16 as the engine's RoPE leaves
// it); weights [T, H] (fp32, bf16 or fp16). Writes each row's FP8 codes (the saturating
// round-to-nearest-even e4m3 of x / s) to codes + row * code_stride (0: packed, D bytes), and
// weights_out(t, h) = weights(t, h) * s * softmax_scale * head_scale, multiplied left to right in
// fp32 (vLLM passes head_dim^-0.5 and H^-0.5; DeepSeek-V4's 128^-0.5 * H^-0.5 is the same pair).
// D is a head dim of fp8_per_token (128, 64, 32); amax_floor must be finite and > 0;
// scaling.rotation = row_rotation::hadamard quantises each row's rotation H_D x / sqrt(D). No
// output may share a byte with an input or the other output.
template <class T, class W>
requires(quantize_input<std::remove_const_t<T>>&& weight_input<W>) void quantize_q_fold_weights(
    matrix_view<T> q, matrix_view<W> weights, std::uint8_t* codes, std::int64_t code_stride,
    matrix_view<float> weights_out, float softmax_scale, float head_scale,
    const q_fold_scaling& scaling = vllm_v32_q_scaling()) {
  constexpr const char* where = "quantize_q_fold_weights";
  using detail::require;
  require(has_head_dim<fp8_per_token>(static_cast<int>(q.cols)) && q.cols <= 128, where,
          [&](auto& m) {
            m << "q has rows of " << q.cols << " elements; the head dim must be "
              << head_dims_text<fp8_per_token>();
          });
  detail::check_quantize_source<fp8_per_token>(where, q);
  if (!(std::isfinite(scaling.amax_floor) && scaling.amax_floor > 0)) {
    char floor[32];
    std::snprintf(floor, sizeof floor, "%g", static_cast<double>(scaling.amax_floor));
    require(false, where, [&](auto& m) {
      m << "q_fold_scaling amax_floor = " << floor << " must be finite and > 0";
    });
  }
  detail::check_rotation(where, scaling.rotation);
  detail::check_q_rows_and_weights(where, q, weights, weights_out);
  const std::int64_t d = q.cols;
  if (code_stride == 0) code_stride = d;
  const detail::byte_range out_codes =
      detail::check_out_rows(where, "codes", codes, q.rows, code_stride, d);
  const detail::byte_range out_w = detail::range_of("weights_out", weights_out),
                           in_q = detail::range_of("q", q),
                           in_w = detail::range_of("weights", weights);
  detail::check_outputs_disjoint(where, {out_codes, out_w}, {in_q, in_w});
  const std::int64_t heads = weights.cols;
  float rotated[128];
  for (std::int64_t r = 0; r < q.rows; ++r) {
    float s = 0;
    std::uint8_t* out = codes + r * code_stride;
    detail::with_rotated_row(q.row(r), static_cast<int>(d), scaling.rotation, rotated,
                             [&](const auto* x) {
                               s = q_fold_scale(detail::absmax(x, 0, static_cast<int>(d)), scaling);
                               for (std::int64_t i = 0; i < d; ++i)
                                 out[i] = encode_e4m3(to_float(x[i]) / s);
                             });
    const std::int64_t t = r / heads, h = r % heads;
    float w = to_float(weights(t, h));
    w *= s;
    w *= softmax_scale;
    w *= head_scale;
    weights_out(t, h) = w;
  }
}

// weights_out(t, h) = weights(t, h) * softmax_scale * head_scale in fp32, left to right: the
// weights of a Q whose scales travel with its codes (vLLM's MXFP4 Q). weights_out [T, H] must not
// share a byte with weights unless it is the same float array (scaled in place).
template <class W>
requires weight_input<W>
void scale_weights(matrix_view<W> weights, matrix_view<float> weights_out, float softmax_scale,
                   float head_scale) {
  constexpr const char* where = "scale_weights";
  detail::require(weights.rows >= 0 && weights.cols >= 0, where, [&](auto& m) {
    m << "weights shape [" << weights.rows << ", " << weights.cols << "]";
  });
  detail::check_matrix(where, "weights", weights, weights.rows, weights.cols);
  detail::check_matrix(where, "weights_out", weights_out, weights.rows, weights.cols);
  detail::check_weights_out_in_place_or_apart(where, weights, weights_out);
  for (std::int64_t t = 0; t < weights.rows; ++t)
    for (std::int64_t h = 0; h < weights.cols; ++h) {
      float w = to_float(weights(t, h));
      w *= softmax_scale;
      w *= head_scale;
      weights_out(t, h) = w;
    }
}

MQALOGITS_NAMESPACE_END
