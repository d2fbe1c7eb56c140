// The four kernels scheduled on the NeuronCore model (core.hpp), in stages:
//
// - key streaming (key_stream): a chunk of keys from HBM into the matmul operand K^T;
// - query staging (query_staging): the query rows into Q^T, through the transposes and decode
//   the keys use (operand_staging; which operands a generation and format take: operand_kind);
// - the passes: prefill (prefill_pass: query tokens on partitions) or decode (decode_pass:
//   heads on partitions, a decode's smallest passes packed by packed_decode); trn3's MX prefill
//   runs whichever of the two ends the call sooner;
// - the epilogue (epilogue): the logits cast and written out through a logits_sink.
//
// The kernel below cuts the plan's work into key chunks (chunks.hpp) and runs them through the
// stages in order. Weights and outputs reach the stages through weights_ref and logits_sink,
// so no stage is compiled per weight, logit or output type; query staging and the operand
// transit tiles do not depend on the plan either.
// PSUM: every streaming tile is double-buffered (psum_buffers), and all of them fit the 8 banks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "../../view/rows_view.hpp"
#include "chunk_order.hpp"
#include "chunks.hpp"
#include "core.hpp"
#include "decode_pass.hpp"
#include "epilogue.hpp"
#include "key_stream.hpp"
#include "logits_sink.hpp"
#include "operand_kind.hpp"
#include "operand_staging.hpp"
#include "packed_decode.hpp"
#include "prefill_pass.hpp"
#include "query_staging.hpp"
#include "report.hpp"
#include "traits.hpp"
#include "weights_ref.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The schedule of one call on one core, for a generation, format and plan: weights and outputs
// of every type reach it through weights_ref and logits_sink.
template <class Gen, class Format, class Plan>
class kernel {
  static_assert(variant_plan<Plan>, "mqalogits neuron model: Plan is not a variant plan");
  using kind = operand_kind<Gen, Format>;
  // Keys stored in the Neuron-native MX layout (native_paged.hpp): whole blocks by DMA.
  static constexpr bool native = requires { requires Plan::native_mx_layout; };
  static_assert(!native || kind::mx,
                "mqalogits neuron model: the native MX layout needs trn3 and MX");
  static constexpr bool packs = !Plan::prefill && !kind::per_token;  // decode passes may be packed
  // trn3's MX prefill may also run decode's passes (rows x heads on partitions, keys on the
  // head sum's output partitions): their fp32 head sum costs half of prefill_pass's per relu
  // score, but each pass of one or two rows loads its Q and weights a (token, head) row per
  // descriptor and writes short runs of logits, so they win on long key ranges only.
  static constexpr bool both_passes = Plan::prefill && kind::mx && !kind::per_token;
  static constexpr bool head_passes = !Plan::prefill || both_passes;  // may run decode_pass
  struct none {};
  // Only the chosen passes are constructed: both at once may not fit SBUF.
  using token_pass =
      std::conditional_t<Plan::prefill, std::optional<prefill_pass<Gen, Format, Plan>>, none>;
  using head_pass =
      std::conditional_t<head_passes, std::optional<decode_pass<Gen, Format, Plan>>, none>;
  using packing = std::conditional_t<packs, packed_decode<Gen, Format, Plan>, none>;

 public:
  kernel(core<Gen>& c, const rows_view<Format>& q, const Plan& plan, const weights_ref& w,
         logits_sink& output, int part, int parts)
      : kernel(c, q, plan, w, output, part, parts,
               choose_layout(c, q, plan, w, output, part, parts)) {}
  // With the chunk layout given (choose_layout's trials).
  kernel(core<Gen>& c, const rows_view<Format>& q, const Plan& plan, const weights_ref& w,
         logits_sink& output, int part, int parts, const chunk_layout& layout)
      : kernel(c, q, plan, w, output, part, parts, choice{layout, {}}) {}

  void run() {
    if (trial_) {  // a cost-only call whose layout trial already ran this schedule
      c_.adopt(*trial_);
      return;
    }
    if (clean_ && part_ == 0) epilogue_.fill_outside();
    const chunk_order order(plan_, layout_.chunk, part_, parts_);
    for (const key_chunk& kc : order.chunks) {
      const work_item& ch = order.items[kc.item];
      if constexpr (packs)
        if (const int slot = pack_.slot_of(ch)) {
          pack_.add(ch, kc.k0, kc.nk, slot);
          continue;
        }
      keys_.load(ch.group, kc.k0, kc.nk);
      if constexpr (Plan::prefill)
        if (layout_.token_passes) {
          tokens_->run(ch, kc.k0, kc.nk);
          continue;
        }
      if constexpr (head_passes) heads_->run(ch, kc.k0, kc.nk);
    }
    if constexpr (packs) pack_.flush();
  }

 private:
  // A layout and, where a cost-only trial chose it on a cost-only core, that trial's counts.
  struct choice {
    chunk_layout layout;
    std::optional<report> trial;
  };
  kernel(core<Gen>& c, const rows_view<Format>& q, const Plan& plan, const weights_ref& w,
         logits_sink& output, int part, int parts, choice chosen)
      : c_(c),
        trial_(c.computes() ? std::nullopt : std::move(chosen.trial)),
        plan_(plan),
        clean_(output.clean()),
        part_(part),
        parts_(parts),
        layout_(chosen.layout),
        staging_(c, layout_.chunk),
        keys_(c, plan, layout_, staging_),
        queries_(c, q, layout_.chunk, staging_),
        epilogue_(c, plan, output, layout_, acc_step(), head_sum_columns()),
        tokens_(make_token_pass(c, w)),
        heads_(make_head_pass(c, w)),
        pack_(make_packing(c, w)) {}

  // A decode's gathered pages go one run of tokens per partition row, and the run length is a
  // trade: pages of 128 or 256 tokens read as runs of 128 (a page of 128 whole) take half the
  // gather descriptors of runs of 64 (one per partition row) but chunks of half the rows, which
  // cost VectorE and TensorE more per key where fewer than 64 rows remain (trn1's SBUF, short
  // requests); requests too short to fill 128 rows with runs of 64 may go as runs of 32, 16 or
  // 8 tokens, so that the elementwise passes (trn2's decode above all) and transposes use more
  // partitions, at the price of more descriptors. A decode takes whichever run ends the call
  // sooner given the work queued after it (the selection's GpSimd and VectorE), from a
  // cost-only run of each; ties keep the runs of 64.
  // trn3's MX prefill likewise takes prefill_pass's or decode_pass's layout, whichever ends the
  // call sooner (decode_pass's on long key ranges, where its cheaper head sum outweighs its
  // DMA); ties keep prefill_pass's.
  // A cost-only call adopts the winning trial's counts instead of running its schedule again.
  static choice choose_layout(core<Gen>& c, const rows_view<Format>& q, const Plan& plan,
                              const weights_ref& w, logits_sink& output, int part, int parts) {
    const chunk_layout runs = layout_of(plan, 0);
    struct trial_run {
      double end;
      report counts;
    };
    const auto ends = [&](const chunk_layout& l) {
      core<Gen> trial(false);
      trial.queue_after(c.later_gpsimd_seconds(), c.later_vector_seconds());
      kernel(trial, q, plan, w, output, part, parts, l).run();
      return trial_run{trial.with_work_after().single_core_seconds(), trial.counters()};
    };
    if constexpr (both_passes) {
      chunk_layout heads = runs;
      heads.token_passes = false;
      trial_run h = ends(heads), t = ends(runs);
      return h.end < t.end ? choice{heads, std::move(h.counts)} : choice{runs, std::move(t.counts)};
    } else if constexpr (Plan::prefill || native) {
      return {runs, {}};
    } else {
      const capture_state cap = current_capture();
      if (cap.target && cap.options.page_run > 0 && runs.page > 0) {
        const std::int64_t run = cap.options.page_run;
        detail::require(run <= runs.page && runs.page % run == 0,
                        detail::where3{"neuron model (", traits<Gen>::name, ")"}, [&](auto& m) {
                          m << "capture_options::page_run = " << run
                            << " does not divide the call's gathered blocks of " << runs.page
                            << " tokens";
                        });
        return {layout_of(plan, run), {}};
      }
      choice best{runs, {}};
      double best_end = -1;
      const auto consider = [&](std::int64_t run) {
        const chunk_layout l = layout_of(plan, run);
        if (best_end < 0) {
          trial_run base = ends(runs);
          best_end = base.end;
          best.trial = std::move(base.counts);
        }
        trial_run t = ends(l);
        if (t.end < best_end) {
          best = {l, std::move(t.counts)};
          best_end = t.end;
        }
      };
      if (runs.page % (2 * page_run) == 0 && runs.block == page_run) consider(2 * page_run);
      for (std::int64_t run = runs.block / 2, last = short_run(plan, runs); run >= last; run /= 2)
        consider(run);
      return best;
    }
  }
  // Requests too short to fill a chunk's 128 partition rows with runs of `l.block` tokens: the
  // shortest run (down to 8 tokens, dividing the page) at which the longest request still fits
  // 128 rows, so that elementwise passes and transposes use more partitions. l.block otherwise.
  static std::int64_t short_run(const Plan& plan, const chunk_layout& l) {
    if (l.page <= 0) return l.block;
    std::int64_t longest = 0;
    for (std::int64_t g = 0; g < plan.num_groups(); ++g) {
      const row_keys keys = detail::key_union(plan, plan.group_rows(g));
      if (!keys.empty()) longest = std::max(longest, keys.key_end - keys.key_begin);
    }
    std::int64_t run = l.block;
    while (run / 2 >= 8 && run % 2 == 0 && l.page % (run / 2) == 0 &&
           (longest + run / 2 - 1) / (run / 2) <= common_traits::partitions)
      run /= 2;
    return run;
  }
  // `run`: keys per partition row of a gathered page (0: runs of 64 tokens for larger pages).
  static chunk_layout layout_of(const Plan& plan, std::int64_t run) {
    chunk_layout l;
    l.page = plan.gather_block();
    // Native blocks go whole (their rows are the block's own); large pages as runs of 64 tokens,
    // or of `run`.
    l.block = l.page <= 0 ? contiguous_block : native ? l.page : run > 0 ? run : run_keys(l.page);
    l.chunk = chunk_keys(l.block, traits<Gen>::sbuf_partition_bytes);
    l.rows = l.chunk / l.block;
    l.slots = kind::mx ? (l.block + mx_pack - 1) / mx_pack * mx_pack : l.block;
    l.padded_order = kind::mx && !native;
    l.token_passes = Plan::prefill;
    return l;
  }
  std::int64_t acc_step() const {
    if constexpr (Plan::prefill)
      if (layout_.token_passes) return prefill_pass<Gen, Format, Plan>::acc_step;
    if constexpr (head_passes)
      return decode_pass<Gen, Format, Plan>::acc_step;
    else
      return 0;  // unreachable: a prefill without decode's passes takes prefill_pass
  }
  std::int64_t head_sum_columns() const {
    if constexpr (head_passes)
      if (!layout_.token_passes) return decode_pass<Gen, Format, Plan>::head_sum_columns(layout_);
    return 0;
  }
  token_pass make_token_pass(core<Gen>& c, const weights_ref& w) {
    if constexpr (Plan::prefill)
      if (layout_.token_passes) return token_pass(std::in_place, c, queries_, keys_, epilogue_, w);
    return token_pass{};
  }
  head_pass make_head_pass(core<Gen>& c, const weights_ref& w) {
    if constexpr (head_passes)
      if (!layout_.token_passes)
        return head_pass(std::in_place, c, queries_, keys_, epilogue_, w, layout_);
    return head_pass{};
  }
  packing make_packing(core<Gen>& c, const weights_ref& w) {
    if constexpr (packs)
      return packing(c, keys_, *heads_, w.cols);
    else
      return packing{};
  }

  core<Gen>& c_;
  std::optional<report> trial_;  // the counts this cost-only call adopts (choose_layout)
  const Plan& plan_;
  bool clean_;
  int part_, parts_;
  chunk_layout layout_;
  operand_staging<Gen, Format> staging_;
  key_stream<Gen, Format, Plan> keys_;
  query_staging<Gen, Format> queries_;
  epilogue<Gen, Plan> epilogue_;
  [[no_unique_address]] token_pass tokens_;
  [[no_unique_address]] head_pass heads_;
  [[no_unique_address]] packing pack_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
