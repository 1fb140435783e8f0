# The textbook chapter's stride demo (../shared/seeds/001), adapted to time
# without perf (no PMU here): a 1 GiB anonymous private buffer from Python's
# mmap module, wrapped by numpy, written whole, then one byte read per 4 KiB
# page, ITERS passes. Prints the time per access and how much of the buffer
# smaps shows on huge pages.
# usage: python3 stride.py plain|advised [MIB [ITERS]]
#   plain    the buffer as the program maps it (the library, if preloaded,
#            advises it on its own)
#   advised  the chapter's hand-advised control: madvise(MADV_HUGEPAGE)
#            before the first write
import ctypes, mmap, sys, time
import numpy as np

mode = sys.argv[1]
size = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) << 20
iters = int(sys.argv[3]) if len(sys.argv) > 3 else 8
stride = 4096

buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                prot=mmap.PROT_READ | mmap.PROT_WRITE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
if mode == "advised":
    libc = ctypes.CDLL(None, use_errno=True)
    MADV_HUGEPAGE = 14
    if libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(size),
                    ctypes.c_int(MADV_HUGEPAGE)) != 0:
        sys.exit("madvise(MADV_HUGEPAGE) failed: errno %d" % ctypes.get_errno())
arr = np.frombuffer(buf, dtype=np.uint8)
arr[:] = 1

huge = rss = 0
inside = False
for line in open("/proc/self/smaps"):
    f = line.split()
    if "-" in f[0] and not f[0].endswith(":"):
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        inside = lo <= addr < hi
    elif inside and f[0] == "Rss:":
        rss += int(f[1])
    elif inside and f[0] == "AnonHugePages:":
        huge += int(f[1])

# numpy's strided view reads one byte per page without a Python-level loop,
# so the time is the memory system's, not the interpreter's.
view = arr[::stride]
t0 = time.perf_counter_ns()
s = 0
for _ in range(iters):
    s += int(view.sum(dtype=np.uint64))
ns = time.perf_counter_ns() - t0
print(f"ns_per_access={ns / (iters * len(view)):.3f}")
print(f"buffer_rss_kb={rss}")
print(f"buffer_huge_kb={huge}")
print(f"checksum={s}")
# For the benchmark runner: the buffer's share on huge pages, and the
# process's peak resident memory.
print(f"huge_kb={huge}")
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(f"peak_kb={line.split()[1]}")
