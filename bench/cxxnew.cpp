// A tight loop of C++ new + delete of small objects: the fast path of
// operator new and of the sized operator delete, for callgrind.
// usage: cxxnew [iterations] [16|64|256|mix] [live]
// Each object is a type of that size, so the delete-expression calls the
// sized operator delete(void *, size_t) (C++14's sized deallocation, g++'s
// default from -std=c++14 on). "mix" cycles through the three sizes.
// The program keeps `live` objects of each size (a power of two, default
// 1024), made before the loop: each step deletes the oldest and makes a
// new one in its place, so the objects freed are spread over their slabs
// as a program's are. (With live 1, one object comes back again and
// again; in a fresh heap it is the first of its slab, page-aligned, which
// jemalloc's sdallocx sends to its slow path: see scripts/bench-cxx.)
// Only loop() is meant to be counted: callgrind --toggle-collect=loop.
#include <cstdio>
#include <cstdlib>
#include <cstring>

template <size_t N> struct Obj {
	char b[N];
};

static void *ring16[1 << 16], *ring64[1 << 16], *ring256[1 << 16];

template <size_t N> static inline void step(void **ring, long i, long mask) {
	delete static_cast<Obj<N> *>(ring[i & mask]);
	ring[i & mask] = new Obj<N>;
}

extern "C" __attribute__((noinline)) void loop(long n, int kind, long mask) {
	switch (kind) {
	case 16:
		for (long i = 0; i < n; i++)
			step<16>(ring16, i, mask);
		break;
	case 64:
		for (long i = 0; i < n; i++)
			step<64>(ring64, i, mask);
		break;
	case 256:
		for (long i = 0; i < n; i++)
			step<256>(ring256, i, mask);
		break;
	default:            // mix: n pairs, the three sizes in turn
		for (long i = 0; i < n; i += 3) {
			step<16>(ring16, i, mask);
			step<64>(ring64, i, mask);
			step<256>(ring256, i, mask);
		}
	}
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int kind = argc > 2 && strcmp(argv[2], "mix") != 0 ? atoi(argv[2]) : 0;
	long live = argc > 3 ? atol(argv[3]) : 1024;
	if ((kind != 0 && kind != 16 && kind != 64 && kind != 256) ||
	    live < 1 || live > 1 << 16 || (live & (live - 1)) != 0) {
		fprintf(stderr, "usage: cxxnew [iterations] [16|64|256|mix] "
		    "[live: a power of two up to 65536]\n");
		return 2;
	}
	for (long i = 0; i < live; i++) {
		if (kind == 16 || kind == 0)
			ring16[i] = new Obj<16>;
		if (kind == 64 || kind == 0)
			ring64[i] = new Obj<64>;
		if (kind == 256 || kind == 0)
			ring256[i] = new Obj<256>;
	}
	loop(n, kind, live - 1);
	for (long i = 0; i < live; i++) {
		delete static_cast<Obj<16> *>(ring16[i]);
		delete static_cast<Obj<64> *>(ring64[i]);
		delete static_cast<Obj<256> *>(ring256[i]);
	}
	return 0;
}
