#!/usr/bin/env python3
"""mqalogits with torch 2.x's own low-precision dtypes, as an engine passes them: Q and K as
torch.float8_e4m3fn tensors quantised by torch itself, packed FP4 as torch.float4_e2m1fn_x2 where
this torch has it (else int8), bfloat16 / float16 / float32 weights, int32 / int64 lengths and
tables. Every result is checked against a float64 reference whose inputs are decoded by ml_dtypes
(float8_e4m3fn, float4_e2m1fn, float8_e8m0fnu scales), not by the library:
|got - exact| <= 2^-7 |exact| + 2^-14 M, M = sum_h |w_h| sum_i |q_hi k_i|, the -inf mask exact.
A float8 tensor must also give bit for bit what its uint8 codes give.

Usage: test_torch_dtypes.py [path/to/libmqalogits_torch_ops.so]   (mqalogits on PYTHONPATH; with
the op library's path, torch.ops.mqalogits is checked the same way)
"""
import sys
import unittest

import ml_dtypes
import numpy as np
import torch

import mqalogits as ml

OPS_LIBRARY = sys.argv.pop(1) if len(sys.argv) > 1 else None
GEN = torch.Generator().manual_seed(49)
D = 128
H = 16
FP4_DTYPE = getattr(torch, "float4_e2m1fn_x2", torch.int8)
WEIGHT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int32, torch.int64)
FORMATS = ("mxfp8", "mxfp4", "per_token")


# ---- inputs, quantised by torch ----

def activations(*shape):
    """Values spread over a few binades, as activations are."""
    x = torch.randn(*shape, generator=GEN)
    return x * torch.exp2(torch.randint(-3, 3, shape[:-1] + (1,), generator=GEN).float())


def ue8m0_words(exponents):
    """int32 words of four UE8M0 bytes (byte k scales elements [32k, 32k + 32)) from biased
    exponents [..., 4]."""
    e = exponents.to(torch.int64)
    words = e[..., 0] | (e[..., 1] << 8) | (e[..., 2] << 16) | (e[..., 3] << 24)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def quantise(x, fmt):
    """x float32 [..., 128] -> (codes, scales or None): MXFP8 by torch's own float8 cast of the
    block-scaled values; MXFP4 as random packed codes with random block scales (torch has no cast
    to FP4); per-token FP8 with a float32 scale per row."""
    if fmt == "mxfp4":
        codes = torch.randint(0, 256, x.shape[:-1] + (D // 2,), dtype=torch.uint8, generator=GEN)
        exps = torch.randint(120, 134, x.shape[:-1] + (4,), generator=GEN)
        return codes.view(FP4_DTYPE), ue8m0_words(exps)
    if fmt == "per_token":
        s = x.abs().amax(-1).clamp_min(1e-30) / 448.0
        return (x / s[..., None]).to(torch.float8_e4m3fn), s.float()
    blocks = x.reshape(x.shape[:-1] + (4, 32))
    amax = blocks.abs().amax(-1).clamp_min(1e-30)
    e = torch.ceil(torch.log2(amax / 448.0)).clamp(-126, 127)
    codes = (blocks / torch.exp2(e)[..., None]).reshape(x.shape).to(torch.float8_e4m3fn)
    return codes, ue8m0_words(e.to(torch.int64) + 127)


# ---- decoding, by ml_dtypes ----

def as_bytes(t):
    return t.view(torch.uint8).numpy()


def decode(codes, scales):
    """Torch codes (+ int32 UE8M0 words or float32 per-row scales or None) -> float64 [..., 128]."""
    b = as_bytes(codes)
    if codes.dtype in (torch.float8_e4m3fn, torch.uint8):
        v = b.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    else:  # packed FP4: element 2i in the low nibble
        lo = (b & 0xF).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        hi = (b >> 4).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        v = np.stack([lo, hi], -1).reshape(b.shape[:-1] + (D,))
    if scales is None:
        return v
    if scales.dtype == torch.float32:
        return v * scales.double().numpy()[..., None]
    sb = scales.contiguous().view(torch.uint8).numpy().reshape(scales.shape + (4,))
    mult = sb.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)  # little-endian: byte k first
    return v * np.repeat(mult, 32, axis=-1)


def reference(qd, kd, w):
    """qd [R, H, D], kd [N, D], w [R, H] float64 -> (exact [R, N], M [R, N])."""
    dots = np.einsum("rhd,nd->rhn", qd, kd)
    exact = np.einsum("rhn,rh->rn", np.maximum(dots, 0), w)
    mag = np.einsum("rhn,rh->rn", np.einsum("rhd,nd->rhn", np.abs(qd), np.abs(kd)), np.abs(w))
    return exact, mag


def to_f64(t):
    return t.detach().to(torch.float64).numpy()


class Checks(unittest.TestCase):
    def assert_logits(self, got, exact, mag, valid):
        self.assertTrue(valid.any(), "the case has valid columns")
        g = to_f64(got)
        np.testing.assert_array_equal(np.isneginf(g), ~valid, "-inf mask")
        bound = 2.0**-7 * np.abs(exact) + 2.0**-14 * mag
        bad = valid & ~(np.abs(g - exact) <= bound)
        self.assertFalse(bad.any(), "%d logits off; first at %s"
                         % (bad.sum(), np.argwhere(bad)[:1].tolist()))

    def dense_case(self, fmt, S=6, N=300):
        q = quantise(activations(S, H, D), fmt)
        if fmt == "per_token":  # Q comes without scales (an engine folds them into the weights)
            q = (q[0], None)
        kv = quantise(activations(N, D), fmt)
        ks = torch.randint(0, 120, (S,), generator=GEN)
        ke = torch.minimum(ks + torch.randint(1, 200, (S,), generator=GEN), torch.tensor(N))
        valid = (np.arange(N) >= ks.numpy()[:, None]) & (np.arange(N) < ke.numpy()[:, None])
        return q, kv, ks, ke, valid

    def paged_case(self, fmt, B=3, next_n=2, block_kv=64, blocks=7, max_blocks=4):
        """A fused cache uint8 [blocks, block_kv, 1, bytes + 4] (each block: its codes, then its
        scales), filled from torch-quantised keys; 2-D context lengths and a block table."""
        codes, scales = quantise(activations(blocks * block_kv, D), fmt)
        per_token = as_bytes(codes).shape[-1]
        raw = np.concatenate([as_bytes(codes).reshape(blocks, -1),
                              scales.contiguous().view(torch.uint8).numpy().reshape(blocks, -1)],
                             axis=1)
        cache = torch.from_numpy(raw.copy()).view(blocks, block_kv, 1, per_token + 4)
        keys = decode(codes, scales).reshape(blocks, block_kv, D)
        lens = torch.randint(1, max_blocks * block_kv, (B, next_n), generator=GEN)
        table = torch.randint(0, blocks, (B, max_blocks), generator=GEN)
        q = quantise(activations(B, next_n, H, D), fmt)
        if fmt == "per_token":
            q = (q[0], None)
        return q, cache, keys, lens, table, max_blocks * block_kv

    @staticmethod
    def paged_reference(qd, keys, w, lens, table, width):
        B, next_n = lens.shape
        tokens = keys[table.numpy()].reshape(B, -1, D)[:, :width]  # each request's keys in order
        exact, mag = np.zeros((B * next_n, width)), np.zeros((B * next_n, width))
        valid = np.zeros((B * next_n, width), bool)
        for b in range(B):
            e, m = reference(qd[b], tokens[b], w[b * next_n:(b + 1) * next_n])
            exact[b * next_n:(b + 1) * next_n], mag[b * next_n:(b + 1) * next_n] = e, m
            valid[b * next_n:(b + 1) * next_n] = np.arange(width) < lens[b].numpy()[:, None]
        return exact, mag, valid


class Module(Checks):
    def test_dense_every_format_weight_and_index_dtype(self):
        for fmt in FORMATS:
            q, kv, ks, ke, valid = self.dense_case(fmt)
            qd, kd = decode(*q), decode(*kv)
            for wdt in WEIGHT_DTYPES:
                w = torch.randn(q[0].shape[:2], generator=GEN).to(wdt)
                exact, mag = reference(qd, kd, to_f64(w))
                for idt in INDEX_DTYPES:
                    for logits in ("float32", "bfloat16"):
                        with self.subTest(fmt=fmt, weights=wdt, index=idt, logits=logits):
                            got = ml.fp8_fp4_mqa_logits(q, kv, w, ks.to(idt), ke.to(idt),
                                                        logits_dtype=logits)
                            self.assertEqual(got.dtype, getattr(torch, logits))
                            self.assert_logits(got, exact, mag, valid)
                            same = ml.fp8_fp4_mqa_logits((as_uint8(q[0]), q[1]),
                                                         (as_uint8(kv[0]), kv[1]), w,
                                                         ks.to(idt), ke.to(idt),
                                                         logits_dtype=logits)
                            self.assertTrue(torch.equal(got, same), "float8 and uint8 differ")

    def test_paged_every_format_weight_and_index_dtype(self):
        for fmt in FORMATS:
            q, cache, keys, lens, table, width = self.paged_case(fmt)
            qd = decode(*q).reshape(-1, H, D)
            for wdt in WEIGHT_DTYPES:
                w = torch.randn(qd.shape[0], H, generator=GEN).to(wdt)
                exact, mag, valid = self.paged_reference(qd.reshape(lens.shape + (H, D)), keys,
                                                         to_f64(w), lens, table, width)
                for idt in INDEX_DTYPES:
                    with self.subTest(fmt=fmt, weights=wdt, index=idt):
                        meta = ml.get_paged_mqa_logits_metadata(lens.to(idt), cache.shape[1], 4)
                        got = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens.to(idt),
                                                          table.to(idt), meta, width,
                                                          clean_logits=True)
                        self.assert_logits(got, exact, mag, valid)

    def test_fp4_dtype_and_int8_are_the_same_codes(self):
        q, kv, ks, ke, _ = self.dense_case("mxfp4")
        w = torch.randn(q[0].shape[:2], generator=GEN)
        got = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke)
        as_int8 = ml.fp8_fp4_mqa_logits((q[0].view(torch.int8), q[1]),
                                        (kv[0].view(torch.int8), kv[1]), w, ks, ke)
        self.assertTrue(torch.equal(got, as_int8))

    def test_other_float8_formats_are_refused_by_name(self):
        q, kv, ks, ke, _ = self.dense_case("mxfp8")
        w = torch.randn(q[0].shape[:2], generator=GEN)
        with self.assertRaisesRegex(ValueError, "float8_e5m2"):
            ml.fp8_fp4_mqa_logits((q[0].view(torch.float8_e5m2), q[1]), kv, w, ks, ke)


def as_uint8(t):
    return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t


@unittest.skipIf(OPS_LIBRARY is None, "no op library given")
class OpLibrary(Checks):
    """torch.ops.mqalogits with the same tensors (float32 / bfloat16 weights, as DeepGEMM)."""

    @classmethod
    def setUpClass(cls):
        torch.ops.load_library(OPS_LIBRARY)
        cls.ops = torch.ops.mqalogits

    def test_dense(self):
        for fmt in FORMATS:
            q, kv, ks, ke, valid = self.dense_case(fmt)
            qd, kd = decode(*q), decode(*kv)
            for wdt, logits in ((torch.float32, torch.float32), (torch.float32, torch.bfloat16),
                                (torch.bfloat16, torch.bfloat16)):
                w = torch.randn(q[0].shape[:2], generator=GEN).to(wdt)
                exact, mag = reference(qd, kd, to_f64(w))
                for idt in INDEX_DTYPES:
                    with self.subTest(fmt=fmt, weights=wdt, index=idt):
                        got = self.ops.fp8_fp4_mqa_logits(list(q), list(kv), w, ks.to(idt),
                                                          ke.to(idt), True, 0, logits)
                        self.assertEqual(got.dtype, logits)
                        self.assert_logits(got, exact, mag, valid)

    def test_paged(self):
        for fmt in FORMATS:
            q, cache, keys, lens, table, width = self.paged_case(fmt)
            qd = decode(*q).reshape(-1, H, D)
            w = torch.randn(qd.shape[0], H, generator=GEN)
            exact, mag, valid = self.paged_reference(qd.reshape(lens.shape + (H, D)), keys,
                                                     to_f64(w), lens, table, width)
            for idt in INDEX_DTYPES:
                with self.subTest(fmt=fmt, index=idt):
                    meta = self.ops.get_paged_mqa_logits_metadata(lens.to(idt), cache.shape[1], 4)
                    got = self.ops.fp8_fp4_paged_mqa_logits(list(q), cache, w, lens.to(idt),
                                                            table.to(idt), meta, width, True)
                    self.assert_logits(got, exact, mag, valid)


if __name__ == "__main__":
    print("torch %s, numpy %s, ml_dtypes %s, FP4 as %s, host path %s"
          % (torch.__version__, np.__version__, ml_dtypes.__version__, FP4_DTYPE,
             ml.host_isa_name()))
    unittest.main()
