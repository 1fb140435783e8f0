// C++'s operator new and delete, every form, whatever allocator serves
// them: sizes from 0 to the huge class, plain, sized, array, aligned
// (alignas(64), alignas(4096), up to 2 MiB), nothrow; failure: nothrow
// new of an impossible size returns nullptr, the throwing forms throw
// std::bad_alloc, and the new_handler runs first. The output (stdout) is
// the same under any allocator; stderr names the module whose operator
// new the program calls. Exits 1 at the first check that fails.
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

static int checks;

#define CHECK(c) do { \
	checks++; \
	if (!(c)) { \
		std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
		std::exit(1); \
	} \
} while (0)

// The compiler may elide a new/delete pair whose memory does not escape.
static inline void escape(void *p) {
	asm volatile("" : : "r"(p) : "memory");
}

static void fill_check(void *p, size_t n, unsigned char v) {
	escape(p);
	std::memset(p, v, n);
	escape(p);
	for (size_t i = 0; i < n; i += n / 7 + 1)
		CHECK(((unsigned char *)p)[i] == v);
	if (n)
		CHECK(((unsigned char *)p)[n - 1] == v);
}

static const size_t sizes[] = {0, 1, 8, 15, 16, 24, 64, 100, 256, 1000,
	4095, 4096, 4097, 8192, 14336, 20000, 65536, 1 << 20, 3 << 20,
	(size_t)64 << 20};

template <size_t N> struct Obj {
	unsigned char b[N];
};
struct alignas(64) A64 {
	char b[64];
};
struct alignas(4096) A4096 {
	char b[100];
};
struct alignas(1 << 21) A2M {
	char b[10];
};
struct Counted {            // non-trivial destructor: new[] keeps a cookie
	static int live;
	long v[3];
	Counted() { live++; }
	~Counted() { live--; }
};
int Counted::live;

template <class T> static void typed(int n) {
	T *p = new T;
	escape(p);
	CHECK((uintptr_t)p % alignof(T) == 0);
	std::memset((void *)p, 0x5a, sizeof *p);
	delete p;                     // sized delete (aligned when alignof > 16)
	T *a = new T[n];
	escape(a);
	for (int i = 0; i < n; i++)
		CHECK((uintptr_t)&a[i] % alignof(T) == 0);
	std::memset((void *)a, 0xa5, sizeof(T) * n);
	delete[] a;
}

static int handler_calls;
static void handler() {
	handler_calls++;
	std::set_new_handler(nullptr);   // the next failure throws
}

static volatile size_t impossible = (size_t)1 << 62;

int main() {
	// Which operator new this program calls.
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "_Znwm");
	if (sym && dladdr(sym, &info) && info.dli_fname)
		std::fprintf(stderr, "operator new: %s\n", info.dli_fname);

	// Plain and sized, every size; the sized forms explicitly too.
	for (size_t n : sizes) {
		void *p = ::operator new(n);
		CHECK(p != nullptr);
		CHECK((uintptr_t)p % (n >= 16 ? 16 : 8) == 0);
		fill_check(p, n, 0x11);
		::operator delete(p, n);
		p = ::operator new(n);
		fill_check(p, n, 0x22);
		::operator delete(p);
		p = ::operator new[](n);
		fill_check(p, n, 0x33);
		::operator delete[](p, n);
		p = ::operator new[](n);
		fill_check(p, n, 0x44);
		::operator delete[](p);
		p = ::operator new(n, std::nothrow);
		CHECK(p != nullptr);
		fill_check(p, n, 0x55);
		::operator delete(p, std::nothrow);
		p = ::operator new[](n, std::nothrow);
		CHECK(p != nullptr);
		fill_check(p, n, 0x66);
		::operator delete[](p, std::nothrow);
	}
	// Typed objects: the delete-expressions the compiler emits.
	typed<Obj<1>>(7);
	typed<Obj<16>>(100);
	typed<Obj<64>>(1000);
	typed<Obj<256>>(10);
	typed<Obj<5000>>(3);
	typed<A64>(33);
	typed<A4096>(5);
	typed<A2M>(2);
	{
		Counted *c = new Counted[1000];
		CHECK(Counted::live == 1000);
		delete[] c;                  // sized array delete (cookie)
		CHECK(Counted::live == 0);
	}
	// Aligned forms, every alignment from 1 to 2 MiB, with sizes.
	for (size_t al = 1; al <= (1 << 21); al <<= 1)
		for (size_t n : {(size_t)1, (size_t)24, (size_t)4096,
		    (size_t)100000, (size_t)5 << 20}) {
			std::align_val_t a{al};
			void *p = ::operator new(n, a);
			CHECK(p != nullptr && (uintptr_t)p % al == 0);
			fill_check(p, n, 0x77);
			::operator delete(p, n, a);
			p = ::operator new[](n, a);
			CHECK(p != nullptr && (uintptr_t)p % al == 0);
			fill_check(p, n, 0x78);
			::operator delete[](p, a);
			p = ::operator new(n, a, std::nothrow);
			CHECK(p != nullptr && (uintptr_t)p % al == 0);
			fill_check(p, n, 0x79);
			::operator delete(p, a, std::nothrow);
			p = ::operator new[](n, a, std::nothrow);
			CHECK(p != nullptr && (uintptr_t)p % al == 0);
			fill_check(p, n, 0x7a);
			::operator delete[](p, n, a);
		}
	// Deleting nullptr, every form.
	::operator delete(nullptr);
	::operator delete(nullptr, 16);
	::operator delete[](nullptr);
	::operator delete[](nullptr, 16);
	::operator delete(nullptr, std::nothrow);
	::operator delete(nullptr, std::align_val_t{64});
	::operator delete(nullptr, 64, std::align_val_t{64});
	delete (Obj<16> *)nullptr;

	// Failure: nothrow returns nullptr, the others throw bad_alloc.
	size_t huge = impossible;
	CHECK(::operator new(huge, std::nothrow) == nullptr);
	CHECK(::operator new[](huge, std::nothrow) == nullptr);
	CHECK(::operator new(huge, std::align_val_t{64}, std::nothrow) == nullptr);
	CHECK(::operator new[](huge, std::align_val_t{4096}, std::nothrow) ==
	    nullptr);
	CHECK(new (std::nothrow) char[huge] == nullptr);
	int thrown = 0;
	try { escape(::operator new(huge)); } catch (const std::bad_alloc &) { thrown++; }
	try { escape(::operator new[](huge)); } catch (const std::bad_alloc &) { thrown++; }
	try { escape(::operator new(huge, std::align_val_t{64})); }
	catch (const std::bad_alloc &) { thrown++; }
	try { escape(::operator new[](huge, std::align_val_t{1 << 21})); }
	catch (const std::bad_alloc &) { thrown++; }
	try { escape(new char[huge]); } catch (const std::bad_alloc &) { thrown++; }
	try { escape(new A4096[huge / 4096]); } catch (const std::bad_alloc &) { thrown++; }
	CHECK(thrown == 6);
	// The new_handler runs before the throw (it removes itself).
	std::set_new_handler(handler);
	try { escape(::operator new(huge)); } catch (const std::bad_alloc &) { thrown++; }
	CHECK(handler_calls == 1 && thrown == 7);
	std::set_new_handler(handler);
	CHECK(::operator new(huge, std::nothrow) == nullptr);
	CHECK(handler_calls == 2);
	std::set_new_handler(handler);
	try { escape(::operator new(huge, std::align_val_t{256})); }
	catch (const std::bad_alloc &) { thrown++; }
	CHECK(handler_calls == 3 && thrown == 8);
	CHECK(std::get_new_handler() == nullptr);
	// Still allocating after all that.
	void *after = ::operator new(48);
	fill_check(after, 48, 0x99);
	::operator delete(after, 48);

	// Objects made in one thread, deleted (sized) in others.
	std::vector<Obj<64> *> objs(20000);
	for (auto &o : objs)
		o = new Obj<64>;
	std::vector<std::thread> ts;
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&objs, t] {
			for (size_t i = t; i < objs.size(); i += 4) {
				delete objs[i];
				Obj<256> *q = new Obj<256>;
				escape(q);
				delete q;
			}
		});
	for (auto &t : ts)
		t.join();

	std::printf("cxxops: %d checks passed\n", checks);
	return 0;
}
