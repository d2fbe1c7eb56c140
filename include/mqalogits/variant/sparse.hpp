// Sparse variant: selected blocks of a token-major KV. With ke' = min(ke, N), column b*B + o of
// row q is token idx[q][b] * B + o (the aligned mapping, DeepGEMM's default), or idx[q][b] * B +
// ks[q] % B + o with use_unaligned_ks (DeepGEMM-Ascend's mapping); it is valid iff b < nb,
// idx >= 0 and ks <= token < ke'. nb, capped at cap, counts the blocks that overlap [ks, ke'):
// ceil(max(0, ke' - ks) / B) unaligned, ceil(ke' / B) - floor(ks / B) (0 when ke' <= ks) aligned.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "../check/extent.hpp"
#include "../check/index_arrays.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "plan.hpp"
#include "reset_on_move.hpp"

MQALOGITS_NAMESPACE_BEGIN

inline bool supported_sparse_block_kv(std::int64_t b) {
  return b == 8 || b == 16;
}
inline constexpr std::int64_t max_sparse_capacity = 4096;

namespace detail {
constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  return ((a % b) + b) % b;
}
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return (a - floor_mod(a, b)) / b;
}
constexpr std::int64_t selected_blocks(std::int64_t length, std::int64_t block, std::int64_t cap) {
  return std::min(cap, (std::max<std::int64_t>(length, 0) + block - 1) / block);
}

template <index_value I>
void check_sparse_indices(const char* where, matrix_view<const I> idx,
                          std::int64_t sparse_block_kv) {
  using detail::require;
  require(idx.rows >= 0, where, [&](auto& m) {
    m << "sparse_kv_block_indices has " << idx.rows << " rows (shape [" << idx.rows << ", "
      << idx.cols << "])";
  });
  require(idx.cols >= 1 && idx.cols <= max_sparse_capacity, where, [&](auto& m) {
    m << "sparse_kv_block_indices capacity " << idx.cols << " is out of range [1, "
      << max_sparse_capacity << "] (shape [" << idx.rows << ", " << idx.cols << "])";
  });
  require(idx.rows == 0 || idx.data, where,
          [&](auto& m) { m << "sparse_kv_block_indices is null with " << idx.rows << " rows"; });
  check_matrix_extent(where, "sparse_kv_block_indices", idx);  // stride, extent
  require(supported_sparse_block_kv(sparse_block_kv), where, [&](auto& m) {
    m << "sparse_block_kv = " << sparse_block_kv << " is not supported (8 or 16)";
  });
}

// Index values are kept as int64, bounded to +-2^61 so that no position arithmetic on them can
// overflow: every bound that can select anything lies inside (the metadata functions reject
// larger token counts), and a clamped ks keeps its remainder modulo the block size.
inline constexpr std::int64_t index_bound = std::int64_t{1} << 61;
constexpr std::int64_t bounded(std::int64_t v) {
  return std::clamp(v, -index_bound, index_bound);
}
constexpr std::int64_t bounded_start(std::int64_t ks, std::int64_t block) {
  if (ks < -index_bound) return -index_bound + floor_mod(ks, block);
  if (ks > index_bound) return index_bound + floor_mod(ks, block);
  return ks;
}

// A copy of the rows of m, each entry through `bound`.
template <index_value I, class Bound>
detail::vector<std::int64_t> copy_rows(matrix_view<const I> m, Bound bound) {
  detail::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = 0; c < m.cols; ++c) out.push_back(bound(std::int64_t{m(r, c)}));
  return out;
}
// A selected block index: -1 for any negative one, and no larger than a block that ends past
// every bound (still masked, its positions computed without overflow).
inline std::int64_t bounded_block(std::int64_t idx, std::int64_t block) {
  return idx < 0 ? -1 : std::min(idx, index_bound / block);
}

// Per row, which of its first count(r) selected blocks repeat an earlier entry of the row: the
// same block index covers the same tokens again (vLLM pads a row by repeating its last valid
// block). [rows, cap], empty when no row repeats a block. A row whose valid entries never
// decrease (sorted, -1 padded, or padded with its last block) takes one pass; any other order
// one sort of the row.
template <class Count>
detail::vector<unsigned char> find_repeated_blocks(const detail::vector<std::int64_t>& idx,
                                                   std::int64_t rows, std::int64_t cap,
                                                   Count count) {
  detail::vector<unsigned char> repeated;
  detail::vector<std::pair<std::int64_t, std::int64_t>> sorted;  // (block index, entry)
  const auto mark = [&](std::int64_t r, std::int64_t b) {
    if (repeated.empty()) repeated.assign(static_cast<std::size_t>(rows * cap), 0);
    repeated[static_cast<std::size_t>(r * cap + b)] = 1;
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t nb = count(r);
    const std::int64_t* row = idx.data() + r * cap;
    std::int64_t last = -1;
    bool monotone = true;
    for (std::int64_t b = 0; b < nb && monotone; ++b)
      if (row[b] >= 0) {
        monotone = row[b] >= last;
        last = row[b];
      }
    if (monotone) {  // a repeat sits right after its first occurrence (-1 entries aside)
      last = -1;
      for (std::int64_t b = 0; b < nb; ++b)
        if (row[b] >= 0) {
          if (row[b] == last) mark(r, b);
          last = row[b];
        }
      continue;
    }
    sorted.clear();
    for (std::int64_t b = 0; b < nb; ++b)
      if (row[b] >= 0) sorted.emplace_back(row[b], b);
    std::sort(sorted.begin(), sorted.end());  // by index, then entry: the first one stays
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].first == sorted[i - 1].first) mark(r, sorted[i].second);
  }
  return repeated;
}
}  // namespace detail

class sparse_mqa_metadata;
namespace detail {
template <index_value I>
sparse_mqa_metadata make_sparse_metadata(std::span<const I>, std::span<const I>, std::int64_t,
                                         matrix_view<const I>, std::int64_t, bool);
}  // namespace detail

// The sparse metadata: a copy of the selection and bounds the kernel runs (the caller's arrays
// may change afterwards, as with DeepGEMM-Ascend), the column mapping and each row's block count.
class sparse_mqa_metadata {
 public:
  std::int64_t num_rows() const { return f_->rows; }
  std::int64_t capacity() const { return f_->cap; }
  std::int64_t sparse_block_kv() const { return f_->block; }
  std::int64_t num_kv_tokens() const { return f_->num_kv; }
  bool use_unaligned_ks() const { return f_->unaligned; }
  std::int64_t num_cols() const { return f_->cap * f_->block; }
  std::int64_t ks(std::int64_t r) const { return f_->ks[static_cast<std::size_t>(r)]; }
  std::int64_t ke(std::int64_t r) const {  // clamped to N
    return std::min<std::int64_t>(f_->ke[static_cast<std::size_t>(r)], f_->num_kv);
  }
  // The blocks of [ks, ke') a row may read (its selection's first entries); counted once, when
  // the metadata is made, since every key the kernel reads asks for it.
  std::int64_t num_blocks(std::int64_t r) const { return f_->nb[static_cast<std::size_t>(r)]; }
  std::int64_t block(std::int64_t r, std::int64_t b) const {
    return f_->idx[static_cast<std::size_t>(r * f_->cap + b)];
  }
  // Whether selected block b of row r repeats an earlier entry of the row (its tokens are
  // already covered): the fused top-k treats its columns as masked, the logits keep them.
  bool repeats(std::int64_t r, std::int64_t b) const {
    return !f_->repeated.empty() && f_->repeated[static_cast<std::size_t>(r * f_->cap + b)];
  }
  // The token column k of row r reads, or -1 when the column is masked.
  std::int64_t token(std::int64_t r, std::int64_t k) const {
    const std::int64_t B = f_->block, idx = block(r, k / B);
    if (k / B >= num_blocks(r) || idx < 0) return -1;
    const std::int64_t s = ks(r);
    const std::int64_t t = idx * B + (f_->unaligned ? detail::floor_mod(s, B) : 0) + k % B;
    return (t >= s && t < ke(r)) ? t : -1;
  }

  template <index_value I>
  friend sparse_mqa_metadata detail::make_sparse_metadata(std::span<const I>, std::span<const I>,
                                                          std::int64_t, matrix_view<const I>,
                                                          std::int64_t, bool);

 private:
  std::int64_t count_blocks(std::int64_t r) const {
    const std::int64_t s = ks(r), e = ke(r), B = f_->block;
    if (f_->unaligned) return detail::selected_blocks(e - s, B, f_->cap);
    if (e <= s) return 0;
    return std::min(f_->cap, -detail::floor_div(-e, B) - detail::floor_div(s, B));
  }
  struct fields {
    std::int64_t rows = 0, cap = 0, block = 0, num_kv = 0;
    bool unaligned = false;
    detail::vector<std::int64_t> ks, ke, idx, nb;
    detail::vector<unsigned char> repeated;  // see repeats(); empty when no row repeats
  };
  reset_on_move<fields> f_;  // a moved-from metadata is empty: the kernel rejects it
};

template <index_value I>
sparse_mqa_metadata detail::make_sparse_metadata(std::span<const I> ks, std::span<const I> ke,
                                                 std::int64_t num_kv_tokens,
                                                 matrix_view<const I> indices,
                                                 std::int64_t sparse_block_kv,
                                                 bool use_unaligned_ks) {
  constexpr const char* where = "get_sparse_mqa_logits_metadata";
  using detail::require;
  detail::check_sparse_indices(where, indices, sparse_block_kv);
  const auto rows = indices.rows;
  require(static_cast<std::int64_t>(ks.size()) == rows, where, [&](auto& m) {
    m << "ks has " << ks.size() << " entries, sparse_kv_block_indices has " << rows << " rows";
  });
  require(static_cast<std::int64_t>(ke.size()) == rows, where, [&](auto& m) {
    m << "ke has " << ke.size() << " entries, sparse_kv_block_indices has " << rows << " rows";
  });
  detail::check_index_span(where, "ks", ks);
  detail::check_index_span(where, "ke", ke);
  require(num_kv_tokens > 0 && num_kv_tokens <= detail::index_bound, where,
          [&](auto& m) { m << "num_kv_tokens = " << num_kv_tokens << " must be in [1, 2^61]"; });
  sparse_mqa_metadata meta;
  auto& f = *meta.f_;
  f.rows = rows;
  f.cap = indices.cols;
  f.block = sparse_block_kv;
  f.num_kv = num_kv_tokens;
  f.unaligned = use_unaligned_ks;
  for (const I v : ks) f.ks.push_back(detail::bounded_start(v, sparse_block_kv));
  for (const I v : ke) f.ke.push_back(detail::bounded(v));
  f.idx = detail::copy_rows(
      indices, [&](std::int64_t v) { return detail::bounded_block(v, sparse_block_kv); });
  for (std::int64_t r = 0; r < rows; ++r) f.nb.push_back(meta.count_blocks(r));
  f.repeated = detail::find_repeated_blocks(f.idx, rows, f.cap,
                                            [&](std::int64_t r) { return meta.num_blocks(r); });
  return meta;
}

// ks, ke: [num_q]; sparse_kv_block_indices: [num_q, cap] (-1 pads); sparse_block_kv: 8 or 16;
// all int32 (as DeepGEMM takes them) or all int64, the type ks has. use_unaligned_ks picks the
// column mapping (false: DeepGEMM's default; true: DeepGEMM-Ascend's). The metadata keeps its
// own copy.
template <index_array KS>
sparse_mqa_metadata get_sparse_mqa_logits_metadata(
    const KS& ks, std::span<const index_value_of<KS>> ke, std::int64_t num_kv_tokens,
    matrix_view<const index_value_of<KS>> sparse_kv_block_indices, std::int64_t sparse_block_kv,
    bool use_unaligned_ks = false) {
  return detail::make_sparse_metadata(index_span(ks), ke, num_kv_tokens, sparse_kv_block_indices,
                                      sparse_block_kv, use_unaligned_ks);
}

namespace detail {
// The shape the sparse and paged-sparse plans share: each query row its own group, columns
// [0, num_blocks * B) of a row, one selected block per gather. With skip_repeats (the fused
// top-k) the columns of a block that repeats an earlier entry of its row are masked, so no
// token is selected twice; the logits output keeps them.
template <class Meta>
class selected_blocks_plan {
 public:
  explicit selected_blocks_plan(const Meta& meta, bool skip_repeats = false)
      : meta_(&meta), skip_repeats_(skip_repeats) {}

  std::int64_t num_rows() const { return meta_->num_rows(); }
  std::int64_t num_cols() const { return meta_->num_cols(); }
  std::int64_t num_groups() const { return num_rows(); }
  row_span group_rows(std::int64_t r) const { return {r, r + 1}; }
  row_keys row(std::int64_t r) const {
    return {0, meta_->num_blocks(r) * meta_->sparse_block_kv(), 0};
  }
  void fill_work(const tiling& t, work_list& list) const { split_work(*this, t, list); }
  static constexpr bool prefill = false;
  std::int64_t gather_block() const { return meta_->sparse_block_kv(); }

 protected:
  bool skipped(std::int64_t r, std::int64_t k) const {
    return skip_repeats_ && meta_->repeats(r, k / meta_->sparse_block_kv());
  }
  const Meta* meta_;
  bool skip_repeats_;
};
}  // namespace detail

template <class Format>
class sparse_plan : public detail::selected_blocks_plan<sparse_mqa_metadata> {
 public:
  sparse_plan(rows_view<Format> kv, const sparse_mqa_metadata& meta, bool skip_repeats = false)
      : selected_blocks_plan(meta, skip_repeats), kv_(kv) {}

  key_ref key(std::int64_t r, std::int64_t k) const {
    const std::int64_t t = meta_->token(r, k);
    if (t < 0 || skipped(r, k)) return {};
    return {kv_.row(t), kv_.scale(t)};
  }

 private:
  rows_view<Format> kv_;
};

MQALOGITS_NAMESPACE_END
