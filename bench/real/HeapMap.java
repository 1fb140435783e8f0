// A heap-heavy Java program for scripts/bench-real: a HashMap of N small
// objects keyed by random longs, then L lookups of random keys (most of
// the heap is touched at random, as a cache's is). Prints build_s,
// lookup_ns (per lookup), rss_kb and huge_kb (from smaps_rollup at the
// end: AnonHugePages and hugetlb) and a checksum.
// usage: java HeapMap N L
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;

public class HeapMap {
    static final class Item {
        final long key;
        final int a, b;
        Item next;
        Item(long key, int a, int b) { this.key = key; this.a = a; this.b = b; }
    }

    static long mix(long x) {
        x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
        return x;
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long lookups = Long.parseLong(args[1]);
        long t0 = System.nanoTime();
        HashMap<Long, Item> map = new HashMap<>(n * 2);
        long r = 0x9e3779b97f4a7c15L;
        Item prev = null;
        for (int i = 0; i < n; i++) {
            r = mix(r);
            Item it = new Item(r, i, (int) (r >>> 40));
            it.next = prev;
            prev = it;
            map.put(r, it);
        }
        long t1 = System.nanoTime();
        long sum = 0;
        long s = 0x9e3779b97f4a7c15L;
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) { s = mix(s); keys[i] = s; }
        long q = 12345;
        long t2 = System.nanoTime();
        for (long i = 0; i < lookups; i++) {
            q = mix(q);
            Item it = map.get(keys[(int) Long.remainderUnsigned(q, n)]);
            sum += it.a + it.b;
        }
        long t3 = System.nanoTime();
        long rss = 0, huge = 0;
        for (String line : Files.readAllLines(Paths.get("/proc/self/smaps_rollup"))) {
            String[] f = line.trim().split("\\s+");
            if (f.length < 2) continue;
            long v;
            try { v = Long.parseLong(f[1]); } catch (NumberFormatException e) { continue; }
            if (f[0].equals("Rss:")) rss += v;
            if (f[0].equals("AnonHugePages:") || f[0].endsWith("_Hugetlb:")) huge += v;
            if (f[0].endsWith("_Hugetlb:")) rss += v;
        }
        System.out.printf("build_s=%.3f%nlookup_ns=%.2f%nrss_kb=%d%nhuge_kb=%d%nchecksum=%d%n",
            (t1 - t0) / 1e9, (double) (t3 - t2) / lookups, rss, huge, sum);
    }
}
