#!/usr/bin/env python3
"""DeepSeek-V3.2's indexer decode step through the Python module against the same call from C++.

The shape vLLM serves: B requests x 1 query token, 64 index heads, head dim 128, the FP8 per-token
cache (132 bytes a token) on pages of 64 scattered over a 4 GiB cache without huge pages, fp32
weights and fp32 logits, upstream's fp8_paged_mqa_logits. The Python side calls
mqalogits.fp8_paged_mqa_logits on numpy arrays; the C++ side is the paired benchmark's
"deepseek decode" shape (bench/paired.cpp), run in its own process. The two alternate, `pairs`
times, so that both see the same machine; each reports the median GFLOP/s of its rounds
(FLOP = 2 x 64 x 128 per valid (query, key) pair), and the script prints Python / C++.

  python3 bench/python_decode.py [--build build] [--pairs 5] [--rounds 9] [--threads 1 2]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

H, D, PAGE, TOKEN_BYTES = 64, 128, 64, 132
CACHE_BYTES = 4 << 30


def inputs(b, ctx, seed=7):
    """q codes [B, 1, H, D], a 4 GiB cache [pages, 64, 1, 132] of which B x ctx / 64 pages at
    random slots are filled (numpy's zeroed allocation maps the rest lazily), fp32 weights,
    int32 lengths and block table."""
    rng = np.random.default_rng(seed)

    def codes(shape):
        c = rng.integers(0, 256, shape, dtype=np.uint8)
        c[(c & 0x7F) == 0x7F] ^= 1  # no NaN codes
        return c

    pages = CACHE_BYTES // (PAGE * TOKEN_BYTES)
    blocks = ctx // PAGE
    cache = np.zeros((pages, PAGE * TOKEN_BYTES), np.uint8)
    table = rng.choice(pages, size=(b, blocks), replace=False).astype(np.int32)
    for p in table.ravel():
        cache[p, :PAGE * D] = codes(PAGE * D)
        cache[p, PAGE * D:] = (rng.uniform(1, 2, PAGE) / 64).astype(np.float32).view(np.uint8)
    q = codes((b, 1, H, D))
    w = rng.uniform(-1, 1, (b, H)).astype(np.float32)
    lens = np.full(b, ctx, np.int32)
    return q, cache.reshape(pages, PAGE, 1, TOKEN_BYTES), w, lens, table


def python_gflops(ml, b, ctx, rounds, threads):
    q, cache, w, lens, table = inputs(b, ctx)
    schedule = ml.get_paged_mqa_logits_metadata(lens, PAGE, 1)
    out = np.empty((b, ctx), np.float32)
    flop = 2.0 * H * D * b * ctx

    def call():
        ml.fp8_paged_mqa_logits(q, cache, w, lens, table, schedule, ctx, clean_logits=False,
                                out=out, num_threads=threads)

    call()  # warm: pages, pools, workspaces
    t0 = time.perf_counter()
    call()
    reps = max(1, int(2e-3 / max(1e-7, time.perf_counter() - t0)))
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        rates.append(flop * reps / (time.perf_counter() - t0) / 1e9)
    return statistics.median(rates)


LINE = re.compile(r"^deepseek decode (?P<b>\d+)x1x(?P<ctx>\d+) fp32 FP8tok .*\| medians "
                  r"(?P<g>[\d.]+) / [\d.]+ GFLOP/s")


def cpp_gflops(binary, rounds, threads):
    out = subprocess.run([binary, str(rounds), "deepseek", str(threads)], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            return int(m["b"]), int(m["ctx"]), float(m["g"])
    raise RuntimeError(f"no deepseek line in the output of {binary}:\n{out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "examples", "10_python_module"))
    import mqalogits as ml
    binary = os.path.join(a.build, "bench", "mqalogits_paired")
    print(f"host path {ml.host_isa_name()}; Python module against {binary}")
    for threads in a.threads:
        py, cpp = [], []
        for _ in range(a.pairs):
            b, ctx, g = cpp_gflops(binary, a.rounds, threads)
            cpp.append(g)
            py.append(python_gflops(ml, b, ctx, a.rounds, threads))
            print(f"#   {threads} thread(s): C++ {g:.1f}, Python {py[-1]:.1f} GFLOP/s", flush=True)
        p, c = statistics.median(py), statistics.median(cpp)
        print(f"deepseek decode {b}x1x{ctx} fp32 FP8tok, {threads} thread(s): Python {p:.1f} "
              f"GFLOP/s, C++ {c:.1f} GFLOP/s, Python / C++ {p / c:.3f} (median of {a.pairs} "
              f"pairs)")


if __name__ == "__main__":
    main()
