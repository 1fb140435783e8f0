"""A numpy program for scripts/bench-real: a random gather over an array
of MIB MiB of int64 (what a join or an embedding lookup does), PASSES
times. Prints setup_s, gather_ns (per element gathered), rss_kb and
huge_kb (smaps_rollup at the end) and a checksum.
usage: /usr/bin/python3 gather.py MIB PASSES"""
import sys
import time

import numpy as np

from smaps import rollup


def main():
    mib, passes = int(sys.argv[1]), int(sys.argv[2])
    n = mib * 1024 * 1024 // 8
    t0 = time.perf_counter()
    a = np.arange(n, dtype=np.int64)
    idx = np.random.default_rng(1).integers(0, n, size=n // 4)
    t1 = time.perf_counter()
    s = 0
    for _ in range(passes):
        s += int(a[idx].sum())
    t2 = time.perf_counter()
    rss, huge = rollup()
    print(f"setup_s={t1 - t0:.3f}\n"
          f"gather_ns={(t2 - t1) / (passes * len(idx)) * 1e9:.3f}\n"
          f"rss_kb={rss}\nhuge_kb={huge}\nchecksum={s}")


main()
