#!/usr/bin/env python3
"""Medians of bench/paired.cpp over several processes, for a noisy machine.

  builds:  python3 bench/paired_compare.py builds RUNS ROUNDS name=path/to/mqalogits_paired ...
           each build's binary run RUNS times (order alternating), ROUNDS rounds a run; per shape
           the median over runs of each run's median: e4m3 % of the FMA peak, MXFP4 %, MXFP4 / e4m3
  threads: python3 bench/paired_compare.py threads RUNS ROUNDS path/to/mqalogits_paired
           the same binary on 1 and 2 threads, alternating; per shape 2T / 1T of median GFLOP/s
  PAIRED_FILTER=text limits either mode to the shapes whose name contains text (paired's filter)
  PAIRED_SPIN=us: the pool's spin in threads mode (paired's fourth argument; 0 by default)
"""
import collections
import os
import re
import statistics
import subprocess
import sys

LINE = re.compile(r'(.*?)\s+(MXFP8|FP8tok) best\s+[\d.]+% median\s+([\d.]+)% .*MXFP4 best\s+[\d.]+% '
                  r'median\s+([\d.]+)% .*median\s+([\d.]+)x .*medians ([\d.]+) / ([\d.]+) GFLOP/s')


def run(binary, rounds, threads=1):
    shapes = os.environ.get("PAIRED_FILTER", "")
    spin = os.environ.get("PAIRED_SPIN", "0")
    out = subprocess.run([binary, str(rounds), shapes, str(threads), spin], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            yield m.group(1).strip(), [float(m.group(i)) for i in (3, 4, 5, 6, 7)]


def main():
    mode, runs, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    order = []
    if mode == "builds":
        builds = [a.split("=", 1) for a in sys.argv[4:]]
        keys = [n for n, _ in builds]
        for r in range(runs):
            for name, binary in (builds if r % 2 == 0 else builds[::-1]):
                for shape, v in run(binary, rounds):
                    order += [shape] if shape not in order else []
                    res[shape][name].append(v)
    else:
        keys = [1, 2]
        for r in range(runs):
            for t in ((1, 2) if r % 2 == 0 else (2, 1)):
                for shape, v in run(sys.argv[4], rounds, t):
                    order += [shape] if shape not in order else []
                    res[shape][t].append(v)

    def med(shape, key, i):
        return statistics.median(v[i] for v in res[shape][key])

    for shape in order:
        if mode == "builds":
            print("%-40s" % shape + "".join(
                " | %s: e4m3 %5.1f%%, MXFP4 %5.1f%%, %4.2fx" %
                (k, med(shape, k, 0), med(shape, k, 1), med(shape, k, 2)) for k in keys))
        else:
            print("%-40s | 2T / 1T: e4m3 %4.2fx, MXFP4 %4.2fx" %
                  (shape, med(shape, 2, 3) / med(shape, 1, 3), med(shape, 2, 4) / med(shape, 1, 4)))


if __name__ == "__main__":
    main()
