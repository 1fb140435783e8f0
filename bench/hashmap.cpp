// W1: the absl::flat_hash_map program of seed 000: N try_emplace with a
// crc32 hash after reserve, then optionally M random lookups. Prints
// ns per insert, ns per lookup and the time of each phase.
// usage: hashmap [millions of inserts] [millions of lookups]
#include <absl/container/flat_hash_map.h>
#include <nmmintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
extern "C" {
#include "probe.h"
}

int main(int argc, char **argv) {
	struct hash {
		size_t operator()(size_t h) const noexcept { return _mm_crc32_u64(0, h); }
	};
	size_t iters = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10) * 1000000;
	size_t lookups = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 0) * 1000000;
	using clock = std::chrono::steady_clock;
	auto t0 = clock::now();
	absl::flat_hash_map<size_t, size_t, hash> ht;
	ht.reserve(iters);
	auto t1 = clock::now();
	for (size_t i = 0; i < iters; ++i)
		ht.try_emplace(i, i);
	auto t2 = clock::now();
	long peak_kb = probe_rss_kb() + probe_hugetlb_kb(), huge_kb = probe_huge_kb();
	size_t sum = 0, x = 88172645463325252ull;
	for (size_t i = 0; i < lookups; ++i) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		auto it = ht.find(x % iters);
		sum += it->second;
	}
	auto t3 = clock::now();
	auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
	std::printf("ns_per_insert=%.2f\nns_per_lookup=%.2f\nreserve_s=%.3f\n"
	    "insert_s=%.3f\nlookup_s=%.3f\npeak_kb=%ld\nhuge_kb=%ld\nsum=%zu\n",
	    s(t1, t2) * 1e9 / iters,
	    lookups ? s(t2, t3) * 1e9 / lookups : 0.0, s(t0, t1), s(t1, t2),
	    s(t2, t3), peak_kb, huge_kb, sum);
	return 0;
}
