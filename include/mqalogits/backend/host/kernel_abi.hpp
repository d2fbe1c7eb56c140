// What the host kernel driver hands to the instruction-set-specific code, and what that code
// gives back: plain operands and one table of function pointers per format, head dim and ISA.
//
// The driver (driver.hpp) never names an ISA: it runs whatever table it is given. A unit built
// for one ISA builds its table from its own code (kernel_table.hpp); a unit built for the
// baseline with runtime dispatch (dispatch.hpp) asks the mqalogits_dispatch library for the
// table of the fastest path the CPU runs. Both sides of that call are compiled with different
// flags, so everything here lives outside the ISA-tagged namespace of config.hpp, with one
// definition for every build: aggregates and function-pointer types only, no code (a member
// function here would be compiled per unit, under one name). For the same reason no standard
// template may be instantiated on these types (std::fill over key_ptrs would be one weak symbol
// compiled differently in every unit): the headers use plain loops on them.
#pragma once

#include <cstdint>

#include "../../config.hpp"

#define MQALOGITS_HOST_ABI_NAMESPACE host_abi_v0_3

namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE {

// Rows of a view: row r's codes at data + r * data_stride, its scales at scales + r *
// scale_stride (no scales: null).
struct rows_ref {
  const std::uint8_t* data;
  const std::uint8_t* scales;
  std::int64_t data_stride, scale_stride;
};

// One key's bytes; a masked key has null data.
struct key_ptrs {
  const std::uint8_t* data;
  const std::uint8_t* scale;
};

// The fp32 path's operands: one decoded query row (heads rounded up to the vector width, padded
// heads zero, in the panels of the path's blocking: isa/base.hpp's panel_index; w[h], zero on
// padding) and a group of decoded keys (rows of D fp32).
struct f32_query {
  const float* qt;
  const float* w;
  int heads, padded_heads;
};
struct f32_keys {
  const float* values;
};

// The bf16 path's operands (e4m3 formats on CPUs with bf16 pair dot products): one query row as
// words of two bf16 values, pairs[p * padded_heads + h] = (q[h][2p], q[h][2p + 1]) (low half the
// even element), padded heads zero, and per head a scale that multiplies its dot products (FP8
// per-token query rows that come with scales; null: none); and a group of keys, rows of D/2 such
// words, with one scale per key that multiplies its dot products (the FP8 per-token scale;
// unused for MX keys, whose block scales are in their values).
struct bf16_query {
  const std::uint32_t* pairs;
  const float* scales;
  const float* w;
  int heads, padded_heads;
};
struct bf16_keys {
  const std::uint32_t* pairs;
  const float* scales;
};

// The int8 paths' operands (score_path_i8.hpp's i8_path and score_paths_i8_compact.hpp's
// i8_fold_path give their layouts).
struct i8_query {
  const std::int32_t* data;   // 4 code bytes (s8) per int32, in i8_query_word order
  const std::int32_t* start;  // accumulator starts (the ISA's int8 encoding)
  const float* scale;         // scales over 4 (the doubling)
  const float* w;             // head weights
  int heads, padded_heads;
};
struct i8_keys {
  const std::uint8_t* codes;  // i8_key_bytes<D> bytes per key
  const float* scales;
};

// A score kernel for one register blocking: scores `keys` keys of a group against every head
// of a query row, out[t] = sum_h relu(dot(q[h], k[t])) * w[h].
template <class Query, class Keys>
struct keys_kernel {
  void (*fn)(const Query&, const Keys&, float*);
  int keys;  // keys per call
};

// What decode_q_bf16 made of a query row.
inline constexpr int bf16_pairs = 1, bf16_scaled_pairs = 2;

// Which query rows of a work item take the format's compact kernel: the folded one for MXFP4,
// the bf16 one for the e4m3 formats. A row or key takes it only where the result stays within
// the same fp32 arithmetic (decode.hpp says when); the others keep the general kernel.
enum class compact_rows : int { none, some, all };

// Where decode_keys writes a tile of n keys (each buffer sized for the format's path).
struct tile_buffers {
  unsigned char* valid;    // [n] 1 for a key, 0 for a masked one
  float* f32;              // fp32 path: [n][D]
  std::uint8_t* i8;        // int8 path: [n][D] codes, per-block form
  float* i8_scales;        // [n][D/32]
  std::uint8_t* fold;      // [n][D] codes, folded form
  float* fold_scales;      // [n][D/32 + 1]: the folded form's row scale, or the relative form's
                           // block multipliers (int32) and base scale
  std::uint32_t* bf16;     // bf16 path: [n][D/2] pairs
  float* bf16_scales;      // [n]
  unsigned char* compact;  // [n] whether the key has the compact form (folds, or fits bf16)
};

// The kernels of one format at one head dim, compiled for one ISA. A format runs either the
// fp32 path (decode_q_f32, f32_kernel, and where the ISA has it the bf16 path beside it:
// decode_q_bf16, bf16_kernel) or the int8 path (the others); the other's pointers are null.
struct format_kernels {
  const char* isa;  // the path's name (target.hpp's tag): "avx512_vnni", "avx2", "portable", ...
  int lanes;        // heads per vector: query rows are padded to a multiple
  bool fold_rows;   // whether a compact int8 kernel exists on this path: folded, or relative
                    // (the paths that sum blocks in int16)
  // Whether the compact kernel reads the per-block form of the query rows and key codes (the
  // relative form keeps them: decode_q_i8_fold then only says whether the rows have the form,
  // and decode_keys writes each key's codes once, in the per-block tile).
  bool compact_reads_per_block;

  // Query rows first_row .. first_row + heads - 1 (one query token) in the path's layout.
  void (*decode_q_f32)(const rows_ref&, std::int64_t first_row, int heads, int padded_heads,
                       float* qt);
  void (*decode_q_i8)(const rows_ref&, std::int64_t first_row, int heads, int padded_heads,
                      std::int32_t* data, std::int32_t* start, float* scale);
  bool (*decode_q_i8_fold)(const rows_ref&, std::int64_t first_row, int heads, int padded_heads,
                           std::int32_t* data, std::int32_t* start, float* scale);
  // The same rows as bf16 pairs, when every one of them fits: returns bf16_pairs, or
  // bf16_scaled_pairs when their scales are kept apart in scales[h] (padded heads 0); 0 (no bf16
  // form) otherwise.
  int (*decode_q_bf16)(const rows_ref&, std::int64_t first_row, int heads, int padded_heads,
                       std::uint32_t* pairs, float* scales);
  // n keys into a tile, prefetching ahead; masked keys decode as keys that score 0. Each key in
  // the forms the item's rows read: the general form for rows without the compact one, the
  // compact form (and for a key without it, the general one) for rows with it.
  void (*decode_keys)(const key_ptrs* keys, std::int64_t n, compact_rows rows,
                      const tile_buffers& out);
  // The score kernel for rows of `head_vectors` vectors of heads.
  keys_kernel<f32_query, f32_keys> (*f32_kernel)(int head_vectors);
  keys_kernel<i8_query, i8_keys> (*i8_kernel)(int head_vectors);
  keys_kernel<i8_query, i8_keys> (*fold_kernel)(int head_vectors);
  keys_kernel<bf16_query, bf16_keys> (*bf16_kernel)(int head_vectors);
};

// The two streaming steps of the fused top-k (output/topk_key.hpp's keys).
struct topk_steps {
  std::int64_t (*admit_keys)(const float* scores, const unsigned char* valid, std::int64_t n,
                             std::int64_t col, std::uint64_t floor, float bar, std::uint64_t* out);
  std::int64_t (*compact_at_least)(std::uint64_t* keys, std::int64_t n, std::uint64_t t);
};

// The formats the dispatch library is compiled for (each at every head dim it supports).
enum class format_id : int { mxfp8, mxfp4, fp8_per_token };

// Everything one compiled path offers.
struct isa_kernels {
  const char* name;
  // The kernels of a format at a head dim; null when not compiled.
  const format_kernels* (*find)(format_id, int head_dim);
  topk_steps topk;
};

}  // namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE

MQALOGITS_NAMESPACE_BEGIN
namespace host_abi = ::mqalogits::MQALOGITS_HOST_ABI_NAMESPACE;
MQALOGITS_NAMESPACE_END
