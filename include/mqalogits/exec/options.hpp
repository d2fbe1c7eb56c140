// Per-call options shared by every kernel.
#pragma once

#include "../config.hpp"
#include "executor.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct options {
  // Where the work runs; serial on the calling thread by default.
  executor_ref executor{};
  // false (upstream's engines): do not spend time writing -inf; invalid columns are then
  // unspecified and the caller's top-k must read only the valid range.
  bool clean_logits = true;
  // A row with tokens its output cannot hold is an error by default, as it is an engine bug that
  // would otherwise lose positions without a word: on the paged kernels a context longer than
  // its block table (context_lens > max_blocks * page_kv) or, for fp8_fp4_paged_mqa_logits, than
  // the output (> max_context_len); on the dense kernel a range past the KV (ke > N) or longer
  // than its columns (ke - ks > max_seqlen_k > 0). true masks the positions past the table and
  // the output instead (DeepGEMM-Ascend's behaviour): the dense kernel clamps ke to N and keeps
  // each row's first max_seqlen_k columns, and a fused top-k selects among the kept ones.
  bool truncate_long_contexts = false;
};

MQALOGITS_NAMESPACE_END
