#!/usr/bin/env python3
"""The installed Python package's dense kernel speed on one thread, as an engine calling it
from Python sees it: GFLOP/s (2 x H x 128 flops per valid query-key pair) in process CPU
seconds, median of N calls, MXFP8 and MXFP4, on bench/paired.cpp's 'dense 32x8192 H64' shape.
Compare with `mqalogits_paired_native 9 "dense 32x8192 H64"` (header-only, -march=native) run
beside it: a wheel built for the baseline CPU should reach the dispatched path's speed.

  python bench/wheel_speed.py [calls]   # the mqalogits first on sys.path
"""
import sys
import time

import numpy as np

import mqalogits

S, H, N, D = 32, 64, 8192, 128


def inputs(rng, fp4):
    def codes(shape):
        if fp4:
            return rng.integers(-128, 128, size=shape[:-1] + (shape[-1] // 2,), dtype=np.int8)
        c = rng.integers(0, 256, size=shape, dtype=np.uint8)
        c[(c & 0x7F) == 0x7F] = 0x38
        return c

    def scales(shape):  # one UE8M0 byte per 32 elements, each its own (no row folds)
        e = rng.integers(120, 134, size=shape + (4,), dtype=np.int64)
        return sum(e[..., k] << (8 * k) for k in range(4)).astype(np.uint32).view(np.int32)

    q = (codes((S, H, D)), scales((S, H)))
    kv = (codes((N, D)), scales((N,)))
    w = rng.standard_normal((S, H)).astype(np.float32)
    return q, kv, w


def gflops(fp4, calls):
    rng = np.random.default_rng(1)
    q, kv, w = inputs(rng, fp4)
    ks = np.zeros(S, np.int32)
    ke = np.full(S, N, np.int32)
    out = np.empty((S, N), np.float32)
    run = lambda: mqalogits.fp8_fp4_mqa_logits(q, kv, w, ks, ke, num_threads=1, out=out)
    run()
    times = []
    for _ in range(calls):
        t0 = time.process_time()
        run()
        times.append(time.process_time() - t0)
    return 2.0 * H * D * S * N / float(np.median(times)) / 1e9


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    print("mqalogits %s, host path %s, dense %dx%d H%d, 1 thread, median of %d calls: "
          "MXFP8 %.1f GFLOP/s, MXFP4 %.1f GFLOP/s" % (
              mqalogits.__version__, mqalogits.host_isa_name(), S, N, H, calls,
              gflops(False, calls), gflops(True, calls)))


if __name__ == "__main__":
    main()
