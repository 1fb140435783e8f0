"""A dict- and object-heavy Python program for scripts/bench-real: a dict
of N small objects keyed by random ints, then L lookups of random keys.
Prints build_s, lookup_ns (per lookup), rss_kb and huge_kb (smaps_rollup
at the end: AnonHugePages and hugetlb) and a checksum.
usage: python3 objects.py N L"""
import random
import sys
import time

from smaps import rollup


class Item:
    __slots__ = ("key", "a", "b", "name")

    def __init__(self, key, a):
        self.key, self.a, self.b, self.name = key, a, a * 3, str(a)


def main():
    n, lookups = int(sys.argv[1]), int(sys.argv[2])
    rnd = random.Random(1)
    t0 = time.perf_counter()
    keys = [rnd.getrandbits(62) for _ in range(n)]
    d = {k: Item(k, i) for i, k in enumerate(keys)}
    t1 = time.perf_counter()
    probe = [keys[rnd.randrange(n)] for _ in range(lookups)]
    t2 = time.perf_counter()
    s = 0
    for k in probe:
        s += d[k].a
    t3 = time.perf_counter()
    rss, huge = rollup()
    print(f"build_s={t1 - t0:.3f}\nlookup_ns={(t3 - t2) / lookups * 1e9:.2f}\n"
          f"rss_kb={rss}\nhuge_kb={huge}\nchecksum={s}")


main()
