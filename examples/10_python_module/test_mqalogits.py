"""Tests of the Python module `mqalogits` against a float64 numpy reference written here.

Inputs are quantised by this file's own numpy quantiser (FP8 e4m3 and packed FP4 e2m1 with UE8M0
scales per 32 elements, FP8 with one fp32 scale per token) and decoded by its own tables, so
nothing is shared with the library but the byte layouts. Every function is called with
DeepGEMM's keyword names; results must satisfy |got - exact| <= 2^-7 |exact| + 2^-14 M with
M = sum_h |w_h| sum_i |q_hi k_i|, and the -inf mask must be exact.

Run: PYTHONPATH=<build>/examples/10_python_module python3 test_mqalogits.py
"""

import inspect
import os
import sys
import unittest

import numpy as np

import mqalogits as ml

D = 128
RNG = np.random.default_rng(2026)


# ---- decoding tables, from the bit layouts ----

def e4m3_value(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 0x7
    if e == 0xF and m == 0x7:
        return np.nan
    if e == 0:
        return s * m / 8.0 * 2.0 ** -6
    return s * (1.0 + m / 8.0) * 2.0 ** (e - 7)


E4M3 = np.array([e4m3_value(c) for c in range(256)], dtype=np.float64)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)
E4M3_POS = np.array([c for c in range(0x7F)], dtype=np.uint8)  # 0x00..0x7E, finite, >= 0


def nearest_code(x, values, codes):
    """Index of the nearest value for each |x| (values sorted ascending), as codes."""
    a = np.abs(x)
    i = np.clip(np.searchsorted(values, a), 1, len(values) - 1)
    lo, hi = values[i - 1], values[i]
    pick = np.where(a - lo <= hi - a, i - 1, i)
    return codes[pick]


def quant_e4m3(x):
    mags = nearest_code(x, E4M3[E4M3_POS], E4M3_POS)
    return np.where(x < 0, mags | 0x80, mags).astype(np.uint8)


def quant_e2m1(x):
    mags = nearest_code(x, E2M1[:8], np.arange(8, dtype=np.uint8))
    return np.where((x < 0) & (mags != 0), mags | 0x8, mags).astype(np.uint8)


def quant_mx(x, fp4):
    """x [..., 128] -> (codes uint8 [..., 128] or int8 [..., 64], int32 scales [...])."""
    blocks = x.reshape(x.shape[:-1] + (4, 32))
    amax = np.abs(blocks).max(axis=-1)
    top = 6.0 if fp4 else 448.0
    with np.errstate(divide="ignore"):
        e = np.ceil(np.log2(np.maximum(amax, 1e-30) / top))
    e = np.clip(e + 127, 1, 254).astype(np.int64)
    scaled = blocks / np.ldexp(1.0, e - 127)[..., None]
    if fp4:
        nib = quant_e2m1(scaled).reshape(x.shape)
        codes = (nib[..., 0::2] | (nib[..., 1::2] << 4)).astype(np.uint8).view(np.int8)
    else:
        codes = quant_e4m3(scaled).reshape(x.shape)
    scales = (e[..., 0] | (e[..., 1] << 8) | (e[..., 2] << 16) | (e[..., 3] << 24))
    return codes, scales.astype(np.uint32).view(np.int32)


def quant_per_token(x):
    """x [N, 128] -> (uint8 codes [N, 128], float32 scales [N])."""
    amax = np.abs(x).max(axis=-1)
    s = np.where(amax > 0, amax / 448.0, 1.0).astype(np.float32)
    return quant_e4m3(x / s[:, None].astype(np.float64)), s


def decode(codes, scales):
    """Rows of codes (+ int32 UE8M0 or float32 per-row or None) -> float64 [..., 128]."""
    if codes.dtype == np.int8:
        b = codes.view(np.uint8).astype(np.int64)
        v = np.stack([E2M1[b & 0xF], E2M1[b >> 4]], axis=-1).reshape(codes.shape[:-1] + (D,))
    else:
        v = E4M3[codes.astype(np.int64)]
    if scales is None:
        return v
    if scales.dtype == np.float32:
        return v * scales.astype(np.float64)[..., None]
    u = scales.view(np.uint32).astype(np.int64)
    e = np.stack([(u >> (8 * k)) & 0xFF for k in range(4)], axis=-1)
    return (v.reshape(v.shape[:-1] + (4, 32)) * np.ldexp(1.0, e - 127)[..., None]).reshape(v.shape)


def bf16_bits(x):
    """float32 -> bfloat16 bits (round to nearest even) as uint16."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def weights_f64(w):
    return bf16_to_f64(w) if w.dtype == np.uint16 else w.astype(np.float64)


# ---- reference: logit and M for (query row, key) pairs ----

def score(qd, w, k):
    """qd [H, 128], w [H], k [n, 128] -> (logits [n], M [n])."""
    dots = k @ qd.T  # [n, H]
    logit = (np.maximum(dots, 0.0) * w).sum(axis=1)
    mag = (np.abs(k) @ np.abs(qd).T * np.abs(w)).sum(axis=1)
    return logit, mag


def fill(exact, mag, r, cols, keys, qd, w):
    if len(cols):
        exact[r, cols], mag[r, cols] = score(qd, w, keys)


def ref_dense(qd, kd, w, ks, ke, max_seqlen_k):
    S, N = qd.shape[0], kd.shape[0]
    cols = N if max_seqlen_k == 0 else max_seqlen_k
    exact, mag = np.full((S, cols), -np.inf), np.zeros((S, cols))
    for r in range(S):
        j = np.arange(cols)
        t = j if max_seqlen_k == 0 else ks[r] + j
        ok = (t >= max(ks[r], 0)) & (t < min(ke[r], N))
        fill(exact, mag, r, j[ok], kd[t[ok]], qd[r], w[r])
    return exact, mag


def cache_keys(cache, fp4, mx):
    """Decoded keys [num_blocks, block_kv, 128] of a fused cache."""
    nb, bkv = cache.shape[0], cache.shape[1]
    flat = cache.reshape(nb, -1)
    dbytes = 64 if fp4 else 128
    data = flat[:, :bkv * dbytes].reshape(nb, bkv, dbytes)
    sf = np.ascontiguousarray(flat[:, bkv * dbytes:bkv * (dbytes + 4)]).reshape(nb, bkv, 4)
    sf = sf.view(np.int32 if mx else np.float32)[..., 0]
    return decode(data.view(np.int8) if fp4 else data, sf)


def ref_paged(qd, keys, w, lens, table, max_context_len):
    B, next_n = lens.shape
    bkv = keys.shape[1]
    rows = B * next_n
    exact, mag = np.full((rows, max_context_len), -np.inf), np.zeros((rows, max_context_len))
    for b in range(B):
        for j in range(next_n):
            r = b * next_n + j
            pos = np.arange(min(lens[b, j], max_context_len, table.shape[1] * bkv))
            k = keys[table[b, pos // bkv], pos % bkv]
            fill(exact, mag, r, pos, k, qd[r], w[r])
    return exact, mag


def ref_sparse(qd, kd, w, ks, ke, idx, B, unaligned):
    S, cap = idx.shape
    N = kd.shape[0]
    exact, mag = np.full((S, cap * B), -np.inf), np.zeros((S, cap * B))
    for r in range(S):
        kend = min(ke[r], N)
        if unaligned:
            nb = -(-max(0, kend - ks[r]) // B)
        else:
            nb = max(0, -(-kend // B) - ks[r] // B) if kend > ks[r] else 0
        nb = min(nb, cap)
        off = ks[r] % B if unaligned else 0
        for b in range(nb):
            if idx[r, b] < 0:
                continue
            t = idx[r, b] * B + off + np.arange(B)
            ok = (t >= ks[r]) & (t < kend)
            fill(exact, mag, r, b * B + np.arange(B)[ok], kd[t[ok]], qd[r], w[r])
    return exact, mag


def ref_paged_sparse(qd, keys, w, lens, table, idx, B):
    S, cap = idx.shape
    bkv = keys.shape[1]
    exact, mag = np.full((S, cap * B), -np.inf), np.zeros((S, cap * B))
    for r in range(S):
        nb = min(cap, -(-max(0, lens[r]) // B))
        for b in range(nb):
            if idx[r, b] < 0:
                continue
            p = idx[r, b] * B + np.arange(B)
            ok = (p < lens[r]) & (p < table.shape[1] * bkv)
            p = p[ok]
            fill(exact, mag, r, b * B + np.arange(B)[ok], keys[table[r, p // bkv], p % bkv],
                 qd[r], w[r])
    return exact, mag


# ---- inputs ----

def rand_x(*shape):
    """Values spread over a few binades, as activations are."""
    return RNG.standard_normal(shape) * np.exp2(RNG.integers(-3, 3, size=shape[:-1] + (1,)))


def rand_weights(rows, H, bf16):
    w = RNG.standard_normal((rows, H)).astype(np.float32) * 0.5
    return bf16_bits(w) if bf16 else w


def make_q(shape, fmt):
    """(q tuple for the module, decoded float64 [rows, H, 128])."""
    x = rand_x(*shape, D)
    if fmt == "per_token":
        codes = quant_e4m3(x * 4.0 / np.abs(x).max())
        return (codes, None), decode(codes, None)
    codes, sf = quant_mx(x, fmt == "mxfp4")
    return (codes, sf), decode(codes, sf)


def make_kv(N, fmt):
    x = rand_x(N, D)
    if fmt == "per_token":
        codes, sf = quant_per_token(x)
    else:
        codes, sf = quant_mx(x, fmt == "mxfp4")
    return (codes, sf), decode(codes, sf)


def make_cache(num_blocks, block_kv, fmt, pad=512):
    """Fused cache uint8 [num_blocks, block_kv, 1, 132 | 68], each block padded like upstream."""
    fp4 = fmt == "mxfp4"
    (codes, sf), _ = make_kv(num_blocks * block_kv, fmt)
    dbytes = 64 if fp4 else 128
    block_bytes = block_kv * (dbytes + 4)
    stride = -(-block_bytes // pad) * pad + pad
    raw = RNG.integers(0, 256, size=num_blocks * stride, dtype=np.uint8).reshape(num_blocks, stride)
    raw[:, :block_kv * dbytes] = codes.view(np.uint8).reshape(num_blocks, -1)
    raw[:, block_kv * dbytes:block_bytes] = sf.view(np.uint8).reshape(num_blocks, -1)
    cache = np.lib.stride_tricks.as_strided(
        raw, shape=(num_blocks, block_kv, 1, dbytes + 4), strides=(stride, dbytes + 4, 0, 1))
    return cache, raw


FORMATS = ("mxfp8", "mxfp4", "per_token")


class Checks(unittest.TestCase):
    def assert_logits(self, got, exact, mag, clean=True):
        got64 = bf16_to_f64(got) if got.dtype == np.uint16 else got.astype(np.float64)
        self.assertEqual(got.shape, exact.shape)
        invalid = np.isneginf(exact)
        self.assertGreater((~invalid).sum(), 0, "the case has valid columns")
        if clean:
            np.testing.assert_array_equal(np.isneginf(got64), invalid, "-inf mask")
        with np.errstate(invalid="ignore"):  # -inf - -inf where both are masked
            ok = np.abs(got64 - exact) <= np.ldexp(np.abs(exact), -7) + np.ldexp(mag, -14)
        bad = ~invalid & ~ok
        self.assertFalse(bad.any(), f"{bad.sum()} values off; first at "
                         f"{np.argwhere(bad)[:1].tolist()}")

    def assert_upstream_stride(self, out):
        self.assertEqual(out.strides[0] % 1024, 0)
        self.assertEqual(out.__array_interface__["data"][0] % 1024, 0)
        self.assertEqual(out.strides[1], out.itemsize)


class Signatures(unittest.TestCase):
    def test_upstream_names_order_and_defaults(self):
        # DeepGEMM's register_apis, argument for argument; num_threads is keyword-only, extra.
        expected = {
            "fp8_fp4_mqa_logits": "q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, "
                                  "clean_logits=True, max_seqlen_k=0, logits_dtype='float32', "
                                  "schedule_meta=None",
            "get_mqa_logits_metadata": "cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, "
                                       "num_heads",
            "get_paged_mqa_logits_metadata": "context_lens, block_kv, num_sms, indices=None",
            "fp8_fp4_paged_mqa_logits": "q, kv_cache, weights, context_lens, block_table, "
                                        "schedule_meta, max_context_len, clean_logits=False, "
                                        "logits_dtype='float32', indices=None",
            "get_sparse_mqa_logits_metadata": "cu_seq_len_k_start, cu_seq_len_k_end, "
                                              "num_kv_tokens, sparse_kv_block_indices, qk_dtype, "
                                              "sparse_block_kv, use_unaligned_ks=False",
            "fp8_fp4_sparse_mqa_logits": "q, kv, weights, metadata, num_max_sparse_blocks, "
                                         "sparse_block_kv, use_unaligned_ks=False",
            "get_paged_sparse_mqa_logits_metadata": "context_lens, block_table, indices, page_kv, "
                                                    "sparse_kv_block_indices, qk_dtype, "
                                                    "sparse_block_kv",
            "fp8_fp4_paged_sparse_mqa_logits": "q, kv_cache, weights, metadata, "
                                               "num_max_sparse_blocks, sparse_block_kv",
            "fp8_mqa_logits": "q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, "
                              "clean_logits=True, max_seqlen_k=0",
            "fp8_paged_mqa_logits": "q, kv_cache, weights, context_lens, block_table, "
                                    "schedule_meta, max_context_len, clean_logits=False, "
                                    "indices=None",
        }
        for name, args in expected.items():
            doc = getattr(ml, name).__doc__.splitlines()[0]
            sig = doc[doc.index("(") + 1:doc.index(")")]
            parts = [p.split(":")[0].strip() + ("=" + p.split("=")[1].strip() if "=" in p else "")
                     for p in sig.split(",")]
            parts = [p for p in parts if p not in ("*", "num_threads=None")]
            self.assertEqual(", ".join(parts), args, name)


class Dense(Checks):
    def test_every_format_weight_and_logit_type(self):
        S, H, N = 7, 16, 300
        for fmt in FORMATS:
            for bf16_w in (False, True):
                for dtype in ("float32", "bfloat16"):
                    for max_seqlen_k in (0, 100):
                        with self.subTest(fmt=fmt, bf16_w=bf16_w, dtype=dtype, msk=max_seqlen_k):
                            q, qd = make_q((S, H), fmt)
                            kv, kd = make_kv(N, fmt)
                            w = rand_weights(S, H, bf16_w)
                            ks = RNG.integers(-3, 150, S).astype(np.int32)
                            ke = (ks + RNG.integers(0, 200, S)).astype(np.int32)
                            ks[0], ke[0] = 10, 10  # empty row
                            out = ml.fp8_fp4_mqa_logits(
                                q=q, kv=kv, weights=w, cu_seq_len_k_start=ks,
                                cu_seq_len_k_end=ke, clean_logits=True, max_seqlen_k=max_seqlen_k,
                                logits_dtype=dtype, num_threads=2)
                            self.assertEqual(out.dtype, np.float32 if dtype == "float32"
                                             else np.uint16)
                            self.assert_upstream_stride(out)
                            exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, max_seqlen_k)
                            self.assert_logits(out, exact, mag)

    def test_defaults_positional_and_threads(self):
        S, H, N = 5, 8, 200
        q, qd = make_q((S, H), "mxfp8")
        kv, kd = make_kv(N, "mxfp8")
        w = rand_weights(S, H, False)
        ks = np.zeros(S, np.int32)
        ke = np.arange(100, 100 + S, dtype=np.int32)
        out = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke)  # clean_logits=True, full width, fp32
        self.assertEqual(out.shape, (S, N))
        self.assertEqual(out.dtype, np.float32)
        # Upstream's full-width stride: align(N + 256, 256) fp32 elements.
        self.assertEqual(out.strides[0], ((N + 256 + 255) // 256 * 256) * 4)
        exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
        self.assert_logits(out, exact, mag)
        for n in (1, 3):
            np.testing.assert_array_equal(out, ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke,
                                                                     num_threads=n))
        meta = ml.get_mqa_logits_metadata(cu_seq_len_k_start=ks, cu_seq_len_k_end=ke,
                                          num_kv_tokens=N, num_heads=H)
        np.testing.assert_array_equal(out, ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke,
                                                                 schedule_meta=meta))
        with self.assertRaisesRegex(ValueError, "schedule_meta"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke + 1, schedule_meta=meta)

    def test_views_are_not_copies(self):
        # A strided kv view (every other row of a larger array) is read in place.
        S, H, N = 3, 4, 64
        q, qd = make_q((S, H), "mxfp4")
        (kc, ksf), kd = make_kv(2 * N, "mxfp4")
        kv = (kc[::2], ksf[::2])
        w = rand_weights(S, H, True)
        ks = np.zeros(S, np.int32)
        ke = np.full(S, N, np.int32)
        out = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke)
        exact, mag = ref_dense(qd, kd[::2], weights_f64(w), ks, ke, 0)
        self.assert_logits(out, exact, mag)
        # Changing the caller's bytes changes the result: the module kept no copy of them.
        kc[::2] = 0
        self.assertTrue(np.all(ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke) == 0.0))

    def test_legacy_fp8_mqa_logits(self):
        S, H, N = 6, 32, 180
        (qc, _), qd = make_q((S, H), "per_token")
        kv, kd = make_kv(N, "per_token")
        w = rand_weights(S, H, False)
        ks = RNG.integers(0, 60, S).astype(np.int32)
        ke = (ks + RNG.integers(1, 150, S)).astype(np.int32)
        for max_seqlen_k in (0, 64):
            out = ml.fp8_mqa_logits(q=qc, kv=kv, weights=w, cu_seq_len_k_start=ks,
                                    cu_seq_len_k_end=ke, clean_logits=True,
                                    max_seqlen_k=max_seqlen_k)
            self.assertEqual(out.dtype, np.float32)
            self.assert_upstream_stride(out)
            exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, max_seqlen_k)
            self.assert_logits(out, exact, mag)
        with self.assertRaisesRegex(ValueError, "fp8_mqa_logits: q is a bare FP8 array"):
            ml.fp8_mqa_logits((qc, None), kv, w, ks, ke)


class Paged(Checks):
    def test_every_format_and_type(self):
        B, H, block_kv, blocks, max_blocks = 3, 16, 64, 9, 4
        for fmt in FORMATS:
            for next_n in (1, 2):
                for bf16_w, dtype in ((False, "float32"), (True, "bfloat16")):
                    with self.subTest(fmt=fmt, next_n=next_n, dtype=dtype):
                        cache, _ = make_cache(blocks, block_kv, fmt)
                        keys = cache_keys(cache, fmt == "mxfp4", fmt != "per_token")
                        lens = RNG.integers(1, max_blocks * block_kv, (B, next_n)).astype(np.int32)
                        table = RNG.integers(0, blocks, (B, max_blocks)).astype(np.int32)
                        for b in range(B):  # garbage past each request's context
                            used = -(-lens[b].max() // block_kv)
                            table[b, used:] = 90210
                        q, qd = make_q((B, next_n, H), fmt)
                        qd = qd.reshape(B * next_n, H, D)
                        w = rand_weights(B * next_n, H, bf16_w)
                        max_context_len = max_blocks * block_kv
                        meta = ml.get_paged_mqa_logits_metadata(context_lens=lens,
                                                                block_kv=block_kv, num_sms=4)
                        out = ml.fp8_fp4_paged_mqa_logits(
                            q=q, kv_cache=cache, weights=w, context_lens=lens, block_table=table,
                            schedule_meta=meta, max_context_len=max_context_len,
                            clean_logits=True, logits_dtype=dtype, indices=None, num_threads=2)
                        self.assert_upstream_stride(out)
                        exact, mag = ref_paged(qd, keys, weights_f64(w), lens, table,
                                               max_context_len)
                        self.assert_logits(out, exact, mag)
                        # Upstream's default clean_logits=False: valid columns are the same.
                        dflt = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens, table, meta,
                                                           max_context_len, logits_dtype=dtype)
                        self.assert_logits(dflt, exact, mag, clean=False)

    def test_varlen_indices_and_legacy(self):
        B, H, block_kv, blocks = 4, 8, 32, 6
        cache, _ = make_cache(blocks, block_kv, "per_token")
        keys = cache_keys(cache, False, False)
        lens = np.array([[40], [70], [9], [100]], np.int32)
        table = RNG.integers(0, blocks, (B, 4)).astype(np.int32)
        table[1] = table[0]  # rows 0 and 1 are one request
        indices = np.array([0, 0, 1, 2], np.int32)
        (qc, _), qd = make_q((B, 1, H), "per_token")
        qd = qd.reshape(B, H, D)
        w = rand_weights(B, H, False)
        meta = ml.get_paged_mqa_logits_metadata(lens, block_kv, 2, indices=indices)
        out = ml.fp8_paged_mqa_logits(q=qc, kv_cache=cache, weights=w, context_lens=lens,
                                      block_table=table, schedule_meta=meta, max_context_len=128,
                                      clean_logits=True, indices=indices)
        self.assertEqual(out.dtype, np.float32)
        exact, mag = ref_paged(qd, keys, weights_f64(w), lens, table, 128)
        self.assert_logits(out, exact, mag)
        plain = ml.get_paged_mqa_logits_metadata(lens, block_kv, 2)
        np.testing.assert_array_equal(
            out, ml.fp8_paged_mqa_logits(qc, cache, w, lens, table, plain, 128, True))
        with self.assertRaisesRegex(ValueError, "consecutive"):
            ml.get_paged_mqa_logits_metadata(lens, block_kv, 2,
                                             indices=np.array([0, 1, 0, 2], np.int32))


class Sparse(Checks):
    def test_every_format_both_mappings(self):
        S, H, N, cap = 6, 8, 400, 8
        for fmt in ("mxfp8", "mxfp4"):
            for B in (8, 16):
                for bf16_w in (False, True):
                    for unaligned in (False, True):
                        with self.subTest(fmt=fmt, B=B, bf16_w=bf16_w, unaligned=unaligned):
                            q, qd = make_q((S, H), fmt)
                            kv, kd = make_kv(N, fmt)
                            w = rand_weights(S, H, bf16_w)
                            ks = (RNG.integers(0, 10, S) * B + 3).astype(np.int32)  # ks % B != 0
                            ke = (ks + RNG.integers(20, 200, S)).astype(np.int32)
                            idx = RNG.integers(0, N // B, (S, cap)).astype(np.int32)
                            idx[RNG.random((S, cap)) < 0.2] = -1
                            qk_dtype = np.int8 if fmt == "mxfp4" else np.uint8
                            meta = ml.get_sparse_mqa_logits_metadata(
                                cu_seq_len_k_start=ks, cu_seq_len_k_end=ke, num_kv_tokens=N,
                                sparse_kv_block_indices=idx, qk_dtype=qk_dtype,
                                sparse_block_kv=B, use_unaligned_ks=unaligned)
                            out = ml.fp8_fp4_sparse_mqa_logits(
                                q=q, kv=kv, weights=w, metadata=meta, num_max_sparse_blocks=cap,
                                sparse_block_kv=B, use_unaligned_ks=unaligned, num_threads=2)
                            self.assertEqual(out.dtype, np.uint16)  # bf16, as upstream
                            self.assert_upstream_stride(out)
                            exact, mag = ref_sparse(qd, kd, weights_f64(w), ks, ke, idx, B,
                                                    unaligned)
                            self.assert_logits(out, exact, mag)


class PagedSparse(Checks):
    def test_every_format_and_reread_across_caches(self):
        S, H, page_kv, blocks, max_blocks, B, cap = 5, 16, 64, 7, 3, 16, 8
        for fmt in FORMATS:
            with self.subTest(fmt=fmt):
                lens = RNG.integers(1, max_blocks * page_kv, S).astype(np.int32)
                table = RNG.integers(0, blocks, (S, max_blocks)).astype(np.int32)
                indices = np.arange(S, dtype=np.int32)
                idx = RNG.integers(0, max_blocks * page_kv // B, (S, cap)).astype(np.int32)
                qk_dtype = "torch.int8" if fmt == "mxfp4" else "torch.float8_e4m3fn"
                meta = ml.get_paged_sparse_mqa_logits_metadata(
                    context_lens=lens, block_table=table, indices=indices, page_kv=page_kv,
                    sparse_kv_block_indices=idx, qk_dtype=qk_dtype, sparse_block_kv=B)
                w = rand_weights(S, H, fmt != "per_token")
                # One metadata, two layers' caches of the same geometry: each its own logits.
                for layer in range(2):
                    cache, _ = make_cache(blocks, page_kv, fmt)
                    keys = cache_keys(cache, fmt == "mxfp4", fmt != "per_token")
                    q, qd = make_q((S, 1, H), fmt)
                    out = ml.fp8_fp4_paged_sparse_mqa_logits(
                        q=q, kv_cache=cache, weights=w, metadata=meta, num_max_sparse_blocks=cap,
                        sparse_block_kv=B)
                    self.assertEqual(out.dtype, np.uint16)
                    self.assert_upstream_stride(out)
                    exact, mag = ref_paged_sparse(qd.reshape(S, H, D), keys, weights_f64(w), lens,
                                                  table, idx, B)
                    self.assert_logits(out, exact, mag)


class BadInput(unittest.TestCase):
    def setUp(self):
        self.S, self.H, self.N = 3, 4, 64
        self.q, _ = make_q((self.S, self.H), "mxfp8")
        self.kv, _ = make_kv(self.N, "mxfp8")
        self.w = rand_weights(self.S, self.H, False)
        self.ks = np.zeros(self.S, np.int32)
        self.ke = np.full(self.S, self.N, np.int32)

    def call(self, **kw):
        args = dict(q=self.q, kv=self.kv, weights=self.w, cu_seq_len_k_start=self.ks,
                    cu_seq_len_k_end=self.ke)
        args.update(kw)
        return ml.fp8_fp4_mqa_logits(**args)

    def test_value_errors_name_the_argument(self):
        cases = [
            (dict(cu_seq_len_k_start=self.ks.astype(np.int64)), "cu_seq_len_k_start has dtype"),
            (dict(weights=self.w.astype(np.float64)), "weights has dtype float64"),
            (dict(weights=self.w[:, :3].copy()), "^fp8_fp4_mqa_logits: .*(weights|rows)"),  # library
            (dict(q=(self.q[0][:, :, :64], self.q[1])), "last dimension must be 128"),
            (dict(q=(np.ascontiguousarray(self.q[0].view(np.int8)[:, :, :64]), self.q[1])),
             "kv\\[0\\] is FP8"),
            (dict(kv=(self.kv[0], self.kv[1].view(np.float32))), "kv\\[1\\] has dtype float32"),
            (dict(q=(np.asfortranarray(self.q[0]), self.q[1])), "C-contiguous"),
            (dict(max_seqlen_k=-1), "max_seqlen_k = -1"),
            (dict(logits_dtype="float16"), "logits_dtype = float16"),
            (dict(num_threads=0), "num_threads = 0"),
            (dict(q=[1, 2]), "q\\[0\\] must be a numpy array"),
        ]
        for kw, msg in cases:
            with self.subTest(kw=list(kw)):
                with self.assertRaisesRegex(ValueError, msg):
                    self.call(**kw)

    def test_library_errors_are_value_errors(self):
        # A page the cache lacks: the library's own message.
        cache, _ = make_cache(2, 64, "mxfp8")
        lens = np.array([[100]], np.int32)
        table = np.array([[0, 7]], np.int32)
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 1)
        q, _ = make_q((1, 1, self.H), "mxfp8")
        w = rand_weights(1, self.H, False)
        with self.assertRaisesRegex(ValueError, r"block_table\[0\]\[1\] = 7 is not a page"):
            ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens, table, meta, 128)
        with self.assertRaisesRegex(ValueError, "schedule is stale"):
            ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens + 1, np.array([[0, 1]], np.int32),
                                        meta, 128)
        with self.assertRaisesRegex(ValueError, "sparse_block_kv"):
            ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N,
                                              np.zeros((self.S, 4), np.int32), np.uint8, 12)
        idx = np.zeros((self.S, 4), np.int32)
        meta = ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N, idx, np.uint8, 8)
        with self.assertRaisesRegex(ValueError, "num_max_sparse_blocks = 8"):
            ml.fp8_fp4_sparse_mqa_logits(self.q, self.kv, self.w, meta, 8, 8)
        with self.assertRaisesRegex(ValueError, "qk_dtype"):
            ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N, idx, np.float32, 8)


if __name__ == "__main__":
    print(f"mqalogits {ml.__version__} from {ml.__file__}, numpy {np.__version__}")
    unittest.main(verbosity=2)
