// What every instruction-set file of the host backend builds on: the register-blocking record,
// the two int8 encodings of doubled e2m1 codes, and the plain row decoders an ISA keeps unless
// it has a faster exact one of its own.
//
// An ISA file (portable.hpp, avx2.hpp, avx512.hpp, neon.hpp) defines one struct carrying
//   - its vector types and the few operations the score paths use (score_paths_float.hpp,
//     score_path_i8.hpp, score_paths_i8_compact.hpp),
//   - its row decoders (decode_row_f32<Format>, decode_e2m1_doubled),
//   - its register blocking (f32_blocks, i8_blocks), sized to its register file,
//   - its int8 encoding (int8: one of the two below, matching what its dot4 multiplies),
//   - the two streaming steps of the fused top-k (admit_keys, compact_at_least: scalar_topk or
//     its own vector ones),
// and ladder.hpp lists it. Nothing outside the ISA files knows which ISA does what.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../../config.hpp"
#include "../../../format/e2m1.hpp"
#include "../../../format/e4m3.hpp"
#include "../../../format/fp32_scale.hpp"
#include "../../../format/ue8m0.hpp"
#include "../../../output/topk_key.hpp"

#if defined(__clang__)
#define MQALOGITS_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define MQALOGITS_UNROLL _Pragma("GCC unroll 16")
#else
#define MQALOGITS_UNROLL
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// One register blocking of a score kernel: rows with at least `min_head_vectors` vectors of
// heads are scored `head_vectors` vectors x `keys` keys at a time (the accumulators of one
// chunk stay in registers across the whole dot product). An ISA lists its blockings from the
// widest down; the last one must take any row (min_head_vectors 1).
struct register_block {
  int min_head_vectors, head_vectors, keys;
};

// The key tiles are padded by this many rows, so no blocking may score more keys at once.
inline constexpr int max_group_keys = 64;

// ---- the query row's panels (fp32 path) ----
//
// score_keys runs a row's head vectors in chunks of the blocking's width, then one narrower
// chunk for the rest, and each chunk reads its head vectors at every d. The fp32 query row is
// stored in the same panels, [d][the panel's heads], one after the other, so a chunk reads one
// contiguous stretch. With the row as one [d][heads] matrix instead, a chunk narrower than the
// row reads one line per d at a stride of the row's width: at 64 heads on AVX2 (chunks of 2 x 8
// heads, a 256-byte stride) its 128 lines fall into a quarter of L1's sets and evict each other
// and the keys, which held the score kernel near 80% of the FMA peak. Where the chunk is the
// whole row (AVX-512 up to 64 heads) both layouts are the same.

// Which of the blocking list Blocks scores rows of `head_vectors` vectors: the first that takes
// them (select_kernel compiles it; decode_q_f32 lays the query out for its chunks).
template <auto& Blocks>
constexpr int chosen_block(int head_vectors) {
  constexpr int last = static_cast<int>(sizeof Blocks / sizeof Blocks[0]) - 1;
  int n = 0;
  while (n < last && head_vectors < Blocks[n].min_head_vectors) ++n;
  return n;
}
// The head vectors of the chunks score_keys takes for such rows.
template <auto& Blocks>
constexpr int chunk_vectors(int head_vectors) {
  return Blocks[chosen_block<Blocks>(head_vectors)].head_vectors;
}

// Index of element d of head h in a query row of `head_vectors` vectors of `lanes` heads stored
// in panels of `chunk` vectors (the last panel: the rest), D elements per head.
constexpr std::int64_t panel_index(int D, int lanes, int head_vectors, int chunk, int d, int h) {
  const int v = h / lanes, full = head_vectors / chunk * chunk;
  const int first = v < full ? v / chunk * chunk : full;
  const int width = v < full ? chunk : head_vectors - full;
  return std::int64_t{first} * lanes * D + std::int64_t{d} * width * lanes + (h - first * lanes);
}

// ---- int8 encodings of doubled e2m1 codes (integers in [-12, 12]) ----
//
// Queries are always stored as signed bytes. Keys are stored the way the ISA's dot4 multiplies.
// `key_code[nibble]` is the stored key byte, `masked_key` the byte of a key that must score 0
// whatever the query (its block scales are 0 as well), and block_start(sum of the query block)
// the value each block's int32 accumulator starts at.

// A 16-entry byte table: the stored byte of each e2m1 nibble.
struct code_table {
  std::uint8_t v[16];
};

// The code table of each 32-element block of a D-element row: rows whose blocks decode alike
// point every block at one table; folded rows point each block at the table of its shift.
template <int D>
struct block_codes {
  const std::uint8_t* block[static_cast<std::size_t>(D / mx_scale_block)];
};
template <int D>
constexpr block_codes<D> same_codes(const std::uint8_t (&code)[16]) {
  block_codes<D> c{};
  for (auto& b : c.block) b = code;
  return c;
}

// Exponent folding of a whole row (keys and queries alike): UE8M0 block scales are powers of
// two, so when a row's 4 block exponents lie within `fold_spread` of their minimum, each block's
// doubled codes shifted left by (its exponent - the minimum) are exact integers in [-96, 96]
// (12 x 2^3), and the whole dot product (up to 128 long) is one exact int32 sum, scaled once by the
// two rows' smallest block scales. Rows outside [fold_min_scale, fold_max_scale] (the NaN scale
// 255, and scales so small that the product of two row scales would underflow) are not folded.
inline constexpr int fold_spread = 3;
inline constexpr int fold_min_scale = 66, fold_max_scale = 254;

// The byte of a code shifted left by `shift`, plus `offset` (mod 256).
constexpr code_table shifted_codes(const std::uint8_t (&code)[16], int shift, int offset) {
  code_table t{};
  for (int n = 0; n < 16; ++n) {
    const int k = static_cast<std::int8_t>(static_cast<std::uint8_t>(code[n]));
    t.v[n] = static_cast<std::uint8_t>((k * (1 << shift) + offset) & 0xFF);
  }
  return t;
}

// s8 x s8 (Arm sdot, plain C++): keys stored as they are, accumulators start at 0.
struct int8_signed_keys {
  static constexpr bool offset_keys = false;
  static constexpr std::uint8_t key_code[16] = {0, 1,   2,   3,   4,   6,   8,   12,
                                                0, 255, 254, 253, 252, 250, 248, 244};
  static constexpr std::uint8_t masked_key = 0;
  static constexpr std::int32_t block_start(std::int32_t) { return 0; }
  // Folded keys: the shifted signed codes.
  static constexpr int fold_offset = 0;
  static constexpr std::int32_t fold_start(std::int32_t) { return 0; }
};

// u8 x s8 (x86 vpdpbusd, vpmaddubsw): keys stored as k + 12 in [0, 24]; each block's
// accumulator starts at -12 * sum(q over the block), which takes the offset back out exactly.
// Folded keys are stored as k' + 96 in [0, 192], and the row's one accumulator starts at
// -96 * sum(q' over the row).
struct int8_offset_keys {
  static constexpr bool offset_keys = true;
  static constexpr std::uint8_t key_code[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                12, 11, 10, 9,  8,  6,  4,  0};
  static constexpr std::uint8_t masked_key = 12;
  static constexpr std::int32_t block_start(std::int32_t query_block_sum) {
    return -12 * query_block_sum;
  }
  static constexpr int fold_offset = 96;
  static constexpr std::int32_t fold_start(std::int32_t query_row_sum) {
    return -96 * query_row_sum;
  }
};

// The folded code tables of an encoding, one per shift 0..fold_spread: keys in the encoding's
// folded form, queries signed.
template <class Int8>
struct fold_tables {
  static constexpr code_table key[fold_spread + 1] = {
      shifted_codes(int8_signed_keys::key_code, 0, Int8::fold_offset),
      shifted_codes(int8_signed_keys::key_code, 1, Int8::fold_offset),
      shifted_codes(int8_signed_keys::key_code, 2, Int8::fold_offset),
      shifted_codes(int8_signed_keys::key_code, 3, Int8::fold_offset)};
  static constexpr code_table query[fold_spread + 1] = {
      shifted_codes(int8_signed_keys::key_code, 0, 0),
      shifted_codes(int8_signed_keys::key_code, 1, 0),
      shifted_codes(int8_signed_keys::key_code, 2, 0),
      shifted_codes(int8_signed_keys::key_code, 3, 0)};
};

// The smallest of a row's Blocks block exponents when the row folds within `spread`, else -1.
template <int Blocks = default_head_dim / mx_scale_block>
inline int fold_exponent(const std::uint8_t* scales, int spread) {
  int lo = 255, hi = 0;
  for (int b = 0; b < Blocks; ++b) {
    lo = scales[b] < lo ? scales[b] : lo;
    hi = scales[b] > hi ? scales[b] : hi;
  }
  return lo >= fold_min_scale && hi <= fold_max_scale && hi - lo <= spread ? lo : -1;
}

// The relative form of a row, the compact int8 form of ISAs whose per-block kernel sums in
// int16 (no VNNI; I::relative_rows), where a folded kernel would be slower. A key row keeps its
// per-block codes; each block's int16 sums are widened by vpmaddwd against 2^(e_b - e_min), the
// block exponent's distance from the row's smallest (at most rel_spread: 9216 x 2^14 stays
// within int32, and a block's dot product, at most 4608 in magnitude, converts to fp32 exactly
// whatever its shift), then multiplied by the query block scale in one multiply-add; the key
// row's smallest scale multiplies each head's sum once. Every value is then the per-block
// kernel's times one power of two, so the logits are the per-block kernel's bit for bit as long
// as every value is a normal float: key and query exponents within rel_min_scale ..
// rel_max_scale keep every product and partial sum between 2^-82 and 2^93.
inline constexpr int rel_spread = 14;
inline constexpr int rel_min_scale = 127 - 40, rel_max_scale = 127 + 40;

// The smallest of a row's Blocks block exponents when the row has the relative form within
// `spread` (queries: any spread), else -1.
template <int Blocks = default_head_dim / mx_scale_block>
inline int rel_exponent(const std::uint8_t* scales, int spread = rel_spread) {
  int lo = 255, hi = 0;
  for (int b = 0; b < Blocks; ++b) {
    lo = scales[b] < lo ? scales[b] : lo;
    hi = scales[b] > hi ? scales[b] : hi;
  }
  return lo >= rel_min_scale && hi <= rel_max_scale && hi - lo <= spread ? lo : -1;
}

// Query bytes use the signed codes in both encodings.
inline constexpr const std::uint8_t (&query_code)[16] = int8_signed_keys::key_code;

// Formats whose rows are e4m3 codes with one UE8M0 scale per 32 elements (MXFP8): the layout an
// ISA's own fp32 row decoder may handle instead of Format::decode_row.
template <class Format>
inline constexpr bool e4m3_ue8m0_rows =
    std::conjunction_v<std::is_same<typename Format::data_type, float_e4m3>,
                       std::bool_constant<Format::ue8m0_scales>,
                       std::bool_constant<Format::scale_block == mx_scale_block>>;

// Formats whose rows are e4m3 codes with one scale for the whole row (FP8 per-token; read by
// Format::block_scale(scales, 0), which is 1 for a null scale pointer when scales are optional).
template <class Format>
inline constexpr bool e4m3_fp32_rows =
    std::conjunction_v<std::is_same<typename Format::data_type, float_e4m3>,
                       std::bool_constant<!Format::ue8m0_scales && Format::blocks == 1>>;

// The decoders an ISA keeps unless it has a faster one: both are exact, so every ISA produces
// the same decoded bits.
struct plain_decoders {
  // One row into Format::head_dim fp32 values, bit-identical to Format::decode_row.
  template <class Format>
  static void decode_row_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    Format::decode_row(data, scales, out);
  }
  // One packed e2m1 row of D elements (D/2 bytes) into D bytes codes.block[b][nibble] (b the
  // element's block), in the stored block order: per 32-element block (16 bytes), its 16 low
  // nibbles (elements 0, 2, .., 30) then its 16 high nibbles (1, 3, .., 31). Queries and keys
  // use the same order, and integer block sums do not care about it.
  template <int D = default_head_dim>
  static void decode_e2m1_doubled(const std::uint8_t* packed, const block_codes<D>& codes,
                                  std::uint8_t* out) {
    for (int b = 0; b < D / mx_scale_block; ++b)
      for (int j = 0; j < 16; ++j) {
        const std::uint8_t byte = packed[b * 16 + j];
        out[b * 32 + j] = codes.block[b][byte & 0xF];
        out[b * 32 + 16 + j] = codes.block[b][byte >> 4];
      }
  }
};

// The top-k steps an ISA keeps unless it has vector ones: one key at a time (output/topk_key.hpp).
struct scalar_topk {
  static std::int64_t admit_keys(const float* scores, const unsigned char* valid, std::int64_t n,
                                 std::int64_t col, std::uint64_t floor, float bar,
                                 std::uint64_t* out) {
    return detail::admit_keys_scalar(scores, valid, n, col, floor, bar, out);
  }
  static std::int64_t compact_at_least(std::uint64_t* keys, std::int64_t n, std::uint64_t t) {
    return detail::compact_at_least_scalar(keys, n, t);
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
