#!/usr/bin/env python3
"""Turns the per-case JSON files of bench/run_topk.sh into the top-k tables, printed on stdout (the
current figures go into bench/RESULTS.md, the full tables of a run into bench/JOURNAL.md).

One row per (shape, format, k): the median wall-clock time (of 5 repetitions) of the fused top-k, of the fp32 logits
kernel alone and of the logits followed by a separate selection (two-pass), at 1 and 2 threads;
fused / logits (the cost of selecting inside the kernel, 1 thread), fused / two-pass, the 1 -> 2
thread speed-up of the fused kernel, and the peak RSS of each case's own process.

The paired cases (topk/paired/..., the calls back to back in each iteration) get a table of
their own: the same ratios from one process, robust to a machine that is not quiet.

usage: topk_results.py PATH...   (folders of case*.json from bench/run_topk.sh, or JSON files)
"""
import glob
import json
import os
import re
import sys

NAME = re.compile(
    r"topk/(?P<mode>\w+)/(?P<shape>[\w]+)/(?P<fmt>\w+)/k:(?P<k>\d+)/threads:(?P<t>\d+)")


def files(paths):
    for p in paths:
        yield from sorted(glob.glob(f"{p}/case*.json")) if os.path.isdir(p) else [p]


def load(paths):
    """{(mode, shape, fmt, k, threads): (median ms, peak RSS MB)}, the paired cases'
    {(shape, fmt, k): counters} and the run's context."""
    runs, paired, ctx = {}, {}, None
    for path in files(paths):
        with open(path) as f:
            doc = json.load(f)
        ctx = ctx or doc.get("context", {})
        for b in doc["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            m = NAME.match(b["name"])
            if not m:
                continue
            if m["mode"] == "paired":
                paired[(m["shape"], m["fmt"], int(m["k"]))] = b
                continue
            key = (m["mode"], m["shape"], m["fmt"], int(m["k"]), int(m["t"]))
            runs[key] = (b["real_time"], b.get("peak_RSS_MB", float("nan")))
    return runs, paired, ctx


def ms_pair(d):
    """'1-thread ms / 2-thread ms' of {threads: (ms, rss)}."""
    return f"{d[1][0]:.1f} / {d[2][0]:.1f}"


def paired_table(paired):
    print("| shape | format | k | fused / logits (1 thread) | two-pass / logits (1 thread) "
          "| fused, 2 threads / 1 |")
    print("|---|---|---:|---:|---:|---:|")
    for (shape, fmt, k), b in sorted(paired.items(), key=lambda x: (x[0][1], x[0][0], x[0][2])):
        print(f"| {shape} | {fmt} | {k} | {b['fused_over_logits']:.3f} "
              f"| {b['two_pass_over_logits']:.3f} | {b['fused_2_threads_speedup']:.2f}x |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs, paired, ctx = load(sys.argv[1:])
    if not runs and not paired:
        sys.exit(f"no top-k results in {' '.join(sys.argv[1:])}")
    print(f"host path: {ctx.get('mqalogits_isa', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
          f"{ctx.get('date', '?')}\n")
    if runs:
        print("| shape | format | k | fused ms (1 / 2 thr) | logits ms (1 / 2) | two-pass ms (1 / 2) "
              "| fused / logits | fused / two-pass | fused 2 thr / 1 | peak RSS MB (fused / logits / "
              "two-pass) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        shapes = sorted({(s, f) for (_, s, f, _, _) in runs}, key=lambda x: (x[1], x[0]))
        for shape, fmt in shapes:
            # The logits kernel does not depend on k: the benchmark runs it once, as k = 512.
            lg = {t: runs.get(("logits", shape, fmt, 512, t)) for t in (1, 2)}
            for k in sorted({k for (m, s, f, k, _) in runs if s == shape and f == fmt}):
                fu = {t: runs.get(("fused", shape, fmt, k, t)) for t in (1, 2)}
                tp = {t: runs.get(("two_pass", shape, fmt, k, t)) for t in (1, 2)}
                if not all(fu.values()) or not all(tp.values()) or not all(lg.values()):
                    continue
                print(f"| {shape} | {fmt} | {k} | {ms_pair(fu)} | {ms_pair(lg)} | {ms_pair(tp)} "
                      f"| {fu[1][0] / lg[1][0]:.3f} | {fu[1][0] / tp[1][0]:.3f} "
                      f"| {fu[1][0] / fu[2][0]:.2f}x "
                      f"| {fu[1][1]:.0f} / {lg[1][1]:.0f} / {tp[1][1]:.0f} |")
    if paired:
        print()
        paired_table(paired)


if __name__ == "__main__":
    main()
