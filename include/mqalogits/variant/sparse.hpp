// Sparse variant: selected blocks of a token-major KV. Column b*B + o of row q is token
// idx[q][b] * B + ks[q] % B + o, valid iff b < nb, idx >= 0 and ks <= token < min(ke, N), with
// nb = min(cap, ceil(max(0, min(ke, N) - ks) / B)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "metadata_checks.hpp"
#include "plan.hpp"

MQALOGITS_NAMESPACE_BEGIN

inline bool supported_sparse_block_kv(std::int64_t b) {
  return b == 8 || b == 16;
}
inline constexpr std::int64_t max_sparse_capacity = 4096;

namespace detail {
constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  return ((a % b) + b) % b;
}
constexpr std::int64_t selected_blocks(std::int64_t length, std::int64_t block, std::int64_t cap) {
  return std::min(cap, (std::max<std::int64_t>(length, 0) + block - 1) / block);
}

inline void check_sparse_indices(const char* where, matrix_view<const std::int32_t> idx,
                                 std::int64_t sparse_block_kv) {
  using detail::require;
  require(idx.rows >= 0 && idx.cols >= 1 && idx.cols <= max_sparse_capacity, where, [&](auto& m) {
    m << "sparse_kv_block_indices capacity " << idx.cols << " is out of range [1, "
      << max_sparse_capacity << "] (shape [" << idx.rows << ", " << idx.cols << "])";
  });
  require(idx.rows == 0 || idx.data, where,
          [&](auto& m) { m << "sparse_kv_block_indices is null with " << idx.rows << " rows"; });
  require(idx.stride >= idx.cols, where, [&](auto& m) {
    m << "sparse_kv_block_indices stride " << idx.stride << " < cols " << idx.cols;
  });
  check_matrix_extent(where, "sparse_kv_block_indices", idx);  // overflowing extents
  require(supported_sparse_block_kv(sparse_block_kv), where, [&](auto& m) {
    m << "sparse_block_kv = " << sparse_block_kv << " is not supported (8 or 16)";
  });
}

inline std::vector<std::int32_t> copy_rows(matrix_view<const std::int32_t> m) {
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) out.insert(out.end(), m.row(r), m.row(r) + m.cols);
  return out;
}
}  // namespace detail

// The sparse metadata: a snapshot of the selection and bounds the kernel runs (it copies them,
// as DeepGEMM-Ascend does, so the caller's arrays may change afterwards), plus each row's block
// count.
class sparse_mqa_metadata {
 public:
  sparse_mqa_metadata() = default;
  sparse_mqa_metadata(const sparse_mqa_metadata&) = default;
  sparse_mqa_metadata& operator=(const sparse_mqa_metadata&) = default;
  // A moved-from metadata is empty, as a default-constructed one: the kernel rejects it.
  sparse_mqa_metadata(sparse_mqa_metadata&& o) noexcept { *this = std::move(o); }
  sparse_mqa_metadata& operator=(sparse_mqa_metadata&& o) noexcept {
    if (this == &o) return *this;
    rows_ = std::exchange(o.rows_, 0);
    cap_ = std::exchange(o.cap_, 0);
    block_ = std::exchange(o.block_, 0);
    num_kv_ = std::exchange(o.num_kv_, 0);
    ks_ = std::move(o.ks_);
    ke_ = std::move(o.ke_);
    idx_ = std::move(o.idx_);
    o.ks_.clear();
    o.ke_.clear();
    o.idx_.clear();
    return *this;
  }

  std::int64_t num_rows() const { return rows_; }
  std::int64_t capacity() const { return cap_; }
  std::int64_t sparse_block_kv() const { return block_; }
  std::int64_t num_kv_tokens() const { return num_kv_; }
  std::int64_t num_cols() const { return cap_ * block_; }
  std::int32_t ks(std::int64_t r) const { return ks_[static_cast<std::size_t>(r)]; }
  std::int64_t ke(std::int64_t r) const {  // clamped to N
    return std::min<std::int64_t>(ke_[static_cast<std::size_t>(r)], num_kv_);
  }
  std::int64_t num_blocks(std::int64_t r) const {
    return detail::selected_blocks(ke(r) - ks(r), block_, cap_);
  }
  std::int32_t block(std::int64_t r, std::int64_t b) const {
    return idx_[static_cast<std::size_t>(r * cap_ + b)];
  }

  friend sparse_mqa_metadata get_sparse_mqa_logits_metadata(std::span<const std::int32_t>,
                                                            std::span<const std::int32_t>,
                                                            std::int64_t,
                                                            matrix_view<const std::int32_t>,
                                                            std::int64_t);

 private:
  std::int64_t rows_ = 0, cap_ = 0, block_ = 0, num_kv_ = 0;
  std::vector<std::int32_t> ks_, ke_, idx_;
};

// ks, ke: [num_q]; sparse_kv_block_indices: [num_q, cap] (-1 pads); sparse_block_kv: 8 or 16.
inline sparse_mqa_metadata get_sparse_mqa_logits_metadata(
    std::span<const std::int32_t> ks, std::span<const std::int32_t> ke, std::int64_t num_kv_tokens,
    matrix_view<const std::int32_t> sparse_kv_block_indices, std::int64_t sparse_block_kv) {
  constexpr const char* where = "get_sparse_mqa_logits_metadata";
  using detail::require;
  detail::check_sparse_indices(where, sparse_kv_block_indices, sparse_block_kv);
  const auto rows = sparse_kv_block_indices.rows;
  require(static_cast<std::int64_t>(ks.size()) == rows, where, [&](auto& m) {
    m << "ks has " << ks.size() << " entries, sparse_kv_block_indices has " << rows << " rows";
  });
  require(static_cast<std::int64_t>(ke.size()) == rows, where, [&](auto& m) {
    m << "ke has " << ke.size() << " entries, sparse_kv_block_indices has " << rows << " rows";
  });
  detail::check_index_span(where, "ks", ks);
  detail::check_index_span(where, "ke", ke);
  require(num_kv_tokens > 0, where,
          [&](auto& m) { m << "num_kv_tokens = " << num_kv_tokens << " must be > 0"; });
  sparse_mqa_metadata meta;
  meta.rows_ = rows;
  meta.cap_ = sparse_kv_block_indices.cols;
  meta.block_ = sparse_block_kv;
  meta.num_kv_ = num_kv_tokens;
  meta.ks_.assign(ks.begin(), ks.end());
  meta.ke_.assign(ke.begin(), ke.end());
  meta.idx_ = detail::copy_rows(sparse_kv_block_indices);
  return meta;
}

template <class Format>
class sparse_plan {
 public:
  sparse_plan(rows_view<Format> kv, const sparse_mqa_metadata& meta) : kv_(kv), meta_(&meta) {}

  std::int64_t num_rows() const { return meta_->num_rows(); }
  std::int64_t num_cols() const { return meta_->num_cols(); }
  std::int64_t num_groups() const { return num_rows(); }
  row_span group_rows(std::int64_t r) const { return {r, r + 1}; }
  row_keys row(std::int64_t r) const {
    return {0, meta_->num_blocks(r) * meta_->sparse_block_kv(), 0};
  }

  // The token a column reads, or -1 when the column is masked.
  std::int64_t token(std::int64_t r, std::int64_t k) const {
    const std::int64_t B = meta_->sparse_block_kv();
    const std::int64_t idx = meta_->block(r, k / B);
    if (idx < 0) return -1;
    const std::int64_t ks = meta_->ks(r);
    const std::int64_t t = idx * B + detail::floor_mod(ks, B) + k % B;
    return (t >= ks && t < meta_->ke(r)) ? t : -1;
  }
  key_ref key(std::int64_t r, std::int64_t k) const {
    const std::int64_t t = token(r, k);
    if (t < 0) return {};
    return {kv_.row(t), kv_.scale(t)};
  }
  void fill_work(const tiling& t, work_list& list) const { detail::split_work(*this, t, list); }
  std::int64_t sparse_block_kv() const { return meta_->sparse_block_kv(); }
  static constexpr bool prefill = false;
  std::int64_t gather_block() const { return meta_->sparse_block_kv(); }  // one selected block

 private:
  rows_view<Format> kv_;
  const sparse_mqa_metadata* meta_;
};

MQALOGITS_NAMESPACE_END
