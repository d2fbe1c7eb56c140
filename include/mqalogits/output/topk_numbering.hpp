// What each kernel's top-k writes for a selected column (topk.hpp's index kinds), and the output
// policy each kernel makes of what the caller passes as its output.
//
// A kernel states what it knows about its columns in an output context (the block table of the
// paged kernel, the selection of the sparse ones) and makes its policy with
// make_output(out, options, context): an argument a kernel cannot serve (a slot numbering on the
// dense kernel) has no overload there, so the call does not compile.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../exec/options.hpp"
#include "../variant/paged_sparse.hpp"
#include "../variant/sparse.hpp"
#include "../view/matrix_view.hpp"
#include "output.hpp"
#include "topk.hpp"
#include "topk_output.hpp"

MQALOGITS_NAMESPACE_BEGIN

// What each kernel knows about its columns, for the outputs that need more than the column.
struct dense_outputs {};
template <class I>
struct paged_outputs {
  matrix_view<const I> block_table;
  std::int32_t page_kv = 1;
  std::int64_t next_n = 1;
  std::int64_t num_pages = 0;
};
struct sparse_outputs {
  const sparse_mqa_metadata* metadata = nullptr;
};
struct paged_sparse_outputs {
  const paged_sparse_mqa_metadata* metadata = nullptr;
  std::int64_t num_pages = 0;
};

namespace detail {

// Column -> what `indices` holds.
struct column_numbering {
  std::int32_t operator()(std::int64_t, std::int32_t col) const { return col; }
};
// Context position -> cache slot of the paged kernel; rows (b, j) of request b share its
// block-table row. Only selected positions are translated, and those lie inside the context,
// whose block-table entries the kernel has checked (int32 or int64, as the call passes them).
template <class I>
struct slot_numbering {
  matrix_view<const I> block_table;
  std::int32_t page_kv = 1;
  std::int64_t next_n = 1;
  std::int32_t operator()(std::int64_t row, std::int32_t pos) const {
    const std::int64_t page = block_table(row / next_n, pos / page_kv);
    return static_cast<std::int32_t>(page * page_kv + pos % page_kv);
  }
};
// Column -> column + offsets[row] (the dense kernel's topk_offset); the entry point has checked
// that every sum fits int32.
template <class I>
struct offset_numbering {
  std::span<const I> offsets;
  std::int32_t operator()(std::int64_t row, std::int32_t col) const {
    return static_cast<std::int32_t>(col + offsets[static_cast<std::size_t>(row)]);
  }
};
// Sparse kernel: column -> the token's request-local position, token - ks[row].
struct sparse_position_numbering {
  const sparse_mqa_metadata* metadata = nullptr;
  std::int32_t operator()(std::int64_t row, std::int32_t col) const {
    return static_cast<std::int32_t>(metadata->token(row, col) - metadata->ks(row));
  }
};
// Paged-sparse kernel: column -> its context position, or the cache slot of that position
// through the one block-table entry the metadata kept per selected block.
struct paged_sparse_position_numbering {
  const paged_sparse_mqa_metadata* metadata = nullptr;
  std::int32_t operator()(std::int64_t row, std::int32_t col) const {
    return static_cast<std::int32_t>(metadata->position(row, col));
  }
};
struct paged_sparse_slot_numbering {
  const paged_sparse_mqa_metadata* metadata = nullptr;
  std::int32_t operator()(std::int64_t row, std::int32_t col) const {
    const std::int64_t pos = metadata->position(row, col);
    const std::int64_t page = metadata->block_page(row, col / metadata->sparse_block_kv());
    return static_cast<std::int32_t>(page * metadata->page_kv() + pos % metadata->page_kv());
  }
};

// Slots page * page_kv + offset as int32: every slot of a cache of num_pages pages must fit.
inline void check_slots_fit(const char* where, std::int64_t num_pages, std::int32_t page_kv) {
  require(num_pages <= (std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1) / page_kv,
          where, [&](auto& m) {
            m << "top-k slots of " << num_pages << " pages x page_kv " << page_kv
              << " do not fit int32";
          });
}
// Short rows are the candidate-source kernels' (dense, paged): a sparse row's valid columns
// are not a run of positions.
inline void refuse_short_rows(const char* where, bool short_rows) {
  require(!short_rows, where,
          [](auto& m) { m << "top-k short rows: only the dense and paged kernels take them"; });
}

template <class Numbering, class Selection>
topk_output<Numbering> topk_policy(const Selection& sel, Numbering numbering) {
  return topk_output<Numbering>(sel.indices, sel.values, numbering, sel.short_rows);
}

}  // namespace detail

// A column selection, on any kernel (what output_argument accepts). Short rows need the kernel's
// context (make_output).
inline topk_output<detail::column_numbering> to_output_policy(
    const topk_selection<topk_index::column_t>& sel, const options&) {
  detail::refuse_short_rows("top-k", sel.short_rows);
  return detail::topk_policy(sel, detail::column_numbering{});
}
static_assert(output_policy<topk_output<detail::column_numbering>>);
static_assert(grouped_output_policy<topk_output<detail::column_numbering>>);

// Any output that needs no context.
template <output_argument Out, class Context>
auto make_output(const Out& out, const options& opt, const Context&) {
  return to_output_policy(out, opt);
}
// Columns, with short rows where the kernel has them.
inline auto make_output(const topk_selection<topk_index::column_t>& sel, const options&,
                        const dense_outputs&) {
  return detail::topk_policy(sel, detail::column_numbering{});
}
template <class I>
auto make_output(const topk_selection<topk_index::column_t>& sel, const options&,
                 const paged_outputs<I>&) {
  return detail::topk_policy(sel, detail::column_numbering{});
}
template <class I>
auto make_output(const topk_offset_selection<I>& sel, const options&, const dense_outputs&) {
  return detail::topk_policy(sel, detail::offset_numbering<I>{sel.offsets});
}
template <class I>
auto make_output(const topk_selection<topk_index::slot_t>& sel, const options&,
                 const paged_outputs<I>& ctx) {
  detail::check_slots_fit("fp8_fp4_paged_mqa_logits", ctx.num_pages, ctx.page_kv);
  return detail::topk_policy(sel,
                             detail::slot_numbering<I>{ctx.block_table, ctx.page_kv, ctx.next_n});
}
inline auto make_output(const topk_selection<topk_index::position_t>& sel, const options&,
                        const sparse_outputs& ctx) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  detail::refuse_short_rows(where, sel.short_rows);
  // A position is token - ks < ke' - ks: it fits int32 when every row's range does.
  const sparse_mqa_metadata& meta = *ctx.metadata;
  for (std::int64_t r = 0; r < meta.num_rows(); ++r)
    detail::require(meta.num_blocks(r) == 0 ||
                        meta.ke(r) - meta.ks(r) <= std::numeric_limits<std::int32_t>::max(),
                    where, [&](auto& m) {
                      m << "top-k positions of row " << r << " (ke - ks = " << meta.ke(r) << " - "
                        << meta.ks(r) << ") do not fit int32";
                    });
  return detail::topk_policy(sel, detail::sparse_position_numbering{ctx.metadata});
}
inline auto make_output(const topk_selection<topk_index::position_t>& sel, const options&,
                        const paged_sparse_outputs& ctx) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  detail::refuse_short_rows(where, sel.short_rows);
  // Positions lie inside the block table: max_blocks * page_kv of them.
  detail::require(
      ctx.metadata->max_blocks() <=
          (std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1) / ctx.metadata->page_kv(),
      where, [&](auto& m) {
        m << "top-k positions of a block table of " << ctx.metadata->max_blocks()
          << " pages x page_kv " << ctx.metadata->page_kv() << " do not fit int32";
      });
  return detail::topk_policy(sel, detail::paged_sparse_position_numbering{ctx.metadata});
}
inline auto make_output(const topk_selection<topk_index::slot_t>& sel, const options&,
                        const paged_sparse_outputs& ctx) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  detail::refuse_short_rows(where, sel.short_rows);
  detail::check_slots_fit(where, ctx.num_pages, ctx.metadata->page_kv());
  return detail::topk_policy(sel, detail::paged_sparse_slot_numbering{ctx.metadata});
}

// What a kernel with output context Context accepts in the position of its output.
template <class Out, class Context>
concept output_for = requires(const Out& out, const options& opt, const Context& ctx) {
  { make_output(out, opt, ctx) } -> output_policy;
};

MQALOGITS_NAMESPACE_END
