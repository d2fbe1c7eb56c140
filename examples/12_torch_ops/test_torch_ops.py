#!/usr/bin/env python3
"""The torch op library (torch.ops.mqalogits.*) driven as vLLM drives DeepGEMM's indexer.

Usage: test_torch_ops.py path/to/libmqalogits_torch_ops.so

One DeepSeek-V3.2 decode step (64 index heads, D = 128, page 64, vLLM's 132-byte FP8 + fp32-scale
cache; lengths 0, 1, 1900, 2049, 9000; next_n 1 and 2 with 2-D lengths), an MXFP4 decode
(DeepSeek-V4's cache, page 256) and a chunked prefill (dense, per-row ks / ke), each checked
against float64 numpy of logit[q, t] = sum_h relu(dot(Q[q, h], K[t])) * w[q, h]:
|got - exact| <= 2^-7 |exact| + 2^-14 M, M = sum_h |w_h| sum_i |q_hi k_i|, and the -inf mask
exact. Then static buffers (out=, the schedule in an engine's buffer), int32 / int64 and thread
counts (bitwise equal), and bad arguments (short ValueErrors that name the argument).
"""
import os
import sys

import numpy as np
import torch

torch.ops.load_library(sys.argv[1])
ops = torch.ops.mqalogits
rng = np.random.default_rng(30)
H, D = 64, 128


def e4m3_values():
    v = np.zeros(256)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 7
        if e == 15 and m == 7:
            v[b] = np.nan
        elif e == 0:
            v[b] = sign * m / 8 * 2.0**-6
        else:
            v[b] = sign * (1 + m / 8) * 2.0 ** (e - 7)
    return v


E4M3 = e4m3_values()
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def fp8_codes(shape):
    c = rng.integers(0, 256, size=shape, dtype=np.uint8)
    c[(c & 0x7F) == 0x7F] = 0  # no NaN codes
    return c


def fp4_decode(packed):  # [..., D/2] bytes -> [..., D]: element 2i in the low nibble
    lo, hi = E2M1[packed & 0xF], E2M1[packed >> 4]
    return np.stack([lo, hi], axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def ue8m0_words(shape):  # one int32 per row: four UE8M0 bytes, one per 32 elements
    return rng.integers(118, 132, size=(*shape, 4), dtype=np.uint8)


def mx_scale(scale_bytes):  # [..., 4] bytes -> [..., 128] multipliers
    return np.repeat(2.0 ** (scale_bytes.astype(np.float64) - 127), 32, axis=-1)


def reference(qd, kd, w):
    """qd [R, H, D], kd [N, D], w [R, H] (float64) -> exact [R, N] and the bound's M."""
    dots = np.einsum("rhd,nd->rhn", qd, kd)
    exact = np.einsum("rhn,rh->rn", np.maximum(dots, 0), w)
    m = np.einsum("rhn,rh->rn", np.einsum("rhd,nd->rhn", np.abs(qd), np.abs(kd)), np.abs(w))
    return exact, m


def check_close(what, got, exact, m):
    got = got.astype(np.float64)
    bound = 2.0**-7 * np.abs(exact) + 2.0**-14 * m
    bad = ~(np.abs(got - exact) <= bound)
    assert not bad.any(), f"{what}: {bad.sum()} logits out of bound, first {np.argwhere(bad)[0]}"


def as_np(t):
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


# ---- decode over vLLM's paged cache ----


def build_cache(token_data, token_scale_bytes, page, spare_pages=3):
    """Pages for each request's tokens. token_data[b]: [L, data_bytes] uint8, token_scale_bytes[b]:
    [L, 4] uint8. Returns the cache [pages, page, 1, data + 4] uint8 (each page all data then all
    scales), and per request its page list (in a shuffled order)."""
    data_bytes = token_data[0].shape[1]
    need = [(len(t) + page - 1) // page for t in token_data]
    total = sum(need) + spare_pages
    order = rng.permutation(total)
    data = rng.integers(0, 256, size=(total, page, data_bytes), dtype=np.uint8)  # junk in spares
    scales = rng.integers(0, 256, size=(total, page, 4), dtype=np.uint8)
    pages, at = [], 0
    for b, t in enumerate(token_data):
        mine = order[at : at + need[b]]
        at += need[b]
        pages.append(mine)
        for i in range(len(t)):
            data[mine[i // page], i % page] = t[i]
            scales[mine[i // page], i % page] = token_scale_bytes[b][i]
    flat = np.concatenate([data.reshape(total, -1), scales.reshape(total, -1)], axis=1)
    return torch.from_numpy(flat.reshape(total, page, 1, data_bytes + 4).copy()), pages


def block_table(pages, max_blocks):
    t = np.full((len(pages), max_blocks), 123456789, dtype=np.int32)  # garbage past the context
    for b, p in enumerate(pages):
        t[b, : len(p)] = p
    return torch.from_numpy(t)


def decode_lengths(lengths, next_n):
    """vLLM's 2-D lengths: row j of a request sees L - next_n + 1 + j positions."""
    return np.array([[max(L - next_n + 1 + j, 0) for j in range(next_n)] for L in lengths], np.int32)


def test_decode_fp8(next_n):
    lengths = [0, 1, 1900, 2049, 9000]
    page, max_context_len, B = 64, 9088, len(lengths)
    k_codes = [fp8_codes((L, D)) for L in lengths]
    k_scale = [(rng.uniform(0.5, 2, size=L) * 2.0**-8).astype(np.float32) for L in lengths]
    cache, pages = build_cache(k_codes, [s.view(np.uint8).reshape(-1, 4) for s in k_scale], page)
    table = block_table(pages, max_context_len // page + 2)
    lens = torch.from_numpy(decode_lengths(lengths, next_n))
    q = torch.from_numpy(fp8_codes((B, next_n, H, D)))
    w = torch.from_numpy(rng.normal(0, 0.05, size=(B * next_n, H)).astype(np.float32))
    meta = ops.get_paged_mqa_logits_metadata(lens, page, 8)
    assert meta.dtype == torch.int32 and tuple(meta.shape) == (9, 2)

    # vLLM's call: the legacy name, fp32 logits, clean_logits=False (invalid columns unspecified).
    got = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_context_len)
    clean = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_context_len, True)
    assert got.dtype == torch.float32 and tuple(got.shape) == (B * next_n, max_context_len)
    qd = E4M3[q.numpy()].reshape(B * next_n, H, D)
    for b, L in enumerate(lengths):
        kd = E4M3[k_codes[b]] * k_scale[b][:, None].astype(np.float64)
        rows = slice(b * next_n, (b + 1) * next_n)
        exact, m = reference(qd[rows], kd, w.numpy()[rows].astype(np.float64))
        for j in range(next_n):
            r, n = b * next_n + j, lens[b, j].item()
            check_close(f"decode next_n={next_n} row {r}", got.numpy()[r, :n], exact[j, :n], m[j, :n])
            assert np.array_equal(clean.numpy()[r, :n], got.numpy()[r, :n])
            assert np.isneginf(clean.numpy()[r, n:]).all(), f"row {r}: mask past {n}"
            assert np.isfinite(clean.numpy()[r, :n]).all()

    # DeepGEMM's current name with its (q, None) pair, bf16 logits.
    bf = ops.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens, table, meta, max_context_len,
                                      True, torch.bfloat16)
    assert bf.dtype == torch.bfloat16
    for r in range(B * next_n):
        n = lens.view(-1)[r].item()
        ref = torch.from_numpy(clean.numpy()[r, :n]).to(torch.bfloat16)  # fp32 rounded once more
        diff = (bf[r, :n].float() - ref.float()).abs()
        assert (diff <= 2.0**-7 * ref.float().abs() + 1e-30).all(), f"bf16 row {r}"
        assert torch.isneginf(bf[r, n:].float()).all()

    # int64 lengths and tables (vLLM's CPU path), a schedule kept in the engine's buffer, out=,
    # and two threads: bitwise the same logits.
    sched_buffer = torch.zeros(64, 2, dtype=torch.int32)
    m64 = ops.get_paged_mqa_logits_metadata(lens.long(), page, 8)
    sched_buffer[: m64.shape[0]] = m64
    out = torch.full((B * next_n, max_context_len), 7.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        again = ops.fp8_paged_mqa_logits(q, cache, w, lens.long(), table.long(),
                                         sched_buffer[: m64.shape[0]], max_context_len, True,
                                         out=out)
    finally:
        torch.set_num_threads(threads)
    assert again.data_ptr() == out.data_ptr()
    assert torch.equal(out, clean)
    # Layouts the views take in place: DeepGEMM's page stride padded to a multiple of 512 bytes,
    # weights as a slice of a wider buffer (a row stride of their own).
    pages, page_bytes = cache.shape[0], page * 132
    padded = torch.zeros(pages, 8704, dtype=torch.uint8)
    padded[:, :page_bytes] = cache.view(pages, page_bytes)
    padded = padded.as_strided((pages, page, 1, 132), (8704, 132, 132, 1))
    wide = torch.zeros(B * next_n, H + 16)
    wide[:, :H] = w
    strided = ops.fp8_paged_mqa_logits(q, padded, wide[:, :H], lens, table, meta, max_context_len,
                                       True)
    assert torch.equal(strided, clean)
    if next_n > 1:  # DeepGEMM's 1-D lengths (one per request): row j sees L - next_n + 1 + j
        one_d = torch.tensor(lengths, dtype=torch.int32)
        meta_1d = ops.get_paged_mqa_logits_metadata(one_d, page, 8)
        assert torch.equal(meta_1d, meta)  # the expanded lengths' schedule
        for lens_1d in (one_d, one_d.long()):
            got_1d = ops.fp8_paged_mqa_logits(q, cache, w, lens_1d, table.to(lens_1d.dtype),
                                              meta_1d, max_context_len, True)
            assert torch.equal(got_1d, clean)
    if next_n == 1:  # upstream's varlen `indices` (one request per row here): the same logits
        indices = torch.arange(B, dtype=torch.int32)
        mv = ops.get_paged_mqa_logits_metadata(lens, page, 8, indices)
        varlen = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, mv, max_context_len, True,
                                          indices)
        assert torch.equal(varlen, clean)
    return lens, q, cache, w, table, meta, max_context_len


def test_decode_mxfp4():
    """DeepSeek-V4's MXFP4 cache (page 256, 68 bytes a token), fp32 and bf16 weights."""
    lengths, page, max_context_len, B = [300, 700, 5], 256, 1024, 3
    k_codes = [rng.integers(0, 256, size=(L, D // 2), dtype=np.uint8) for L in lengths]
    k_sf = [ue8m0_words((L,)) for L in lengths]
    cache, pages = build_cache(k_codes, k_sf, page)
    table = block_table(pages, 4).long()
    lens = torch.tensor(lengths).view(B, 1)  # int64, as torch.tensor makes them
    q_bytes = rng.integers(0, 256, size=(B, 1, H, D // 2), dtype=np.uint8)
    q_sf_bytes = ue8m0_words((B, 1, H))
    q = torch.from_numpy(q_bytes.view(np.int8))  # DeepGEMM's packed FP4 dtype
    q_sf = torch.from_numpy(q_sf_bytes.view(np.int32)[..., 0].copy())
    w = torch.from_numpy(rng.normal(0, 0.05, size=(B, H)).astype(np.float32))
    meta = ops.get_paged_mqa_logits_metadata(lens, page, 3)
    qd = (fp4_decode(q_bytes) * mx_scale(q_sf_bytes)).reshape(B, H, D)
    for weights, dtype in ((w, torch.float32), (w.to(torch.bfloat16), torch.bfloat16)):
        got = ops.fp8_fp4_paged_mqa_logits((q, q_sf), cache, weights, lens, table, meta,
                                           max_context_len, True, dtype)
        assert got.dtype == dtype
        wd = weights.float().numpy().astype(np.float64)
        for b, L in enumerate(lengths):
            kd = fp4_decode(k_codes[b]) * mx_scale(k_sf[b])
            exact, m = reference(qd[b : b + 1], kd, wd[b : b + 1])
            check_close(f"mxfp4 decode row {b}", as_np(got)[b, :L], exact[0], m[0])
            assert np.isneginf(as_np(got)[b, L:]).all()
    # Packed codes whose last dimension (an expanded view: no storage) is near INT64_MAX / 2:
    # refused for their shape, the doubling to a head dim never overflowing into 128.
    huge = torch.zeros(1, dtype=torch.int8).expand(2**62 + 64).view(1, 1, 1, 2**62 + 64)
    expect_error(lambda: ops.fp8_fp4_paged_mqa_logits((huge, q_sf[:1, :, :1]), cache, w[:1, :1],
                                                      lens[:1], table[:1], meta, max_context_len),
                 "q has shape", "last dimension must be")


# ---- chunked prefill: dense K gathered per chunk, per-row [ks, ke) ----


def test_prefill():
    # Two requests in one chunk: 300 cached + 40 new tokens, 1000 cached + 30 new.
    reqs = [(300, 40), (1000, 30)]
    ks, ke, start = [], [], 0
    for cached, new in reqs:
        for i in range(new):
            ks.append(start)
            ke.append(start + cached + i + 1)
        start += cached + new
    N, S = start, len(ks)
    k = fp8_codes((N, D))
    k_scale = (rng.uniform(0.5, 2, size=N) * 2.0**-8).astype(np.float32)
    q = fp8_codes((S, H, D))
    w = rng.normal(0, 0.05, size=(S, H)).astype(np.float32)
    kd = E4M3[k] * k_scale[:, None].astype(np.float64)
    exact, m = reference(E4M3[q], kd, w.astype(np.float64))
    qt, kt, st, wt = (torch.from_numpy(a) for a in (q, k, k_scale, w))
    ks32, ke32 = torch.tensor(ks, dtype=torch.int32), torch.tensor(ke, dtype=torch.int32)

    # vLLM's call: full width [S, N], column j = token j.
    got = ops.fp8_mqa_logits(qt, (kt, st), wt, ks32, ke32)
    assert tuple(got.shape) == (S, N) and got.dtype == torch.float32
    cols = np.arange(N)
    for r in range(S):
        valid = (cols >= ks[r]) & (cols < ke[r])
        check_close(f"prefill row {r}", got.numpy()[r, valid], exact[r, valid], m[r, valid])
        assert np.isneginf(got.numpy()[r, ~valid]).all(), f"prefill row {r}: mask"
    # int64 ks / ke (torch.tensor's default) and out=: bitwise the same.
    out = torch.empty(S, N)
    assert ops.fp8_mqa_logits(qt, (kt, st), wt, torch.tensor(ks), torch.tensor(ke),
                              out=out).data_ptr() == out.data_ptr()
    assert torch.equal(out, got)
    # K scales as [N, 1] (as some engines keep them): the same.
    assert torch.equal(ops.fp8_mqa_logits(qt, (kt, st.view(N, 1)), wt, ks32, ke32), got)
    # Compressed columns (max_seqlen_k > 0): column j = token ks + j.
    width = max(e - s for s, e in zip(ks, ke))
    comp = ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks32, ke32, False, width)
    for r in range(S):
        n = ke[r] - ks[r]
        assert torch.equal(comp[r, :n], got[r, ks[r] : ke[r]]), f"compressed row {r}"

    # MXFP8 (scales as DeepGEMM's int32 words), bf16 weights and logits.
    q_sf_bytes, k_sf_bytes = ue8m0_words((S, H)), ue8m0_words((N,))
    q_sf = torch.from_numpy(q_sf_bytes.view(np.int32)[..., 0].copy())
    k_sf = torch.from_numpy(k_sf_bytes.view(np.int32)[..., 0].copy())
    wb = wt.to(torch.bfloat16)
    mx = ops.fp8_fp4_mqa_logits((qt, q_sf), (kt, k_sf), wb, ks32, ke32, True, 0, torch.bfloat16)
    qd = E4M3[q] * mx_scale(q_sf_bytes)
    exact, m = reference(qd, E4M3[k] * mx_scale(k_sf_bytes), wb.float().numpy().astype(np.float64))
    for r in range(S):
        valid = (cols >= ks[r]) & (cols < ke[r])
        check_close(f"mxfp8 prefill row {r}", as_np(mx)[r, valid], exact[r, valid], m[r, valid])
        assert np.isneginf(as_np(mx)[r, ~valid]).all()
    return qt, kt, st, wt, ks32, ke32


# ---- sparse: selected blocks (MX formats, bf16 weights and logits, as upstream) ----


def selections(rows, lo, hi, cap, pad):
    """Per row, sorted distinct blocks in [lo[r], hi[r]) (nb of them, at most cap), padded as vLLM
    pads (repeating the last valid block) or with -1."""
    idx = np.full((rows, cap), -1, dtype=np.int32)
    nbs = []
    for r in range(rows):
        nb = min(cap, max(hi[r] - lo[r], 0))
        chosen = np.sort(rng.choice(np.arange(lo[r], hi[r]), size=nb, replace=False)) if nb else []
        idx[r, :nb] = chosen
        if nb and pad == "repeat":
            idx[r, nb:] = chosen[-1]
        nbs.append(nb)
    return idx, nbs


def test_sparse():
    B, cap, S, N = 16, 8, 6, 700
    ks = rng.integers(0, 200, size=S)
    ke = ks + rng.integers(1, 500, size=S)
    ke[0] = N + 50  # past the KV: clipped to N
    kep = np.minimum(ke, N)
    idx, nbs = selections(S, ks // B, (kep + B - 1) // B, cap, "repeat")
    idx[1, nbs[1]:] = -1  # -1 padding is accepted too
    q, k = fp8_codes((S, H, D)), fp8_codes((N, D))
    q_sf_b, k_sf_b = ue8m0_words((S, H)), ue8m0_words((N,))
    w = torch.from_numpy(rng.normal(0, 0.05, size=(S, H)).astype(np.float32)).to(torch.bfloat16)
    words = lambda b: torch.from_numpy(b.view(np.int32)[..., 0].copy())
    meta = ops.get_sparse_mqa_logits_metadata(torch.from_numpy(ks.astype(np.int32)),
                                              torch.from_numpy(ke.astype(np.int32)), N,
                                              torch.from_numpy(idx), torch.uint8, B)
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    got = ops.fp8_fp4_sparse_mqa_logits((qt, words(q_sf_b)), (kt, words(k_sf_b)), w, meta, cap, B)
    assert got.dtype == torch.bfloat16 and tuple(got.shape) == (S, cap * B)
    exact, m = reference(E4M3[q] * mx_scale(q_sf_b), E4M3[k] * mx_scale(k_sf_b),
                         w.float().numpy().astype(np.float64))
    for r in range(S):
        for b in range(cap):
            tokens = idx[r, b] * B + np.arange(B)
            valid = (b < nbs[r]) & (idx[r, b] >= 0) & (tokens >= ks[r]) & (tokens < kep[r])
            cols = as_np(got)[r, b * B : (b + 1) * B]
            assert np.isneginf(cols[~valid]).all(), f"sparse row {r} block {b}: mask"
            if valid.any():
                t = tokens[valid]
                check_close(f"sparse row {r} block {b}", cols[valid], exact[r, t], m[r, t])
    expect_error(lambda: ops.fp8_fp4_sparse_mqa_logits((qt, words(q_sf_b)), (kt, words(k_sf_b)),
                                                       w, meta, cap + 4, B), "num_max_sparse_blocks")
    # Fused top-k: the K best valid tokens (a block selected twice counts once), fp32 values
    # descending whose bf16 rounding is the logit, nothing better left out; "position" numbers
    # them token - ks.
    K, vals = 6, torch.zeros(S, 6)
    args = ((qt, words(q_sf_b)), (kt, words(k_sf_b)), w, meta, cap, B)
    sel = ops.fp8_fp4_sparse_mqa_logits(*args, topk=K, topk_values_out=vals)
    pos = ops.fp8_fp4_sparse_mqa_logits(*args, topk=K, topk_index="position")
    g = as_np(got)
    for r in range(S):
        finite = np.flatnonzero(np.isfinite(g[r]))
        token_of = lambda c: idx[r, c // B] * B + c % B  # noqa: E731
        c = sel[r].numpy()
        n = int((c >= 0).sum())
        assert n == min(K, len(set(token_of(finite)))) and (c[n:] == -1).all(), f"top-k row {r}"
        assert np.isin(c[:n], finite).all() and len(set(token_of(c[:n]))) == n
        v = vals[r].numpy()[:n]
        assert (np.diff(v) <= 0).all(), f"top-k row {r}: descending"
        assert np.array_equal(torch.from_numpy(v).to(torch.bfloat16).float().numpy(), g[r, c[:n]])
        if n:
            assert (g[r, np.setdiff1d(finite, c[:n])] <= g[r, c[n - 1]]).all(), f"top-k row {r}"
        assert np.array_equal(pos[r].numpy()[:n], token_of(c[:n]) - ks[r]), f"position row {r}"
    expect_error(lambda: ops.fp8_fp4_sparse_mqa_logits(*args, topk=K, topk_index="slot"),
                 "topk_index", "'column' or 'position'")
    expect_error(lambda: ops.fp8_fp4_sparse_mqa_logits((qt, words(q_sf_b)), (kt, words(k_sf_b)),
                                                       w.float(), meta, cap, B), "weights",
                 "torch.bfloat16")


def test_paged_sparse():
    """DeepSeek-V4-style decode: selected 16-token blocks of an MXFP4 cache, page 64."""
    B, cap, page = 16, 8, 64
    lengths = [1, 100, 1000, 0]
    R = len(lengths)
    k_codes = [rng.integers(0, 256, size=(max(L, 1), D // 2), dtype=np.uint8) for L in lengths]
    k_sf = [ue8m0_words((max(L, 1),)) for L in lengths]
    cache, pages = build_cache(k_codes, k_sf, page)
    table = block_table(pages, 16)
    idx, nbs = selections(R, [0] * R, [(L + B - 1) // B for L in lengths], cap, "repeat")
    q_b = rng.integers(0, 256, size=(R, 1, H, D // 2), dtype=np.uint8)
    q_sf_b = ue8m0_words((R, 1, H))
    w = torch.from_numpy(rng.normal(0, 0.05, size=(R, H)).astype(np.float32)).to(torch.bfloat16)
    lens = torch.tensor(lengths, dtype=torch.int32)
    meta = ops.get_paged_sparse_mqa_logits_metadata(lens, table, torch.arange(R, dtype=torch.int32),
                                                    page, torch.from_numpy(idx), torch.int8, B)
    q = torch.from_numpy(q_b.view(np.int8))
    q_sf = torch.from_numpy(q_sf_b.view(np.int32)[..., 0].copy())
    got = ops.fp8_fp4_paged_sparse_mqa_logits((q, q_sf), cache, w, meta, cap, B)
    qd = (fp4_decode(q_b) * mx_scale(q_sf_b)).reshape(R, H, D)
    for r, L in enumerate(lengths):
        kd = fp4_decode(k_codes[r]) * mx_scale(k_sf[r])
        exact, m = reference(qd[r : r + 1], kd, w[r : r + 1].float().numpy().astype(np.float64))
        for b in range(cap):
            pos = idx[r, b] * B + np.arange(B)
            valid = (b < nbs[r]) & (idx[r, b] >= 0) & (pos < L)
            cols = as_np(got)[r, b * B : (b + 1) * B]
            assert np.isneginf(cols[~valid]).all(), f"paged sparse row {r} block {b}: mask"
            if valid.any():
                check_close(f"paged sparse row {r}", cols[valid], exact[0, pos[valid]],
                            m[0, pos[valid]])


# ---- fused top-k (dense, paged, sparse), candidate blocks, float16 weights, head dims 64 and 32 ----


def topk_reference(logits, lens, k):
    """Each row's k best of its first lens[r] columns (fp32 value descending, ties to the lower
    column), -1 padded: (indices, values)."""
    idx = np.full((len(lens), k), -1, dtype=np.int64)
    val = np.full((len(lens), k), -np.inf, dtype=np.float32)
    for r, n in enumerate(lens):
        row = logits[r, :n]
        order = sorted(range(n), key=lambda c: (-row[c], c))[:k]
        idx[r, : len(order)] = order
        val[r, : len(order)] = row[order]
    return idx, val


def test_topk(decode, prefill):
    lens, q, cache, w, table, meta, max_len = decode
    clean = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, True)
    n = lens.view(-1).tolist()
    want, want_v = topk_reference(clean.numpy(), n, 16)
    got = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, topk=16)
    assert got.dtype == torch.int32 and tuple(got.shape) == (len(n), 16)
    assert np.array_equal(got.numpy(), want), "paged top-k columns"
    # The caller's buffers: indices and values written there, the indices returned.
    idx_out, val_out = torch.full((len(n), 16), 7, dtype=torch.int32), torch.zeros(len(n), 16)
    ret = ops.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens, table, meta, max_len,
                                       topk_out=idx_out, topk_values_out=val_out)
    assert ret.data_ptr() == idx_out.data_ptr() and np.array_equal(idx_out.numpy(), want)
    assert np.array_equal(val_out.numpy(), want_v), "paged top-k values"
    # Cache slots: block_table[b, pos // page] * page + pos % page.
    slots = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, topk=16,
                                     topk_index="slot")
    page = cache.shape[1]
    t = table.numpy()
    for r in range(len(n)):
        want_slots = [t[r, c // page] * page + c % page if c >= 0 else -1 for c in want[r]]
        assert slots[r].tolist() == want_slots, f"slot row {r}"
    # Short rows (at most k valid columns): those columns ascending, -1 after.
    short = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, topk=16,
                                     topk_short_rows=True)
    for r, L in enumerate(n):
        if L <= 16:
            assert short[r].tolist() == list(range(L)) + [-1] * (16 - L), f"short row {r}"
        else:
            assert np.array_equal(short[r].numpy(), want[r])
    expect_error(lambda: ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                  topk=4, topk_values=True), "topk_values_out")
    expect_error(lambda: ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                  topk=0), "topk = 0")
    expect_error(lambda: ops.fp8_mqa_logits(prefill[0], (prefill[1], prefill[2]), *prefill[3:],
                                            topk=4, topk_index="slot"), "topk_index")
    expect_error(lambda: ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                  topk=4, out=clean), "out is the logits")

    # Dense: columns of the full-width logits, then sglang's topk_offset added (-1 kept).
    qt, kt, st, wt, ks, ke = prefill
    full = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke)
    # Valid columns [ks, ke) of the full width: rank within them by value, then column.
    fw = full.numpy()
    want = np.full((len(ks), 8), -1, dtype=np.int64)
    for r in range(len(ks)):
        cols = range(ks[r].item(), ke[r].item())
        want[r] = sorted(cols, key=lambda c: (-fw[r, c], c))[:8]
    got = ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks, ke, topk=8)
    assert np.array_equal(got.numpy(), want), "dense top-k columns"
    offsets = torch.arange(len(ks), dtype=torch.int64) * 1000
    shifted = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke, topk=8, topk_offset=offsets)
    assert np.array_equal(shifted.numpy(), want + offsets.numpy()[:, None]), "topk_offset"


def candidates_reference(plog, lens, n, size, order="ascending", padding="minus_one"):
    """Each row's n blocks of `size` positions by block-max logit (positions 0 .. lens[r] - 1 of
    plog[r]; the newest block first of all, ties to the lower block), -1 past them."""
    out = np.full((len(lens), n), -1, np.int32)
    for r, L in enumerate(lens):
        nblk = -(-L // size)
        if nblk == 0:
            continue
        score = np.full(nblk * size, -np.inf)
        score[:L] = plog[r][:L]
        score = score.reshape(nblk, size).max(axis=1)
        score[-1] = np.inf
        sel = [b for b in sorted(range(nblk), key=lambda b: (-score[b], b))[:n]
               if not np.isneginf(score[b])]
        sel = sorted(sel) if order == "ascending" else sel
        out[r, : len(sel)] = sel
        if padding == "repeat_last" and sel:
            out[r, len(sel):] = sel[-1]
    return out


def test_candidates(decode, prefill):
    """candidate_topk_blocks: each row's best blocks of request-local positions, against a numpy
    ranking of the ops' own fp32 logits; beside a top-k (one pass) into candidate_out."""
    lens, q, cache, w, table, meta, max_len = decode
    clean = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, True)
    n = lens.view(-1).tolist()
    got = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                   candidate_topk_blocks=5, candidate_block_size=64)
    assert got.dtype == torch.int32 and tuple(got.shape) == (len(n), 5)
    assert np.array_equal(got.numpy(), candidates_reference(clean.numpy(), n, 5, 64))
    blocks = torch.zeros(len(n), 3, dtype=torch.int32)
    idx = ops.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens, table, meta, max_len, topk=16,
                                       topk_index="slot", candidate_block_size=32,
                                       candidate_order="score", candidate_padding="repeat_last",
                                       candidate_out=blocks)
    assert torch.equal(idx, ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                     topk=16, topk_index="slot"))
    assert np.array_equal(blocks.numpy(), candidates_reference(clean.numpy(), n, 3, 32, "score",
                                                               "repeat_last"))
    m = lambda t: t.to("meta")  # noqa: E731
    fake = ops.fp8_paged_mqa_logits(m(q), m(cache), m(w), m(lens), m(table), m(meta), max_len,
                                    candidate_topk_blocks=5)
    assert fake.device.type == "meta" and (fake.shape, fake.dtype) == (got.shape, got.dtype)
    expect_error(lambda: ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                  topk=4, candidate_topk_blocks=2),
                 "candidate_out")
    expect_error(lambda: ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                  candidate_topk_blocks=2,
                                                  candidate_block_size=3), "candidate_block_size")
    expect_error(lambda: ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len,
                                                  candidate_order="score"), "candidate_topk_blocks")

    # Dense: positions are request-local (column - ks).
    qt, kt, st, wt, ks, ke = prefill
    fw = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke).numpy()
    plog = [fw[r, ks[r].item() : ke[r].item()] for r in range(len(ks))]
    dlens = (ke - ks).tolist()
    for op, qarg in ((ops.fp8_mqa_logits, qt), (ops.fp8_fp4_mqa_logits, (qt, None))):
        got = op(qarg, (kt, st), wt, ks, ke, candidate_topk_blocks=4, candidate_block_size=16,
                 candidate_order="score")
        assert np.array_equal(got.numpy(), candidates_reference(plog, dlens, 4, 16, "score"))
    blocks = torch.zeros(len(ks), 6, dtype=torch.int32)
    top = ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks, ke, topk=8, candidate_out=blocks)
    assert torch.equal(top, ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks, ke, topk=8))
    assert np.array_equal(blocks.numpy(), candidates_reference(plog, dlens, 6, 8))


def test_weights_and_head_dims():
    """float16 weights; head dims 64 (FP8 and MXFP4) and 32 (FP8), dense and paged."""
    S, N, heads = 6, 90, 4
    ks = torch.zeros(S, dtype=torch.int32)
    ke = torch.tensor([N - 5 * i for i in range(S)], dtype=torch.int32)
    valid = np.arange(N)[None, :] < ke.numpy()[:, None]
    w16 = torch.from_numpy(rng.normal(0, 0.05, size=(S, heads)).astype(np.float16))
    wd = w16.numpy().astype(np.float64)
    for d in (128, 64, 32):
        q, k = fp8_codes((S, heads, d)), fp8_codes((N, d))
        scale = (rng.uniform(0.5, 2, size=N) * 2.0**-8).astype(np.float32)
        exact, m = reference(E4M3[q], E4M3[k] * scale[:, None].astype(np.float64), wd)
        got = ops.fp8_mqa_logits(torch.from_numpy(q), (torch.from_numpy(k),
                                 torch.from_numpy(scale)), w16, ks, ke)
        check_close(f"fp16 weights, FP8 head dim {d}", got.numpy()[valid], exact[valid], m[valid])
        assert np.isneginf(got.numpy()[~valid]).all()
        # The same tokens in vLLM's paged cache (page 16), one request per row, next_n 1.
        page = 16
        c, pages = build_cache([k] * S, [scale.view(np.uint8).reshape(-1, 4)] * S, page)
        assert tuple(c.shape[1:]) == (page, 1, d + 4)
        lens = ke.view(S, 1)
        sched = ops.get_paged_mqa_logits_metadata(lens, page, 3)
        paged = ops.fp8_paged_mqa_logits(torch.from_numpy(q).view(S, 1, heads, d), c, w16, lens,
                                         block_table(pages, 8), sched, 128, True)
        check_close(f"paged head dim {d}", paged.numpy()[:, :N][valid], exact[valid], m[valid])
        assert np.isneginf(paged.numpy()[:, :N][~valid]).all()
        if d == 128:  # vLLM's cache is 4-D: a 3-D one is refused as the Python module does
            expect_error(lambda: ops.fp8_paged_mqa_logits(
                torch.from_numpy(q).view(S, 1, heads, d), c.view(c.shape[0], page, d + 4), w16,
                lens, block_table(pages, 8), sched, 128),
                "kv_cache has shape", "expected [num_blocks, block_kv, 1, head_dim_with_sf]")
    # MXFP4 at head dim 64: 32 packed bytes and one int32 of UE8M0 scales a row.
    qb, kb = rng.integers(0, 256, (S, heads, 32), np.uint8), rng.integers(0, 256, (N, 32), np.uint8)
    qsb, ksb = ue8m0_words((S, heads)), ue8m0_words((N,))
    qd = fp4_decode(qb) * mx_scale(qsb)[..., :64]
    kd = fp4_decode(kb) * mx_scale(ksb)[..., :64]
    exact, m = reference(qd, kd, wd)
    words = lambda b: torch.from_numpy(b.view(np.int32)[..., 0].copy())  # noqa: E731
    got = ops.fp8_fp4_mqa_logits((torch.from_numpy(qb.view(np.int8)), words(qsb)),
                                 (torch.from_numpy(kb.view(np.int8)), words(ksb)), w16, ks, ke)
    check_close("MXFP4 head dim 64", got.numpy()[valid], exact[valid], m[valid])


# ---- metadata, and the Meta kernels torch.compile / FakeTensor trace through ----


def test_metadata_and_meta(decode, prefill):
    lens, q, cache, w, table, meta, max_len = decode
    qt, kt, st, wt, ks, ke = prefill
    # Dense: the record of the call it was made for; another call's is refused.
    dm = ops.get_mqa_logits_metadata(ks, ke, kt.shape[0], qt.shape[1])
    full = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke)
    assert torch.equal(ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks, ke, True, 0,
                                              torch.float32, dm), full)
    stale = ops.get_mqa_logits_metadata(ks, ke + 0 * ke.roll(1), kt.shape[0] - 1, qt.shape[1])
    expect_error(lambda: ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks, ke, True, 0,
                                                torch.float32, stale), "regenerate it")
    expect_error(lambda: ops.get_mqa_logits_metadata(ks, ke, 0, 64), "num_kv_tokens = 0")
    # Paged: the schedule written into an engine's buffer.
    buf = torch.full((meta.shape[0], 2), -1, dtype=torch.int32)
    assert ops.get_paged_mqa_logits_metadata(lens, 64, 8, out=buf).data_ptr() == buf.data_ptr()
    assert torch.equal(buf, meta)
    expect_error(lambda: ops.get_paged_mqa_logits_metadata(lens, 64, 8, out=buf[:3]), "out")

    # Meta tensors: the CPU results' shapes, dtypes and strides, nothing computed.
    m = lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")  # noqa
    calls = [
        (ops.fp8_mqa_logits, (qt, (kt, st), wt, ks, ke), {}),
        (ops.fp8_mqa_logits, (qt, (kt, st), wt, ks, ke, False, 1100), {"topk": 8}),
        (ops.fp8_paged_mqa_logits, (q, cache, w, lens, table, meta, max_len), {}),
        (ops.fp8_fp4_paged_mqa_logits, ((q, None), cache, w, lens, table, meta, max_len, True,
                                        torch.bfloat16), {}),
        (ops.fp8_paged_mqa_logits, (q, cache, w, lens, table, meta, max_len), {"topk": 16}),
        (ops.get_paged_mqa_logits_metadata, (lens, 64, 8), {}),
        (ops.get_mqa_logits_metadata, (ks, ke, kt.shape[0], qt.shape[1]), {}),
    ]
    on_meta = lambda a: m(a) if isinstance(a, torch.Tensor) else (  # noqa: E731
        tuple(on_meta(x) for x in a) if isinstance(a, tuple) else a)
    for op, args, kw in calls:
        real, fake = op(*args, **kw), op(*on_meta(args), **kw)
        assert fake.device.type == "meta", op
        assert (fake.shape, fake.dtype, fake.stride()) == (real.shape, real.dtype, real.stride()), (
            op, fake.shape, real.shape, fake.stride(), real.stride())
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
    except ImportError:
        return
    with FakeTensorMode() as mode:
        fake = ops.fp8_paged_mqa_logits(*[mode.from_tensor(a) if isinstance(a, torch.Tensor)
                                          else a for a in calls[2][1]])
        assert tuple(fake.shape) == (q.shape[0] * q.shape[1], max_len)
    if int(torch.__version__.split(".")[0]) >= 2:  # one graph through the op: torch.compile
        def step(q, kv, w, ks, ke):
            return ops.fp8_fp4_mqa_logits([q, None], kv, w * 2, ks, ke, topk=8) + 1

        compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
        assert torch.equal(compiled(qt, [kt, st], wt, ks, ke), step(qt, [kt, st], wt, ks, ke))


# ---- the ops around the kernels: cache inserts, the prefill gather, Q quantisation ----


def test_cache_ops():
    page, blocks, N = 16, 6, 40
    k = torch.from_numpy(rng.normal(0, 1, size=(N, D)).astype(np.float32))
    k[3] = 0  # an all-zero token: amax clamped at 1e-4
    slots = torch.from_numpy(rng.permutation(blocks * page)[:N].astype(np.int64))
    cache = torch.zeros(blocks, page, 1, D + 4, dtype=torch.uint8)
    ops.indexer_k_quant_and_cache(k, cache, slots, 128, "ue8m0")
    flat = cache.view(blocks, page * (D + 4)).numpy()
    blk, row = slots.numpy() // page, slots.numpy() % page
    codes = np.stack([flat[b, r * D : (r + 1) * D] for b, r in zip(blk, row)])
    scale = np.stack([flat[b, page * D + r * 4 : page * D + r * 4 + 4] for b, r in zip(blk, row)])
    scale = scale.copy().view(np.float32)[:, 0].astype(np.float64)
    amax = np.maximum(np.abs(k.numpy()).max(axis=1), 1e-4).astype(np.float64)
    assert (scale >= amax / 448).all() and (scale < 2 * amax / 448).all(), "ue8m0 scale"
    assert (np.log2(scale) == np.round(np.log2(scale))).all(), "a power of two"
    dec = E4M3[codes] * scale[:, None]
    err = np.abs(dec - k.numpy())
    assert (err <= 2.0**-4 * np.abs(k.numpy()) + 2.0**-9 * scale[:, None]).all(), "FP8 insert"
    # The prefill gather: two sequences through the block table, bytes as stored.
    tokens_of = [list(range(0, 25)), list(range(25, N))]
    table = torch.zeros(2, blocks, dtype=torch.int32)
    # Each sequence's tokens laid out in a fresh cache, in order, through its own pages.
    seq_cache = torch.zeros(blocks, page, 1, D + 4, dtype=torch.uint8)
    seq_slots = torch.zeros(N, dtype=torch.int64)
    perm = rng.permutation(blocks)
    table[0, :2], table[1, :1] = torch.from_numpy(perm[:2]), torch.from_numpy(perm[2:3])
    for b, toks in enumerate(tokens_of):
        for i, t in enumerate(toks):
            seq_slots[t] = table[b, i // page].item() * page + i % page
    ops.indexer_k_quant_and_cache(k, seq_cache, seq_slots, 128, None)
    dst_k = torch.full((N + 3, D), 7, dtype=torch.uint8)
    dst_s = torch.full((N + 3, 4), 7, dtype=torch.uint8)
    cu = torch.tensor([0, 25, N], dtype=torch.int32)
    ops.cp_gather_indexer_k_quant_cache(seq_cache, dst_k, dst_s, table, cu)
    sf = seq_cache.view(blocks, -1).numpy()
    for t in range(N):
        b, r = seq_slots[t].item() // page, seq_slots[t].item() % page
        assert np.array_equal(dst_k[t].numpy(), sf[b, r * D : (r + 1) * D]), f"gathered k {t}"
        assert np.array_equal(dst_s[t].numpy(), sf[b, page * D + r * 4 : page * D + r * 4 + 4])
    assert (dst_k[N:] == 7).all() and (dst_s[N:] == 7).all(), "rows past cu_seq_lens[-1] kept"
    # MXFP4 (DeepSeek-V4): inserted, gathered, decoded within half an e2m1 step of each block.
    c4 = torch.zeros(blocks, page, 1, D // 2 + 4, dtype=torch.uint8)
    ops.indexer_k_quant_and_cache_mxfp4(k, c4, seq_slots.int())
    k4, s4 = torch.zeros(N, D // 2, dtype=torch.uint8), torch.zeros(N, 4, dtype=torch.uint8)
    ops.cp_gather_indexer_k_quant_cache(c4, k4, s4, table, cu)
    block_scale = mx_scale(s4.numpy())
    dec = fp4_decode(k4.numpy()) * block_scale
    assert (np.abs(dec - k.numpy()) <= block_scale).all(), "MXFP4 insert"
    expect_error(lambda: ops.indexer_k_quant_and_cache(k, c4, slots, 128, None), "kv_cache has shape")
    expect_error(lambda: ops.indexer_k_quant_and_cache(k, cache, slots, 64, None), "quant_block_size")

    # Q: FP8 codes of each (token, head) row, its scale folded into the weights.
    T, heads = 5, 8
    q = torch.from_numpy(rng.normal(0, 1, size=(T, heads, D)).astype(np.float32))
    w = torch.from_numpy(rng.uniform(0.5, 1, size=(T, heads)).astype(np.float32))
    q8, w8 = ops.indexer_q_quant(q, w, 0.125, 0.5)
    assert q8.dtype == torch.uint8 and tuple(q8.shape) == (T, heads, D)
    s = (w8.numpy() / (w.numpy() * 0.125 * 0.5)).astype(np.float64)  # each row's scale
    amax = np.abs(q.numpy()).max(axis=2).astype(np.float64)
    assert (s >= amax / 448 * (1 - 1e-6)).all() and (s < 2 * amax / 448 * (1 + 1e-6)).all()
    dec = E4M3[q8.numpy()] * s[..., None]
    assert (np.abs(dec - q.numpy()) <= 2.0**-4 * np.abs(q.numpy()) + 2.0**-9 * s[..., None]).all()
    qp, qs, w4 = ops.indexer_q_quant(q, w, 0.125, 0.5, True)
    assert (tuple(qp.shape), tuple(qs.shape), qs.dtype) == ((T, heads, D // 2), (T, heads),
                                                            torch.int32)
    qs_bytes = qs.numpy().view(np.uint8).reshape(T, heads, 4)
    dec = fp4_decode(qp.numpy()) * mx_scale(qs_bytes)
    assert (np.abs(dec - q.numpy()) <= mx_scale(qs_bytes)).all(), "MXFP4 Q"
    assert np.allclose(w4.numpy(), w.numpy() * 0.125 * 0.5, rtol=1e-6)
    expect_error(lambda: ops.indexer_q_quant(q, w, 1.0, 1.0, rule="v5"), "rule = v5")


# ---- bad arguments: ValueError, short, naming the argument ----


def expect_error(fn, *words):
    try:
        fn()
    except ValueError as e:
        msg = str(e).splitlines()[0]
        assert len(msg) < 300, f"message too long ({len(msg)}): {msg[:200]}"
        for word in words:
            assert word in msg, f"{word!r} not in {msg!r}"
        return
    raise AssertionError(f"no error (expected one naming {words})")


def test_errors(decode, prefill):
    lens, q, cache, w, table, meta, max_len = decode
    qt, kt, st, wt, ks, ke = prefill
    paged = ops.fp8_paged_mqa_logits
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt.int(), ks, ke), "weights", "torch.int32")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt[:, :-1], ks, ke), "weights", "num_heads")
    expect_error(lambda: ops.fp8_mqa_logits(qt.float(), (kt, st), wt, ks, ke), "q ", "torch.float32")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st[:-1]), wt, ks, ke), "kv_sf", "shape")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke.long()), "cu_seq_len_k_end")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke, out=torch.empty(3, 3)), "out")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke, True, -1), "max_seqlen_k")
    # Widths whose padded size overflows int64: a ValueError naming the argument, not torch's
    # message about a negative size.
    for width in (2**63 - 1, 2**62):
        expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke, True, width),
                     "max_seqlen_k", "overflows int64")
        expect_error(lambda: paged(q, cache, w, lens, table, meta, width),
                     "max_context_len", "overflows int64")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt,), wt, ks, ke), "kv", "pair")
    expect_error(lambda: ops.fp8_mqa_logits(qt.transpose(0, 1).contiguous().transpose(0, 1),
                                            (kt, st), wt, ks, ke), "q ", "contiguous")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt[:, :64], st), wt, ks, ke),
                 "fp8_mqa_logits: kv head_dim = 64")
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt[:1].expand(wt.shape), ks, ke),
                 "weights", "overlap")
    expect_error(lambda: paged(q, cache, w, lens, table.long(), meta, max_len), "block_table")
    expect_error(lambda: paged(q, cache[..., :-2], w, lens, table, meta, max_len), "kv_cache", "130")
    expect_error(lambda: paged(q, cache, w, lens, table, meta.long(), max_len), "schedule_meta")
    expect_error(lambda: paged(q, cache, w, lens[:-1], table, meta, max_len), "context_lens")
    # Dense rows whose tokens the output cannot hold: past the kv, or past max_seqlen_k columns.
    past = ke.clone()
    past[1] = kt.shape[0] + 5
    expect_error(lambda: ops.fp8_mqa_logits(qt, (kt, st), wt, ks, past),
                 f"cu_seq_len_k_end[1] = {kt.shape[0] + 5} is past the {kt.shape[0]} rows",
                 "truncate_long_contexts")
    # The opt-in keyword keeps the tokens the output holds: the row as if it ended at the kv's end.
    clamped = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, past.clamp(max=kt.shape[0]))
    kept = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, past, truncate_long_contexts=True)
    assert torch.equal(kept, clamped)
    width = int((ke - ks).max())
    expect_error(lambda: ops.fp8_fp4_mqa_logits((qt, None), (kt, st), wt, ks, ke, False, width - 1),
                 f"max_seqlen_k = {width - 1}", "cu_seq_len_k_start[")
    expect_error(lambda: ops.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens, table, meta,
                                                      max_len, False, torch.float16), "logits_dtype")
    # A schedule made for other lengths (or another block_kv) is refused by name.
    other = lens.clone()
    other[-1] = 100
    expect_error(lambda: paged(q, cache, w, lens, table, ops.get_paged_mqa_logits_metadata(
        other, 64, 8), max_len), "fp8_paged_mqa_logits: schedule", "stale")
    expect_error(lambda: ops.get_paged_mqa_logits_metadata(lens, 64, 0), "num_sms")
    # DeepGEMM's get_num_sms / set_num_sms: the partition count, by default torch's thread count.
    assert ops.get_num_sms() == torch.get_num_threads()
    ops.set_num_sms(5)
    assert ops.get_num_sms() == 5
    assert tuple(ops.get_paged_mqa_logits_metadata(lens, 64, ops.get_num_sms()).shape) == (6, 2)
    expect_error(lambda: ops.set_num_sms(0), "set_num_sms: num_sms = 0 must be in [1, 4096]")
    assert ops.get_num_sms() == 5
    expect_error(lambda: ops.get_paged_mqa_logits_metadata(lens.float(), 64, 8), "context_lens")
    # A block-table slot the context reads that is not a page: the library's own check.
    bad = table.clone()
    bad[-1, 3] = -5
    expect_error(lambda: paged(q, cache, w, lens, bad, meta, max_len), "block_table", "-5")


def test_readme_snippet(decode):
    """README.md's ```python block (section "Torch ops for C++ engines"), run as written."""
    lens, q, cache, w, table, meta, max_len = decode
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("\n## Torch ops for C++ engines\n"):]
    block = section[section.index("```python\n") + 10:]
    block = block[: block.index("```")]
    logits_buffer = torch.full((q.shape[0] * q.shape[1], max_len), 7.0)
    env = dict(torch=torch, seq_lens=lens, num_sms=8, q_fp8=q, kv_cache=cache, weights=w,
               block_table=table, max_model_len=max_len, logits_buffer=logits_buffer,
               sched_buffer=torch.full((64, 2), -1, dtype=torch.int32))
    exec(block, env)
    assert env["logits"].data_ptr() == logits_buffer.data_ptr()
    want = ops.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len)
    for r in range(want.shape[0]):
        n = lens.view(-1)[r].item()
        assert torch.equal(logits_buffer[r, :n], want[r, :n]), f"README snippet row {r}"


def wait_with_deadline(pid, seconds=60):
    """The child's exit code, or "hung" after killing it when it outlives the deadline."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"


def test_fork(prefill):
    """After calls on the op library's pool, a forked child exits normally (its pool is not
    joined or waited for) and calls the ops again on a fresh pool."""
    qt, kt, st, wt, ks, ke = prefill
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    want = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke)
    for calls in (False, True, False, True):
        pid = os.fork()
        if pid == 0:
            code = 0
            if calls:
                torch.set_num_threads(2)
                # Compared in numpy: torch's own intra-op pool (OpenMP in pip's torch 2.x) hangs
                # in a child forked after the parent used it, whatever the ops do.
                got = ops.fp8_mqa_logits(qt, (kt, st), wt, ks, ke)
                code = 0 if np.array_equal(got.numpy(), want.numpy()) else 3
            sys.stdout.flush()
            if code:
                os._exit(code)
            sys.exit(0)  # a normal exit: static destructors run
        status = wait_with_deadline(pid)
        assert status == 0, f"forked child ({'calling' if calls else 'idle'}): {status}"
    torch.set_num_threads(threads)


decode = test_decode_fp8(1)
test_readme_snippet(decode)
test_decode_fp8(2)
test_decode_mxfp4()
prefill = test_prefill()
test_errors(decode, prefill)
test_fork(prefill)
test_sparse()
test_paged_sparse()
test_topk(decode, prefill)
test_candidates(decode, prefill)
test_weights_and_head_dims()
test_metadata_and_meta(decode, prefill)
test_cache_ops()
print("torch ops: decode (next_n 1, 2; FP8 and MXFP4), prefill, sparse, paged sparse, static "
      "buffers, errors, fork, fused top-k (dense, paged, sparse), candidate blocks, float16 weights, head dims 64 / 32, metadata, meta kernels, cache and Q ops: ok")
