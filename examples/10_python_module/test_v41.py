"""DeepSeek V4.1's two-level selection through `mqalogits`: the candidate-source layer's
candidate blocks and top-k (one call of the dense or paged kernel), and consumer layers that
reuse one sparse metadata over those blocks (sparse and paged-sparse kernels, top-k by position
and by cache slot), checked against a float64 numpy transcription written here.

The transcription decodes FP8 e4m3 / FP4 e2m1 codes and UE8M0 scales with test_mqalogits.py's
decoders (tables built from the bit layouts, not the module's), computes the logits in float64,
and the candidate blocks as vLLM's select_candidate_blocks does: block max (NaN propagates), the
newest block pinned +inf, the N best with ties to the lower id (NaN above +inf), -inf -> -1, then
the order and the padding. Selections are compared exactly against the transcription applied to
the module's own fp32 logits (the ranking is the fp32 logit's), and the logits and the consumer
layers' selections against float64 within a rounding tolerance.

Request-local block l (positions [8 l, 8 l + 8)) of a row whose keys start at token ks is token
ks + 8 l + o. Under the sparse metadata's unaligned mapping (use_unaligned_ks=True) entry id
covers tokens 8 id + ks % 8 + o, so id = l + ks // 8 maps block l exactly for any ks; the
aligned mapping (tokens 8 id + o) does only where ks % 8 == 0. The paged-sparse kernel's context
positions are request-local already: the ids go in as they are.

Run: PYTHONPATH=<build>/examples/10_python_module python3 test_v41.py
"""

import unittest

import numpy as np

import mqalogits as ml
from test_mqalogits import (D, cache_keys, decode, expected_topk, make_cache, make_kv, make_q,
                            rand_weights, ref_dense, ref_paged, weights_f64)

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(41)


# ---- the transcription ----

def ref_candidates(plog, lens, N, B, order="ascending", padding="minus_one"):
    """Candidate blocks [rows, N] int32 of per-position logits plog [rows, P] (row r's valid
    positions are 0 .. lens[r] - 1)."""
    rows = plog.shape[0]
    out = np.full((rows, N), -1, np.int32)
    for r in range(rows):
        L = int(lens[r])
        nblk = -(-L // B)
        if nblk == 0:
            continue
        padded = np.full(nblk * B, -np.inf)
        padded[:L] = plog[r, :L]
        score = padded.reshape(nblk, B).max(axis=1)  # NaN propagates
        score[nblk - 1] = np.inf  # the newest block
        ids = np.arange(nblk)
        nan = np.isnan(score)
        rank = np.lexsort((ids, np.where(nan, 0.0, -score), ~nan))  # NaN first, then by score
        sel = rank[:N]
        sel = sel[~np.isneginf(score[sel])]
        if order == "ascending":
            sel = np.sort(sel)
        out[r, :len(sel)] = sel
        if padding == "repeat_last" and len(sel):
            out[r, len(sel):] = sel[-1]
    return out


def positions_of(blocks, lens, B):
    """Per row, the valid request-local positions the row's candidate blocks cover."""
    res = []
    for r in range(blocks.shape[0]):
        ids = np.unique(blocks[r][blocks[r] >= 0])
        p = (ids[:, None] * B + np.arange(B)).ravel()
        res.append(p[p < lens[r]])
    return res


def short_rows(idx, valid_cols, k):
    """The dense / paged top-k with short rows: a row with at most k valid columns is its valid
    columns ascending, -1 after."""
    out = idx.copy()
    for r in range(idx.shape[0]):
        cols = np.nonzero(valid_cols[r])[0]
        if len(cols) <= k:
            out[r] = -1
            out[r, :len(cols)] = cols
    return out


class V41(unittest.TestCase):
    def assert_consumer(self, pos, exact, mag, cover, k):
        """pos [rows, k] request-local positions of a consumer layer's top-k; exact / mag [rows,
        P] its float64 logits by position; cover: the positions its candidate blocks cover.
        The selection is a top-k of the covered positions within rounding."""
        for r in range(pos.shape[0]):
            n = min(k, len(cover[r]))
            sel = pos[r, :n]
            np.testing.assert_array_equal(pos[r, n:], -1)
            self.assertEqual(len(set(sel.tolist())), n)
            self.assertTrue(np.isin(sel, cover[r]).all(), "a position outside the blocks")
            if n == 0:
                continue
            tol = 2.0 ** -10 * mag[r, cover[r]].max() + 1e-12
            v = exact[r, sel]
            self.assertTrue(np.all(v[:-1] >= v[1:] - tol), "not descending")
            rest = np.setdiff1d(cover[r], sel)
            if len(rest):
                self.assertLessEqual(exact[r, rest].max(), v.min() + tol)

    # ---- the candidate blocks alone, against the transcription ----

    def test_dense_candidates_every_order_and_padding(self):
        S, H, Nk = 40, 8, 600
        for fmt in ("mxfp8", "mxfp4", "per_token"):
            q, qd = make_q((S, H), fmt)
            (kc, ksf), kd = make_kv(Nk, fmt)
            if fmt == "mxfp8":
                kc[97, 5] = 0x7F  # an e4m3 NaN: its block's max is NaN, selected first
                kd = decode(kc, ksf)
            w = rand_weights(S, H, fmt == "mxfp4")
            ks = RNG.integers(0, 200, S).astype(np.int32)
            ke = np.minimum(ks + RNG.integers(0, 420, S), Nk).astype(np.int32)  # rows end by Nk
            ke[3] = ks[3]  # an empty row: all -1
            exact, mag = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
            logits = ml.fp8_fp4_mqa_logits(q, (kc, ksf), w, ks, ke)
            ok = np.isfinite(exact)
            tol = 2.0 ** -7 * np.abs(exact[ok]) + 2.0 ** -14 * mag[ok]
            self.assertTrue(np.all(np.abs(logits[ok] - exact[ok]) <= tol), fmt)
            if fmt == "mxfp8":
                self.assertTrue(np.isnan(logits).any(), "the NaN key gives NaN logits")
            L = np.minimum(ke, Nk) - ks
            plog = np.stack([np.concatenate([logits[r, ks[r]:ks[r] + L[r]],
                                             np.full(Nk - L[r], -np.inf)]) for r in range(S)])
            for B, N in ((8, 5), (16, 64), (1, 7)):
                for order in ("ascending", "score"):
                    for padding in ("minus_one", "repeat_last"):
                        with self.subTest(fmt=fmt, B=B, N=N, order=order, padding=padding):
                            got = ml.fp8_fp4_mqa_logits(
                                q, (kc, ksf), w, ks, ke, candidate_topk_blocks=N,
                                candidate_block_size=B, candidate_order=order,
                                candidate_padding=padding, num_threads=2)
                            self.assertEqual((got.dtype, got.shape), (np.int32, (S, N)))
                            np.testing.assert_array_equal(
                                got, ref_candidates(plog, L, N, B, order, padding))
            # Where the float64 block maxima separate the N-th block from the next, the
            # selection is the float64 one too.
            N, B = 6, 8
            got = ml.fp8_fp4_mqa_logits(q, (kc, ksf), w, ks, ke, candidate_topk_blocks=N)
            plog64 = np.stack([np.concatenate([exact[r, ks[r]:ks[r] + L[r]],
                                               np.full(Nk - L[r], -np.inf)]) for r in range(S)])
            want = ref_candidates(plog64, L, N, B)
            for r in range(S):
                nblk = -(-L[r] // B)
                if nblk <= N or np.isnan(plog[r, :L[r]]).any():
                    continue
                sc = np.sort(np.pad(plog64[r, :L[r]], (0, nblk * B - L[r]),
                                    constant_values=-np.inf).reshape(nblk, B).max(1)[:-1])[::-1]
                if sc[N - 2] - sc[N - 1] > 2.0 ** -6 * mag[r].max():
                    np.testing.assert_array_equal(got[r], want[r])

    def test_paged_candidates_short_rows_and_legacy(self):
        Bq, H, page_kv, pages, max_blocks = 3, 8, 64, 40, 12
        for next_n in (1, 2):
            cache, _ = make_cache(pages, page_kv, "mxfp8")
            keys = cache_keys(cache, False, True)
            lens = np.array([[700], [33], [64 * 12]], np.int32)
            lens = (lens - (next_n - 1) + np.arange(next_n)).astype(np.int32)
            table = RNG.permutation(pages)[:Bq * max_blocks].reshape(Bq, max_blocks)
            table = table.astype(np.int32)
            q, qd = make_q((Bq, next_n, H), "mxfp8")
            w = rand_weights(Bq * next_n, H, False)
            mcl = max_blocks * page_kv
            meta = ml.get_paged_mqa_logits_metadata(lens, page_kv, 4)
            logits = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens, table, meta, mcl,
                                                 clean_logits=True)
            exact, _ = ref_paged(qd.reshape(-1, H, D), keys, weights_f64(w), lens, table, mcl)
            valid = ~np.isneginf(exact)
            L = lens.reshape(-1)
            for B, N, order, padding in ((8, 64, "ascending", "minus_one"),
                                         (64, 3, "score", "repeat_last"),
                                         (16, 10, "ascending", "repeat_last")):
                with self.subTest(next_n=next_n, B=B, N=N):
                    want = ref_candidates(logits, L, N, B, order, padding)
                    got = ml.fp8_fp4_paged_mqa_logits(
                        q, cache, w, lens, table, meta, mcl, candidate_topk_blocks=N,
                        candidate_block_size=B, candidate_order=order, candidate_padding=padding)
                    np.testing.assert_array_equal(got, want)
            # The short rows: row 1 (33 positions) is 0..32 ascending.
            k = 48
            idx, _ = expected_topk(logits, valid, k)
            got = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens, table, meta, mcl, topk=k,
                                              topk_short_rows=True)
            np.testing.assert_array_equal(got, short_rows(idx, valid, k))
            self.assertEqual(got[next_n, :3].tolist(), [0, 1, 2])
            # With the candidate blocks, in one call: (indices, blocks); slots through the table.
            want_blocks = ref_candidates(logits, L, 16, 8)
            i2, b2 = ml.fp8_fp4_paged_mqa_logits(q, cache, w, lens, table, meta, mcl, topk=k,
                                                 topk_short_rows=True, topk_index="slot",
                                                 candidate_topk_blocks=16)
            pos = short_rows(idx, valid, k)
            req = np.repeat(np.arange(Bq), next_n)[:, None]
            slots = np.where(pos < 0, -1, table[req, np.maximum(pos, 0) // page_kv] * page_kv +
                             np.maximum(pos, 0) % page_kv)
            np.testing.assert_array_equal(i2, slots)
            np.testing.assert_array_equal(b2, want_blocks)
            # The legacy name takes them too (per-token FP8).
            pcache, _ = make_cache(pages, page_kv, "per_token")
            (pq, _), _ = make_q((Bq, next_n, H), "per_token")
            plog = ml.fp8_paged_mqa_logits(pq, pcache, w, lens, table, meta, mcl,
                                           clean_logits=True)
            got = ml.fp8_paged_mqa_logits(pq, pcache, w, lens, table, meta, mcl,
                                          candidate_topk_blocks=16)
            np.testing.assert_array_equal(got, ref_candidates(plog, L, 16, 8))

    def test_dense_topk_values_and_candidates_one_call(self):
        S, H, Nk, k, N = 24, 8, 500, 20, 12
        q, qd = make_q((S, H), "mxfp8")
        kv, kd = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks = RNG.integers(0, 100, S).astype(np.int32)
        ke = (ks + RNG.integers(1, 400, S)).astype(np.int32)
        ke[0] = ks[0] + 5  # a short row
        exact, _ = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
        valid = ~np.isneginf(exact)
        logits = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke)
        L = np.minimum(ke, Nk) - ks
        plog = np.stack([np.concatenate([logits[r, ks[r]:ks[r] + L[r]],
                                         np.full(Nk - L[r], -np.inf)]) for r in range(S)])
        want_i, want_v = expected_topk(logits, valid, k)
        want_b = ref_candidates(plog, L, N, 8)
        i, v, b = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, topk=k, topk_values=True,
                                        candidate_topk_blocks=N)
        np.testing.assert_array_equal(i, want_i)
        np.testing.assert_array_equal(v, want_v)
        np.testing.assert_array_equal(b, want_b)
        # The caller's buffers, filled and returned as given; N from candidate_out alone.
        ti = np.full((S, k), -7, np.int32)
        tb = np.full((S, N), -7, np.int32)
        ri, rb = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, topk_out=ti, candidate_out=tb)
        self.assertIs(ri, ti)
        self.assertIs(rb, tb)
        np.testing.assert_array_equal(ti, want_i)
        np.testing.assert_array_equal(tb, want_b)
        # A slice of a larger buffer (rows further apart).
        big = np.full((S, N + 9), -7, np.int32)
        out = big[:, 2:2 + N]
        self.assertIs(ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, candidate_out=out), out)
        np.testing.assert_array_equal(out, want_b)
        self.assertTrue((big[:, :2] == -7).all() and (big[:, 2 + N:] == -7).all())
        # Short rows and the offsets beside the blocks; the legacy name.
        offs = np.arange(S, dtype=np.int32) * 1000
        i, b = ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, topk=k, topk_short_rows=True,
                                     topk_offset=offs, candidate_topk_blocks=N)
        sr = short_rows(want_i, valid, k)
        np.testing.assert_array_equal(i, np.where(sr < 0, -1, sr + offs[:, None]))
        np.testing.assert_array_equal(b, want_b)
        (pq, _), _ = make_q((S, H), "per_token")
        pkv, _ = make_kv(Nk, "per_token")
        plg = ml.fp8_mqa_logits(pq, pkv, w, ks, ke)
        pl = np.stack([np.concatenate([plg[r, ks[r]:ks[r] + L[r]],
                                       np.full(Nk - L[r], -np.inf)]) for r in range(S)])
        np.testing.assert_array_equal(
            ml.fp8_mqa_logits(pq, pkv, w, ks, ke, candidate_topk_blocks=N, candidate_order="score"),
            ref_candidates(pl, L, N, 8, "score"))

    # ---- the V4.1 layer loop ----

    def prefill_loop(self, conv, back):
        """Causal prefill of two requests: the source layer on the dense kernel (top-k and
        candidate blocks in one call), two consumer layers on the sparse kernel over one
        metadata, static buffers reused. conv turns an input array into what the module is
        given (numpy or torch), back a result into numpy. Returns every selection."""
        H, B, N, k, kc = 8, 8, 64, 32, 48
        reqs = [(0, 700), (700, 420)]  # (first token, length): the second starts unaligned
        T = sum(n for _, n in reqs)
        ks = np.concatenate([np.full(n, s) for s, n in reqs]).astype(np.int32)
        ke = np.concatenate([s + np.arange(1, n + 1) for s, n in reqs]).astype(np.int32)
        layers = []
        for _ in range(3):
            (qc, qs), qd = make_q((T, H), "mxfp8")
            (kc_, ksf), kd = make_kv(T, "mxfp8")
            w = rand_weights(T, H, False)
            layers.append(((qc, qs), qd, (kc_, ksf), kd, w))
        topk_buf = conv(np.full((T, k), -9, np.int32))
        cand_buf = conv(np.full((T, N), -9, np.int32))
        cons_buf = conv(np.full((T, kc), -9, np.int32))
        col_buf = conv(np.full((T, kc), -9, np.int32))
        cv = lambda t: tuple(conv(x) for x in t)  # noqa: E731
        (q0, _, kv0, _, w0) = layers[0]
        ks, ke = ks.astype(np.int64), ke.astype(np.int64)  # torch's default index type, narrowed
        r = ml.fp8_fp4_mqa_logits(cv(q0), cv(kv0), conv(w0), conv(ks), conv(ke), topk=k,
                                  candidate_topk_blocks=N, candidate_block_size=B,
                                  topk_out=topk_buf, candidate_out=cand_buf)
        self.assertIs(r[0], topk_buf)
        self.assertIs(r[1], cand_buf)
        src_topk, blocks = back(topk_buf).copy(), back(cand_buf).copy()
        rl = back(ml.fp8_fp4_mqa_logits(cv(q0), cv(kv0), conv(w0), conv(ks), conv(ke),
                                        candidate_topk_blocks=N,
                                        candidate_padding="repeat_last")).copy()
        src_logits = back(ml.fp8_fp4_mqa_logits(cv(q0), cv(kv0), conv(w0), conv(ks),
                                                conv(ke))).copy()
        out = dict(src_topk=src_topk, blocks=blocks, blocks_rl=rl, src_logits=src_logits,
                   consumers=[])
        metas = {}
        for name, bl in (("minus_one", blocks), ("repeat_last", rl)):
            ids = np.where(bl >= 0, bl + ks[:, None] // B, -1).astype(np.int32)
            metas[name] = ml.get_sparse_mqa_logits_metadata(conv(ks), conv(ke), T, conv(ids),
                                                            np.uint8, B, use_unaligned_ks=True)
        for q, _, kv, _, w in layers[1:]:
            got = {}
            for name, meta in metas.items():
                res = ml.fp8_fp4_sparse_mqa_logits(cv(q), cv(kv), conv(w), meta, N, B,
                                                   use_unaligned_ks=True, topk=kc,
                                                   topk_index="position", topk_out=cons_buf)
                self.assertIs(res, cons_buf)
                got[name] = back(cons_buf).copy()
            ml.fp8_fp4_sparse_mqa_logits(cv(q), cv(kv), conv(w), metas["minus_one"], N, B,
                                         use_unaligned_ks=True, topk=kc, topk_out=col_buf)
            got["column"] = back(col_buf).copy()
            out["consumers"].append(got)
        return dict(out, ks=ks, ke=ke, layers=layers, T=T, H=H, B=B, N=N, k=k, kc=kc)

    def check_prefill(self, o):
        ks, ke, T, B, N, k, kc = o["ks"], o["ke"], o["T"], o["B"], o["N"], o["k"], o["kc"]
        L = ke - ks
        _, qd0, _, kd0, w0 = o["layers"][0]
        exact, mag = ref_dense(qd0, kd0, weights_f64(w0), ks, ke, 0)
        logits = o["src_logits"]
        ok = np.isfinite(exact)
        self.assertTrue(np.all(np.abs(logits[ok] - exact[ok]) <=
                               2.0 ** -7 * np.abs(exact[ok]) + 2.0 ** -14 * mag[ok]))
        np.testing.assert_array_equal(o["src_topk"], expected_topk(logits, ok, k)[0])
        plog = np.stack([np.concatenate([logits[r, ks[r]:ks[r] + L[r]],
                                         np.full(T - L[r], -np.inf)]) for r in range(T)])
        np.testing.assert_array_equal(o["blocks"], ref_candidates(plog, L, N, B))
        np.testing.assert_array_equal(o["blocks_rl"],
                                      ref_candidates(plog, L, N, B, padding="repeat_last"))
        self.assertTrue((o["blocks"][:, -1] >= 0).any(), "some row selects N blocks of more")
        self.assertTrue((L > N * B).any(), "some row has more blocks than N")
        cover = positions_of(o["blocks"], L, B)
        for (_, qd, _, kd, w), got in zip(o["layers"][1:], o["consumers"]):
            np.testing.assert_array_equal(got["repeat_last"], got["minus_one"])
            # Columns of the metadata -> request-local positions, transcribed.
            c = got["column"]
            blk = np.take_along_axis(o["blocks"], np.maximum(c, 0) // B, axis=1)
            np.testing.assert_array_equal(got["minus_one"],
                                          np.where(c < 0, -1, blk * B + np.maximum(c, 0) % B))
            ex, mg = ref_dense(qd, kd, weights_f64(w), ks, ke, 0)
            pe = np.stack([np.concatenate([ex[r, ks[r]:ks[r] + L[r]], np.zeros(T - L[r])])
                           for r in range(T)])
            pm = np.stack([np.concatenate([mg[r, ks[r]:ks[r] + L[r]], np.zeros(T - L[r])])
                           for r in range(T)])
            self.assert_consumer(got["minus_one"], pe, pm, cover, kc)

    def decode_loop(self, conv, back, next_n):
        """Decode on the paged kernel (the source layer: slots and candidate blocks in one
        call) and two consumer layers on the paged-sparse kernel over one metadata, by position
        and by slot, static buffers reused."""
        Bq, H, page_kv, pages, max_blocks, B, N, k, kc = 3, 8, 64, 64, 20, 8, 64, 40, 48
        ctx = np.array([1200, 90, 777])
        lens = (ctx[:, None] - (next_n - 1) + np.arange(next_n)).astype(np.int32)
        table = RNG.permutation(pages)[:Bq * max_blocks].reshape(Bq, max_blocks).astype(np.int32)
        rows = Bq * next_n
        layers = []
        for _ in range(3):
            cache, _ = make_cache(pages, page_kv, "mxfp8")
            (qc, qs), qd = make_q((Bq, next_n, H), "mxfp8")
            w = rand_weights(rows, H, True)
            layers.append((cache, (qc, qs), qd, w))
        mcl = max_blocks * page_kv
        sched = ml.get_paged_mqa_logits_metadata(conv(lens), page_kv, 4)
        topk_buf = conv(np.full((rows, k), -9, np.int32))
        cand_buf = conv(np.full((rows, N), -9, np.int32))
        pos_buf = conv(np.full((rows, kc), -9, np.int32))
        slot_buf = conv(np.full((rows, kc), -9, np.int32))
        col_buf = conv(np.full((rows, kc), -9, np.int32))
        cv = lambda t: tuple(conv(x) for x in t)  # noqa: E731
        cache0, q0, _, w0 = layers[0]
        r = ml.fp8_fp4_paged_mqa_logits(cv(q0), conv(cache0), conv(w0), conv(lens), conv(table),
                                        sched, mcl, topk=k, topk_index="slot",
                                        candidate_topk_blocks=N, candidate_block_size=B,
                                        topk_out=topk_buf, candidate_out=cand_buf)
        self.assertIs(r[0], topk_buf)
        self.assertIs(r[1], cand_buf)
        out = dict(src_slots=back(topk_buf).copy(), blocks=back(cand_buf).copy(), consumers=[])
        out["src_logits"] = back(ml.fp8_fp4_paged_mqa_logits(
            cv(q0), conv(cache0), conv(w0), conv(lens), conv(table), sched, mcl,
            clean_logits=True)).copy()
        out["blocks_rl"] = back(ml.fp8_fp4_paged_mqa_logits(
            cv(q0), conv(cache0), conv(w0), conv(lens), conv(table), sched, mcl,
            candidate_topk_blocks=N, candidate_padding="repeat_last")).copy()
        # One row per query row: its request's block-table row, indices grouping the rows.
        req = np.repeat(np.arange(Bq), next_n)
        metas = {name: ml.get_paged_sparse_mqa_logits_metadata(
            conv(lens.reshape(-1).astype(np.int64)), conv(table[req]), conv(req), page_kv,
            conv(bl),
            "torch.float8_e4m3fn", B) for name, bl in (("minus_one", out["blocks"]),
                                                       ("repeat_last", out["blocks_rl"]))}
        for cache, (qc, qs), _, w in layers[1:]:
            q = (conv(qc.reshape(rows, 1, H, D)), conv(qs.reshape(rows, 1, H)))
            got = {}
            for name, meta in metas.items():
                ml.fp8_fp4_paged_sparse_mqa_logits(q, conv(cache), conv(w), meta, N, B, topk=kc,
                                                   topk_index="position", topk_out=pos_buf)
                got[name] = back(pos_buf).copy()
            ml.fp8_fp4_paged_sparse_mqa_logits(q, conv(cache), conv(w), metas["minus_one"], N, B,
                                               topk=kc, topk_index="slot", topk_out=slot_buf)
            ml.fp8_fp4_paged_sparse_mqa_logits(q, conv(cache), conv(w), metas["minus_one"], N, B,
                                               topk=kc, topk_out=col_buf)
            got["slot"], got["column"] = back(slot_buf).copy(), back(col_buf).copy()
            out["consumers"].append(got)
        return dict(out, lens=lens, table=table, layers=layers, rows=rows, H=H, B=B, N=N, k=k,
                    kc=kc, page_kv=page_kv, mcl=mcl, req=req)

    def check_decode(self, o):
        lens, table, H, B, N, k, kc = o["lens"], o["table"], o["H"], o["B"], o["N"], o["k"], o["kc"]
        page_kv, mcl, req = o["page_kv"], o["mcl"], o["req"]
        L = lens.reshape(-1)

        def slots_of(pos):
            p = np.maximum(pos, 0)
            return np.where(pos < 0, -1, table[req[:, None], p // page_kv] * page_kv +
                            p % page_kv)

        cache0, _, qd0, w0 = o["layers"][0]
        exact, mag = ref_paged(qd0.reshape(-1, H, D), cache_keys(cache0, False, True),
                               weights_f64(w0), lens, table, mcl)
        logits = o["src_logits"]
        ok = np.isfinite(exact)
        self.assertTrue(np.all(np.abs(logits[ok] - exact[ok]) <=
                               2.0 ** -7 * np.abs(exact[ok]) + 2.0 ** -14 * mag[ok]))
        np.testing.assert_array_equal(o["src_slots"], slots_of(expected_topk(logits, ok, k)[0]))
        np.testing.assert_array_equal(o["blocks"], ref_candidates(logits, L, N, B))
        np.testing.assert_array_equal(o["blocks_rl"],
                                      ref_candidates(logits, L, N, B, padding="repeat_last"))
        cover = positions_of(o["blocks"], L, B)
        for (cache, _, qd, w), got in zip(o["layers"][1:], o["consumers"]):
            np.testing.assert_array_equal(got["repeat_last"], got["minus_one"])
            c = got["column"]
            blk = np.take_along_axis(o["blocks"], np.maximum(c, 0) // B, axis=1)
            pos = np.where(c < 0, -1, blk * B + np.maximum(c, 0) % B)
            np.testing.assert_array_equal(got["minus_one"], pos)
            np.testing.assert_array_equal(got["slot"], slots_of(pos))
            ex, mg = ref_paged(qd.reshape(-1, H, D), cache_keys(cache, False, True),
                               weights_f64(w), lens, table, mcl)
            self.assert_consumer(pos, np.where(np.isfinite(ex), ex, 0), mg, cover, kc)

    def test_prefill_loop_numpy(self):
        o = self.prefill_loop(lambda a: a, lambda a: a)
        self.check_prefill(o)

    def test_decode_loop_numpy(self):
        for next_n in (1, 2):
            with self.subTest(next_n=next_n):
                self.check_decode(self.decode_loop(lambda a: a, lambda a: a, next_n))

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_loops_with_torch(self):
        def conv(a):
            if isinstance(a, np.ndarray):
                if a.dtype == np.uint16:
                    return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
                return torch.from_numpy(a)
            return a

        def back(t):
            self.assertIsInstance(t, torch.Tensor)
            return t.numpy()

        self.check_prefill(self.prefill_loop(conv, back))
        for next_n in (1, 2):
            with self.subTest(next_n=next_n):
                self.check_decode(self.decode_loop(conv, back, next_n))

    # ---- the checks on the new arguments ----

    def test_refused_calls_name_the_argument_and_write_nothing(self):
        S, H, Nk = 6, 4, 128
        q, _ = make_q((S, H), "mxfp8")
        kv, _ = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, Nk, np.int32)
        buf = np.full((S, 8), -5, np.int32)
        cases = [
            (dict(candidate_topk_blocks=0), "candidate_topk_blocks = 0 must be >= 1"),
            (dict(candidate_topk_blocks=True), "candidate_topk_blocks must be an int"),
            (dict(candidate_topk_blocks=4, candidate_block_size=6), "candidate_block_size = 6"),
            (dict(candidate_topk_blocks=4, candidate_block_size=2 ** 21), "power of two"),
            (dict(candidate_topk_blocks=4, candidate_order="best"), "candidate_order = 'best'"),
            (dict(candidate_topk_blocks=4, candidate_padding="zero"),
             "candidate_padding = 'zero'"),
            (dict(candidate_block_size=16), "need candidate_topk_blocks"),
            (dict(candidate_order="score"), "need candidate_topk_blocks"),
            (dict(candidate_out=np.zeros((S, 4), np.int64)), "candidate_out has dtype int64"),
            (dict(candidate_out=np.zeros(4, np.int32)), r"candidate_out has shape \[4\]"),
            (dict(candidate_topk_blocks=4, candidate_out=np.zeros((S, 5), np.int32)),
             r"candidate_out has shape \[6, 5\], expected \[6, 4\]"),
            (dict(candidate_out=np.zeros((S, 8), np.int32)[:, ::2]), "candidate_out has column"),
            (dict(candidate_out=np.broadcast_to(np.zeros(4, np.int32), (S, 4))), "read-only"),
            (dict(candidate_topk_blocks=4, out=np.zeros((S, Nk), np.float32)),
             "with candidate_topk_blocks the buffer is candidate_out"),
            (dict(topk=4, topk_short_rows=True, topk_values=True), "topk_short_rows writes no"),
            (dict(topk_short_rows=True), "topk_short_rows needs topk"),
            (dict(topk=4, topk_index="position"), "'position' the sparse kernels'"),
            (dict(topk=4, candidate_out=buf, topk_out=buf[:, 4:]),
             "candidate_out overlaps topk_out"),
            (dict(topk=4, topk_values_out=buf.view(np.float32)[:, :4], candidate_out=buf[:, 2:6]),
             "candidate_out overlaps topk_values_out"),
        ]
        for kw, msg in cases:
            with self.subTest(kw=list(kw)):
                with self.assertRaisesRegex(ValueError, "^fp8_fp4_mqa_logits: .*" + msg):
                    ml.fp8_fp4_mqa_logits(q, kv, w, ks, ke, **kw)
                self.assertTrue((buf == -5).all(), "a refused call wrote")
        # An output over an input: the library's check (q, weights, ks) and the module's (int64
        # ks, which the library sees only as its int32 copy), named.
        both = np.zeros(2 * S, np.int32)
        both[:S] = Nk
        with self.assertRaisesRegex(ValueError, "candidate_out .*overlap"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks, both[:S], candidate_out=both.reshape(S, 2)[:, :1])
        ks64 = np.zeros(2 * S, np.int64)
        with self.assertRaisesRegex(ValueError, "candidate_out overlaps cu_seq_len_k_start"):
            ml.fp8_fp4_mqa_logits(q, kv, w, ks64[:S], ke,
                                  candidate_out=ks64.view(np.int32).reshape(S, 4)[:, :2])
        self.assertTrue((ks64 == 0).all())
        # Paged: the block size against the cache's block_kv; the sparse kernels' index kinds.
        cache, _ = make_cache(4, 64, "mxfp8")
        lens = np.array([[100]], np.int32)
        table = np.arange(4, dtype=np.int32)[None]
        (pq, pqs), _ = make_q((1, 1, H), "mxfp8")
        meta = ml.get_paged_mqa_logits_metadata(lens, 64, 2)
        pw = rand_weights(1, H, False)
        with self.assertRaisesRegex(ValueError, "candidate_block_size = 128 is larger than "
                                                "kv_cache's block_kv 64"):
            ml.fp8_fp4_paged_mqa_logits((pq, pqs), cache, pw, lens, table, meta, 256,
                                        candidate_topk_blocks=2, candidate_block_size=128)
        with self.assertRaisesRegex(ValueError, r"'position' is not supported \('column' or "
                                                r"'slot'\)"):
            ml.fp8_fp4_paged_mqa_logits((pq, pqs), cache, pw, lens, table, meta, 256, topk=2,
                                        topk_index="position")
        idx = np.zeros((S, 2), np.int32)
        smeta = ml.get_sparse_mqa_logits_metadata(ks, ke, Nk, idx, np.uint8, 8)
        with self.assertRaisesRegex(ValueError, r"'slot' is not supported \('column' or "
                                                r"'position'\)"):
            ml.fp8_fp4_sparse_mqa_logits(q, kv, w, smeta, 2, 8, topk=4, topk_index="slot")
        with self.assertRaises(TypeError):
            ml.fp8_fp4_sparse_mqa_logits(q, kv, w, smeta, 2, 8, candidate_topk_blocks=2)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_outputs(self):
        S, H, Nk = 5, 4, 100
        (qc, qs), _ = make_q((S, H), "mxfp8")
        (kc, ksf), _ = make_kv(Nk, "mxfp8")
        w = rand_weights(S, H, False)
        ks, ke = np.zeros(S, np.int32), np.full(S, Nk, np.int32)
        args = ((torch.from_numpy(qc), torch.from_numpy(qs)),
                (torch.from_numpy(kc), torch.from_numpy(ksf)), torch.from_numpy(w),
                torch.from_numpy(ks.astype(np.int64)), torch.from_numpy(ke.astype(np.int64)))
        cand = torch.full((S, 4), -5, dtype=torch.int32)
        vals = torch.zeros((S, 3), requires_grad=True)
        with self.assertRaisesRegex(ValueError, "topk_values_out requires grad"):
            ml.fp8_fp4_mqa_logits(*args, topk=3, topk_values_out=vals, candidate_out=cand)
        self.assertTrue((cand == -5).all())
        i, v, b = ml.fp8_fp4_mqa_logits(*args, topk=3, topk_values=True, candidate_out=cand)
        self.assertIs(b, cand)
        self.assertIsInstance(i, torch.Tensor)
        self.assertEqual((i.dtype, v.dtype), (torch.int32, torch.float32))
        want = ml.fp8_fp4_mqa_logits((qc, qs), (kc, ksf), w, ks, ke, candidate_topk_blocks=4)
        np.testing.assert_array_equal(cand.numpy(), want)


if __name__ == "__main__":
    unittest.main()
