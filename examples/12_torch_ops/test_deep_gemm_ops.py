#!/usr/bin/env python3
"""The opt-in DeepGEMM names (torch.ops.deep_gemm.*, upstream's schemas) called as an engine calls
DeepGEMM's torch ops: the results equal torch.ops.mqalogits.* bitwise and float64 numpy decoding
of the FP8 / FP4 bytes within the kernels' bound; the Meta kernels trace them.

Usage: test_deep_gemm_ops.py path/to/libmqalogits_torch_ops.so path/to/libmqalogits_deep_gemm_ops.so
"""
import sys

import numpy as np
import torch

torch.ops.load_library(sys.argv[1])
ops = torch.ops.mqalogits
try:  # the op library alone registers no deep_gemm op
    torch.ops.deep_gemm.fp8_mqa_logits
    raise AssertionError("deep_gemm ops registered without their library")
except (AttributeError, RuntimeError):
    pass
torch.ops.load_library(sys.argv[2])
dg = torch.ops.deep_gemm

# Upstream's schemas, as DeepGEMM's torch extension registers them (the library writes its own
# from declarations: they must parse to exactly these).
UPSTREAM_SCHEMAS = [
    "fp8_fp4_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv, Tensor kv_sf, Tensor weights, "
    "Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, bool clean_logits=True, "
    "int max_seqlen_k=0, ScalarType logits_dtype=6, Tensor? schedule_meta=None) -> Tensor",
    "get_mqa_logits_metadata(Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, "
    "int num_kv_tokens, int num_heads) -> Tensor",
    "get_paged_mqa_logits_metadata(Tensor context_lens, int block_kv, int num_sms, "
    "Tensor? indices=None) -> Tensor",
    "fp8_fp4_paged_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv_cache, Tensor weights, "
    "Tensor context_lens, Tensor block_table, Tensor schedule_meta, int max_context_len, "
    "bool clean_logits=False, ScalarType logits_dtype=6, Tensor? indices=None) -> Tensor",
    "fp8_mqa_logits(Tensor q, Tensor kv, Tensor kv_sf, Tensor weights, "
    "Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, bool clean_logits=True, "
    "int max_seqlen_k=0) -> Tensor",
    "fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, "
    "Tensor block_table, Tensor schedule_meta, int max_context_len, bool clean_logits=False, "
    "Tensor? indices=None) -> Tensor",
    "get_sparse_mqa_logits_metadata(Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, "
    "int num_kv_tokens, Tensor sparse_kv_block_indices, ScalarType qk_dtype, "
    "int sparse_block_kv, bool use_unaligned_ks=False) -> Tensor",
    "get_paged_sparse_mqa_logits_metadata(Tensor context_lens, Tensor block_table, "
    "Tensor indices, int page_kv, Tensor sparse_kv_block_indices, ScalarType qk_dtype, "
    "int sparse_block_kv) -> Tensor",
    "fp8_fp4_sparse_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv, Tensor kv_sf, "
    "Tensor weights, Tensor metadata, int num_max_sparse_blocks, int sparse_block_kv, "
    "bool use_unaligned_ks=False) -> Tensor",
    "fp8_fp4_paged_sparse_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv_cache, Tensor weights, "
    "Tensor metadata, int num_max_sparse_blocks, int sparse_block_kv) -> Tensor",
]


def schemas_are_upstreams():
    registered = {s.name: s for s in torch._C._jit_get_all_schemas()
                  if s.name.startswith("deep_gemm::")}
    assert len(registered) == len(UPSTREAM_SCHEMAS), sorted(registered)
    for text in UPSTREAM_SCHEMAS:
        want = torch._C.parse_schema("deep_gemm::" + text)
        assert registered.get(want.name) == want, (str(registered.get(want.name)), text)


schemas_are_upstreams()
rng = np.random.default_rng(7)
H, D = 16, 128

E4M3 = np.zeros(256)
for b in range(256):
    e, m = (b >> 3) & 0xF, b & 7
    mag = m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    E4M3[b] = -mag if b & 0x80 else mag
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def fp8_codes(shape):
    c = rng.integers(0, 256, size=shape, dtype=np.uint8)
    c[(c & 0x7F) == 0x7F] = 0  # no NaN codes
    return c


def fp4_decode(packed):  # [..., D/2] bytes -> [..., D]: element 2i in the low nibble
    return np.stack([E2M1[packed & 0xF], E2M1[packed >> 4]], -1).reshape(*packed.shape[:-1], -1)


def ue8m0(shape):  # one int32 word per row: four UE8M0 bytes -> (word tensor, [..., D] multipliers)
    b = rng.integers(118, 132, size=(*shape, 4), dtype=np.uint8)
    return torch.from_numpy(b.view(np.int32)[..., 0].copy()), np.repeat(2.0 ** (b - 127.0), 32, -1)


def check_close(what, got, qd, kd, w):
    """got [R, N] against float64 sum_h relu(q_h . k) w_h within 2^-7 |exact| + 2^-14 M."""
    exact = np.einsum("rhn,rh->rn", np.maximum(np.einsum("rhd,nd->rhn", qd, kd), 0), w)
    m = np.einsum("rhn,rh->rn", np.einsum("rhd,nd->rhn", np.abs(qd), np.abs(kd)), np.abs(w))
    bad = ~(np.abs(got.astype(np.float64) - exact) <= 2.0**-7 * np.abs(exact) + 2.0**-14 * m)
    assert not bad.any(), f"{what}: {bad.sum()} logits out of bound"


def prefill():
    N, S = 300, 24
    ks = torch.tensor(np.sort(rng.integers(0, 100, S)), dtype=torch.int32)
    ke = torch.tensor(np.minimum(ks.numpy() + rng.integers(1, 200, S), N), dtype=torch.int32)
    q, k = fp8_codes((S, H, D)), fp8_codes((N, D))
    sf = (rng.uniform(0.5, 2, N) * 2.0**-8).astype(np.float32)
    w = torch.from_numpy(rng.normal(0, 0.05, (S, H)).astype(np.float32))
    qt, kt, st = torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(sf)
    # vLLM's calls: the legacy name (keywords), the current one positional with its metadata.
    got = dg.fp8_mqa_logits(qt, kt, st, w, ks, ke, clean_logits=True)
    assert torch.equal(got, ops.fp8_mqa_logits(qt, (kt, st), w, ks, ke, True))
    meta = dg.get_mqa_logits_metadata(ks, ke, N, H)
    assert torch.equal(meta, ops.get_mqa_logits_metadata(ks, ke, N, H))
    cur = dg.fp8_fp4_mqa_logits(qt, None, kt, st, w, ks, ke, True, 0, torch.float32, meta)
    assert torch.equal(cur, got)
    cut = dg.fp8_fp4_mqa_logits(qt, None, kt, st, w, ks, ke, max_seqlen_k=N, clean_logits=False)
    twin = ops.fp8_fp4_mqa_logits((qt, None), (kt, st), w, ks, ke, False, N)
    for r in range(S):  # without clean_logits only each row's own columns are written
        n = ke[r].item() - ks[r].item()
        assert torch.equal(cut[r, :n], twin[r, :n]), r
    kd = E4M3[k] * sf[:, None].astype(np.float64)
    cols = np.arange(N)
    for r in range(S):
        valid = (cols >= ks[r].item()) & (cols < ke[r].item())
        check_close(f"fp8 prefill row {r}", got.numpy()[r : r + 1, valid], E4M3[q[r : r + 1]],
                    kd[valid], w.numpy()[r : r + 1].astype(np.float64))
        assert np.isneginf(got.numpy()[r, ~valid]).all()
    # MXFP4 (packed int8 codes, int32 scale words), bf16 weights and logits.
    qb, kb = fp8_codes((S, H, D // 2)), fp8_codes((N, D // 2))
    (q_sf, q_mul), (k_sf, k_mul) = ue8m0((S, H)), ue8m0((N,))
    q4, k4 = torch.from_numpy(qb.view(np.int8)), torch.from_numpy(kb.view(np.int8))
    wb = w.to(torch.bfloat16)
    mx = dg.fp8_fp4_mqa_logits(q4, q_sf, k4, k_sf, wb, ks, ke, logits_dtype=torch.bfloat16)
    assert mx.dtype == torch.bfloat16
    assert torch.equal(mx, ops.fp8_fp4_mqa_logits((q4, q_sf), (k4, k_sf), wb, ks, ke, True, 0,
                                                  torch.bfloat16))
    qd, kd = fp4_decode(qb) * q_mul, fp4_decode(kb) * k_mul
    for r in range(S):
        valid = (cols >= ks[r].item()) & (cols < ke[r].item())
        check_close(f"mxfp4 prefill row {r}", mx.float().numpy()[r : r + 1, valid], qd[r : r + 1],
                    kd[valid], wb.float().numpy()[r : r + 1].astype(np.float64))
    return (qt, kt, st, w, ks, ke)


def decode():
    """vLLM's 132-byte FP8 + fp32-scale cache, page 64, next_n 2 with 2-D lengths."""
    lengths, page, B, next_n = [1, 150, 400], 64, 3, 2
    max_len, blocks = 448, 7
    cache = np.zeros((B * blocks, page, 132), np.uint8)
    k = [fp8_codes((L, D)) for L in lengths]
    sf = [(rng.uniform(0.5, 2, L) * 2.0**-8).astype(np.float32) for L in lengths]
    table = rng.permutation(B * blocks).reshape(B, blocks).astype(np.int32)
    for b, L in enumerate(lengths):
        for t in range(L):
            p = cache[table[b, t // page]]
            p.reshape(-1)[(t % page) * D : (t % page + 1) * D] = k[b][t]
            p.reshape(-1)[page * D + (t % page) * 4 : page * D + (t % page + 1) * 4] = (
                sf[b][t : t + 1].view(np.uint8))
    kv_cache = torch.from_numpy(cache.reshape(B * blocks, page, 1, 132))
    lens = torch.tensor([[max(L - next_n + 1 + j, 0) for j in range(next_n)] for L in lengths],
                        dtype=torch.int32)
    q = fp8_codes((B, next_n, H, D))
    qt, tt = torch.from_numpy(q), torch.from_numpy(table)
    w = torch.from_numpy(rng.normal(0, 0.05, (B * next_n, H)).astype(np.float32))
    meta = dg.get_paged_mqa_logits_metadata(lens, page, 4)
    assert torch.equal(meta, ops.get_paged_mqa_logits_metadata(lens, page, 4))
    got = dg.fp8_paged_mqa_logits(qt, kv_cache, w, lens, tt, meta, max_len, clean_logits=True)
    want = ops.fp8_paged_mqa_logits(qt, kv_cache, w, lens, tt, meta, max_len, True)
    assert torch.equal(got, want)
    cur = dg.fp8_fp4_paged_mqa_logits(qt, None, kv_cache, w, lens, tt, meta, max_len, True)
    assert torch.equal(cur, got)
    bf = dg.fp8_fp4_paged_mqa_logits(qt, None, kv_cache, w, lens, tt, meta, max_len,
                                     logits_dtype=torch.bfloat16, clean_logits=True)
    assert torch.equal(bf, ops.fp8_fp4_paged_mqa_logits((qt, None), kv_cache, w, lens, tt, meta,
                                                        max_len, True, torch.bfloat16))
    qd = E4M3[q].reshape(B * next_n, H, D)
    for b, L in enumerate(lengths):
        kd = E4M3[k[b]] * sf[b][:, None].astype(np.float64)
        for j in range(next_n):
            r, n = b * next_n + j, lens[b, j].item()
            check_close(f"decode row {r}", got.numpy()[r : r + 1, :n], qd[r : r + 1], kd[:n],
                        w.numpy()[r : r + 1].astype(np.float64))
            assert np.isneginf(got.numpy()[r, n:]).all()
    # Upstream's varlen indices (one request per row).
    flat = lens[:, :1].contiguous()
    idx = torch.arange(B, dtype=torch.int32)
    mv = dg.get_paged_mqa_logits_metadata(flat, page, 4, idx)
    assert torch.equal(mv, ops.get_paged_mqa_logits_metadata(flat, page, 4, idx))
    q1, w1 = qt[:, :1].contiguous(), w[::2].contiguous()
    assert torch.equal(dg.fp8_paged_mqa_logits(q1, kv_cache, w1, flat, tt, mv, max_len, True, idx),
                       ops.fp8_paged_mqa_logits(q1, kv_cache, w1, flat, tt, mv, max_len, True, idx))
    return (qt, kv_cache, w, lens, tt, meta, max_len)


def sparse():
    """Selected 16-token blocks: MXFP8 dense K (use_unaligned_ks both ways), MXFP4 paged cache."""
    B, cap, S, N = 16, 4, 5, 200
    ks = np.sort(rng.integers(0, 60, S)).astype(np.int32)
    ke = (ks + rng.integers(20, 140, S)).astype(np.int32)
    sel = np.full((S, cap), -1, np.int32)
    for r in range(S):
        lo, hi = ks[r] // B, -(-ke[r] // B)
        sel[r, : min(cap, hi - lo)] = np.sort(rng.permutation(np.arange(lo, hi))[:cap])
    q, k = fp8_codes((S, H, D)), fp8_codes((N, D))
    (q_sf, q_mul), (k_sf, k_mul) = ue8m0((S, H)), ue8m0((N,))
    w = torch.from_numpy(rng.normal(0, 0.05, (S, H)).astype(np.float32)).to(torch.bfloat16)
    qt, kt, kst, kse, st = (torch.from_numpy(a) for a in (q, k, ks, ke, sel))
    for unaligned in (False, True):
        meta = dg.get_sparse_mqa_logits_metadata(kst, kse, N, st, torch.uint8, B, unaligned)
        got = dg.fp8_fp4_sparse_mqa_logits(qt, q_sf, kt, k_sf, w, meta, cap, B,
                                           use_unaligned_ks=unaligned)
        twin = ops.get_sparse_mqa_logits_metadata(kst, kse, N, st, torch.uint8, B, unaligned)
        assert torch.equal(got, ops.fp8_fp4_sparse_mqa_logits((qt, q_sf), (kt, k_sf), w, twin, cap,
                                                              B, unaligned))
    qd, kd, wd = E4M3[q] * q_mul, E4M3[k] * k_mul, w.float().numpy().astype(np.float64)
    g = got.float().numpy()  # unaligned: block id covers tokens 16 id + ks % 16 + o
    assert np.isfinite(g).sum() > S * B
    for r in range(S):
        for b in range(cap):
            t = sel[r, b] * B + ks[r] % B + np.arange(B)
            ok = (sel[r, b] >= 0) & (t >= ks[r]) & (t < ke[r])
            assert np.isneginf(g[r, b * B : (b + 1) * B][~ok]).all(), f"sparse row {r} mask"
            if ok.any():
                check_close(f"sparse row {r}", g[r : r + 1, b * B : (b + 1) * B][:, ok],
                            qd[r : r + 1], kd[t[ok]], wd[r : r + 1])
    try:
        dg.fp8_fp4_sparse_mqa_logits(qt, q_sf, kt, k_sf, w, meta[:3], cap, B)
    except ValueError as e:
        assert "get_sparse_mqa_logits_metadata" in str(e) or "truncated" in str(e), e
    else:
        raise AssertionError("no error for a cut metadata")

    # Paged: an MXFP4 cache of page 64 (68 bytes a token: codes then scale words per page).
    page, lengths = 64, [70, 130]
    R = len(lengths)
    cache = np.zeros((3 * R + 1, page, 68), np.uint8)
    table = rng.permutation(3 * R + 1)[: 3 * R].reshape(R, 3).astype(np.int32)
    kb = [fp8_codes((L, D // 2)) for L in lengths]
    kw = [ue8m0((L,)) for L in lengths]
    for r, L in enumerate(lengths):
        for t in range(L):
            p = cache[table[r, t // page]].reshape(-1)
            p[(t % page) * 64 : (t % page + 1) * 64] = kb[r][t]
            p[page * 64 + (t % page) * 4 : page * 64 + (t % page + 1) * 4] = (
                kw[r][0][t : t + 1].numpy().view(np.uint8))
    psel = np.array([[0, 4, -1, -1], [1, 3, 8, 7]], np.int32)
    qb = fp8_codes((R, 1, H, D // 2))
    pq_sf, pq_mul = ue8m0((R, 1, H))
    pw = torch.from_numpy(rng.normal(0, 0.05, (R, H)).astype(np.float32)).to(torch.bfloat16)
    args = (torch.tensor(lengths, dtype=torch.int32), torch.from_numpy(table),
            torch.arange(R, dtype=torch.int32), page, torch.from_numpy(psel), torch.int8, B)
    pmeta = dg.get_paged_sparse_mqa_logits_metadata(*args)
    q4, kc = torch.from_numpy(qb.view(np.int8)), torch.from_numpy(cache.reshape(-1, page, 1, 68))
    got = dg.fp8_fp4_paged_sparse_mqa_logits(q4, pq_sf, kc, pw, pmeta, cap, B)
    twin = ops.get_paged_sparse_mqa_logits_metadata(*args)
    assert torch.equal(got, ops.fp8_fp4_paged_sparse_mqa_logits((q4, pq_sf), kc, pw, twin, cap, B))
    g = got.float().numpy()
    assert np.isfinite(g).sum() == 16 + 6 + 3 * 16 + 2
    qd = (fp4_decode(qb) * pq_mul).reshape(R, H, D)
    for r, L in enumerate(lengths):
        kd = fp4_decode(kb[r]) * kw[r][1]
        for b in range(cap):
            t = psel[r, b] * B + np.arange(B)
            ok = (psel[r, b] >= 0) & (t < L)
            assert np.isneginf(g[r, b * B : (b + 1) * B][~ok]).all(), f"paged sparse row {r}"
            if ok.any():
                check_close(f"paged sparse row {r}", g[r : r + 1, b * B : (b + 1) * B][:, ok],
                            qd[r : r + 1], kd[t[ok]], pw[r : r + 1].float().numpy())


def meta_tensors(dense, paged):
    """On the meta device: the CPU results' shapes, dtypes and strides."""
    qt, kt, st, w, ks, ke = dense
    q, cache, pw, lens, table, meta, max_len = paged
    calls = [
        (dg.fp8_mqa_logits, (qt, kt, st, w, ks, ke)),
        (dg.fp8_fp4_mqa_logits, (qt, None, kt, st, w, ks, ke, True, 0, torch.bfloat16)),
        (dg.fp8_paged_mqa_logits, (q, cache, pw, lens, table, meta, max_len)),
        (dg.fp8_fp4_paged_mqa_logits, (q, None, cache, pw, lens, table, meta, max_len)),
        (dg.get_paged_mqa_logits_metadata, (lens, 64, 4)),
        (dg.get_mqa_logits_metadata, (ks, ke, kt.shape[0], H)),
    ]
    m = lambda a: (  # noqa: E731
        torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
        if isinstance(a, torch.Tensor) else a)
    for op, args in calls:
        real, fake = op(*args), op(*map(m, args))
        assert fake.device.type == "meta", op
        want = (real.shape, real.dtype, real.stride())
        assert (fake.shape, fake.dtype, fake.stride()) == want, op
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in calls[2][1]]
        fake = dg.fp8_paged_mqa_logits(*fakes)
    assert fake.shape == calls[2][0](*calls[2][1]).shape


def errors(dense):
    qt, kt, st, w, ks, ke = dense
    try:
        dg.fp8_mqa_logits(qt, kt, st[:-1], w, ks, ke)
    except ValueError as e:
        assert "kv_sf" in str(e), e
    else:
        raise AssertionError("no error for a short kv_sf")


dense = prefill()
paged = decode()
meta_tensors(dense, paged)
sparse()
errors(dense)
print("ok")
