// Paged variant (decode): rows (b, j) of request b share its block table (varlen: consecutive
// rows with one index share identical block-table rows); column j is context position j, read
// from page block_table[b][j / page_kv], slot j % page_kv; valid iff j < context_lens[b][j'] and
// j < max_blocks * page_kv.
//
// Its parts: paged_limits.hpp (limits), paged_schedule.hpp (the schedule type),
// paged_checks.hpp (argument checks), paged_metadata.hpp (get_paged_mqa_logits_metadata),
// paged_schedule_array.hpp (upstream's array form) and paged_plan.hpp (the plan the kernel runs).
#pragma once

#include "paged_checks.hpp"
#include "paged_limits.hpp"
#include "paged_metadata.hpp"
#include "paged_plan.hpp"
#include "paged_schedule.hpp"
#include "paged_schedule_array.hpp"
