// Fills most of a 2 GiB Java heap with long-lived objects (arrays of 128 KiB
// kept in a list), prints its pid, then waits for the caller to read its
// memory (until stdin closes or 60 s pass).
import java.util.ArrayList;

public class Fill {
    public static void main(String[] args) throws Exception {
        long want = Long.parseLong(args.length > 0 ? args[0] : "1536") << 20;
        ArrayList<long[]> keep = new ArrayList<>();
        long total = 0;
        while (total < want) {
            long[] x = new long[1 << 14];
            for (int i = 0; i < x.length; i += 512)
                x[i] = i;
            keep.add(x);
            total += 8L << 14;
        }
        System.out.println("pid=" + ProcessHandle.current().pid() +
            " filled_mib=" + (total >> 20) + " arrays=" + keep.size());
        System.out.flush();
        long end = System.currentTimeMillis() + 60000;
        while (System.in.read() >= 0 && System.currentTimeMillis() < end)
            ;
        System.out.println("kept=" + keep.size());
    }
}
