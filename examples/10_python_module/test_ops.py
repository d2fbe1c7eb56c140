"""The module's ops around the kernels, byte-exact against numpy transcriptions of vLLM's kernels.

- cp_gather_indexer_k_quant_cache: the CUDA kernel's byte arithmetic (token -> sequence by
  cu_seq_lens, page from the block table, data at page * block_stride + slot * D, the 4 scale
  bytes at page * block_stride + block_size * D + slot * 4).
- indexer_q_quant: fused_indexer_q_rope_quant after its RoPE (DeepSeek-V3.2: fmax(amax, 1e-10) *
  fp32(1/448); V4: fmax(amax, 1e-4) / 448; UE8M0 2^ceil(log2 s); the e4m3 of x / s, nearest with
  ties to even, saturating at 448; weights * s * softmax_scale * head_scale in fp32), and V4's MXFP4
  Q (the weights without the scale).
- indexer_k_quant_and_cache_mxfp4: DeepSeek-V4's MXFP4 rule (fmax(amax, 1e-4),
  ceil(log2(amax / 6)) clamped to [-127, 127], the e2m1 bucket of x * 2^-e with each boundary in
  the lower bucket, even elements in low nibbles) into the paged cache, slot -1 skipped.
- hadamard=True (indexer_q_quant and both K cache inserts): DeepSeek-V4's Walsh-Hadamard rotation
  H_D x / sqrt(D), H from the Sylvester recursion, then the same op with the rotation off.

Run with the module's folder on PYTHONPATH: python3 test_ops.py
"""

import sys
import unittest

import numpy as np

import mqalogits as mq

F32 = np.float32


# ---- element references ----


def e4m3_table():
    """The 127 non-negative finite e4m3fn magnitudes, codes 0..0x7E, from the bit layout."""
    vals = []
    for c in range(0x7F):
        e, m = c >> 3, c & 7
        vals.append(m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(vals)


E4M3 = e4m3_table()


def encode_e4m3(x):
    """Nearest e4m3fn code of float32 x, ties to the even code, |x| >= 448 saturating."""
    v = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(E4M3, v), 1, 0x7E)
    lo = hi - 1
    dlo, dhi = v - E4M3[lo], E4M3[hi] - v
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(v >= 448, 0x7E, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (finite inputs)."""
    u = x.astype(F32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(F32)


def e2m1_nibble(v):
    """vLLM's _e2m1_nibble: buckets [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], each boundary in the
    lower bucket, |v| capped at 6, the sign only on a non-zero code."""
    a = np.minimum(np.abs(v), F32(6))
    code = np.searchsorted(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], F32), a, side="left")
    return (code | np.where((v < 0) & (code != 0), 8, 0)).astype(np.uint8)


def mxfp4_rows(x):
    """x float32 [rows, D] -> (packed uint8 [rows, D / 2], ue8m0 uint8 [rows, D / 32])."""
    rows, d = x.shape
    blocks = x.reshape(rows, d // 32, 32)
    amax = np.maximum(np.max(np.abs(blocks), axis=-1), F32(1e-4))
    e = np.clip(np.ceil(np.log2(amax / F32(6))), -127, 127).astype(F32)
    inv = (F32(1) / np.exp2(e)).astype(F32)
    v = (blocks * inv[..., None]).astype(F32)
    nib = e2m1_nibble(v).reshape(rows, d)
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    return packed, (e + 127).astype(np.uint8)


def q_fold(x, w, softmax_scale, head_scale, rule, ue8m0):
    """x float32 [T, H, D], w float32 [T, H] -> (codes, weights_out) as the Triton kernels."""
    amax = np.max(np.abs(x), axis=-1)
    if rule == "deepseek_v32":
        s = (np.maximum(amax, F32(1e-10)) * F32(1 / 448)).astype(F32)
    else:
        s = (np.maximum(amax, F32(1e-4)) / F32(448)).astype(F32)
    if ue8m0:
        s = np.exp2(np.ceil(np.log2(s))).astype(F32)
    codes = encode_e4m3((x / s[..., None]).astype(F32))
    wo = (((w * s).astype(F32) * F32(softmax_scale)).astype(F32) * F32(head_scale)).astype(F32)
    return codes, wo


def vllm_gather(cache_bytes, block_stride, block_size, table, cu, d, num_tokens):
    """cp_gather_indexer_k_quant_cache_kernel on flat bytes: (dst_k, dst_scale bytes)."""
    k = np.full((num_tokens, d), 0xCD, np.uint8)
    s = np.full((num_tokens, 4), 0xCD, np.uint8)
    cols = table.shape[1]
    flat_table = table.reshape(-1)
    for t in range(num_tokens):
        b = -1
        for i in range(len(cu) - 1):
            if cu[i] <= t < cu[i + 1]:
                b = i
        if b < 0:
            continue
        j = t - cu[b]
        page = int(flat_table[b * cols + j // block_size])
        src = page * block_stride
        inblock = (j % block_size) * d
        k[t] = cache_bytes[src + inblock : src + inblock + d]
        sc = src + block_size * d + inblock * 4 // d
        s[t] = cache_bytes[sc : sc + 4]
    return k, s


def random_rows(rng, rows, d):
    """float32 rows with every branch: random magnitudes, zeros, under the floors, 448 * 2^k,
    blocks at 6 * 2^k, huge."""
    x = np.empty((rows, d), F32)
    for r in range(rows):
        mag = F32(2.0 ** rng.integers(-20, 20))
        v = rng.uniform(-mag, mag, d).astype(F32)
        kind = r % 6
        if kind == 1:
            v[:] = 0
        elif kind == 2:
            v *= F32(1e-12)
        elif kind == 3:
            v[5] = 448 * 64
        elif kind == 4:
            v[::7] = 6 * 2.0 ** (np.arange(len(v[::7])) % 5)
        elif kind == 5:
            v *= F32(2.0**100)
        x[r] = v
    return x


class GatherTest(unittest.TestCase):
    def case(self, token_bytes, block_size, lens, pad=0, scale_words=False, index=np.int32,
             four=False):
        rng = np.random.default_rng(block_size * 1000 + sum(lens) + token_bytes)
        d = token_bytes - 4
        cols = max([(n + block_size - 1) // block_size for n in lens] + [0]) + 1
        num_blocks = len(lens) * cols + 3
        stride = block_size * token_bytes + pad
        big = rng.integers(0, 256, (num_blocks, stride), dtype=np.uint8)
        cache = big[:, : block_size * token_bytes].reshape(num_blocks, block_size, token_bytes)
        if four:
            cache = cache.reshape(num_blocks, block_size, 1, token_bytes)
        table = rng.permutation(num_blocks)[: len(lens) * cols].reshape(len(lens), cols)
        table = table.astype(index)
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(index)
        rows = int(cu[-1]) + 2  # two rows past the last sequence stay as they are
        want_k, want_s = vllm_gather(big.reshape(-1), stride, block_size, table, cu, d, rows)
        k = np.full((rows, d), 0xCD, np.uint8)
        s = np.full((rows, 4), 0xCD, np.uint8)
        scale_arg = s.view(np.float32).reshape(rows) if scale_words else s
        mq.cp_gather_indexer_k_quant_cache(cache, k, scale_arg, table, cu)
        np.testing.assert_array_equal(k, want_k)
        np.testing.assert_array_equal(s, want_s)

    def test_fp8_pages(self):
        self.case(132, 64, [70, 0, 200, 1])
        self.case(132, 1, [3, 5], index=np.int64)
        self.case(132, 16, [33, 16, 15], pad=48, scale_words=True)
        self.case(132, 64, [65], four=True)

    def test_mxfp4_pages(self):
        self.case(68, 64, [130, 64])
        self.case(68, 1, [4, 0, 2], index=np.int64)
        self.case(68, 64, [65], pad=512 * 9 - 64 * 68)  # upstream's 512-byte page alignment

    def test_errors(self):
        cache = np.zeros((3, 4, 132), np.uint8)
        k, s = np.zeros((10, 128), np.uint8), np.zeros((10, 4), np.uint8)
        table = np.array([[0, 1], [2, 0]], np.int32)
        with self.assertRaisesRegex(ValueError, "sequence 0 has 9 tokens: 3 pages of 4.*2 columns"):
            mq.cp_gather_indexer_k_quant_cache(cache, k, s, table, np.array([0, 9, 10], np.int32))
        with self.assertRaisesRegex(ValueError, r"block_table\[1, 0\] = 7 is not a page"):
            mq.cp_gather_indexer_k_quant_cache(
                cache, k, s, np.array([[0, 1], [7, 0]], np.int32), np.array([0, 4, 8], np.int32)
            )
        with self.assertRaisesRegex(ValueError, "kv_cache has 132 bytes per token; dst_k rows of"):
            mq.cp_gather_indexer_k_quant_cache(
                cache, np.zeros((10, 64), np.uint8), s, table, np.array([0, 4, 8], np.int32)
            )
        with self.assertRaisesRegex(ValueError, "dst_scale has shape"):
            mq.cp_gather_indexer_k_quant_cache(
                cache, k, np.zeros((9, 4), np.uint8), table, np.array([0, 4, 8], np.int32)
            )
        inside = cache.reshape(-1)[: 2 * 128].reshape(2, 128)
        with self.assertRaisesRegex(ValueError, "overlap the cache"):
            mq.cp_gather_indexer_k_quant_cache(
                cache, inside, s[:2], table, np.array([0, 1, 2], np.int32)
            )
        with self.assertRaisesRegex(ValueError, "cu_seq_lens has dtype float64"):
            mq.cp_gather_indexer_k_quant_cache(cache, k, s, table, np.array([0.0, 1, 2]))


class QQuantTest(unittest.TestCase):
    def inputs(self, tokens, heads, d, seed, wtype):
        rng = np.random.default_rng(seed)
        qbits = to_bf16_bits(random_rows(rng, tokens * heads, d)).reshape(tokens, heads, d)
        w32 = rng.uniform(-2, 2, (tokens, heads)).astype(F32)
        if wtype == "bf16":
            wbits = to_bf16_bits(w32)
            return qbits, wbits, bf16_value(wbits)
        if wtype == "f16":
            w16 = w32.astype(np.float16)
            return qbits, w16, w16.astype(F32)
        return qbits, w32, w32

    def test_fp8_fold(self):
        for rule in ("deepseek_v32", "deepseek_v4"):
            for fmt in ("ue8m0", None):
                for wtype in ("bf16", "f32", "f16"):
                    with self.subTest(rule=rule, fmt=fmt, wtype=wtype):
                        tokens, heads, d = 7, 8, 128
                        qbits, w, w32 = self.inputs(tokens, heads, d, 3, wtype)
                        ss, hs = d**-0.5, heads**-0.5
                        codes, wo = mq.indexer_q_quant(qbits, w, ss, hs, rule=rule, scale_fmt=fmt)
                        x = bf16_value(qbits)
                        want_c, want_w = q_fold(x, w32, ss, hs, rule, fmt == "ue8m0")
                        np.testing.assert_array_equal(codes, want_c)
                        np.testing.assert_array_equal(wo.view(np.uint32), want_w.view(np.uint32))
        # float32 q, and a head dim of 64
        rng = np.random.default_rng(5)
        x = random_rows(rng, 6 * 4, 64).reshape(6, 4, 64)
        w = rng.uniform(-1, 1, (6, 4)).astype(F32)
        codes, wo = mq.indexer_q_quant(x, w, 0.125, 0.5)
        want_c, want_w = q_fold(x, w, 0.125, 0.5, "deepseek_v32", True)
        np.testing.assert_array_equal(codes, want_c)
        np.testing.assert_array_equal(wo, want_w)

    def test_saturation_and_floor(self):
        # Without UE8M0 the row's largest element maps to 448 or just above: saturated there.
        x = np.ones((1, 1, 128), F32)
        x[0, 0, 3] = 1000.37
        codes, _ = mq.indexer_q_quant(x, np.ones((1, 1), F32), 1.0, 1.0, scale_fmt=None)
        self.assertEqual(codes[0, 0, 3], 0x7E)
        # A zero row: scale from the floor, codes 0, weights scaled by it.
        z = np.zeros((1, 2, 128), F32)
        for rule, floor in (("deepseek_v32", 1e-10), ("deepseek_v4", 1e-4)):
            codes, wo = mq.indexer_q_quant(z, np.ones((1, 2), F32), 1.0, 1.0, rule=rule)
            self.assertFalse(codes.any())
            s = F32(2.0 ** np.ceil(np.log2(F32(floor) / F32(448))))
            self.assertEqual(wo[0, 0], s)

    def test_out_in_place(self):
        qbits, w, _ = self.inputs(3, 4, 128, 9, "f32")
        codes = np.zeros((3, 4, 128), np.uint8)
        wo = np.zeros((3, 4), F32)
        got = mq.indexer_q_quant(qbits, w, 0.1, 0.5, out=(codes, wo))
        self.assertIs(got[0], codes)
        self.assertIs(got[1], wo)
        want_c, want_w = mq.indexer_q_quant(qbits, w, 0.1, 0.5)
        np.testing.assert_array_equal(codes, want_c)
        np.testing.assert_array_equal(wo, want_w)
        with self.assertRaisesRegex(ValueError, "weights_out has dtype float64"):
            mq.indexer_q_quant(qbits, w, 0.1, 0.5, out=(codes, np.zeros((3, 4))))
        with self.assertRaisesRegex(ValueError, r"q_fp8 has shape \[3, 4, 64\]"):
            mq.indexer_q_quant(qbits, w, 0.1, 0.5, out=(np.zeros((3, 4, 64), np.uint8), wo))
        with self.assertRaisesRegex(ValueError, "overlap"):
            mq.indexer_q_quant(w.reshape(3, 4, 1).repeat(128, 2), w, 0.1, 0.5,
                               out=(codes, w))

    def test_mxfp4_q(self):
        tokens, heads, d = 5, 4, 128
        qbits, w, w32 = self.inputs(tokens, heads, d, 13, "bf16")
        (packed, scale), wo = mq.indexer_q_quant(
            qbits, w, d**-0.5, heads**-0.5, True, rule="deepseek_v4"
        )
        want_p, want_s = mxfp4_rows(bf16_value(qbits).reshape(-1, d))
        np.testing.assert_array_equal(packed.reshape(-1, d // 2), want_p)
        self.assertEqual(scale.dtype, np.int32)
        np.testing.assert_array_equal(scale.reshape(-1).view(np.uint8).reshape(-1, 4), want_s)
        want_w = ((w32 * F32(d**-0.5)).astype(F32) * F32(heads**-0.5)).astype(F32)
        np.testing.assert_array_equal(wo, want_w)
        # use_fp4 alone picks DeepSeek-V4's rule; V3.2's has no MXFP4 Q.
        (p2, s2), _ = mq.indexer_q_quant(qbits, w, d**-0.5, heads**-0.5, True)
        np.testing.assert_array_equal(p2, packed)
        np.testing.assert_array_equal(s2, scale)
        with self.assertRaisesRegex(ValueError, "use_fp4 is DeepSeek-V4"):
            mq.indexer_q_quant(qbits, w, 1.0, 1.0, True, rule="deepseek_v32")
        with self.assertRaisesRegex(ValueError, "q has rows of 96 elements"):
            mq.indexer_q_quant(np.zeros((2, 3, 96), F32), np.zeros((2, 3), F32), 1.0, 1.0)

    def test_refused_calls_write_nothing(self):
        # Every output is checked against every input and the other outputs before the first
        # byte is written: a refused call leaves every buffer as it was.
        T, H, d = 3, 4, 128
        qbits, w, _ = self.inputs(T, H, d, 21, "f32")
        q32 = bf16_value(qbits).astype(F32)

        def refused(q, weights, out, pattern="overlap"):
            before = [a.copy() for a in (q, weights)] + [a.copy() for a in leaves(out)]
            with self.assertRaisesRegex(ValueError, pattern):
                mq.indexer_q_quant(q, weights, 0.5, 0.25, True, out=out)
            after = [q, weights] + list(leaves(out))
            for b, a in zip(before, after):
                np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))

        def leaves(out):
            (p, sc), wo = out
            return p, sc, wo

        def outs():
            p = np.full((T, H, d // 2), 0xAB, np.uint8)
            sc = np.full((T, H), -1, np.int32)
            wo = np.full((T, H), 7.0, F32)
            return p, sc, wo

        # q_scale over q: was zeroed before the refusal.
        q = q32.copy()
        p, _, wo = outs()
        refused(q, w, ((p, q.reshape(-1).view(np.int32)[: T * H].reshape(T, H)), wo))
        # q_packed over the weights, q_scale over the weights: was silently wrong weights_out.
        buf = np.zeros(T * H * d // 8, F32)
        weights = buf[: T * H].reshape(T, H)
        weights[:] = w
        _, sc, wo = outs()
        refused(q32, weights, ((buf.view(np.uint8).reshape(T, H, d // 2), sc), wo))
        p, _, wo = outs()
        w2 = w.copy()
        refused(q32, w2, ((p, w2.view(np.int32)), wo))
        # weights_out over q_packed or over q_scale.
        p, sc, _ = outs()
        refused(q32, w, ((p, sc), p.reshape(-1).view(F32)[: T * H].reshape(T, H)))
        refused(q32, w, ((p, sc), sc.view(F32)))
        # q_packed and q_scale sharing bytes.
        p, _, wo = outs()
        refused(q32, w, ((p, p.reshape(-1).view(np.int32)[: T * H].reshape(T, H)), wo))
        # A bad head dim with every output given: nothing written either.
        p, sc, wo = outs()
        refused(np.zeros((T, H, 96), F32), w, ((p[:, :, :48].copy(), sc), wo), "96")
        # The FP8 path: q_fp8 over the weights.
        buf = np.zeros(T * H * d // 4, F32)
        weights = buf[: T * H].reshape(T, H)
        weights[:] = w
        keep = buf.copy()
        with self.assertRaisesRegex(ValueError, "overlap"):
            mq.indexer_q_quant(q32, weights, 0.5, 0.25,
                               out=(buf.view(np.uint8).reshape(T, H, d), np.zeros((T, H), F32)))
        np.testing.assert_array_equal(buf, keep)
        # Weights scaled in place (weights_out is the float32 weights) stays allowed.
        w3 = w.copy()
        p, sc, _ = outs()
        (_, _), wo3 = mq.indexer_q_quant(q32, w3, 0.5, 0.25, True, out=((p, sc), w3))
        self.assertIs(wo3, w3)
        np.testing.assert_array_equal(w3, ((w * F32(0.5)).astype(F32) * F32(0.25)).astype(F32))


class Mxfp4InsertTest(unittest.TestCase):
    def test_insert(self):
        for block_size in (1, 64):
            for index in (np.int64, np.int32):
                with self.subTest(block_size=block_size, index=index):
                    rng = np.random.default_rng(block_size)
                    n, d = 14, 128
                    x = random_rows(rng, n, d)
                    kbits = to_bf16_bits(x)
                    num_blocks = (n + block_size - 1) // block_size * 2 + 1
                    cache = np.full((num_blocks, block_size, 68), 0xAB, np.uint8)
                    slots = rng.permutation(num_blocks * block_size)[:n].astype(index)
                    slots[2::3] = -1  # padding: skipped
                    want = cache.copy().reshape(num_blocks, -1)
                    packed, ue8m0 = mxfp4_rows(bf16_value(kbits))
                    for i, slot in enumerate(slots):
                        if slot < 0:
                            continue
                        p, o = divmod(int(slot), block_size)
                        want[p, o * 64 : o * 64 + 64] = packed[i]
                        want[p, block_size * 64 + o * 4 : block_size * 64 + o * 4 + 4] = ue8m0[i]
                    mq.indexer_k_quant_and_cache_mxfp4(kbits, cache, slots)
                    np.testing.assert_array_equal(cache.reshape(num_blocks, -1), want)
                    # The prefill gather reads the same rows back.
                    live = slots >= 0
                    seq = slots[live]
                    table = (seq // block_size).astype(np.int32)
                    if block_size == 1:
                        k = np.zeros((len(seq), 64), np.uint8)
                        s = np.zeros((len(seq), 4), np.uint8)
                        mq.cp_gather_indexer_k_quant_cache(
                            cache, k, s, table.reshape(len(seq), 1),
                            np.arange(len(seq) + 1, dtype=np.int32))
                        np.testing.assert_array_equal(k, packed[live])
                        np.testing.assert_array_equal(s, ue8m0[live])

    def test_errors(self):
        cache = np.zeros((2, 4, 68), np.uint8)
        k = np.zeros((3, 128), F32)
        with self.assertRaisesRegex(ValueError, r"slot_mapping\[1\] = 8 is past the cache"):
            mq.indexer_k_quant_and_cache_mxfp4(k, cache, np.array([0, 8, 1], np.int64))
        with self.assertRaisesRegex(ValueError, "kv_cache has 132 bytes per token"):
            mq.indexer_k_quant_and_cache_mxfp4(
                k, np.zeros((2, 4, 132), np.uint8), np.zeros(3, np.int64)
            )
        with self.assertRaisesRegex(ValueError, "slot_mapping has 2 entries for 3 tokens"):
            mq.indexer_k_quant_and_cache_mxfp4(k, cache, np.zeros(2, np.int64))
        ro = cache.copy()
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "kv_cache is read-only"):
            mq.indexer_k_quant_and_cache_mxfp4(k, ro, np.zeros(3, np.int64))


# ---- DeepSeek-V4's Walsh-Hadamard rotation ----


def sylvester(d):
    """The d x d Hadamard matrix in natural (Sylvester) order: H_2n = [[H, H], [H, -H]]."""
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def rotate(x):
    """H x / sqrt(d) along the last axis: each sum in float64 (exact for the rows below), rounded
    to float32, times float32(d^-0.5)."""
    d = x.shape[-1]
    sums = (x.astype(np.float64) @ sylvester(d).T).astype(F32)
    return (sums * F32(1.0 / np.sqrt(d))).astype(F32)


def exact_rows(rng, rows, d):
    """Rows whose rotation is exact before the scale: 8-bit integers (exact in bfloat16) times one
    power of two per row, all-zero rows, a lone outlier, magnitudes near 2^100 and 2^-100."""
    x = rng.integers(-255, 256, (rows, d)).astype(F32)
    x[0] = 0
    x[1] = 1
    x[1, 5] = 255
    e = rng.integers(-30, 31, rows)
    e[2], e[3] = 100, -100
    return (x * np.exp2(e.astype(np.float64))[:, None]).astype(F32)


class HadamardTest(unittest.TestCase):
    """Each op with hadamard=True writes the bytes it writes, rotation off, for rows rotated by
    numpy first; float32 and bfloat16 inputs, head dims the op takes."""

    def test_matrix(self):
        h = sylvester(4)
        np.testing.assert_array_equal(h[1], [1, -1, 1, -1])
        np.testing.assert_array_equal(h[3], [1, -1, -1, 1])
        np.testing.assert_array_equal(sylvester(128) @ sylvester(128).T, 128 * np.eye(128))

    def test_q_fp8(self):
        for d in (128, 64, 32):
            for rule in ("deepseek_v4", "deepseek_v32"):
                with self.subTest(d=d, rule=rule):
                    tokens, heads = 6, 4
                    rng = np.random.default_rng(d)
                    x = exact_rows(rng, tokens * heads, d).reshape(tokens, heads, d)
                    w = rng.uniform(-2, 2, (tokens, heads)).astype(F32)
                    ss, hs = 128**-0.5, heads**-0.5
                    want_c, want_w = mq.indexer_q_quant(rotate(x), w, ss, hs, rule=rule)
                    for q in (x, to_bf16_bits(x)):
                        codes, wo = mq.indexer_q_quant(q, w, ss, hs, rule=rule, hadamard=True)
                        np.testing.assert_array_equal(codes, want_c)
                        np.testing.assert_array_equal(wo.view(np.uint32), want_w.view(np.uint32))
                    off_c, off_w = mq.indexer_q_quant(x, w, ss, hs, rule=rule, hadamard=False)
                    plain_c, plain_w = mq.indexer_q_quant(x, w, ss, hs, rule=rule)
                    np.testing.assert_array_equal(off_c, plain_c)
                    np.testing.assert_array_equal(off_w, plain_w)
                    self.assertFalse(np.array_equal(off_c, want_c))

    def test_q_mxfp4(self):
        for d in (128, 64):
            with self.subTest(d=d):
                tokens, heads = 5, 4
                rng = np.random.default_rng(d + 1)
                x = exact_rows(rng, tokens * heads, d).reshape(tokens, heads, d)
                w = rng.uniform(-2, 2, (tokens, heads)).astype(F32)
                (want_p, want_s), want_w = mq.indexer_q_quant(rotate(x), w, 0.5, 0.25, True)
                for q in (x, to_bf16_bits(x)):
                    (p, s), wo = mq.indexer_q_quant(q, w, 0.5, 0.25, True, hadamard=True)
                    np.testing.assert_array_equal(p, want_p)
                    np.testing.assert_array_equal(s, want_s)
                    np.testing.assert_array_equal(wo, want_w)

    def test_k_fp8_cache(self):
        for fmt in ("ue8m0", None):
            with self.subTest(scale_fmt=fmt):
                rng = np.random.default_rng(7)
                n, block_size = 20, 8
                x = exact_rows(rng, n, 128)
                slots = rng.permutation(4 * block_size)[:n].astype(np.int64)
                slots[3::4] = -1
                want = np.full((4, block_size, 132), 0xAB, np.uint8)
                mq.indexer_k_quant_and_cache(rotate(x), want, slots, 128, fmt)
                for k in (x, to_bf16_bits(x)):
                    cache = np.full_like(want, 0xAB)
                    mq.indexer_k_quant_and_cache(k, cache, slots, 128, fmt, hadamard=True)
                    np.testing.assert_array_equal(cache, want)
                off = np.full_like(want, 0xAB)
                mq.indexer_k_quant_and_cache(x, off, slots, 128, fmt, hadamard=False)
                plain = np.full_like(want, 0xAB)
                mq.indexer_k_quant_and_cache(x, plain, slots, 128, fmt)
                np.testing.assert_array_equal(off, plain)
                self.assertFalse(np.array_equal(off, want))

    def test_k_mxfp4_cache(self):
        for d in (128, 64):
            with self.subTest(d=d):
                rng = np.random.default_rng(d + 2)
                n, block_size = 18, 4
                x = exact_rows(rng, n, d)
                slots = rng.permutation(6 * block_size)[:n].astype(np.int32)
                slots[1::5] = -1
                want = np.full((6, block_size, d // 2 + 4), 0xAB, np.uint8)
                mq.indexer_k_quant_and_cache_mxfp4(rotate(x), want, slots)
                for k in (x, to_bf16_bits(x)):
                    cache = np.full_like(want, 0xAB)
                    mq.indexer_k_quant_and_cache_mxfp4(k, cache, slots, hadamard=True)
                    np.testing.assert_array_equal(cache, want)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
