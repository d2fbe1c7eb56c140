"""One DeepSeek-V3.2 indexer decode step and one chunked prefill step, driven through `mqalogits`
as vLLM drives DeepGEMM: 64 index heads, head dim 128, page 64, the FP8 per-token cache (132
bytes a token: 128 e4m3 codes, then an fp32 scale) written by indexer_k_quant_and_cache, and
static buffers (the logits, a persistent top-k buffer, the schedule copied into a
scheduler_metadata_buffer). Each step runs once with torch tensors (int64 lengths and tables, as
torch makes them) and once with numpy arrays alone; a third run does the numpy one in a process
where torch cannot be imported.

Logits are checked against float64 numpy of the formula on the decoded FP8 inputs,
|got - exact| <= 2^-7 |exact| + 2^-14 M with M = sum_h |w_h| sum_i |q_hi k_i|, and the top-k
against a stable descending sort of the kernel's own logits (ties to the lower column, -1 past
a row's valid columns).

Run: PYTHONPATH=<build>/examples/10_python_module python3 test_engine_step.py
"""

import os
import subprocess
import sys
import tracemalloc
import unittest

import numpy as np

if os.environ.get("MQALOGITS_NO_TORCH"):
    sys.modules["torch"] = None  # import torch raises ImportError from here on

import mqalogits as ml
from test_mqalogits import (E4M3, Checks, cache_keys, expected_topk, quant_e4m3, ref_dense,
                            ref_paged)

try:
    import torch
except ImportError:
    torch = None

H, D, PAGE, TOPK = 64, 128, 64, 2048
RNG = np.random.default_rng(30)


class NumpyIO:
    """The engine's arrays as numpy (bf16 as uint16 bits)."""
    name = "numpy"

    @staticmethod
    def put(a):
        return a

    @staticmethod
    def get(a):
        assert isinstance(a, np.ndarray), type(a)
        return a

    @staticmethod
    def empty(shape, dtype):
        return np.empty(shape, dtype)

    @staticmethod
    def index(a):
        return a  # int32, as the numpy caller has it


class TorchIO:
    """The engine's arrays as CPU torch tensors; indices int64 (torch's default)."""
    name = "torch"

    @staticmethod
    def put(a):
        if a.dtype == np.uint16:
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)

    @staticmethod
    def get(t):
        assert isinstance(t, torch.Tensor), type(t)
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()

    @staticmethod
    def empty(shape, dtype):
        return TorchIO.put(np.empty(shape, dtype))

    @staticmethod
    def index(a):
        return torch.from_numpy(a.astype(np.int64))


def fill_cache(io, lens):
    """Pages for every request (a shuffled pool), the keys of all their tokens written by
    indexer_k_quant_and_cache through an int64 slot mapping; returns (cache [pages, 64, 132],
    block_table int32 [B, max_blocks], decoded keys [pages, 64, 128])."""
    blocks = [-(-n // PAGE) for n in lens]
    pages = sum(blocks) + 3
    perm = RNG.permutation(pages).astype(np.int32)
    max_blocks = max(max(blocks), 1) + 2
    table = np.zeros((len(lens), max_blocks), np.int32)
    at = 0
    for b, nb in enumerate(blocks):
        table[b, :nb] = perm[at:at + nb]
        at += nb
    slots = np.concatenate([table[b, np.arange(n) // PAGE] * PAGE + np.arange(n) % PAGE
                            for b, n in enumerate(lens)] + [np.zeros(0, np.int32)]).astype(np.int64)
    k = (RNG.standard_normal((len(slots), D)) * 2.0).astype(np.float32)
    cache = io.put(np.zeros((pages, PAGE, 132), np.uint8))
    ml.indexer_k_quant_and_cache(io.put(k), cache, io.put(slots), 128, "ue8m0")
    cache_np = io.get(cache)
    keys = cache_keys(cache_np.reshape(pages, PAGE, 1, 132), False, False)
    return cache, table, keys


def fp8_q(rows_shape):
    """FP8 q codes as vLLM's per-token Q quantisation leaves them (the scale folded into the
    weights), and their decoded values."""
    x = RNG.standard_normal(rows_shape + (D,))
    codes = quant_e4m3(x * 100.0 / np.abs(x).max())
    return codes, E4M3[codes.astype(np.int64)]


class EngineStep(Checks):
    io = NumpyIO

    def decode(self, next_n):
        io = self.io
        lens_1d = [0, 1, 1900, 2049, 9000]
        B = len(lens_1d)
        cache, table, keys = fill_cache(io, lens_1d)
        # MTP: the next_n query tokens of a request see its context up to themselves.
        lens = np.array([[max(n - next_n + 1 + j, 0) for j in range(next_n)] for n in lens_1d],
                        np.int32)
        rows = B * next_n
        q, qd = fp8_q((B, next_n, H))
        w = (RNG.standard_normal((rows, H)) * 0.1).astype(np.float32)
        max_model_len = 9216
        num_sms = 8
        # The engine's static buffers, allocated once for the largest batch.
        max_rows = 16
        sched_buf = io.empty((num_sms + 1, 2), np.int32)
        logits_buf = io.empty((max_rows, max_model_len), np.float32)
        topk_buf = io.empty((max_rows, TOPK), np.int32)
        cache4 = cache.reshape(cache.shape[0], PAGE, 1, 132)  # zero-copy view

        lens_in, table_in = io.index(lens), io.index(table)
        m = ml.get_paged_mqa_logits_metadata(lens_in, PAGE, num_sms)
        self.assertEqual(tuple(m.shape), (num_sms + 1, 2))
        self.assertEqual(io.get(m).dtype, np.int32)
        sched_buf[:m.shape[0]] = m
        if next_n == 2:  # or written there directly
            sched_buf.fill(-1) if io is NumpyIO else sched_buf.fill_(-1)
            self.assertIs(ml.get_paged_mqa_logits_metadata(lens_in, PAGE, num_sms, out=sched_buf),
                          sched_buf)
            np.testing.assert_array_equal(io.get(sched_buf), io.get(m))

        args = (io.put(q), cache4, io.put(w), lens_in, table_in, sched_buf, max_model_len)
        out = logits_buf[:rows]
        got = ml.fp8_paged_mqa_logits(*args, clean_logits=False, out=out)
        self.assertIs(got, out)
        exact, mag = ref_paged(qd.reshape(rows, H, D), keys, w.astype(np.float64), lens, table,
                               max_model_len)
        logits = io.get(out)
        with np.errstate(invalid="ignore"):  # the columns past a context hold what out held
            self.assert_logits(logits, exact, mag, clean=False)
        valid = ~np.isneginf(exact)

        # Top-k 2048 into the persistent buffer, as positions and as cache slots.
        want, _ = expected_topk(np.where(valid, logits, -np.inf), valid, TOPK)
        tk = topk_buf[:rows]
        self.assertIs(ml.fp8_paged_mqa_logits(*args, topk=TOPK, topk_out=tk), tk)
        np.testing.assert_array_equal(io.get(tk), want)
        b = np.repeat(np.arange(B), next_n)[:, None]
        slots = np.where(want < 0, -1, table[b, np.maximum(want, 0) // PAGE] * PAGE + want % PAGE)
        ml.fp8_fp4_paged_mqa_logits((io.put(q), None), *args[1:], topk_out=tk, topk_index="slot")
        np.testing.assert_array_equal(io.get(tk), slots)

        # A warm call allocates nothing (numpy's allocations are traced; the logits are MBs).
        tracemalloc.start()
        ml.fp8_paged_mqa_logits(*args, out=out)
        ml.fp8_paged_mqa_logits(*args, topk=TOPK, topk_out=tk)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        self.assertLess(peak, 64 << 10)

        # The schedule table is held to the call: another step's lengths are refused by name.
        stale = lens.copy()
        stale[4] += 4000
        with self.assertRaisesRegex(ValueError, "schedule_meta: .* stale"):
            ml.fp8_paged_mqa_logits(args[0], cache4, args[2], io.index(stale), table_in,
                                    sched_buf, max_model_len, out=out)
        return logits

    def test_decode_next_n_1(self):
        self.decode(1)

    def test_decode_next_n_2(self):
        self.decode(2)

    def test_chunked_prefill(self):
        io = self.io
        # Two requests: 3000 cached tokens + a chunk of 8 new ones, and a first chunk of 40.
        ctx, new = [3000, 0], [8, 40]
        total = [c + n for c, n in zip(ctx, new)]
        cache, table, keys = fill_cache(io, total)
        # Each request's K, contiguous: here by numpy from the cache's bytes.
        kcodes, kscales, ks, ke = [], [], [], []
        cache_np = io.get(cache)
        flat = cache_np.reshape(cache_np.shape[0], -1)
        base = 0
        for b, n in enumerate(total):
            pos = np.arange(n)
            page, off = table[b, pos // PAGE], pos % PAGE
            # A page is 64 tokens' codes, then their 64 fp32 scales (vLLM's layout).
            kcodes.append(flat[page[:, None], off[:, None] * 128 + np.arange(128)])
            kscales.append(flat[page[:, None], PAGE * 128 + 4 * off[:, None] + np.arange(4)]
                           .copy().view(np.float32)[:, 0])
            for j in range(new[b]):  # causal: query token j sees up to ctx + j
                ks.append(base)
                ke.append(base + ctx[b] + j + 1)
            base += n
        kc, ksf = np.concatenate(kcodes), np.concatenate(kscales)
        ks, ke = np.array(ks, np.int32), np.array(ke, np.int32)
        S, N = len(ks), len(kc)
        q, qd = fp8_q((S, H))
        # bf16 weights (the engine's activations' type).
        wf = (RNG.standard_normal((S, H)) * 0.1).astype(np.float32)
        w = (wf.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact in bf16
        wd = (w.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

        logits_buf = io.empty((64, N), np.float32)
        bf16_buf = io.empty((64, N), np.uint16)
        topk_buf = io.empty((64, TOPK), np.int32)
        vals_buf = io.empty((64, TOPK), np.float32)
        # The engine's gather (vLLM's cp_gather_indexer_k_quant_cache) into its K buffers: the
        # bytes of the numpy gather above.
        kv = (io.empty((N, 128), np.uint8), io.empty((N,), np.float32))
        cu = np.concatenate([[0], np.cumsum(total)]).astype(np.int32)
        ml.cp_gather_indexer_k_quant_cache(cache, kv[0], kv[1], io.index(table), io.index(cu))
        np.testing.assert_array_equal(io.get(kv[0]), kc)
        np.testing.assert_array_equal(io.get(kv[1]).view(np.uint32), ksf.view(np.uint32))
        args = (io.put(q), kv, io.put(w), io.index(ks), io.index(ke))
        exact, mag = ref_dense(qd, decode_rows(kc, ksf), wd, ks, ke, 0)
        valid = ~np.isneginf(exact)

        out = logits_buf[:S]
        self.assertIs(ml.fp8_mqa_logits(*args, clean_logits=True, out=out), out)
        logits = io.get(out)
        self.assert_logits(logits, exact, mag)
        out16 = bf16_buf[:S]
        got = ml.fp8_fp4_mqa_logits((args[0], None), *args[1:], logits_dtype="bfloat16", out=out16)
        self.assertIs(got, out16)
        self.assert_logits(io.get(out16), exact, mag)

        want_i, want_v = expected_topk(np.where(valid, logits, -np.inf), valid, TOPK)
        tk, tv = topk_buf[:S], vals_buf[:S]
        got = ml.fp8_mqa_logits(*args, topk=TOPK, topk_out=tk, topk_values_out=tv)
        self.assertIs(got[0], tk)
        self.assertIs(got[1], tv)
        np.testing.assert_array_equal(io.get(tk), want_i)
        np.testing.assert_array_equal(io.get(tv), want_v)

        # Outputs are checked: shape, dtype, and no byte shared with an input.
        with self.assertRaisesRegex(ValueError, r"out has shape .*expected \[%d, %d\]" % (S, N)):
            ml.fp8_mqa_logits(*args, out=logits_buf[:S - 1])
        with self.assertRaisesRegex(ValueError, "topk_out has dtype"):
            ml.fp8_mqa_logits(*args, topk=TOPK, topk_out=vals_buf[:S])
        with self.assertRaisesRegex(ValueError, "overlap"):
            ml.fp8_mqa_logits(*args, topk=TOPK, topk_out=tk, topk_values_out=tk.view(
                torch.float32) if io is TorchIO else tk.view(np.float32))


def decode_rows(codes, scales):
    return E4M3[codes.astype(np.int64)] * scales.astype(np.float64)[:, None]


@unittest.skipIf(torch is None, "torch is not installed")
class EngineStepTorch(EngineStep):
    io = TorchIO


class WithoutTorch(unittest.TestCase):
    def test_numpy_alone_never_imports_torch(self):
        if os.environ.get("MQALOGITS_NO_TORCH"):
            self.skipTest("already the process without torch")
        env = dict(os.environ, MQALOGITS_NO_TORCH="1")
        code = ("import sys, unittest, test_engine_step as t\n"
                "r = unittest.main(module=t, argv=['x', 'EngineStep', '-q'], exit=False).result\n"
                "assert sys.modules['torch'] is None, 'torch was imported'\n"
                "assert not [m for m in sys.modules if m.startswith('torch.')], 'torch.*'\n"
                "sys.exit(0 if r.wasSuccessful() and r.testsRun == 3 else 1)\n")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.abspath(__file__)), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    print(f"mqalogits {ml.__version__} from {ml.__file__}, numpy {np.__version__}, torch "
          f"{torch.__version__ if torch else 'absent'}")
    unittest.main(verbosity=2)
