"""Tests of the Python module `mqalogits` against a float64 numpy reference written here.

Inputs are quantised by this file's own numpy quantiser (FP8 e4m3 and packed FP4 e2m1 with UE8M0
scales per 32 elements, FP8 with one fp32 scale per token) and decoded by its own tables, so
nothing is shared with the library but the byte layouts. Every function is called with
DeepGEMM's keyword names; results must satisfy |got - exact| <= 2^-7 |exact| + 2^-14 M with
M = sum_h |w_h| sum_i |q_hi k_i|, and the -inf mask must be exact. The classes at the end check
torch tensors, int64 indices, the caller's output buffers, short errors and the thread pools.

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
    """x [..., d] -> (codes uint8 [..., d] or int8 [..., d / 2], int32 scales [...]); the scale
    bytes past d / 32 blocks are 0."""
    nb = x.shape[-1] // 32
    blocks = x.reshape(x.shape[:-1] + (nb, 32))
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
    scales = sum(e[..., k] << (8 * k) for k in range(nb))
    return codes, np.asarray(scales).astype(np.uint32).view(np.int32)


def quant_per_token(x):
    """x [N, d] -> (uint8 codes [N, d], float32 scales [N])."""
    amax = np.abs(x).max(axis=-1)
    s = np.where(amax > 0, amax / 448.0, 1.0).astype(np.float32)
    return quant_e4m3(x / s[:, None].astype(np.float64)), s


def decode(codes, scales):
    """Rows of codes (+ int32 UE8M0 or float32 per-row or None) -> float64 [..., d]."""
    d = codes.shape[-1] * (2 if codes.dtype == np.int8 else 1)
    if codes.dtype == np.int8:
        b = codes.view(np.uint8).astype(np.int64)
        v = np.stack([E2M1[b & 0xF], E2M1[b >> 4]], axis=-1).reshape(codes.shape[:-1] + (d,))
    else:
        v = E4M3[codes.astype(np.int64)]
    if scales is None:
        return v
    if scales.dtype == np.float32:
        return v * scales.astype(np.float64)[..., None]
    u = scales.view(np.uint32).astype(np.int64)
    nb = d // 32  # the scale bytes past the row's blocks are not read
    e = np.stack([(u >> (8 * k)) & 0xFF for k in range(nb)], axis=-1)
    return (v.reshape(v.shape[:-1] + (nb, 32)) * np.ldexp(1.0, e - 127)[..., None]).reshape(v.shape)


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
    """Decoded keys [num_blocks, block_kv, d] of a fused cache."""
    nb, bkv = cache.shape[0], cache.shape[1]
    flat = cache.reshape(nb, -1)
    dbytes = cache.shape[-1] - 4
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


def make_q(shape, fmt, d=D):
    """(q tuple for the module, decoded float64 [rows, H, d])."""
    x = rand_x(*shape, d)
    if fmt == "per_token":
        codes = quant_e4m3(x * 4.0 / np.abs(x).max())
        return (codes, None), decode(codes, None)
    codes, sf = quant_mx(x, fmt == "mxfp4")
    return (codes, sf), decode(codes, sf)


def make_kv(N, fmt, d=D):
    x = rand_x(N, d)
    if fmt == "per_token":
        codes, sf = quant_per_token(x)
    else:
        codes, sf = quant_mx(x, fmt == "mxfp4")
    return (codes, sf), decode(codes, sf)


def make_cache(num_blocks, block_kv, fmt, pad=512, d=D):
    """Fused cache uint8 [num_blocks, block_kv, 1, d + 4 | d / 2 + 4], each block padded like
    upstream."""
    fp4 = fmt == "mxfp4"
    (codes, sf), _ = make_kv(num_blocks * block_kv, fmt, d)
    dbytes = d // 2 if fp4 else d
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


class HostPath(unittest.TestCase):
    PATHS = {"avx512_amx", "avx512_bf16", "avx512_vnni", "avx512", "avx2_vnni", "avx2", "neon_dotprod", "neon", "portable"}

    def test_names_the_path_and_caps_it(self):
        chosen = ml.host_isa_name()
        self.assertIn(chosen, self.PATHS)
        if not hasattr(ml, "limit_host_isa"):  # a header-only build (MQALOGITS_DISPATCH=OFF)
            return
        try:
            self.assertEqual(ml.limit_host_isa("portable"), "portable")
            self.assertEqual(ml.host_isa_name(), "portable")
            with self.assertRaisesRegex(ValueError, "names no host path"):
                ml.limit_host_isa("avx1024")
            # A NUL would end the name the dispatcher compares: neither caps nor lifts.
            for bad in ("avx2\x00junk", "native\x00avx2"):
                with self.assertRaisesRegex(ValueError, r"names no host path"):
                    ml.limit_host_isa(bad)
                self.assertEqual(ml.host_isa_name(), "portable")
        finally:
            self.assertEqual(ml.limit_host_isa("native"), chosen)


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
            parts = [p for p in parts
                     if p not in ("*", "num_threads=None", "out=None",
                                  "truncate_long_contexts=False")
                     and not p.startswith(("topk", "candidate_"))]
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
                                logits_dtype=dtype, num_threads=2,
                                truncate_long_contexts=True)  # rows past N or max_seqlen_k
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
                                    max_seqlen_k=max_seqlen_k, truncate_long_contexts=True)
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
                for bf16_w, dtype in ((False, "float32"), (True, "bfloat16"), ("fp16", "float32")):
                    with self.subTest(fmt=fmt, next_n=next_n, dtype=dtype, weights=bf16_w):
                        cache, _ = make_cache(blocks, block_kv, fmt)
                        keys = cache_keys(cache, fmt == "mxfp4", fmt != "per_token")
                        lens = RNG.integers(1, max_blocks * block_kv, (B, next_n)).astype(np.int32)
                        table = RNG.integers(0, blocks, (B, max_blocks)).astype(np.int32)
                        for b in range(B):  # garbage past each request's context
                            used = -(-lens[b].max() // block_kv)
                            table[b, used:] = 90210
                        q, qd = make_q((B, next_n, H), fmt)
                        qd = qd.reshape(B * next_n, H, D)
                        w = rand_weights(B * next_n, H, bf16_w is True)
                        if bf16_w == "fp16":  # upstream SM100's float16 weights
                            w = w.astype(np.float16)
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
        # The table holds where each worker starts (block-table row, unit of its context); the
        # kernel rebuilds the schedule from the call's own lengths and indices and refuses a
        # table that differs. Here the tables with and without indices are equal: each call
        # runs its own schedule, with the same logits.
        np.testing.assert_array_equal(meta, plain)
        for m, idx in ((meta, None), (plain, indices), (meta, np.array([0, 0, 1, 7], np.int32))):
            np.testing.assert_array_equal(
                out, ml.fp8_paged_mqa_logits(qc, cache, w, lens, table, m, 128, True, indices=idx))
        long_lens = np.array([[600], [600], [9], [100]], np.int32)  # split otherwise
        with self.assertRaisesRegex(ValueError, "schedule_meta: .*row 1 = \\[2, 0\\], but these "
                                    "context_lens with page_kv 32 give \\[1, 1\\]: the array "
                                    "is stale"):
            ml.fp8_paged_mqa_logits(qc, cache, w, long_lens, table, meta, 1024, True)
        bad = table.copy()
        bad[1, 0] = (bad[0, 0] + 1) % blocks
        with self.assertRaisesRegex(ValueError, "identical block-table rows"):
            ml.fp8_paged_mqa_logits(qc, cache, w, lens, bad, meta, 128, True, indices=indices)

    def test_long_contexts_are_errors_unless_truncated(self):
        # L = 300 with a 2-column table at page 64 (128 positions), and L = 200 past
        # max_context_len = 160: engine bugs, refused by default; truncate_long_contexts=True
        # masks the positions past the table and the output.
        B, H, page_kv, blocks = 2, 8, 64, 6
        cache, _ = make_cache(blocks, page_kv, "per_token")
        keys = cache_keys(cache, False, False)
        (qc, _), qd = make_q((B, 1, H), "per_token")
        w = rand_weights(B, H, False)
        for lens, table, max_len, msg in (
                (np.array([[300], [50]], np.int32), np.array([[0, 1], [2, 3]], np.int32), 256,
                 "300"),
                (np.array([[100], [200]], np.int32), np.array([[0, 1, 4, 5], [2, 3, 4, 5]],
                                                             np.int32), 160, "200")):
            meta = ml.get_paged_mqa_logits_metadata(lens, page_kv, 2)
            with self.subTest(msg=msg):
                with self.assertRaisesRegex(ValueError, "^fp8_paged_mqa_logits: .*" + msg):
                    ml.fp8_paged_mqa_logits(qc, cache, w, lens, table, meta, max_len, True)
                with self.assertRaisesRegex(ValueError, "^fp8_fp4_paged_mqa_logits: .*" + msg):
                    ml.fp8_fp4_paged_mqa_logits((qc, None), cache, w, lens, table, meta,
                                                max_len, topk=8)
                out = ml.fp8_paged_mqa_logits(qc, cache, w, lens, table, meta, max_len, True,
                                              truncate_long_contexts=True)
                exact, mag = ref_paged(qd.reshape(B, H, D), keys, weights_f64(w), lens, table,
                                       max_len)
                self.assert_logits(out, exact, mag)
        # The paged-sparse kernel: the same rule for the block table.
        lens, table = np.array([300, 50], np.int32), np.array([[0, 1], [2, 3]], np.int32)
        sel = np.tile(np.arange(8, dtype=np.int32), (B, 1))
        meta = ml.get_paged_sparse_mqa_logits_metadata(lens, table, np.arange(B, dtype=np.int32),
                                                       page_kv, sel, np.uint8, 16)
        with self.assertRaisesRegex(ValueError, "^fp8_fp4_paged_sparse_mqa_logits: .*300.*"
                                    "truncate_long_contexts=True"):
            ml.fp8_fp4_paged_sparse_mqa_logits((qc, None), cache, w, meta, 8, 16)
        out = ml.fp8_fp4_paged_sparse_mqa_logits((qc, None), cache, w, meta, 8, 16,
                                                 truncate_long_contexts=True)
        exact, mag = ref_paged_sparse(qd.reshape(B, H, D), keys, weights_f64(w), lens, table,
                                      sel, 16)
        self.assert_logits(out, exact, mag)


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


class HeadDims(Checks):
    """Head dims 64 and 32 (32 for the FP8 formats), taken from the arrays' last dimension."""

    def test_every_kernel_at_64_and_32(self):
        H, S, N, B, cap, block_kv, blocks, max_blocks = 8, 4, 120, 16, 4, 32, 6, 3
        for fmt in FORMATS:
            for d in ((64,) if fmt == "mxfp4" else (64, 32)):
                with self.subTest(fmt=fmt, d=d):
                    q, qd = make_q((S, H), fmt, d)
                    kv, kd = make_kv(N, fmt, d)
                    w = rand_weights(S, H, False)
                    ks = RNG.integers(0, 20, S).astype(np.int32)
                    ke = (ks + RNG.integers(30, 100, S)).astype(np.int32)
                    out = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke)
                    exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
                    self.assert_logits(out, exact, mag)

                    idx = RNG.integers(0, N // B, (S, cap)).astype(np.int32)
                    qk_dtype = np.int8 if fmt == "mxfp4" else np.uint8
                    meta = ml.get_sparse_mqa_logits_metadata(ks, ke, N, idx, qk_dtype, B)
                    out = ml.fp8_fp4_sparse_mqa_logits(q, kv, w, meta, cap, B)
                    exact, mag = ref_sparse(qd, kd, weights_f64(w), ks, ke, idx, B, False)
                    self.assert_logits(out, exact, mag)

                    cache, _ = make_cache(blocks, block_kv, fmt, d=d)
                    self.assertEqual(cache.shape[-1], (d // 2 if fmt == "mxfp4" else d) + 4)
                    keys = cache_keys(cache, fmt == "mxfp4", fmt != "per_token")
                    lens = RNG.integers(1, max_blocks * block_kv, (S, 1)).astype(np.int32)
                    table = RNG.integers(0, blocks, (S, max_blocks)).astype(np.int32)
                    pq, pqd = make_q((S, 1, H), fmt, d)
                    pmeta = ml.get_paged_mqa_logits_metadata(lens, block_kv, 2)
                    max_len = max_blocks * block_kv
                    out = ml.fp8_fp4_paged_mqa_logits(pq, cache, w, lens, table, pmeta, max_len,
                                                      clean_logits=True)
                    exact, mag = ref_paged(pqd.reshape(S, H, d), keys, weights_f64(w), lens,
                                           table, max_len)
                    self.assert_logits(out, exact, mag)

                    flat_lens = lens[:, 0].copy()
                    sidx = RNG.integers(0, max_len // B, (S, cap)).astype(np.int32)
                    smeta = ml.get_paged_sparse_mqa_logits_metadata(
                        flat_lens, table, np.arange(S, dtype=np.int32), block_kv, sidx,
                        qk_dtype, B)
                    out = ml.fp8_fp4_paged_sparse_mqa_logits(pq, cache, w, smeta, cap, B)
                    exact, mag = ref_paged_sparse(pqd.reshape(S, H, d), keys, weights_f64(w),
                                                  flat_lens, table, sidx, B)
                    self.assert_logits(out, exact, mag)

    def test_mismatch_and_unsupported(self):
        S, H, N = 3, 4, 40
        q, _ = make_q((S, H), "mxfp8", 64)
        kv, _ = make_kv(N, "mxfp8", 128)
        w = rand_weights(S, H, False)
        ks = np.zeros(S, np.int32)
        ke = np.full(S, N, np.int32)
        with self.assertRaisesRegex(ValueError, "kv head_dim = 128 differs from q head_dim = 64"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke)
        q4, _ = make_q((S, H), "mxfp4", 128)
        q4 = (np.ascontiguousarray(q4[0][:, :, :16]), q4[1])  # 32 elements: not for MXFP4
        with self.assertRaisesRegex(ValueError, "last dimension must be 64 or 32"):
            ml.fp8_fp4_mqa_logits(q4, kv, w, ks, ke)
        cache, _ = make_cache(2, 16, "mxfp8", d=64)
        lens = np.array([[10]] * S, np.int32)
        table = np.zeros((S, 1), np.int32)
        meta = ml.get_paged_mqa_logits_metadata(lens, 16, 1)
        q128, _ = make_q((S, 1, H), "mxfp8", 128)
        with self.assertRaisesRegex(ValueError,
                                    "cache head_dim = 64 differs from q head_dim = 128"):
            ml.fp8_fp4_paged_mqa_logits(q128, cache, w, lens, table, meta, 16)


class IndexerKCache(unittest.TestCase):
    """vLLM's indexer_k_quant_and_cache, computed here in float32 the way its kernel does."""

    @staticmethod
    def vllm_token(x, ue8m0):
        x = x.astype(np.float32)
        scale = np.float32(max(np.float32(np.abs(x).max()), np.float32(1e-4))) / np.float32(448)
        if ue8m0:
            scale = np.float32(2.0) ** np.ceil(np.log2(scale, dtype=np.float32))
        y = (x / scale).astype(np.float64)  # float32 division, then exact
        a = np.minimum(np.abs(y), 448.0)  # saturating, as the GPU's satfinite conversion
        vals, codes = E4M3[E4M3_POS], E4M3_POS
        i = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
        lo, hi = vals[i - 1], vals[i]
        even_lo = codes[i - 1] % 2 == 0
        pick = np.where((a - lo < hi - a) | ((a - lo == hi - a) & even_lo), i - 1, i)
        mags = codes[pick]
        return np.where(np.signbit(y), mags | 0x80, mags).astype(np.uint8), np.float32(scale)

    def test_bytes_match_vllm(self):
        T, blocks, block_size = 50, 4, 16
        for ue8m0 in (False, True):
            for bf16_k in (False, True):
                with self.subTest(ue8m0=ue8m0, bf16_k=bf16_k):
                    mag = np.ldexp(1.0, RNG.integers(-18, 10, (T, 1)))
                    x = (RNG.uniform(-1, 1, (T, D)) * mag).astype(np.float32)
                    x[0] = 0  # under the 1e-4 floor
                    k = bf16_bits(x) if bf16_k else x
                    xk = bf16_to_f64(k).astype(np.float32) if bf16_k else x
                    cache = np.full((blocks, block_size, 132), 0xCD, np.uint8)
                    slots = RNG.permutation(blocks * block_size)[:T].astype(np.int64)
                    slots[3] = -1  # padding: skipped
                    ml.indexer_k_quant_and_cache(k, cache, slots, 128,
                                                 "ue8m0" if ue8m0 else None)
                    flat = cache.reshape(blocks, block_size * 132)
                    for t in range(T):
                        if slots[t] < 0:
                            continue
                        b, o = divmod(int(slots[t]), block_size)
                        codes, scale = self.vllm_token(xk[t], ue8m0)
                        np.testing.assert_array_equal(flat[b, o * 128:(o + 1) * 128], codes)
                        got = flat[b, block_size * 128 + 4 * o:block_size * 128 + 4 * o + 4]
                        self.assertEqual(got.view(np.float32)[0], scale)
                    # The padded token wrote nothing: its slot (if unused) stays 0xCD.
                    unused = sorted(set(range(blocks * block_size)) - set(slots.tolist()))
                    b, o = divmod(unused[0], block_size)
                    self.assertTrue((flat[b, o * 128:(o + 1) * 128] == 0xCD).all())
        with self.assertRaisesRegex(ValueError, "quant_block_size = 64"):
            ml.indexer_k_quant_and_cache(x, cache, slots, 64, None)
        with self.assertRaisesRegex(ValueError, "scale_fmt"):
            ml.indexer_k_quant_and_cache(x, cache, slots, 128, "fp32")


# ---- the fused top-k (topk= on the four kernels) ----

def expected_topk(logits, valid, k):
    """A stable descending sort of each row's valid fp32 logits (ties to the lower column), cut
    to k and padded with -1 / -inf: (int32 [rows, k], float32 [rows, k])."""
    rows = logits.shape[0]
    idx = np.full((rows, k), -1, np.int32)
    val = np.full((rows, k), -np.inf, np.float32)
    for r in range(rows):
        cols = np.nonzero(valid[r])[0]
        order = cols[np.argsort(-logits[r, cols], kind="stable")][:k]
        idx[r, :len(order)] = order
        val[r, :len(order)] = logits[r, order]
    return idx, val


def repeat_keys(codes, scales, distinct):
    """Only `distinct` different keys, repeated: many equal logits, so the tie rule matters."""
    codes[distinct:] = np.resize(codes[:distinct], codes[distinct:].shape)
    scales[distinct:] = np.resize(scales[:distinct], scales[distinct:].shape)


class TopK(Checks):
    def assert_topk(self, got, want):
        idx, val = got
        self.assertEqual((idx.dtype, val.dtype), (np.int32, np.float32))
        np.testing.assert_array_equal(idx, want[0])
        np.testing.assert_array_equal(val, want[1])

    def assert_topk_of_bf16(self, idx, val, logits, valid, k):
        """The sparse kernels' logits are bf16 and the selection ranks the fp32 logit, so no sort
        of the bf16 row reproduces it: check what must hold instead. Every selected column is
        valid and distinct, as many as min(k, valid) then -1 / -inf; the values are fp32,
        non-increasing, equal ones in increasing column order, and round to the logits at their
        columns; no unselected valid column has a larger bf16 logit than the k-th."""
        self.assertEqual((idx.shape, idx.dtype, val.dtype), ((logits.shape[0], k), np.int32,
                                                             np.float32))
        for r in range(logits.shape[0]):
            n = min(k, int(valid[r].sum()))
            sel = idx[r, :n]
            np.testing.assert_array_equal(idx[r, n:], -1)
            np.testing.assert_array_equal(val[r, n:], -np.inf)
            self.assertEqual(len(set(sel.tolist())), n)
            self.assertTrue(valid[r, sel].all())
            np.testing.assert_array_equal(bf16_bits(val[r, :n]), logits[r, sel])
            v = val[r, :n]
            self.assertTrue(np.all(v[:-1] >= v[1:]))
            self.assertTrue(np.all(sel[:-1][v[:-1] == v[1:]] < sel[1:][v[:-1] == v[1:]]))
            if n and n < valid[r].sum():
                rest = np.setdiff1d(np.nonzero(valid[r])[0], sel)
                self.assertLessEqual(bf16_to_f64(logits[r, rest]).max(),
                                     bf16_to_f64(bf16_bits(v[-1:]))[0])

    def test_dense_against_a_sort_of_its_logits(self):
        S, H, N = 6, 8, 300
        for fmt in FORMATS:
            for max_seqlen_k in (0, 100):
                with self.subTest(fmt=fmt, max_seqlen_k=max_seqlen_k):
                    q, qd = make_q((S, H), fmt)
                    (kc, ksf), kd = make_kv(N, fmt)
                    repeat_keys(kc, ksf, 40)
                    kd = decode(kc, ksf)
                    w = rand_weights(S, H, fmt == "mxfp4")
                    ks = RNG.integers(-3, 150, S).astype(np.int32)
                    ke = (ks + RNG.integers(0, 200, S)).astype(np.int32)
                    ks[0], ke[0] = 10, 10  # no valid column: all -1
                    exact, _ = ref_dense(qd, kd, weights_f64(w), ks, ke, max_seqlen_k)
                    valid = ~np.isneginf(exact)
                    # Rows past N or max_seqlen_k: their kept columns, the top-k among them.
                    logits = ml.fp8_fp4_mqa_logits(q, (kc, ksf), w, ks, ke,
                                                   max_seqlen_k=max_seqlen_k,
                                                   truncate_long_contexts=True)
                    for k in (1, 17, logits.shape[1] + 5):
                        want = expected_topk(logits, valid, k)
                        got = ml.fp8_fp4_mqa_logits(
                            q=q, kv=(kc, ksf), weights=w, cu_seq_len_k_start=ks,
                            cu_seq_len_k_end=ke, max_seqlen_k=max_seqlen_k, topk=k,
                            topk_values=True, num_threads=2, truncate_long_contexts=True)
                        self.assert_topk(got, want)
                        only = ml.fp8_fp4_mqa_logits(q, (kc, ksf), w, ks, ke,
                                                     max_seqlen_k=max_seqlen_k, topk=k,
                                                     truncate_long_contexts=True)
                        self.assertIsInstance(only, np.ndarray)
                        np.testing.assert_array_equal(only, want[0])

    def test_paged_positions_and_slots(self):
        B, H, block_kv, blocks, max_blocks = 3, 16, 64, 9, 4
        for fmt in FORMATS:
            for next_n in (1, 2):
                with self.subTest(fmt=fmt, next_n=next_n):
                    cache, _ = make_cache(blocks, block_kv, fmt)
                    keys = cache_keys(cache, fmt == "mxfp4", fmt != "per_token")
                    lens = RNG.integers(1, max_blocks * block_kv, (B, next_n)).astype(np.int32)
                    lens[0] = 5  # fewer valid columns than k: -1 padding
                    table = RNG.integers(0, blocks, (B, max_blocks)).astype(np.int32)
                    q, qd = make_q((B, next_n, H), fmt)
                    w = rand_weights(B * next_n, H, False)
                    mcl = max_blocks * block_kv
                    meta = ml.get_paged_mqa_logits_metadata(lens, block_kv, 4)
                    exact, _ = ref_paged(qd.reshape(B * next_n, H, D), keys, weights_f64(w),
                                         lens, table, mcl)
                    logits = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens, table, meta, mcl,
                                                         clean_logits=True)
                    k = 33
                    want_idx, want_val = expected_topk(logits, ~np.isneginf(exact), k)
                    got = ml.fp8_fp4_paged_mqa_logits(
                        q=q, kv_cache=cache, weights=w, context_lens=lens, block_table=table,
                        schedule_meta=meta, max_context_len=mcl, topk=k, topk_values=True)
                    self.assert_topk(got, (want_idx, want_val))
                    # Cache slots: block_table[b, pos // block_kv] * block_kv + pos % block_kv.
                    b = np.repeat(np.arange(B), next_n)[:, None]
                    pos = np.maximum(want_idx, 0)
                    slots = np.where(want_idx < 0, -1,
                                     table[b, pos // block_kv] * block_kv + pos % block_kv)
                    got_slots = ml.fp8_fp4_paged_mqa_logits(
                        q, cache, w, lens, table, meta, mcl, topk=k, topk_index="slot")
                    np.testing.assert_array_equal(got_slots, slots.astype(np.int32))

    @staticmethod
    def first_entries(idx, B):
        """[rows, cap * B]: the columns of each row's blocks that no earlier entry of the row
        selected already. The sparse top-k never selects a token twice: of a repeated block
        (vLLM pads a row by repeating its last valid block) only the first entry's columns
        are candidates."""
        first = np.ones(idx.shape, bool)
        for r in range(idx.shape[0]):
            seen = set()
            for b, v in enumerate(idx[r]):
                first[r, b] = v < 0 or v not in seen
                seen.add(v)
        return np.repeat(first, B, axis=1)

    def test_sparse_and_paged_sparse(self):
        S, H, N, cap, B = 6, 8, 400, 8, 16
        for fmt in ("mxfp8", "mxfp4"):
            with self.subTest(kernel="sparse", fmt=fmt):
                q, qd = make_q((S, H), fmt)
                kv, kd = make_kv(N, fmt)
                w = rand_weights(S, H, True)
                ks = (RNG.integers(0, 10, S) * B).astype(np.int32)
                ke = (ks + RNG.integers(20, 200, S)).astype(np.int32)
                idx = RNG.integers(0, N // B, (S, cap)).astype(np.int32)  # repeats blocks
                idx[0, 5:] = idx[0, 4]  # vLLM's padding: the last valid block, repeated
                meta = ml.get_sparse_mqa_logits_metadata(ks, ke, N, idx, np.int8 if fmt ==
                                                         "mxfp4" else np.uint8, B)
                exact, _ = ref_sparse(qd, kd, weights_f64(w), ks, ke, idx, B, False)
                logits = ml.fp8_fp4_sparse_mqa_logits(q, kv, w, meta, cap, B)
                for k in (1, 40, cap * B + 3):
                    got_idx, got_val = ml.fp8_fp4_sparse_mqa_logits(
                        q=q, kv=kv, weights=w, metadata=meta, num_max_sparse_blocks=cap,
                        sparse_block_kv=B, topk=k, topk_values=True)
                    self.assert_topk_of_bf16(got_idx, got_val, logits,
                                             ~np.isneginf(exact) & self.first_entries(idx, B), k)
        S, page_kv, blocks, max_blocks = 5, 64, 7, 3
        for fmt in FORMATS:
            with self.subTest(kernel="paged_sparse", fmt=fmt):
                lens = RNG.integers(1, max_blocks * page_kv, S).astype(np.int32)
                table = RNG.integers(0, blocks, (S, max_blocks)).astype(np.int32)
                idx = RNG.integers(0, max_blocks * page_kv // B, (S, cap)).astype(np.int32)
                idx[0, 5:] = idx[0, 4]  # vLLM's padding
                meta = ml.get_paged_sparse_mqa_logits_metadata(
                    lens, table, np.arange(S, dtype=np.int32), page_kv, idx,
                    "torch.int8" if fmt == "mxfp4" else "torch.float8_e4m3fn", B)
                cache, _ = make_cache(blocks, page_kv, fmt)
                keys = cache_keys(cache, fmt == "mxfp4", fmt != "per_token")
                q, qd = make_q((S, 1, H), fmt)
                w = rand_weights(S, H, True)
                exact, _ = ref_paged_sparse(qd.reshape(S, H, D), keys, weights_f64(w), lens,
                                            table, idx, B)
                logits = ml.fp8_fp4_paged_sparse_mqa_logits(q, cache, w, meta, cap, B)
                got_idx, got_val = ml.fp8_fp4_paged_sparse_mqa_logits(
                    q, cache, w, meta, cap, B, topk=50, topk_values=True)
                self.assert_topk_of_bf16(got_idx, got_val, logits,
                                         ~np.isneginf(exact) & self.first_entries(idx, B), 50)

    def test_bad_requests(self):
        S, H, N = 3, 4, 64
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(N, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, N, np.int32)
        for kw, msg in [(dict(topk=0), "topk = 0 must be >= 1"),
                        (dict(topk="8"), "topk must be an int"),
                        (dict(topk_values=True), "need topk"),
                        (dict(topk=4, topk_index="slot"), "'slot' is the paged kernel's")]:
            with self.subTest(kw=kw):
                with self.assertRaisesRegex(ValueError, "^fp8_fp4_mqa_logits: .*" + msg):
                    ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, **kw)
        # The library's own checks still run (here: weights rows against q's).
        with self.assertRaisesRegex(ValueError, "^fp8_fp4_mqa_logits: "):
            ml.fp8_fp4_mqa_logits(q, kv, w[:2], ks, ke, topk=4)


class ReadmeSnippet(Checks):
    """README.md's ```python block (section "Python"), run as written. Its first call is the
    dense kernel ([S, H, 128] q) and the rest decode ([B, next_n, H, 128] q), under the same names,
    so it runs in two parts, each over inputs of its own shape."""

    def test_readme_python_block(self):
        readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("\n## Python\n"):]
        block = section[section.index("```python\n") + 10:]
        block = block[:block.index("```")]
        split = block.index("\nmeta = ")
        dense_part, paged_part = block[:split + 1], "import mqalogits as dg\n" + block[split + 1:]

        S, H, N = 4, 16, 200
        (q, q_sf), qd = make_q((S, H), "mxfp8")
        (kv, kv_sf), kd = make_kv(N, "mxfp8")
        weights = rand_weights(S, H, False)
        ks = np.zeros(S, np.int32)
        ke = np.array([50, 120, 200, 7], np.int32)
        env = dict(q=q, q_sf=q_sf, kv=kv, kv_sf=kv_sf, weights=weights, ks=ks, ke=ke)
        exec(dense_part, env)
        self.assert_logits(env["logits"], *ref_dense(qd, kd, weights_f64(weights), ks, ke, 0))

        B, next_n, block_kv, blocks, max_blocks = 2, 1, 64, 6, 4
        cache, _ = make_cache(blocks, block_kv, "mxfp8")
        context_lens = np.array([[130], [256]], np.int32)
        block_table = RNG.integers(0, blocks, (B, max_blocks)).astype(np.int32)
        (q, q_sf), qd = make_q((B, next_n, H), "mxfp8")
        weights = rand_weights(B * next_n, H, False)
        max_context_len = max_blocks * block_kv
        sched_buf = np.full((8 + 1, 2), -1, np.int32)
        topk_buf = np.full((16, 2048), -2, np.int32)
        env = dict(q=q, q_sf=q_sf, kv_cache=cache, weights=weights, context_lens=context_lens,
                   block_table=block_table, max_context_len=max_context_len,
                   sched_buf=sched_buf, topk_buf=topk_buf)
        exec(paged_part, env)
        exact, mag = ref_paged(qd.reshape(B * next_n, H, D),
                               cache_keys(cache, False, True), weights_f64(weights),
                               context_lens, block_table, max_context_len)
        self.assert_logits(env["logits"], exact, mag, clean=False)
        pos, _ = expected_topk(np.where(np.isneginf(exact), -np.inf, env["logits"]),
                               ~np.isneginf(exact), 2048)
        slots = np.where(pos < 0, -1, block_table[np.arange(B)[:, None], np.maximum(pos, 0) //
                                                  block_kv] * block_kv + pos % block_kv)
        np.testing.assert_array_equal(env["slots"], slots)
        np.testing.assert_array_equal(topk_buf[:B], slots)
        self.assertTrue((topk_buf[B:] == -2).all())


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
            (dict(cu_seq_len_k_start=self.ks.astype(np.float64)),
             "cu_seq_len_k_start has dtype float64, expected int32 or int64"),
            (dict(weights=self.w.astype(np.float64)), "weights has dtype float64"),
            (dict(weights=self.w[:, :3].copy()), "^fp8_fp4_mqa_logits: .*(weights|rows)"),  # library
            (dict(q=(np.ascontiguousarray(self.q[0][:, :, :96]), self.q[1])),
             "last dimension must be 128, 64 or 32"),
            (dict(q=(np.ascontiguousarray(self.q[0][:, :, :64]), self.q[1])),
             "kv head_dim = 128 differs from q head_dim = 64"),
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

    def test_strides_and_byte_order_are_checked_before_a_view(self):
        # A 2-D input whose rows overlap (stride 0 from np.broadcast_to, or a row stride below
        # the row) or run backwards would be read as [rows, cols] of smaller storage.
        S, H = self.S, self.H
        w = self.w
        overlapping = np.lib.stride_tricks.as_strided(w, shape=(S, H), strides=(8, 4))
        for bad, what in [(np.broadcast_to(w[:1], (S, H)), "row stride 0"),
                          (overlapping, "row stride 8"),
                          (w[::-1], "row stride -16")]:
            with self.subTest(weights=what):
                with self.assertRaisesRegex(ValueError, "^fp8_fp4_mqa_logits: weights .*" + what):
                    self.call(weights=bad)
        # Big-endian float16 (and float32) weights: refused, not read as little-endian.
        for dt in (">f2", ">f4"):
            with self.subTest(weights=dt):
                with self.assertRaisesRegex(ValueError, "weights .*(byte order|dtype)"):
                    self.call(weights=w.astype(dt))
        # The paged block table with stride-0 rows, the sparse indices with overlapping rows.
        cache, _ = make_cache(4, 64, "mxfp8")
        lens = np.array([[100], [70], [120]], np.int32)
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 1)
        q, _ = make_q((3, 1, self.H), "mxfp8")
        table = np.broadcast_to(np.array([[0, 1]], np.int32), (3, 2))
        with self.assertRaisesRegex(ValueError, "block_table .*row stride 0"):
            ml.fp8_fp4_paged_mqa_logits(q, cache, self.w, lens, table, meta, 128)
        idx = np.lib.stride_tricks.as_strided(np.zeros(8, np.int32), shape=(S, 4), strides=(4, 4))
        with self.assertRaisesRegex(ValueError, "sparse_kv_block_indices .*row stride 4"):
            ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N, idx, np.uint8, 8)
        # The k of the cache insert with stride-0 rows.
        kv_cache = np.zeros((2, 16, 132), np.uint8)
        k = np.broadcast_to(np.ones((1, D), np.float32), (4, D))
        with self.assertRaisesRegex(ValueError, "^indexer_k_quant_and_cache: k .*row stride 0"):
            ml.indexer_k_quant_and_cache(k, kv_cache, np.arange(4, dtype=np.int64), 128, None)
        self.assertTrue((kv_cache == 0).all())

    def test_cache_block_stride_zero_is_refused(self):
        # A cache whose blocks all alias one block (stride 0 on the first dimension) must not be
        # read or written as num_blocks separate blocks.
        cache, _ = make_cache(4, 64, "mxfp8")
        aliased = np.lib.stride_tricks.as_strided(cache, strides=(0,) + cache.strides[1:])
        lens = np.array([[100], [70], [120]], np.int32)
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 1)
        q, _ = make_q((3, 1, self.H), "mxfp8")
        table = np.array([[0, 1], [2, 3], [1, 0]], np.int32)
        with self.assertRaisesRegex(ValueError, "^fp8_fp4_paged_mqa_logits: kv_cache .*stride 0"):
            ml.fp8_fp4_paged_mqa_logits(q, aliased, self.w, lens, table, meta, 128)
        kv_cache = np.zeros((1, 16, 132), np.uint8)
        aliased = np.lib.stride_tricks.as_strided(kv_cache, shape=(4, 16, 132),
                                                  strides=(0, 132, 1))
        k = np.ones((4, D), np.float32)
        with self.assertRaisesRegex(ValueError, "^indexer_k_quant_and_cache: kv_cache .*stride 0"):
            ml.indexer_k_quant_and_cache(k, aliased, np.array([0, 16, 32, 48], np.int64), 128,
                                         None)
        self.assertTrue((kv_cache == 0).all())

    def test_paged_sparse_metadata_index_checks_are_the_librarys(self):
        # Fewer block-table rows than context_lens: the library's shape check, before any read
        # of the table (the wrapper's own index check read past it).
        lens = np.array([64, 64, 64], np.int32)
        table = np.array([[0, 1]], np.int32)
        one_request = np.zeros(3, np.int32)
        idx = np.zeros((3, 4), np.int32)
        with self.assertRaisesRegex(
                ValueError, r"^get_paged_sparse_mqa_logits_metadata: block_table shape \[1, 2\]"):
            ml.get_paged_sparse_mqa_logits_metadata(lens, table, one_request, 64, idx,
                                                    np.uint8, 16)
        # A request split in two runs, and rows of one request with different tables.
        table = np.array([[0, 1], [0, 1], [0, 1]], np.int32)
        with self.assertRaisesRegex(ValueError, "indices value 0"):
            ml.get_paged_sparse_mqa_logits_metadata(lens, table, np.array([0, 1, 0], np.int32),
                                                    64, idx, np.uint8, 16)
        table[1, 1] = 2
        with self.assertRaisesRegex(ValueError, r"indices\[0\] = indices\[1\]"):
            ml.get_paged_sparse_mqa_logits_metadata(lens, table, one_request, 64, idx,
                                                    np.uint8, 16)

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
        # A stale schedule table: made for 100 positions (one unit of work over 4 workers),
        # called with 1000 (two units).
        meta4 = ml.get_paged_mqa_logits_metadata(lens, 64, 4)
        with self.assertRaisesRegex(ValueError, r"schedule_meta: .*row 2 = \[0, 0\], .* stale"):
            ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens + 900, np.array([[0, 1]], np.int32),
                                        meta4, 1024)
        with self.assertRaisesRegex(ValueError, "sparse_block_kv"):
            ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N,
                                              np.zeros((self.S, 4), np.int32), np.uint8, 12)
        idx = np.zeros((self.S, 4), np.int32)
        meta = ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N, idx, np.uint8, 8)
        with self.assertRaisesRegex(ValueError, "num_max_sparse_blocks = 8"):
            ml.fp8_fp4_sparse_mqa_logits(self.q, self.kv, self.w, meta, 8, 8)
        with self.assertRaisesRegex(ValueError, "qk_dtype"):
            ml.get_sparse_mqa_logits_metadata(self.ks, self.ke, self.N, idx, np.float32, 8)


# ---- torch tensors, int64 indices, caller's buffers (test_engine_step.py: the engine's step) ----

try:
    import torch
except ImportError:
    torch = None


def threads_now():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


def T(a):
    """A CPU tensor sharing a's memory (bf16 bits as torch.bfloat16)."""
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def N(t):
    """A numpy array of a result tensor (torch.bfloat16 as uint16 bits)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


@unittest.skipIf(torch is None, "torch is not installed")
class Torch(Checks):
    def sparse_case(self):
        S, H, Nk, B, cap = 5, 8, 300, 16, 6
        q, qd = make_q((S, H), "mxfp8")
        kv, kd = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, True)
        ks = (RNG.integers(0, 5, S) * B).astype(np.int32)
        ke = (ks + RNG.integers(20, 150, S)).astype(np.int32)
        idx = RNG.integers(0, Nk // B, (S, cap)).astype(np.int32)
        return S, H, B, cap, q, qd, kv, kd, w, ks, ke, idx

    def test_every_function_takes_tensors_and_int64(self):
        S, H, B, cap, q, qd, kv, kd, w, ks, ke, idx = self.sparse_case()
        # numpy with int32, the reference of the torch call below.
        meta = ml.get_sparse_mqa_logits_metadata(ks, ke, len(kv[0]), idx, np.uint8, B)
        want = ml.fp8_fp4_sparse_mqa_logits(q, kv, w, meta, cap, B)
        tq = (T(q[0]), T(q[1]))
        tkv = (T(kv[0]), T(kv[1]))
        i64 = lambda a: torch.from_numpy(a.astype(np.int64))  # noqa: E731
        tmeta = ml.get_sparse_mqa_logits_metadata(i64(ks), i64(ke), len(kv[0]), i64(idx),
                                                  torch.uint8, B)
        got = ml.fp8_fp4_sparse_mqa_logits(tq, tkv, T(w), tmeta, cap, B)
        self.assertIsInstance(got, torch.Tensor)
        self.assertEqual(got.dtype, torch.bfloat16)
        np.testing.assert_array_equal(N(got), want)
        # The result shares memory with the array the module made (no copy on the way back).
        self.assertEqual(got.stride(0) * 2 % 1024, 0)

        # Paged-sparse: int64 lengths, table, indices and selection.
        page_kv, blocks = 64, 6
        lens = RNG.integers(1, 3 * page_kv, S).astype(np.int32)
        table = RNG.integers(0, blocks, (S, 3)).astype(np.int32)
        sel = RNG.integers(0, 3 * page_kv // B, (S, cap)).astype(np.int32)
        cache, _ = make_cache(blocks, page_kv, "mxfp8")
        pm = ml.get_paged_sparse_mqa_logits_metadata(lens, table, np.arange(S, dtype=np.int32),
                                                     page_kv, sel, np.uint8, B)
        want = ml.fp8_fp4_paged_sparse_mqa_logits(q, cache, w, pm, cap, B)
        tpm = ml.get_paged_sparse_mqa_logits_metadata(i64(lens), i64(table), torch.arange(S),
                                                      page_kv, i64(sel), torch.uint8, B)
        got = ml.fp8_fp4_paged_sparse_mqa_logits(tq, T(cache), T(w), tpm, cap, B)
        np.testing.assert_array_equal(N(got), want)

        # The schedule table comes back as a tensor for tensor lengths, and is taken back.
        plens = np.array([[100], [300]], np.int32)
        m = ml.get_paged_mqa_logits_metadata(i64(plens), page_kv, 3)
        self.assertIsInstance(m, torch.Tensor)
        self.assertEqual((m.dtype, tuple(m.shape)), (torch.int32, (4, 2)))
        np.testing.assert_array_equal(
            N(m), ml.get_paged_mqa_logits_metadata(plens, page_kv, 3))

    def test_weights_squeezed_grad_and_device(self):
        S, H, B, cap, q, qd, kv, kd, w, ks, ke, idx = self.sparse_case()
        wf = bf16_to_f64(w).astype(np.float32)
        want = ml.fp8_fp4_mqa_logits(q, kv, wf, ks, ke)
        # sglang's [T, H, 1] weights, and a tensor that requires grad (read through detach()).
        tw = T(wf).unsqueeze(-1).requires_grad_(True)
        got = ml.fp8_fp4_mqa_logits((T(q[0]), T(q[1])), (T(kv[0]), T(kv[1])), tw, T(ks), T(ke))
        np.testing.assert_array_equal(N(got), want)
        np.testing.assert_array_equal(ml.fp8_fp4_mqa_logits(q, kv, wf[:, :, None], ks, ke), want)
        buf = torch.zeros(want.shape, requires_grad=True)
        with self.assertRaisesRegex(ValueError, "out requires grad"):
            ml.fp8_fp4_mqa_logits(q, kv, T(wf), ks, ke, out=buf)
        if hasattr(torch, "float8_e4m3fn"):  # torch >= 2.1
            f8 = T(q[0]).view(torch.float8_e4m3fn)
            np.testing.assert_array_equal(
                N(ml.fp8_fp4_mqa_logits((f8, T(q[1])), kv, wf, ks, ke)), want)
        with self.assertRaisesRegex(ValueError, "cu_seq_len_k_end .*int64.* holds 4294967296"):
            ml.fp8_fp4_mqa_logits(q, kv, wf, ks, torch.full((S,), 2 ** 32))

    def test_nested_and_positional_outputs(self):
        # indexer_q_quant's out=((q_packed, q_scale), weights_out) and the buffers the cache
        # helpers write (dst_k, dst_scale, kv_cache) are outputs at any depth: refused when they
        # require grad, and handed back as the caller's own tensors.
        T_, H, d = 2, 4, 128
        x = torch.from_numpy(rand_x(T_, H, d).astype(np.float32))
        w = torch.ones(T_, H)
        packed = torch.zeros(T_, H, d // 2, dtype=torch.uint8)
        scale = torch.zeros(T_, H, dtype=torch.int32)
        wo = torch.zeros(T_, H)
        (p, s), got_w = ml.indexer_q_quant(x, w, 1.0, 1.0, True, out=((packed, scale), wo))
        self.assertIs(p, packed)
        self.assertIs(s, scale)
        self.assertIs(got_w, wo)
        for grad in ("packed", "weights_out"):
            with self.subTest(grad=grad):
                pk = packed.float().requires_grad_(grad == "packed")
                wg = wo.clone().requires_grad_(grad == "weights_out")
                with self.assertRaisesRegex(ValueError, "requires grad"):
                    ml.indexer_q_quant(x, w, 1.0, 1.0, True,
                                       out=((pk if grad == "packed" else packed, scale), wg))
        cache = torch.zeros(2, 16, 132, dtype=torch.float32).requires_grad_(True)
        with self.assertRaisesRegex(ValueError, "kv_cache requires grad"):
            ml.indexer_k_quant_and_cache(torch.zeros(1, 128), cache,
                                         torch.zeros(1, dtype=torch.int64), 128, "ue8m0")


class Buffers(Checks):
    def test_out_into_a_larger_buffer_and_checks(self):
        S, H, Nk = 4, 8, 200
        q, qd = make_q((S, H), "mxfp8")
        kv, kd = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks = np.zeros(S, np.int32)
        ke = np.array([10, 200, 50, 120], np.int32)
        exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
        big = np.full((8, Nk + 40), 7.0, np.float32)
        out = big[2:2 + S, :Nk]  # rows Nk + 40 apart
        self.assertIs(ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, out=out), out)
        self.assert_logits(out, exact, mag)
        self.assertTrue((big[:2] == 7).all() and (big[:, Nk:] == 7).all(), "wrote outside out")
        bits = np.zeros((S, Nk), np.uint16)
        ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, logits_dtype="bfloat16", out=bits)
        self.assert_logits(bits, exact, mag)
        cases = [
            (dict(out=np.zeros((S, Nk), np.float64)), "out has dtype float64, expected float32"),
            (dict(out=np.zeros((S, Nk + 1), np.float32)), r"out has shape \[4, 201\]"),
            (dict(out=np.zeros((S, Nk), np.float32)[:, ::-1]), "out has column stride"),
            (dict(out=np.broadcast_to(np.zeros(Nk, np.float32), (S, Nk))), "read-only"),
            (dict(out=w), "out has"),
            (dict(topk=4, topk_out=np.zeros((S, 5), np.int32)), r"topk_out has shape"),
            (dict(topk_out=np.zeros((S, 4), np.int64)), "topk_out has dtype int64"),
            (dict(topk=4, out=np.zeros((S, Nk), np.float32)), "with topk the buffers are"),
            (dict(topk_values_out=np.zeros((S, 4), np.float32)), "need topk"),
            (dict(topk=2 ** 64), "topk = 18446744073709551616 must be at most 2\\^31 - 1"),
        ]
        for kw, msg in cases:
            with self.subTest(kw=list(kw)):
                with self.assertRaisesRegex(ValueError, msg):
                    ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, **kw)
        # Output overlapping an input: the library's check, naming both.
        wbuf = np.zeros((S, Nk), np.float32)
        wbuf[:, :H] = w
        with self.assertRaisesRegex(ValueError, "overlap"):
            ml.fp8_fp4_mqa_logits(q, kv, wbuf[:, :H], ks, ke, out=wbuf)
        # topk_out alone: k from its width, the values too with topk_values_out.
        ti, tv = np.zeros((S, 6), np.int32), np.zeros((S, 6), np.float32)
        ri, rv = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, topk_out=ti, topk_values_out=tv)
        self.assertIs(ri, ti)
        self.assertIs(rv, tv)
        wi, wv = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, topk=6, topk_values=True)
        np.testing.assert_array_equal(ti, wi)
        np.testing.assert_array_equal(tv, wv)

    def test_legacy_names_take_topk(self):
        S, H, Nk = 5, 16, 150
        (qc, _), qd = make_q((S, H), "per_token")
        kv, kd = make_kv(Nk, "per_token")
        w = rand_weights(S, H, False)
        ks = RNG.integers(0, 40, S).astype(np.int32)
        ke = (ks + RNG.integers(1, 100, S)).astype(np.int32)
        logits = ml.fp8_mqa_logits(qc, kv, w, ks, ke)
        exact, _ = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
        valid = ~np.isneginf(exact)
        idx, val = ml.fp8_mqa_logits(qc, kv, w, ks, ke, topk=32, topk_values=True)
        want_i, want_v = expected_topk(np.where(valid, logits, -np.inf), valid, 32)
        np.testing.assert_array_equal(idx, want_i)
        np.testing.assert_array_equal(val, want_v)
        # sglang's ragged prefill: topk_offset added to each row's columns, -1 kept.
        off = np.array([0, 5, 1000, 7, 2 ** 31 - Nk], np.int64)
        plain = ml.fp8_mqa_logits(qc, kv, w, ks, ke, topk=Nk)
        want = np.where(plain < 0, -1, plain + off[:, None])
        np.testing.assert_array_equal(ml.fp8_mqa_logits(qc, kv, w, ks, ke, topk=Nk,
                                                        topk_offset=off), want)
        (qm, qm_sf), _ = make_q((S, H), "mxfp8")
        kvm, _ = make_kv(Nk, "mxfp8")
        plain = ml.fp8_fp4_mqa_logits((qm, qm_sf), kvm, w, ks, ke, topk=1)
        shared = off[:, None].astype(np.int32)  # topk_out over the offsets' own bytes
        got = ml.fp8_fp4_mqa_logits((qm, qm_sf), kvm, w, ks, ke, topk_out=shared,
                                    topk_offset=shared[:, 0])
        np.testing.assert_array_equal(got, np.where(plain < 0, -1, plain + off[:, None]))
        for kw, msg in ((dict(topk=4, topk_offset=off[:4]), "topk_offset has 4 entries"),
                        (dict(topk=4, topk_offset=-off), r"topk_offset\[1\] = -5: must be >= 0"),
                        (dict(topk=4, topk_offset=off + 1), r"topk_offset\[4\] = 2147483499"),
                        (dict(topk_offset=off), "topk_offset needs topk")):
            with self.subTest(msg=msg):
                with self.assertRaisesRegex(ValueError, "^fp8_mqa_logits: " + msg):
                    ml.fp8_mqa_logits(qc, kv, w, ks, ke, **kw)
        # Paged, as cache slots.
        B, page_kv, blocks = 3, 32, 12
        cache, _ = make_cache(blocks, page_kv, "per_token")
        lens = np.array([[5], [70], [128]], np.int32)
        table = RNG.permutation(blocks)[:B * 4].reshape(B, 4).astype(np.int32)
        (pq, _), _ = make_q((B, 1, H), "per_token")
        pw = rand_weights(B, H, False)
        meta = ml.get_paged_mqa_logits_metadata(lens, page_kv, 2)
        plog = ml.fp8_paged_mqa_logits(pq, cache, pw, lens, table, meta, 128, True)
        pvalid = np.arange(128)[None, :] < lens
        pos, _ = expected_topk(np.where(pvalid, plog, -np.inf), pvalid, 16)
        slots = np.where(pos < 0, -1, table[np.arange(B)[:, None], np.maximum(pos, 0) // page_kv]
                         * page_kv + pos % page_kv)
        got = ml.fp8_paged_mqa_logits(pq, cache, pw, lens, table, meta, 128, topk=16,
                                      topk_index="slot")
        np.testing.assert_array_equal(got, slots)


class ShortErrors(unittest.TestCase):
    def test_type_errors_name_the_argument_without_values(self):
        S, H, Nk = 64, 64, 4096  # large enough that printing them would be kilobytes
        (q, q_sf), _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, Nk, np.int32)
        cases = [
            (lambda: ml.fp8_fp4_mqa_logits((q, q_sf), kv, w, ks, ke, max_seqlen_k="x"),
             "max_seqlen_k must be int, not str 'x'"),
            (lambda: ml.fp8_fp4_mqa_logits((q, q_sf), kv, w, ks, ke, clean_logits=w),
             r"clean_logits must be bool, not numpy.ndarray float32 \[64, 64\]"),
            (lambda: ml.fp8_fp4_mqa_logits((q, q_sf), kv, w, ks, ke, num_threads=1.5),
             "num_threads must be Optional\\[int\\], not float 1.5"),
            (lambda: ml.fp8_fp4_mqa_logits((q, q_sf), kv, w, ks, ke, bogus=1),
             "unexpected keyword argument 'bogus'"),
            (lambda: ml.fp8_fp4_mqa_logits((q, q_sf), kv, w),
             "incompatible arguments \\(missing cu_seq_len_k_start, cu_seq_len_k_end; it "
             "takes \\(q, kv, "),
        ]
        for call, msg in cases:
            with self.subTest(msg=msg):
                with self.assertRaisesRegex(TypeError, msg) as c:
                    call()
                # Short: names (the keyword error lists the ~25 argument names), no values.
                self.assertLess(len(str(c.exception)), 500, str(c.exception))
        meta = ml.get_mqa_logits_metadata(ks, ke, Nk, H)
        for fn, args in ((ml.fp8_fp4_sparse_mqa_logits, ((q, q_sf), kv, w, meta, 8, 8)),
                         (ml.fp8_fp4_paged_sparse_mqa_logits, ((q, q_sf), kv, w, meta, 8, 8))):
            with self.assertRaisesRegex(ValueError, "metadata must be what get_.*returns, not "
                                        ".*MqaLogitsMetadata"):
                fn(*args)
        with self.assertRaisesRegex(ValueError, "schedule_meta must be what get_mqa_logits_"
                                    "metadata returns, not <class 'dict'>"):
            ml.fp8_fp4_mqa_logits((q, q_sf), kv, w, ks, ke, schedule_meta={})
        with self.assertRaisesRegex(ValueError, "schedule_meta must be the int32 \\[num_workers"):
            ml.fp8_fp4_paged_mqa_logits((q[None], q_sf[None]), np.zeros((1, 64, 1, 132), np.uint8),
                                        w, np.zeros((1, S), np.int32), np.zeros((1, 1), np.int32),
                                        meta, 64)


class Threads(unittest.TestCase):
    def test_distinct_thread_counts_leave_few_threads(self):
        S, H, Nk = 2, 4, 64
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, Nk, np.int32)
        before = threads_now()
        for n in range(1, 65):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, num_threads=n)
        # A pool per count would leave 1 + 2 + ... + 64 = 2080; the newest (64) stays, and
        # idle ones up to 2 x the cores.
        cores = os.cpu_count() or 1
        self.assertLessEqual(threads_now() - before, 64 + 2 * cores + 4)


class Truncation(Checks):
    """A dense row with tokens its output cannot hold (past the kv, or more than max_seqlen_k)
    is a named error that writes nothing, unless truncate_long_contexts=True: then the row keeps
    its first columns, and its top-k selects among those."""

    def test_refused_by_default_first_columns_on_request(self):
        S, H, N, msk, k = 3, 8, 80, 10, 4
        q, qd = make_q((S, H), "mxfp8")
        kv, kd = make_kv(N, "mxfp8")
        w = rand_weights(S, H, False)
        ks = np.array([0, 70, 5], np.int32)
        for ke, msg in (
                (np.array([10, 85, 15], np.int32),
                 r"cu_seq_len_k_end\[1\] = 85 is past the 80 rows of kv"),
                (np.array([10, 80, 16], np.int32),
                 r"cu_seq_len_k_start\[2\] = 5, cu_seq_len_k_end\[2\] = 16: .*max_seqlen_k = 10")):
            with self.subTest(msg=msg):
                out = np.full((S, msk), 7.0, np.float32)
                with self.assertRaisesRegex(ValueError, "^fp8_fp4_mqa_logits: " + msg +
                                            ".*truncate_long_contexts=True"):
                    ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, True, msk, out=out)
                self.assertTrue(np.all(out == 7.0))
                top_out = np.full((S, k), -7, np.int32)
                with self.assertRaisesRegex(ValueError, msg):
                    ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, True, msk, topk_out=top_out)
                self.assertTrue(np.all(top_out == -7))
                # The opt-in: the reference's truncated rows, and the top-k of their columns.
                exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, msk)
                got = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, True, msk,
                                            truncate_long_contexts=True)
                self.assert_logits(got, exact, mag)
                top = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, True, msk, topk=k,
                                            truncate_long_contexts=True)
                for r in range(S):
                    valid = np.flatnonzero(~np.isneginf(exact[r]))
                    best = valid[np.argsort(-exact[r, valid], kind="stable")][:k]
                    want = np.full(k, -1, np.int32)
                    want[:len(best)] = best
                    np.testing.assert_array_equal(top[r], want)
        # The legacy name refuses the same rows; the full-width mode holds any row below N.
        (qc, _), _ = make_q((S, H), "per_token")
        kvp, _ = make_kv(N, "per_token")
        with self.assertRaisesRegex(ValueError, "^fp8_mqa_logits: cu_seq_len_k_end\\[1\\] = 85"):
            ml.fp8_mqa_logits(qc, kvp, w, ks, np.array([10, 85, 15], np.int32), True, msk)
        ml.fp8_fp4_mqa_logits(q, kv, w, np.zeros(S, np.int32), np.full(S, N, np.int32))


class UpstreamCallForms(Checks):
    def test_one_dimensional_context_lens_with_next_n(self):
        # DeepGEMM's 1-D context_lens [B] with next_n rows per request: row j of request b sees
        # the positions t <= context_lens[b] - next_n + j.
        B, next_n, H, block_kv, blocks, max_blocks = 3, 3, 8, 64, 8, 4
        cache, _ = make_cache(blocks, block_kv, "mxfp8")
        keys = cache_keys(cache, False, True)
        lens = np.array([200, 2, 65], np.int32)
        table = RNG.integers(0, blocks, (B, max_blocks)).astype(np.int32)
        q, qd = make_q((B, next_n, H), "mxfp8")
        qd = qd.reshape(B * next_n, H, D)
        w = rand_weights(B * next_n, H, False)
        max_len = max_blocks * block_kv
        # Upstream's reference: each row over the request's whole context, masked past its limit.
        exact, mag = ref_paged(qd, keys, weights_f64(w), np.repeat(lens[:, None], next_n, 1),
                               table, max_len)
        for b in range(B):
            for j in range(next_n):
                cut = max(lens[b] - next_n + j + 1, 0)
                exact[b * next_n + j, cut:] = -np.inf
                mag[b * next_n + j, cut:] = 0
        meta = ml.get_paged_mqa_logits_metadata(lens, block_kv, 3)
        rows = np.array([[max(n - next_n + j + 1, 0) for j in range(next_n)] for n in lens],
                        np.int32)
        np.testing.assert_array_equal(meta, ml.get_paged_mqa_logits_metadata(rows, block_kv, 3))
        for lens_in in (lens, lens.astype(np.int64)):
            out = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens_in, table, meta, max_len,
                                              clean_logits=True)
            self.assert_logits(out, exact, mag)
        two_d = ml.fp8_fp4_paged_mqa_logits(q, cache, w, rows, table, meta, max_len,
                                            clean_logits=True)
        np.testing.assert_array_equal(two_d, out)
        # A wrong batch size names the caller's own shape.
        with self.assertRaisesRegex(ValueError, r"context_lens has shape \[2\]: expected "
                                    r"\[batch_size, next_n\] or \[batch_size\]"):
            ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens[:2], table, meta, max_len)

    def test_metadata_arguments_and_num_sms(self):
        lens = np.array([[100], [30]], np.int32)
        # Upstream's (context_lens, block_kv, num_sms): a second argument alone is not guessed.
        with self.assertRaisesRegex(TypeError, "missing num_sms.*block_kv, num_sms"):
            ml.get_paged_mqa_logits_metadata(lens, 64)
        default = ml.get_num_sms()
        self.assertGreaterEqual(default, 1)
        try:
            ml.set_num_sms(6)
            self.assertEqual(ml.get_num_sms(), 6)
            meta = ml.get_paged_mqa_logits_metadata(lens, 64, ml.get_num_sms())
            self.assertEqual(meta.shape, (7, 2))
        finally:
            ml.set_num_sms(default)
        self.assertEqual(ml.get_num_sms(), default)
        for bad in (0, 4097):
            with self.assertRaisesRegex(ValueError, "^set_num_sms: num_sms = %d must be in "
                                        "\\[1, 4096\\]" % bad):
                ml.set_num_sms(bad)

    def test_messages_name_the_callers_dtype(self):
        import torch

        S, H, N = 2, 4, 32
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(N, "mxfp8")
        w = rand_weights(S, H, False)
        ks = torch.zeros(S, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "cu_seq_len_k_start has dtype bfloat16, "
                                    "expected int32 or int64"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, np.full(S, N, np.int32))


class ConcurrentCalls(unittest.TestCase):
    def test_calls_from_several_threads_give_the_serial_results(self):
        import threading

        S, H, N = 6, 16, 600
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(N, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, N, np.int32)
        want = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, num_threads=2)
        got, errors = [None] * 4, []

        def call(i):
            try:
                for _ in range(5):
                    got[i] = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, num_threads=2)
            except Exception as e:  # reported below, on the test's thread
                errors.append(e)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for g in got:
            np.testing.assert_array_equal(g, want)


class HostileSizesAndAliases(unittest.TestCase):
    def test_widths_that_overflow_are_named(self):
        # The padded logits' size computed from the caller's width overflows int64: a ValueError
        # naming the argument, before any arithmetic wraps.
        S, H, Nk = 2, 4, 64
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, Nk, np.int32)
        for width in (2**63 - 1, 2**62):
            with self.assertRaisesRegex(ValueError, "max_seqlen_k.*overflows int64"):
                ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, max_seqlen_k=width)
        cache, _ = make_cache(2, 64, "mxfp8")
        lens = np.array([[10], [20]], np.int32)
        table = np.array([[0], [1]], np.int32)
        qp, _ = make_q((2, 1, H), "mxfp8")
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 2)
        for width in (2**63 - 1, 2**62):
            with self.assertRaisesRegex(ValueError, "max_context_len.*overflows int64"):
                ml.fp8_fp4_paged_mqa_logits(qp, cache, w, lens, table, meta, width,
                                            truncate_long_contexts=True)

    def test_cache_dimensions_are_not_narrowed(self):
        # Shapes no real cache has, described by strides over a few bytes (nothing is read: the
        # call is refused first): a last dimension of 2^32 + 132 is no head dim 128, and a block
        # dimension past int32 is no block size.
        S, H = 2, 4
        qp, _ = make_q((S, 1, H), "mxfp8")
        w = rand_weights(S, H, False)
        lens = np.array([[10], [20]], np.int32)
        table = np.zeros((S, 1), np.int32)
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 2)
        base = np.zeros(4096, np.uint8)
        wide = np.lib.stride_tricks.as_strided(base, shape=(1, 1, 1, 2**32 + 132),
                                               strides=(0, 0, 0, 1))
        with self.assertRaisesRegex(ValueError, "kv_cache has shape"):
            ml.fp8_fp4_paged_mqa_logits(qp, wide, w, lens, table, meta, 64)
        tall = np.lib.stride_tricks.as_strided(base, shape=(1, 2**31, 1, 132),
                                               strides=(0, 132, 0, 1))
        with self.assertRaisesRegex(ValueError, "block size .* does not fit in int32"):
            ml.fp8_fp4_paged_mqa_logits(qp, tall, w, lens, table, meta, 64)

    def test_outputs_over_int64_indices(self):
        # int64 index arrays reach the library as int32 copies; an output over the caller's own
        # array is still refused, and the array left as it was.
        S, H, Nk = 4, 4, 64
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        buf = np.zeros(2 * S + 1024, np.int64)
        ks, ke = buf[:S], buf[S:2 * S]
        ke[:] = Nk
        keep = buf.copy()
        out = buf.view(np.float32)[: S * 64].reshape(S, 64)
        with self.assertRaisesRegex(ValueError, "out overlaps cu_seq_len_k_start"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, max_seqlen_k=64, out=out)
        topk_out = buf.view(np.int32)[2 * S:2 * S + 3 * S].reshape(S, 3)  # over ke
        with self.assertRaisesRegex(ValueError, "topk_out overlaps cu_seq_len_k_end"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, topk=3, topk_out=topk_out)
        np.testing.assert_array_equal(buf, keep)
        # Paged: an output over the int64 block table or over schedule_meta.
        cache, _ = make_cache(4, 64, "mxfp8")
        lens = np.array([[10], [20]], np.int64)
        qp, _ = make_q((2, 1, H), "mxfp8")
        wp = rand_weights(2, H, False)
        tbuf = np.zeros(4096, np.int64)
        table = tbuf[:4].reshape(2, 2)
        table[:] = [[0, 1], [2, 3]]
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 2)
        keep = tbuf.copy()
        over_table = tbuf.view(np.float32)[: 2 * 256].reshape(2, 256)
        with self.assertRaisesRegex(ValueError, "out overlaps block_table"):
            ml.fp8_fp4_paged_mqa_logits(qp, cache, wp, lens, table, meta, 256, out=over_table)
        np.testing.assert_array_equal(tbuf, keep)
        mbuf = np.zeros(4096, np.int32)
        mbuf[: meta.size] = meta.reshape(-1)
        meta2 = mbuf[: meta.size].reshape(meta.shape)
        keep = mbuf.copy()
        with self.assertRaisesRegex(ValueError, "out overlaps schedule_meta"):
            ml.fp8_fp4_paged_mqa_logits(qp, cache, wp, lens, table, meta2, 256,
                                        out=mbuf.view(np.float32)[: 2 * 256].reshape(2, 256))
        np.testing.assert_array_equal(mbuf, keep)


# A child made by os.fork() after calls on the module's thread pools: it must exit normally, and
# call the kernels again (on fresh pools), whether the fork came between calls or during one on
# another thread. Run in a subprocess, each child under a deadline: a hang fails the test.
FORK_SCRIPT = r"""
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import test_mqalogits as t

ml = t.ml
S, H, Nk = 4, 16, 2048
q, _ = t.make_q((S, H), "mxfp8")
kv, _ = t.make_kv(Nk, "mxfp8")
w = t.rand_weights(S, H, False)
ks, ke = np.zeros(S, np.int32), np.full(S, Nk, np.int32)


def call():
    return ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, num_threads=2)


want = call()


def wait(pid):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"


def fork(child):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = child()
        finally:
            sys.stdout.flush()
            if code:
                os._exit(code)
        sys.exit(0)  # a normal exit: the interpreter's and the module's finalisation
    return wait(pid)


def calls_again():
    return 0 if np.array_equal(call(), want, equal_nan=True) else 3


failures = []
for i in range(5):
    failures += [("idle child", i, fork(lambda: 0))]
    failures += [("calling child", i, fork(calls_again))]
stop = threading.Event()
def busy():
    while not stop.is_set():
        call()
caller = threading.Thread(target=busy)
caller.start()
for i in range(5):
    time.sleep(0.003)
    failures += [("fork during a call", i, fork(calls_again))]
stop.set()
caller.join()
bad = [f for f in failures if f[2] != 0]
print("fork results:", bad or "all children exited 0")
sys.exit(1 if bad else 0)
"""


class Fork(unittest.TestCase):
    def test_children_never_hang(self):
        import subprocess

        here = os.path.dirname(os.path.abspath(__file__))
        r = subprocess.run([sys.executable, "-c", FORK_SCRIPT, here], capture_output=True,
                           text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class CallContract(unittest.TestCase):
    def test_refusals_are_the_library_contracts_messages(self):
        # The module states no check of its own for these: each refusal is the library's
        # contract (ml::check), word for word, as the C++ entry points give it.
        S, H, N = 3, 4, 64
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(N, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, N, np.int32)
        with self.assertRaisesRegex(
                ValueError, r"^fp8_fp4_mqa_logits: max_seqlen_k = -1 must be > 0 \(or 0 for full "
                r"width\)$"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, max_seqlen_k=-1)
        over_q = q[0].reshape(-1).view(np.float32)[:S * N].reshape(S, N)  # logits over q's codes
        with self.assertRaisesRegex(
                ValueError, r"^fp8_fp4_mqa_logits: logits \[\d+, \d+\) overlap q \[\d+, \d+\): "
                r"an output must not share a byte with an input$"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, max_seqlen_k=N, out=over_q)
        cache, _ = make_cache(2, 64, "mxfp8")
        lens, table = np.array([[40]], np.int32), np.array([[0, 1]], np.int32)
        meta = ml.get_paged_mqa_logits_metadata(context_lens=lens, block_kv=64, num_sms=1)
        qp, _ = make_q((1, 1, H), "mxfp8")
        with self.assertRaisesRegex(
                ValueError, r"^fp8_fp4_paged_mqa_logits: max_context_len = 0 must be > 0$"):
            ml.fp8_fp4_paged_mqa_logits(qp, cache, rand_weights(1, H, False), lens, table, meta, 0)


if __name__ == "__main__":
    print(f"mqalogits {ml.__version__} from {ml.__file__}, numpy {np.__version__}")
    unittest.main(verbosity=2)
