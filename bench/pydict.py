# A dict-heavy CPython program with long-lived data and churn through
# the same allocator wrappers (PyObject_Malloc, PyMem_RawMalloc): an
# index of 400,000 records (a dict each, with a body string of 600 to
# 999 bytes, above pymalloc's 512, so from malloc) kept to the end,
# built while each step also serves a request: a record of its own
# JSON-encoded and decoded again, and dropped. With "same", the request
# also carries a string made as the bodies are ("x" * n): CPython then
# allocates kept and dropped strings from one C call stack (the
# interpreter's), which no call-stack key tells apart. Then,
# from /proc/self/smaps: the anonymous resident bytes on 4 KiB pages and
# on huge pages, AnonHugePages in nh mappings, and the kept data's bytes
# (sys.getsizeof of the dict, its keys and values). kept_on_huge_min is a
# lower bound of the kept data's share on huge pages: 1 minus the
# anonymous bytes on 4 KiB pages over the kept bytes.
# usage: python3 bench/pydict.py [N [same]]
import sys
import time

import json

n = int(sys.argv[1]) if len(sys.argv) > 1 else 400000
same = len(sys.argv) > 2 and sys.argv[2] == "same"
keep = {}
for i in range(n):
    keep["k%07d" % i] = {"n": i, "tags": ["t%d" % (i % 13)],
                         "body": "v" * (600 + i % 400)}
    msg = {"id": i, "parts": list(range(i % 9)),
           "words": ["w%d" % j for j in range(40 + i % 20)]}
    if same:
        msg["q"] = "x" * (700 + i % 300)
    req = json.loads(json.dumps(msg))
    del req, msg
# Two seconds: the maintenance thread's passes (catch-up) at the default
# maintain_ms.
time.sleep(2)
anon = ahp = tlb = nh_ahp = 0
ah = 0
with open("/proc/self/smaps") as f:
    for line in f:
        k = line.split()
        if not k:
            continue
        if k[0] == "Anonymous:":
            anon += int(k[1])
        elif k[0] == "AnonHugePages:":
            ah = int(k[1])
            ahp += ah
        elif k[0] == "Private_Hugetlb:":
            tlb += int(k[1])
        elif k[0] == "VmFlags:" and "nh" in k[1:]:
            nh_ahp += ah
kept = sys.getsizeof(keep) + sum(
    sys.getsizeof(k) + sys.getsizeof(v) + sum(sys.getsizeof(x) + sys.getsizeof(y)
                                              for x, y in v.items())
    for k, v in keep.items())
small = (anon - ahp) * 1024
print("kept_mib=%.0f" % (kept / 2**20))
print("anon_4k_mib=%.0f" % (small / 2**20))
print("huge_mib=%.0f" % ((ahp + tlb) / 1024))
print("nh_anonhuge_kb=%d" % nh_ahp)
print("kept_on_huge_min=%.3f" % (1 - small / kept))
