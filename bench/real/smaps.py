"""The process's resident memory and its part on huge pages, in kB, from
/proc/self/smaps_rollup (AnonHugePages and hugetlb pages): what
objects.py and gather.py print at their end for scripts/bench-real."""


def rollup():
    rss = huge = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            k, _, v = line.partition(":")
            if not v.strip().endswith("kB"):
                continue
            v = int(v.split()[0])
            if k == "Rss" or k.endswith("_Hugetlb"):
                rss += v
            if k == "AnonHugePages" or k.endswith("_Hugetlb"):
                huge += v
    return rss, huge
