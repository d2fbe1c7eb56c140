#!/usr/bin/env python3
"""What runtime dispatch costs: the paired benchmark built with mqalogits::dispatch (for the
baseline CPU) against the same file built header-only with -march=native, run alternately in
fresh processes so that both see the same machine, at one and at two threads.

  python3 bench/dispatch_cost.py [--build build] [--pairs 5] [--rounds 5] [--threads 1 2]

Per shape and format it prints the median over the pairs of each binary's median % of the fp32
FMA peak (measured in the same process), and dispatched / native.
"""
import argparse
import os
import re
import statistics
import subprocess

# A shape's line: its first format (MXFP8, or FP8tok on the FP8 per-token shapes, whose names
# say so) against MXFP4.
LINE = re.compile(r"^(?P<shape>\S.*?)\s+(?:MXFP8|FP8tok) best\s+[\d.]+% median\s+(?P<m8>[\d.]+)% "
                  r"of fp32 FMA peak \| MXFP4 best\s+[\d.]+% median\s+(?P<m4>[\d.]+)%")


def run(binary, rounds, threads, env=None):
    out = subprocess.run([binary, str(rounds), "", str(threads)], check=True,
                         capture_output=True, text=True, env=env).stdout
    head = out.splitlines()[0]
    rows = {}
    for line in out.splitlines()[1:]:
        m = LINE.match(line)
        if m:
            rows[m["shape"].strip()] = (float(m["m8"]), float(m["m4"]))
    return head, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--native", help="the header-only binary to compare with (default: the "
                    "build's mqalogits_paired_native, -march=native)")
    ap.add_argument("--cap", help="MQALOGITS_HOST_ISA for the dispatched binary (e.g. avx2, "
                    "against a header-only -mavx2 -mfma build given with --native)")
    a = ap.parse_args()
    binaries = {"dispatch": f"{a.build}/bench/mqalogits_paired",
                "native": a.native or f"{a.build}/bench/mqalogits_paired_native"}
    env = dict(os.environ)
    if a.cap:
        env["MQALOGITS_HOST_ISA"] = a.cap
    for threads in a.threads:
        seen = {k: {} for k in binaries}
        for _ in range(a.pairs):
            for name, binary in binaries.items():
                head, rows = run(binary, a.rounds, threads, env if name == "dispatch" else None)
                print(f"# {name}: {head}", flush=True)
                for shape, v in rows.items():
                    seen[name].setdefault(shape, []).append(v)
        print(f"\n{threads} thread(s): median over {a.pairs} pairs of each process's median "
              f"({a.rounds} rounds), % of the fp32 FMA peak")
        print("| shape | MXFP8 dispatch | MXFP8 native | ratio | MXFP4 dispatch | MXFP4 native | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for shape in seen["native"]:
            d, n = seen["dispatch"][shape], seen["native"][shape]
            d8, n8 = statistics.median(x[0] for x in d), statistics.median(x[0] for x in n)
            d4, n4 = statistics.median(x[1] for x in d), statistics.median(x[1] for x in n)
            print(f"| {shape} | {d8:.1f}% | {n8:.1f}% | {d8 / n8:.3f} | {d4:.1f}% | {n4:.1f}% | "
                  f"{d4 / n4:.3f} |")


if __name__ == "__main__":
    main()
