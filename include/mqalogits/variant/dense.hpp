// Dense variant: token-major KV; column j of row q is token ks[q] + j (or token j in the
// full-width mode), valid iff 0 <= token < min(ke[q], N) and ks[q] <= token.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../view/index_array.hpp"
#include "../view/rows_view.hpp"
#include "plan.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class Format, index_value Index = std::int32_t>
class dense_plan {
 public:
  // max_seqlen_k > 0: column j is token ks + j. max_seqlen_k == 0 (full width): num_cols = N
  // and column j is token j.
  dense_plan(rows_view<Format> kv, std::span<const Index> ks, std::span<const Index> ke,
             std::int64_t max_seqlen_k)
      : kv_(kv),
        ks_(ks),
        ke_(ke),
        full_width_(max_seqlen_k == 0),
        cols_(full_width_ ? kv.rows : max_seqlen_k) {}

  std::int64_t num_rows() const { return static_cast<std::int64_t>(ks_.size()); }
  std::int64_t num_cols() const { return cols_; }
  std::int64_t num_groups() const { return 1; }
  row_span group_rows(std::int64_t) const { return {0, num_rows()}; }

  row_keys row(std::int64_t r) const {
    // ks past N selects nothing: clamping it there keeps ks + cols from overflowing (int64).
    const std::int64_t ks = std::min<std::int64_t>(ks_[static_cast<std::size_t>(r)], kv_.rows);
    const std::int64_t ke = std::min<std::int64_t>(ke_[static_cast<std::size_t>(r)], kv_.rows);
    const std::int64_t offset = full_width_ ? 0 : ks;
    return {std::max<std::int64_t>({ks, 0, offset}), std::min(ke, offset + cols_), offset};
  }
  // The key of the row's request-local position 0 (token ks: position = token - ks).
  std::int64_t position_key(std::int64_t r) const {
    return std::min<std::int64_t>(ks_[static_cast<std::size_t>(r)], kv_.rows);
  }
  key_ref key(std::int64_t, std::int64_t k) const { return {kv_.row(k), kv_.scale(k)}; }
  void fill_work(const tiling& t, work_list& list) const { detail::split_work(*this, t, list); }
  static constexpr bool prefill = true;
  std::int64_t gather_block() const { return 0; }  // keys are contiguous tokens

 private:
  rows_view<Format> kv_;
  std::span<const Index> ks_, ke_;
  bool full_width_;
  std::int64_t cols_;
};

MQALOGITS_NAMESPACE_END
