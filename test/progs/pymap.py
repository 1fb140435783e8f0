# A 1 GiB anonymous buffer from Python's mmap module, written: how much
# of it smaps shows on huge pages (AnonHugePages, or ShmemPmdMapped for
# shared memory). usage: pymap.py private|default
#   private  mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE)
#   default  mmap.mmap(-1, n): MAP_SHARED, the module's default
import ctypes
import mmap
import sys
n = 1 << 30
if sys.argv[1] == "private":
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE)
else:
    m = mmap.mmap(-1, n)
for i in range(0, n, 4096):
    m[i] = 1
rss = huge = 0
inside = False
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
for line in open("/proc/self/smaps"):
    f = line.split()
    if "-" in f[0] and not f[0].endswith(":"):
        a, b = (int(x, 16) for x in f[0].split("-"))
        inside = a <= addr < b
    elif inside and f[0] == "Rss:":
        rss += int(f[1])
    elif inside and f[0] in ("AnonHugePages:", "ShmemPmdMapped:"):
        huge += int(f[1])
print(f"rss_kb={rss}\nhuge_kb={huge}")
