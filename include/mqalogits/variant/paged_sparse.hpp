// Paged-sparse variant: selected blocks of a paged cache. Column b*B + o of row q is context
// position idx[q][b] * B + o, valid iff b < nb, idx >= 0, position < len and position <
// max_blocks * page_kv, with nb = min(cap, ceil(max(0, len) / B)).
//
// Two protocols, chosen when the metadata is made:
// - reread (DeepGEMM's, the default): the metadata resolves every selected block to its page
//   once; each kernel call reads the current bytes of the cache it is given. One metadata object
//   serves every indexer layer of a decode step, each layer with its own cache of the same
//   geometry (as vLLM and sglang use it). Regenerate it when lengths, table or selection change.
// - snapshot (DeepGEMM-Ascend's first/reuse): the first kernel call gathers the selected KV bytes
//   into the metadata; later calls reuse them with new Q and weights, whatever the cache holds by
//   then. Regenerate it when the KV contents change.
//
// Its parts: paged_sparse_metadata.hpp (the metadata type), paged_sparse_snapshot.hpp (the
// snapshot protocol's copy of the keys), paged_sparse_checks.hpp (the varlen indices check),
// paged_sparse_make.hpp (get_paged_sparse_mqa_logits_metadata) and paged_sparse_plan.hpp (the plans
// the kernel runs).
#pragma once

#include "paged_sparse_checks.hpp"
#include "paged_sparse_make.hpp"
#include "paged_sparse_metadata.hpp"
#include "paged_sparse_plan.hpp"
