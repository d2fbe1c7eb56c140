"""`python -m mqalogits`: the version, the host path this CPU runs, and a one-second self-check
of the dense kernel against a float64 scalar reference written here (FP8 / FP4 decoded from the
bit layouts, not by the library). Exits 1 if a logit is outside the accuracy bound
|got - exact| <= 2^-7 |exact| + 2^-14 M (M = sum_h |w_h| sum_i |q_hi k_i|) or the -inf mask
is not exact."""

import sys
import time

import numpy as np

import mqalogits


def _e4m3_table():
    v = np.zeros(256)
    for c in range(256):
        sign = -1.0 if c & 0x80 else 1.0
        e, m = (c >> 3) & 0xF, c & 7
        if e == 0xF and m == 7:
            v[c] = np.nan
        elif e == 0:
            v[c] = sign * m / 8 * 2.0**-6
        else:
            v[c] = sign * (1 + m / 8) * 2.0 ** (e - 7)
    return v


E4M3 = _e4m3_table()
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def _codes(rng, shape, fp4):
    """Random codes: packed e2m1 pairs as int8, or e4m3 codes without the NaN ones."""
    if fp4:
        return rng.integers(-128, 128, size=shape[:-1] + (shape[-1] // 2,), dtype=np.int8)
    c = rng.integers(0, 256, size=shape, dtype=np.uint8)
    c[(c & 0x7F) == 0x7F] = 0x38  # 1.0 instead of NaN
    return c


def _decode(codes, scales):
    """codes [..., d or d/2] and int32 UE8M0 words [...] (four scale bytes, one per 32) ->
    float64 [..., d]."""
    if codes.dtype == np.int8:
        b = codes.view(np.uint8).astype(np.int64)
        v = np.stack([E2M1[b & 0xF], E2M1[b >> 4]], -1).reshape(codes.shape[:-1] + (-1,))
    else:
        v = E4M3[codes]
    nb = v.shape[-1] // 32
    u = scales.view(np.uint32).astype(np.int64)
    e = np.stack([(u >> (8 * k)) & 0xFF for k in range(nb)], -1)
    mult = np.repeat(np.ldexp(1.0, e - 127), 32, axis=-1)
    return v * mult


def _scales(rng, shape):
    e = rng.integers(120, 134, size=shape + (4,), dtype=np.int64)
    return sum(e[..., k] << (8 * k) for k in range(4)).astype(np.uint32).view(np.int32)


def _one_case(rng):
    """One random dense call (MXFP8 or MXFP4, float32 or bfloat16 logits); the number of
    logits outside the bound or the mask."""
    fp4 = bool(rng.integers(2))
    S, H, N, d = int(rng.integers(1, 9)), int(rng.choice([8, 32, 64])), int(rng.integers(1, 300)), 128
    q = (_codes(rng, (S, H, d), fp4), _scales(rng, (S, H)))
    kv = (_codes(rng, (N, d), fp4), _scales(rng, (N,)))
    w = rng.standard_normal((S, H)).astype(np.float32)
    ks = rng.integers(0, N, size=S).astype(np.int32)
    ke = np.minimum(ks + rng.integers(0, N + 1, size=S), N).astype(np.int32)
    bf16 = bool(rng.integers(2))
    got = mqalogits.fp8_fp4_mqa_logits(q, kv, w, ks, ke,
                                       logits_dtype="bfloat16" if bf16 else "float32")
    if bf16:  # bfloat16 bits as uint16
        got = (got.astype(np.uint32) << 16).view(np.float32)
    qd, kd = _decode(*q), _decode(*kv)
    dots = np.einsum("shd,nd->shn", qd, kd)
    exact = np.einsum("shn,sh->sn", np.maximum(dots, 0), w.astype(np.float64))
    mag = np.einsum("shn,sh->sn", np.einsum("shd,nd->shn", np.abs(qd), np.abs(kd)),
                    np.abs(w.astype(np.float64)))
    cols = np.arange(N)
    valid = (cols >= ks[:, None]) & (cols < ke[:, None])
    bound = 2.0**-7 * np.abs(exact) + 2.0**-14 * mag
    ok = np.where(valid, np.abs(got.astype(np.float64) - exact) <= bound, got == -np.inf)
    return int((~ok).sum()), S * N


def main():
    print("mqalogits %s" % mqalogits.__version__)
    print("host path: %s" % mqalogits.host_isa_name())
    rng = np.random.default_rng(int(time.time()))
    calls = logits = bad = 0
    start = time.perf_counter()
    while time.perf_counter() - start < 1.0:
        b, n = _one_case(rng)
        calls, logits, bad = calls + 1, logits + n, bad + b
    took = time.perf_counter() - start
    verdict = "passed" if bad == 0 else "FAILED: %d logits outside the bound or mask" % bad
    print("self-check: %d dense calls (MXFP8 / MXFP4, %d logits) against a float64 reference "
          "in %.1f s: %s" % (calls, logits, took, verdict))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
