# A 1 GiB anonymous buffer from Python's mmap module, written: how much
# of it smaps shows on huge pages. usage: pymap.py private|shared
import mmap, sys
n = 1 << 30
flags = mmap.MAP_PRIVATE if sys.argv[1] == "private" else mmap.MAP_SHARED
m = mmap.mmap(-1, n, flags=flags)
for i in range(0, n, 4096):
    m[i] = 1
rss = ahp = 0
inside = False
import ctypes
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
for line in open("/proc/self/smaps"):
    f = line.split()
    if "-" in f[0] and not f[0].endswith(":"):
        a, b = (int(x, 16) for x in f[0].split("-"))
        inside = a <= addr < b
    elif inside and f[0] == "Rss:":
        rss += int(f[1])
    elif inside and f[0] == "AnonHugePages:":
        ahp += int(f[1])
print(f"rss_kb={rss}\nanon_huge_kb={ahp}")
