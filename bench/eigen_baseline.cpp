// The Eigen decode-then-GEMM baseline (see eigen_baseline.hpp), in its own translation unit so
// Eigen's GEMM compiles in parallel with the rest of the benchmark.
#include "eigen_baseline.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <limits>

namespace bench {
namespace {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr int D = ml::head_dim;

template <class Format>
void decode_q(const ml::rows_view<Format>& q, std::int64_t first, std::int64_t n, matrix& out) {
  out.resize(n, D);
  for (std::int64_t i = 0; i < n; ++i)
    Format::decode_row(q.row(first + i), q.scale(first + i), out.row(i).data());
}

// out[t] = sum_h relu(S[row0 + h, t]) * w[h] for t in [0, n), rounded to bf16.
void epilogue(const matrix& s, std::int64_t row0, std::int64_t H, const ml::bf16* w, std::int64_t n,
              std::int64_t s_col0, ml::bf16* out) {
  Eigen::ArrayXf acc = Eigen::ArrayXf::Zero(n);
  for (std::int64_t h = 0; h < H; ++h)
    acc += s.row(row0 + h).segment(s_col0, n).array().cwiseMax(0.0f) * w[h].to_float();
  for (std::int64_t t = 0; t < n; ++t) out[t] = ml::bf16::from_float(acc[t]);
}

const ml::bf16 neg_inf = ml::bf16::from_float(-std::numeric_limits<float>::infinity());

}  // namespace

template <class Format>
void eigen_dense(const dense_inputs<Format>& in, ml::matrix_view<ml::bf16> out,
                 ml::executor_ref exec) {
  static matrix k;
  k.resize(in.N, D);
  const auto kv = in.kv.view();
  constexpr std::int64_t chunk = 256;
  auto decode = [&](std::int64_t c) {
    for (std::int64_t t = c * chunk; t < std::min(in.N, (c + 1) * chunk); ++t)
      Format::decode_row(kv.row(t), kv.scale(t), k.row(t).data());
  };
  exec.parallel_for((in.N + chunk - 1) / chunk, decode);
  constexpr std::int64_t block = 8;  // query rows per GEMM
  const auto q = in.q.view();
  auto task = [&](std::int64_t b) {
    thread_local matrix qf, s;
    const std::int64_t r0 = b * block, r1 = std::min(in.num_q, r0 + block);
    std::int64_t k0 = in.N, k1 = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      k0 = std::min<std::int64_t>(k0, in.ks[r]);
      k1 = std::max<std::int64_t>(k1, in.ke[r]);
    }
    decode_q(q, r0 * in.H, (r1 - r0) * in.H, qf);
    s.resize((r1 - r0) * in.H, k1 - k0);
    s.noalias() = qf * k.middleRows(k0, k1 - k0).transpose();
    for (std::int64_t r = r0; r < r1; ++r) {
      ml::bf16* o = out.row(r);
      std::fill(o, o + out.cols, neg_inf);
      epilogue(s, (r - r0) * in.H, in.H, in.w.data() + r * in.H, in.ke[r] - in.ks[r], in.ks[r] - k0,
               o);  // column j = token ks + j
    }
  };
  exec.parallel_for((in.num_q + block - 1) / block, task);
}

template <class Format>
void eigen_paged(const paged_inputs<Format>& in, ml::matrix_view<ml::bf16> out,
                 ml::executor_ref exec) {
  const auto cache = in.cache.view();
  const auto q = in.q.view();
  auto task = [&](std::int64_t b) {  // one request: its keys, one GEMM for its next_n rows
    thread_local matrix qf, k, s;
    std::int64_t len = 0;
    for (std::int64_t j = 0; j < in.next_n; ++j)
      len = std::max<std::int64_t>(len, in.lens[b * in.next_n + j]);
    k.resize(len, D);
    for (std::int64_t t = 0; t < len; ++t) {
      const std::int64_t page = in.table[b * in.blocks + t / in.page_kv];
      Format::decode_row(cache.data(page, t % in.page_kv), cache.scale(page, t % in.page_kv),
                         k.row(t).data());
    }
    decode_q(q, b * in.next_n * in.H, in.next_n * in.H, qf);
    s.resize(in.next_n * in.H, len);
    s.noalias() = qf * k.transpose();
    for (std::int64_t j = 0; j < in.next_n; ++j) {
      const std::int64_t r = b * in.next_n + j, l = in.lens[r];
      ml::bf16* o = out.row(r);
      epilogue(s, j * in.H, in.H, in.w.data() + r * in.H, l, 0, o);
      std::fill(o + l, o + out.cols, neg_inf);
    }
  };
  exec.parallel_for(in.B, task);
}

template <class Format>
void eigen_sparse(const sparse_inputs<Format>& in, bool paged, ml::matrix_view<ml::bf16> out,
                  ml::executor_ref exec) {
  const auto kv = in.kv.view();
  const auto cache = in.cache.view();
  const auto q = in.q.view();
  const std::int64_t cols = in.cap * in.blk;
  auto task = [&](std::int64_t r) {  // one query row: gather its selected keys, one GEMM
    thread_local matrix qf, k, s;
    k.resize(cols, D);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t t = std::int64_t{in.idx[r * in.cap + c / in.blk]} * in.blk + c % in.blk;
      if (paged) {
        const std::int64_t page = in.table[r * in.blocks + t / 64];
        Format::decode_row(cache.data(page, t % 64), cache.scale(page, t % 64), k.row(c).data());
      } else {
        Format::decode_row(kv.row(t), kv.scale(t), k.row(c).data());
      }
    }
    decode_q(q, r * in.H, in.H, qf);
    s.resize(in.H, cols);
    s.noalias() = qf * k.transpose();
    epilogue(s, 0, in.H, in.w.data() + r * in.H, cols, 0, out.row(r));
  };
  exec.parallel_for(in.rows_n, task);
}

template void eigen_dense(const dense_inputs<ml::mxfp8>&, ml::matrix_view<ml::bf16>,
                          ml::executor_ref);
template void eigen_dense(const dense_inputs<ml::mxfp4>&, ml::matrix_view<ml::bf16>,
                          ml::executor_ref);
template void eigen_paged(const paged_inputs<ml::mxfp8>&, ml::matrix_view<ml::bf16>,
                          ml::executor_ref);
template void eigen_paged(const paged_inputs<ml::mxfp4>&, ml::matrix_view<ml::bf16>,
                          ml::executor_ref);
template void eigen_sparse(const sparse_inputs<ml::mxfp8>&, bool, ml::matrix_view<ml::bf16>,
                           ml::executor_ref);
template void eigen_sparse(const sparse_inputs<ml::mxfp4>&, bool, ml::matrix_view<ml::bf16>,
                           ml::executor_ref);

}  // namespace bench
