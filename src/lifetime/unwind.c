/*
 * Unwinding a sampled allocation's stack with libunwind, without any
 * descriptor the program could see.
 *
 * libunwind (1.6, as Debian 12 builds it) validates each address it reads
 * while stepping: it writes one byte from the address into a pipe that it
 * opens on first use, with the lowest free descriptors. A program started
 * with stdin closed finds that pipe on fd 0 and reads libunwind's bytes as
 * its input; a program that closes its descriptors and opens new ones has
 * its own files read and written by libunwind instead.
 *
 * So before libunwind is first used, its own imports of pipe2, read,
 * syscall and open (entries of its GOT: nobody else's calls change) are
 * pointed here. The "pipe" is two numbers that are never descriptors; the
 * validation write to it is answered by process_vm_readv from this
 * process to itself, which fails with EFAULT exactly where a read would
 * fault, and needs no descriptor; the files libunwind opens to read
 * unwind tables are close-on-exec and never 0, 1 or 2.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "lifetime/lifetime.h"

#define HP_BT_MAX   (HP_SITE_DEPTH + 8)  /* frames looked at, at most */
#define FAKE_RD     (-4096)              /* the pipe's two ends: never fds */
#define FAKE_WR     (-4095)

/* Whether the byte at addr can be read, by the kernel's own page walk.
 * (getpid() each time: a fork child is another process.) */
static bool readable(const void *addr) {
	char byte;
	struct iovec local = {&byte, 1}, remote = {(void *)addr, 1};
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1;
}

static int unw_pipe2(int fds[2], int flags) {
	(void)flags;
	fds[0] = FAKE_RD;
	fds[1] = FAKE_WR;
	return 0;
}

static ssize_t unw_read(int fd, void *buf, size_t n) {
	if (fd == FAKE_RD) {         /* libunwind drains its pipe: empty */
		errno = EAGAIN;
		return -1;
	}
	return hp_os_read(fd, buf, n);
}

static long unw_syscall(long nr, ...) {
	long a[6];
	va_list ap;
	va_start(ap, nr);
	hp_os_va_longs(ap, a);
	va_end(ap);
	if (nr == SYS_write && (int)a[0] == FAKE_WR) {
		if (readable((const void *)a[1]))
			return 1;
		errno = EFAULT;
		return -1;
	}
	return hp_os_syscall_fds(nr, a);
}

/* True while hp_unwind_frames has every signal blocked itself, for the
 * whole unwind: then libunwind's own blocking, two system calls around
 * each step's cache lookup, is already in force, and is skipped, so a
 * sample makes two system calls instead of two a step (docs/lifetime.md
 * has what that saves). Anyone else's use of libunwind blocks as it
 * would. */
static HP_TLS bool masked;

static int unw_sigprocmask(int how, const sigset_t *set, sigset_t *old) {
	if (masked) {
		if (old != NULL)
			sigfillset(old);     /* what it is: all blocked */
		return 0;
	}
	return sigprocmask(how, set, old);
}

static const struct {
	const char *name;
	void *to;
	bool required;
} redirect[] = {
	{"pipe2", (void *)unw_pipe2, true},
	{"read", (void *)unw_read, true},
	{"syscall", (void *)unw_syscall, true},
	{"open", (void *)hp_os_open_va, true},
	/* Only where libunwind was built to block signals. */
	{"sigprocmask", (void *)unw_sigprocmask, false},
};
#define NREDIRECT (sizeof redirect / sizeof redirect[0])

/* The module's PT_GNU_RELRO range, for a slot that may be read-only. */
struct relro {
	uintptr_t base, lo, hi;
};

static int find_relro(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	struct relro *r = arg;
	if (info->dlpi_addr != r->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
			r->lo = r->base + info->dlpi_phdr[i].p_vaddr;
			r->hi = r->lo + info->dlpi_phdr[i].p_memsz;
		}
	return 1;
}

static bool patch(void **slot, void *to, const struct relro *r) {
	uintptr_t a = (uintptr_t)slot, page = a & ~(HP_PAGE - 1);
	bool ro = a >= r->lo && a < r->hi;
	if (ro && hp_os_mprotect((void *)page, HP_PAGE, PROT_READ | PROT_WRITE) != 0)
		return false;
	__atomic_store_n(slot, to, __ATOMIC_RELEASE);
	if (ro)
		hp_os_mprotect((void *)page, HP_PAGE, PROT_READ);
	return true;
}

/* Points libunwind's GOT entries for the names in redirect[] here; the
 * number of required names found and patched (each may have several
 * entries). */
static unsigned redirect_imports(void) {
	struct link_map *lm = NULL;
	Dl_info info;
	if (dladdr1((void *)&unw_init_local, &info, (void **)&lm,
	    RTLD_DL_LINKMAP) == 0 || lm == NULL)
		return 0;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Rela) *tabs[2] = {NULL, NULL};
	size_t sizes[2] = {0, 0};
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		/* glibc has relocated these to addresses, except where the
		 * dynamic section is read-only. */
		uintptr_t p = d->d_un.d_ptr < lm->l_addr ?
		    d->d_un.d_ptr + lm->l_addr : d->d_un.d_ptr;
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: strtab = (const char *)p; break;
		case DT_JMPREL: tabs[0] = (const ElfW(Rela) *)p; break;
		case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
		case DT_RELA: tabs[1] = (const ElfW(Rela) *)p; break;
		case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
		case DT_PLTREL:
			if (d->d_un.d_val != DT_RELA)
				return 0;
			break;
		}
	}
	if (symtab == NULL || strtab == NULL)
		return 0;
	struct relro r = {lm->l_addr, 0, 0};
	dl_iterate_phdr(find_relro, &r);
	unsigned found = 0;
	for (size_t i = 0; i < NREDIRECT; i++) {
		bool hit = false;
		for (int t = 0; t < 2; t++)
			for (size_t k = 0; tabs[t] && k < sizes[t] / sizeof **tabs;
			    k++) {
				const ElfW(Rela) *rel = &tabs[t][k];
				unsigned type = ELF64_R_TYPE(rel->r_info);
				if (type != R_X86_64_JUMP_SLOT &&
				    type != R_X86_64_GLOB_DAT)
					continue;
				const char *name = strtab +
				    symtab[ELF64_R_SYM(rel->r_info)].st_name;
				if (strcmp(name, redirect[i].name) != 0)
					continue;
				if (!patch((void **)(lm->l_addr + rel->r_offset),
				    redirect[i].to, &r))
					return found;
				hit = true;
			}
		found += hit && redirect[i].required;
	}
	return found;
}

/*
 * Once, before libunwind's first use. pipe2 and syscall must both be
 * redirected (the validation uses them together); if they cannot be, or
 * this process may not call process_vm_readv (some seccomp profiles), no
 * stack is unwound: false, with the reason in *why.
 */
bool hp_unwind_init(const char **why) {
	int probe = 1;
	if (!readable(&probe)) {
		*why = hp_strerror(errno);
		return false;
	}
	unsigned n = redirect_imports(), required = 0;
	for (size_t i = 0; i < NREDIRECT; i++)
		required += redirect[i].required;
	if (n != required) {
		*why = "libunwind's imports of pipe2, read, syscall and open "
		    "were not all found";
		return false;
	}
	return true;
}

/* The frames of the caller of malloc: from the frame that returns to ret
 * (the sampler's own frames come first), and between each frame and the
 * next, the distance from where the one's return address is kept to
 * where the next one's is (its caller's frame size at the call): what a
 * wrapper's callers are told apart by (site.c). unw_step, not
 * unw_backtrace: unw_backtrace keeps a 256 KiB frame cache per thread for
 * good, so every thread that samples would hold one; stepping holds no
 * memory per thread, for a little more work per sample
 * (docs/lifetime.md). */
unsigned hp_unwind_frames(uintptr_t ret, uintptr_t *out, int32_t *stride) {
	unw_context_t uc;
	unw_cursor_t cur;
	unsigned m = 0;
	unw_word_t sp[HP_SITE_DEPTH];
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	masked = true;
	if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0)
		for (int depth = 0; depth < HP_BT_MAX && m < HP_SITE_DEPTH;
		    depth++) {
			unw_word_t ip;
			if (unw_step(&cur) <= 0 ||
			    unw_get_reg(&cur, UNW_REG_IP, &ip))
				break;
			if (m == 0 && (uintptr_t)ip != ret)
				continue;
			/* The stack pointer of the frame that returns to ip:
			 * its return address was kept just below it. */
			if (unw_get_reg(&cur, UNW_REG_SP, &sp[m]))
				sp[m] = 0;
			out[m++] = (uintptr_t)ip;
		}
	masked = false;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (unsigned i = 0; i + 1 < HP_SITE_DEPTH; i++) {
		unw_word_t d = i + 1 < m && sp[i] != 0 && sp[i + 1] > sp[i] ?
		    sp[i + 1] - sp[i] : 0;
		stride[i] = d <= HP_STRIDE_MAX ? (int32_t)d : 0;
	}
	if (m > 0)
		return m;
	/* ret not found: it alone */
	out[0] = ret;
	return 1;
}
