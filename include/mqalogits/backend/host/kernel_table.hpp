// The table of kernels (kernel_abi.hpp) of one format at its head dim on instruction set I:
// the decoders of decode.hpp and the score kernels of microkernel.hpp behind plain operands.
// kernels_of<I, Format> is what the driver runs: a unit's own path, a test's choice of path,
// or (through the dispatch library) the path picked at run time.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "../../view/rows_view.hpp"
#include "amx_scores.hpp"
#include "decode.hpp"
#include "kernel_abi.hpp"
#include "microkernel.hpp"
#include "prefetch.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

template <class I, class Format>
struct table_entries {
  static constexpr int head_dim = Format::head_dim, blocks = Format::blocks;

  static rows_view<Format> view(const host_abi::rows_ref& r) {
    rows_view<Format> v;
    v.data = r.data;
    v.scales = r.scales;
    v.data_stride = r.data_stride;
    v.scale_stride = r.scale_stride;
    return v;
  }
  static void decode_q_f32(const host_abi::rows_ref& q, std::int64_t first_row, int heads, int hp,
                           float* qt) {
    host_backend::decode_q_f32<I>(view(q), first_row, heads, hp,
                                  chunk_vectors<I::f32_blocks>(hp / I::lanes), qt);
  }
  static void decode_q_i8(const host_abi::rows_ref& q, std::int64_t first_row, int heads, int hp,
                          std::int32_t* data, std::int32_t* start, float* scale) {
    host_backend::decode_q_i8<I>(view(q), first_row, heads, hp, data, start, scale);
  }
  static int decode_q_bf16(const host_abi::rows_ref& q, std::int64_t first_row, int heads, int hp,
                           std::uint32_t* pairs, float* scales) {
    return host_backend::decode_q_bf16<I>(view(q), first_row, heads, hp, pairs, scales);
  }
  // The compact int8 form of the rows, when they have it: folded, or on ISAs whose per-block
  // kernel sums in int16, relative (whose kernel reads the per-block form: nothing written).
  static bool decode_q_i8_fold(const host_abi::rows_ref& q, std::int64_t first_row, int heads,
                               int hp, std::int32_t* data, std::int32_t* start, float* scale) {
    if constexpr (relative_rows<I>)
      return host_backend::q_rows_relative(view(q), first_row, heads);
    else
      return host_backend::decode_q_i8_fold<I>(view(q), first_row, heads, hp, data, start, scale);
  }

  // One int8 key in the forms the item's query rows read. Folding paths: the per-block form
  // alone when no row folds; else both, except that a key that folds skips its per-block form
  // when every row folds: it is then written as a masked key, which the per-block kernel may
  // still read for a group that mixes both forms, and whose score there is dropped. Relative
  // paths: the per-block form always (its codes are the relative form's too), and the relative
  // form's scale words when some row has that form.
  static void decode_key_i8_forms(const host_abi::key_ptrs& key, std::int64_t i,
                                  host_abi::compact_rows folding,
                                  const host_abi::tile_buffers& out) {
    constexpr int key_bytes = i8_key_bytes<head_dim>;
    std::uint8_t* k = out.i8 + i * key_bytes;
    float* ks = out.i8_scales + i * blocks;
    float* kfs = out.fold_scales + i * i8_compact_scale_words<head_dim>;
    if constexpr (relative_rows<I>) {
      if (folding != host_abi::compact_rows::none) {
        if (key.data) {
          out.compact[i] = rel_key_scales<head_dim>(key.scale, kfs);
        } else {
          masked_key_rel_scales<head_dim>(kfs);
          out.compact[i] = 1;
        }
      }
    } else if (folding != host_abi::compact_rows::none) {
      std::uint8_t* kf = out.fold + i * key_bytes;
      if (key.data) {
        out.compact[i] = decode_key_i8_fold<I, head_dim>(key.data, key.scale, kf, kfs);
      } else {
        masked_key_i8_fold<I, head_dim>(kf, kfs);
        out.compact[i] = 1;
      }
    }
    if (key.data &&
        (relative_rows<I> || !(folding == host_abi::compact_rows::all && out.compact[i])))
      decode_key_i8<I, head_dim>(key.data, key.scale, k, ks);
    else
      masked_key_i8<I, head_dim>(k, ks);
  }

  // One e4m3 key in the forms the item's query rows read (on a path with bf16 pairs): the bf16
  // form when any row takes it, the fp32 form when some row does not or the key does not fit
  // (its bf16 form is then zeros, which every kernel may read, and whose score is replaced). A
  // masked key is zeros in both, scoring 0.
  static void decode_key_f32_forms(const host_abi::key_ptrs& key, std::int64_t i,
                                   host_abi::compact_rows rows, const host_abi::tile_buffers& out) {
    constexpr int P = head_dim / 2;
    bool fp32_form = true;
    if constexpr (runs_bf16<I, Format>) {
      if (rows != host_abi::compact_rows::none) {
        std::uint32_t* kp = out.bf16 + i * P;
        const bool fits =
            key.data && decode_key_bf16<I, Format>(key.data, key.scale, kp, out.bf16_scales + i);
        if (!fits) {
          std::fill(kp, kp + P, 0u);
          out.bf16_scales[i] = 0.0f;
        }
        out.compact[i] = fits || !key.data;
        fp32_form = rows == host_abi::compact_rows::some || !out.compact[i];
      }
    }
    if (!fp32_form) return;
    float* k = out.f32 + i * head_dim;
    if (key.data)
      decode_key_f32<I, Format>(key.data, key.scale, k);
    else
      std::fill(k, k + head_dim, 0.0f);
  }

  static void decode_keys(const host_abi::key_ptrs* keys, std::int64_t n,
                          host_abi::compact_rows rows, const host_abi::tile_buffers& buffers) {
    // A local copy: read through the reference, the buffer pointers are reloaded after every
    // byte stored (a store through uint8_t* may change them).
    const host_abi::tile_buffers out = buffers;
    for (std::int64_t i = 0; i < std::min(n, prefetch_keys); ++i) prefetch_key<Format>(keys[i]);
    for (std::int64_t i = 0; i < n; ++i) {
      if (i + prefetch_keys < n) prefetch_key<Format>(keys[i + prefetch_keys]);
      const host_abi::key_ptrs key = keys[i];
      out.valid[i] = key.data != nullptr;
      if constexpr (int8_path<Format>)
        decode_key_i8_forms(key, i, rows, out);
      else
        decode_key_f32_forms(key, i, rows, out);
    }
  }

  static host_abi::keys_kernel<host_abi::f32_query, host_abi::f32_keys> f32_kernel(
      int head_vectors) {
    return select_kernel<I, f32_path<head_dim>>(head_vectors);
  }
  static host_abi::keys_kernel<host_abi::bf16_query, host_abi::bf16_keys> bf16_kernel(
      int head_vectors) {
    if constexpr (amx_tiles<I>)
      return {&amx::bf16_scores<I, head_dim, bf16_key_scales<Format>>::score, amx::call_keys};
    else
      return select_kernel<I, bf16_path<head_dim, bf16_key_scales<Format>>>(head_vectors);
  }
  static host_abi::keys_kernel<i8_query, i8_keys> i8_kernel(int head_vectors) {
    if constexpr (amx_tiles<I>)
      return {&amx::i8_scores<I, head_dim>::score, amx::call_keys};
    else
      return select_kernel<I, i8_path<head_dim>>(head_vectors);
  }
  static host_abi::keys_kernel<i8_query, i8_keys> fold_kernel(int head_vectors) {
    if constexpr (amx_tiles<I>)
      return {&amx::fold_scores<I, head_dim>::score, amx::call_keys};
    else if constexpr (relative_rows<I>)
      return select_kernel<I, i8_rel_path<head_dim>>(head_vectors);
    else if constexpr (I::fold_rows)
      return select_kernel<I, i8_fold_path<head_dim>>(head_vectors);
    else
      return {nullptr, 0};
  }
};

// The kernels of Format (at its head dim) on path I.
template <class I, class Format>
inline constexpr host_abi::format_kernels kernels_of = [] {
  using e = table_entries<I, Format>;
  host_abi::format_kernels k{};
  k.isa = I::path;
  k.lanes = I::lanes;
  k.fold_rows = I::fold_rows || relative_rows<I>;
  k.compact_reads_per_block = relative_rows<I>;
  k.decode_keys = &e::decode_keys;
  if constexpr (int8_path<Format>) {
    k.decode_q_i8 = &e::decode_q_i8;
    k.decode_q_i8_fold = &e::decode_q_i8_fold;
    k.i8_kernel = &e::i8_kernel;
    k.fold_kernel = &e::fold_kernel;
  } else {
    k.decode_q_f32 = &e::decode_q_f32;
    k.f32_kernel = &e::f32_kernel;
    if constexpr (runs_bf16<I, Format>) {
      k.decode_q_bf16 = &e::decode_q_bf16;
      k.bf16_kernel = &e::bf16_kernel;
    }
  }
  return k;
}();

// The fused top-k's streaming steps of path I.
template <class I>
inline constexpr host_abi::topk_steps topk_steps_of = {&I::admit_keys, &I::compact_at_least};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
