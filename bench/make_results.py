#!/usr/bin/env python3
"""Turns mqalogits_bench JSON output (--benchmark_out=FILE --benchmark_out_format=json, with
--benchmark_repetitions=N) into markdown tables, printed on stdout. Nothing is written to a file:
the current figures of each machine go into its tables in bench/RESULTS.md, and the full tables of
a run, with its machine, load and reading, into a section of bench/JOURNAL.md.

Per kernel row: median wall-clock time and FLOP/s, the same per CPU-second of the whole process
(robust to a shared machine time-slicing it), the fraction of the measured peak of the
instruction the path uses (wall: the peak at the same thread count; CPU: one core's peak), the
speed-up over the Eigen baseline (same shape, format and threads) and the 1 -> N thread scaling
(wall-clock, and N x the parallel efficiency in FLOP per CPU-second).

usage: make_results.py results.json [--summary]
"""
import json
import re
import statistics
import sys
from collections import defaultdict

# The instruction each format's path multiplies with, per host path (the library's
# host_isa_name(), recorded in the JSON context as mqalogits_isa), most specific first: the
# first one the binary measured is used.
PEAKS_OF_ISA = {
    "avx512": {"MXFP8": ["vfmadd231ps_zmm"], "MXFP4": ["vpdpbusd_zmm", "vpmaddubsw_zmm"]},
    # Without VNNI the per-block MXFP4 kernel steps with vpmaddubsw + vpaddw (int16 block sums).
    "avx2": {"MXFP8": ["vfmadd231ps_ymm"],
             "MXFP4": ["vpdpbusd_ymm", "vpmaddubsw_vpaddw_ymm", "vpmaddubsw_ymm"]},
    "neon": {"MXFP8": [], "MXFP4": []},
    # x86 without vector flags: SSE2 mulps + addps, what the compiler vectorises the fp32 loops to.
    "portable": {"MXFP8": ["mulps_addps_xmm"], "MXFP4": []},
}
PEAK_OF = {}  # format -> peak benchmark name, filled in by choose_peaks


def choose_peaks(isa, peaks):
    """The peak benchmark of each format for the ISA the binary ran (None: not measured)."""
    # Older result files carry no ISA: they came from the AVX-512 build.
    wanted = PEAKS_OF_ISA.get(isa or "avx512", {"MXFP8": [], "MXFP4": []})
    measured = {ins for (ins, _) in peaks}
    for fmt, names in wanted.items():
        PEAK_OF[fmt] = next((n for n in names if n in measured), None)


def context(path):
    return json.load(open(path)).get("context", {})


def load(path):
    runs = defaultdict(list)
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"].replace("/process_time", "").replace("/real_time", "")
        wall = b["real_time"]
        cpu = b["cpu_time"]
        flops = b.get("FLOP/s", 0.0)
        runs[name].append({
            "ms": wall if b["time_unit"] == "ms" else wall / 1e6,
            "flops": flops,
            "cpu_flops": flops * wall / cpu if cpu > 0 else 0.0,
            "bytes": b.get("bytes/s", 0.0),
        })
    out = {}
    for name, rs in runs.items():
        out[name] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        out[name]["n"] = len(rs)
        # (The peaks run with ->Threads(t); bench/peak.cpp counts each thread's share of the
        # work, so their counters are already the total rate of the t threads.)
    return out


def percent(r, fmt, peaks):
    p = peaks.get((PEAK_OF.get(fmt), 1))
    return f"{100 * r['cpu_flops'] / p['cpu_flops']:.0f}%" if p else "-"


def summary(res, peaks):
    """One line per shape: both formats, one thread, per CPU-second (plus wall scaling)."""
    p8, p4 = PEAK_OF.get("MXFP8") or "no", PEAK_OF.get("MXFP4") or "no"
    print(f"| shape | MXFP8 GFLOP/s | % of `{p8}` peak | MXFP4 GFLOP/s | % of `{p4}` peak "
          "| MXFP4 / MXFP8 | x Eigen (MXFP8 / MXFP4) | 2 threads / 1 (MXFP8 / MXFP4) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    shapes = []
    for name in res:
        m = re.match(r"mqalogits/([^/]+)/MXFP8/threads:1$", name)
        if m:
            shapes.append(m.group(1))
    for shape in shapes:
        r8, r4 = res[f"mqalogits/{shape}/MXFP8/threads:1"], res.get(f"mqalogits/{shape}/MXFP4/threads:1")
        if not r4:
            continue
        e8, e4 = res.get(f"eigen/{shape}/MXFP8/threads:1"), res.get(f"eigen/{shape}/MXFP4/threads:1")
        def scaling(fmt):
            one, two = res.get(f"mqalogits/{shape}/{fmt}/threads:1"), None
            for k, v in res.items():
                if k.startswith(f"mqalogits/{shape}/{fmt}/threads:") and not k.endswith(":1"):
                    two = v
            if not two:
                return "-"
            t = int(next(k for k, v in res.items() if v is two).rsplit(":", 1)[1])
            return (f"{two['flops'] / one['flops']:.2f}x wall, "
                    f"{t * two['cpu_flops'] / one['cpu_flops']:.2f}x CPU")
        def vs(r, e):
            return f"{r['cpu_flops'] / e['cpu_flops']:.1f}x" if e else "-"
        print(f"| {shape} | {r8['cpu_flops'] / 1e9:.0f} | {percent(r8, 'MXFP8', peaks)} "
              f"| {r4['cpu_flops'] / 1e9:.0f} | {percent(r4, 'MXFP4', peaks)} "
              f"| {r4['cpu_flops'] / r8['cpu_flops']:.2f}x "
              f"| {vs(r8, e8)} / {vs(r4, e4)} "
              f"| {scaling('MXFP8')} / {scaling('MXFP4')} |")


def main():
    res = load(sys.argv[1])
    ctx = context(sys.argv[1])
    peaks = {}
    for name, r in res.items():
        m = re.match(r"peak/([^/]+)/threads:(\d+)", name)
        if m:
            peaks[(m.group(1), int(m.group(2)))] = r
    choose_peaks(ctx.get("mqalogits_isa"), peaks)
    if len(sys.argv) > 2 and sys.argv[2] == "--summary":
        summary(res, peaks)
        return
    print(f"Host path: `{ctx.get('mqalogits_isa', 'avx512 (not recorded)')}`; input scales: "
          f"{ctx.get('mqalogits_scales', 'block (not recorded)')}; peaks used: MXFP8 "
          f"`{PEAK_OF.get('MXFP8')}`, MXFP4 `{PEAK_OF.get('MXFP4')}`.\n")
    print("### Peak of each instruction (16 independent chains)\n")
    print("| instruction | threads | GFLOP/s wall | GFLOP/s per CPU-s |")
    print("|---|---:|---:|---:|")
    for (ins, t), r in sorted(peaks.items()):
        print(f"| `{ins}` | {t} | {r['flops'] / 1e9:.1f} | {r['cpu_flops'] / 1e9:.1f} |")

    print("\n### Kernels\n")
    print("| kernel | format | threads | ms | GFLOP/s wall | GB/s | GFLOP/s per CPU-s "
          "| % of peak (wall / CPU) | x Eigen (wall / CPU) | 1->N threads (wall / CPU) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in res.items():
        m = re.match(r"mqalogits/([^/]+)/([^/]+)/threads:(\d+)", name)
        if not m:
            continue
        shape, fmt, t = m.group(1), m.group(2), int(m.group(3))
        peak = peaks.get((PEAK_OF.get(fmt), t))
        peak1 = peaks.get((PEAK_OF.get(fmt), 1))  # per CPU-second, one core's peak is the bound
        frac = (f"{100 * r['flops'] / peak['flops']:.0f}% / "
                f"{100 * r['cpu_flops'] / peak1['cpu_flops']:.0f}%") if peak and peak1 else "-"
        eig = res.get(f"eigen/{shape}/{fmt}/threads:{t}")
        vs = (f"{r['flops'] / eig['flops']:.1f}x / {r['cpu_flops'] / eig['cpu_flops']:.1f}x"
              if eig else "-")
        scale = "-"
        if t > 1:
            one = res.get(f"mqalogits/{shape}/{fmt}/threads:1")
            if one:  # wall-clock, and t x the parallel efficiency in FLOP per CPU-second
                scale = (f"{r['flops'] / one['flops']:.2f}x / "
                         f"{t * r['cpu_flops'] / one['cpu_flops']:.2f}x")
        print(f"| {shape} | {fmt} | {t} | {r['ms']:.1f} | {r['flops'] / 1e9:.1f} | "
              f"{r['bytes'] / 1e9:.2f} | {r['cpu_flops'] / 1e9:.1f} | {frac} | {vs} | {scale} |")

    print("\n### Baselines\n")
    print("| benchmark | threads | ms | GFLOP/s wall | GFLOP/s per CPU-s |")
    print("|---|---:|---:|---:|---:|")
    for name, r in res.items():
        m = re.match(r"(eigen|reference)/(.+)/threads:(\d+)", name)
        if m:
            print(f"| {m.group(1)}/{m.group(2)} | {m.group(3)} | {r['ms']:.1f} | "
                  f"{r['flops'] / 1e9:.2f} | {r['cpu_flops'] / 1e9:.2f} |")


if __name__ == "__main__":
    main()
