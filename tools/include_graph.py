#!/usr/bin/env python3
"""Print the folder-level include graph of include/mqalogits/ and fail on a loop.

Each `#include "..."` between two library headers becomes an arrow from the
including header's folder to the included header's folder. The root headers
that include only root headers (config, error, ...) are the folder "."; the
root headers that include a folder (mqalogits.hpp, neuron.hpp, quantize.hpp)
are "(umbrella)". The folders are printed by floor: a folder's floor is one
above the highest floor it includes, so the folders that include nothing of
the library sit on floor 0.

The graph is checked twice: with every folder its own node (backend/host apart
from backend/), and with each folder merged into its top-level folder
(backend/host/isa and backend/neuron into backend/). A loop between folders at
either level has no floor: the script names it, with a pair of headers that
draws each of its arrows, and exits with status 1; so does an arrow out of a
folder held to a fixed set of folders (ONLY).

    python3 tools/include_graph.py [repository root]
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include", "mqalogits")
# Folders held to a fixed set of folders below them: the argument checks sit under every layer
# that calls them (output/, quantize/, variant/, backend/, api/), so they see only the views
# and formats they check.
ONLY = {"check": {".", "format", "view"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    d = os.path.dirname(rel)
    return d if d else "."


def header_includes(root):
    """(header, included header) pairs, both relative to root."""
    pairs = []
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith((".hpp", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            pairs.append((rel, None))
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                if not os.path.exists(target):
                    target = os.path.normpath(os.path.join(root, "..", inc))
                if not os.path.exists(target) or not target.startswith(root + os.sep):
                    continue
                pairs.append((rel, os.path.relpath(target, root)))
    return pairs


def check(pairs, top_level):
    umbrellas = {h for h, t in pairs if t and "/" not in h and "/" in t}

    def node(header):
        if header in umbrellas:
            return "(umbrella)"
        d = folder_of(header)
        return d.split("/")[0] if top_level else d

    arrows = defaultdict(set)  # folder -> folders
    witness = {}  # (from, to) -> first header pair that draws the arrow
    folders = set()
    for h, t in pairs:
        src = node(h)
        folders.add(src)
        if t is None:
            continue
        dst = node(t)
        if dst != src:
            arrows[src].add(dst)
            witness.setdefault((src, dst), (h, t))

    # Loops: strongly connected components with more than one folder.
    index, low, on_stack, stack, comps = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(arrows[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(folders):
        if v not in index:
            visit(v)
    loops = [sorted(c) for c in comps if len(c) > 1]
    for loop in loops:
        print("loop between folders: " + ", ".join(loop))
        for a in loop:
            for b in sorted(arrows[a]):
                if b in loop:
                    h, t = witness[(a, b)]
                    print(f"  {a} -> {b}  ({h} includes {t})")

    # Floors of the graph with each loop drawn as one room.
    room = {v: "{" + ", ".join(sorted(c)) + "}" if len(c) > 1 else v for c in comps for v in c}
    room_arrows = defaultdict(set)
    for a in folders:
        for b in arrows[a]:
            if room[a] != room[b]:
                room_arrows[room[a]].add(room[b])
    floor = {}

    def floor_of(v):
        if v not in floor:
            floor[v] = 1 + max((floor_of(w) for w in room_arrows[v]), default=-1)
        return floor[v]

    rooms = set(room.values())
    for v in rooms:
        floor_of(v)
    n_arrows = sum(len(s) for s in arrows.values())
    floors = max(floor.values()) + 1
    print(("top-level folders: " if top_level else "folders: ") +
          f"{len(folders)} folders, {floors} floors, {n_arrows} arrows, {len(loops)} loops")
    for f in range(floors):
        for v in sorted(x for x in rooms if floor[x] == f):
            below = ", ".join(sorted(room_arrows[v])) or "-"
            print(f"  floor {f}: {v} -> {below}")
    failed = bool(loops)
    for folder, allowed in ([] if top_level else ONLY.items()):
        for b in sorted(arrows[folder] - allowed):
            h, t = witness[(folder, b)]
            print(f"{folder}/ may include only {', '.join(sorted(allowed))}: "
                  f"{h} includes {t}")
            failed = True
    return 1 if failed else 0


def main():
    root = os.path.join(sys.argv[1], "include", "mqalogits") if len(sys.argv) > 1 else ROOT
    pairs = header_includes(os.path.normpath(root))
    nested = check(pairs, top_level=False)
    print()
    top = check(pairs, top_level=True)
    return 1 if nested or top else 0


if __name__ == "__main__":
    sys.exit(main())
