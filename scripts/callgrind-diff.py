#!/usr/bin/env python3
"""Exclusive instructions per function of two callgrind dumps, per operation, largest change
first: where one subject's redis-server spends more than another's.

    scripts/callgrind-diff.py A.out B.out OPS [ROWS]

Reads the dumps written with --compress-strings=no (profile-pair.sh's redis-cg.out.N). Costs
are summed per function name across files (callgrind_annotate puts a whole LTO-built
redis-server under __libc_start_main); a call's inclusive cost line is skipped.
"""
import collections
import sys


def exclusive(path):
    cost = collections.Counter()
    fn = None
    after_call = False
    with open(path, errors="replace") as dump:
        for line in dump:
            if line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("calls="):
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_call:
                    after_call = False
                    continue
                parts = line.split()
                if fn and len(parts) >= 2:
                    cost[fn] += int(parts[1])
    return cost


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    a, b, ops = exclusive(sys.argv[1]), exclusive(sys.argv[2]), float(sys.argv[3])
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    names = sorted(set(a) | set(b), key=lambda k: -abs(b[k] - a[k]))
    print(f"{'function':<45} {'A/op':>10} {'B/op':>10} {'B-A':>10}")
    for name in names[:rows]:
        print(f"{name[:45]:<45} {a[name] / ops:>10.1f} {b[name] / ops:>10.1f} "
              f"{(b[name] - a[name]) / ops:>10.1f}")
    print(f"{'total':<45} {sum(a.values()) / ops:>10.1f} {sum(b.values()) / ops:>10.1f}")


main()
