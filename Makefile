# hugepreload: build, test, demo. See README.md.

# Plain "make" and "make install" build and install only: they install no
# packages. scripts/setup-deps (make deps) installs what the build needs;
# make test, make demo, the benchmarks and the check-* targets run it with
# their group first, then make what they need.
.DEFAULT_GOAL := all

CC      ?= gcc
CFLAGS  ?= -O2 -g
BUILD   := build
JE_LIBDIR := $(shell pkg-config --variable=libdir jemalloc 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
JE_PIC  := $(JE_LIBDIR)/libjemalloc_pic.a
# The library's ABI version: its soname is libhugepreload.so.$(SOVERSION).
SOVERSION := 1

HP_CFLAGS := -std=gnu11 -Wall -Wextra -Wshadow -fPIC -fvisibility=hidden \
	-fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
	-fno-builtin-realloc -ftls-model=initial-exec -Iinclude -Isrc \
	$(shell pkg-config --cflags libunwind)
# The release library is optimised across its files (one concern per file
# costs no calls on the promoted path: make bench-callgrind); fat objects,
# so that nm and the tool's link read them as plain ones too.
LTO     := -flto=auto -ffat-lto-objects
# src/ in layers, lowest first: a file may include the headers of its own
# folder and of the folders before it, and call only into them (docs/
# design.md; make check-layers checks both).
LAYERS := $(shell awk '!/^\#/ && NF {print $$1}' src/layers)
SRCS := $(shell awk '!/^\#/ && NF {for (i = 2; i <= NF; i++) \
	print "src/" $$1 "/" $$i ".c"}' src/layers)
OBJS := $(SRCS:src/%.c=$(BUILD)/obj/%.o)

# jemalloc's public API, renamed NAME -> hp_je_NAME in our copy of the
# archive so that nothing of it is exported or interposed.
JE_SYMS := malloc free calloc realloc posix_memalign aligned_alloc memalign \
	valloc malloc_usable_size mallocx rallocx xallocx sallocx dallocx \
	sdallocx nallocx mallctl mallctlnametomib mallctlbymib \
	malloc_stats_print malloc_message malloc_conf malloc_conf_2_conf_harder

.PHONY: all deps reference deb check-deb test tests check-layers check-debug check-python check-redis check-redis-lifetime check-java check-jemalloc demo bench bench-quick bench-redis bench-real bench-real-quick bench-callgrind bench-cxx bench-maint bench-mtpromoted bench-stride bench-embedding bench-threshold install uninstall clean
all: $(BUILD)/libhugepreload.so $(BUILD)/hugepreload

deps:
	scripts/setup-deps


$(BUILD)/je.syms: Makefile | $(BUILD)
	@for s in $(JE_SYMS); do echo "$$s hp_je_$$s"; done > $@

# Debian's jemalloc archive is what the library embeds; without it, one
# line says which package to install.
$(BUILD)/libjemalloc_hp.a: $(wildcard $(JE_PIC)) $(BUILD)/je.syms scripts/embed-jemalloc
	@test -f $(JE_PIC) || { echo "make: no $(JE_PIC): libjemalloc-dev" \
	    "is not installed (make deps installs what the build needs)" >&2; \
	    exit 1; }
	scripts/embed-jemalloc $(JE_PIC) $(BUILD)/je.syms $@

# Each object depends on the headers it includes (-MMD).
$(BUILD)/obj/%.o: src/%.c | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HP_CFLAGS) -MMD -MP $(LTO) -c $< -o $@
-include $(OBJS:.o=.d)

# The library from objects $(1): the malloc family and the public API
# exported, nothing else; every symbol resolved at link time. Beside it,
# the soname's link, which programs linked with -lhugepreload load.
LINK_LIB = $(CC) $(CFLAGS) $(LTO) -shared -o $@ $(1) $(BUILD)/libjemalloc_hp.a \
	-Wl,--version-script=src/api/exports.map \
	-Wl,-z,now -Wl,-z,relro -Wl,-z,defs -Wl,-soname,libhugepreload.so.$(SOVERSION) \
	-lunwind -lpthread -ldl && \
	ln -sf $(@F) $(@D)/libhugepreload.so.$(SOVERSION)

$(BUILD)/libhugepreload.so: $(OBJS) $(BUILD)/libjemalloc_hp.a src/api/exports.map
	$(call LINK_LIB,$(OBJS))

# The debug build: hp_assert checked (page indexes, ranges, lock ranks and
# owners). The unit tests link its objects; make check-debug runs the
# contract and integration tests against its library.
DEBUG := $(BUILD)/debug
DBG_OBJS := $(SRCS:src/%.c=$(DEBUG)/obj/%.o)
$(DEBUG)/obj/%.o: src/%.c | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -DHP_DEBUG $(HP_CFLAGS) -MMD -MP -c $< -o $@
-include $(DBG_OBJS:.o=.d)

# src/je/jetc.c runs jemalloc's inline fast paths and src/je/jectl.c asks
# jemalloc without mallctl, so they are built against
# jemalloc's internal headers as the embedded archive was configured
# (scripts/jemalloc-headers: Debian's source package, fetched once per
# build directory), and none of the library's.
JE_HDRS := $(BUILD)/jemalloc
JE_NS   := $(JE_HDRS)/include/jemalloc/internal/private_namespace.h
# jemalloc's inline mutex functions take its locks through the same three
# functions as the embedded archive does (scripts/embed-jemalloc), so that
# src/base/lock.c counts every lock held.
JE_CFLAGS := -std=gnu11 -fPIC -fvisibility=hidden -D_GNU_SOURCE -D_REENTRANT \
	-Werror=implicit-function-declaration \
	-Dpthread_mutex_lock=hp_mutex_lock -Dpthread_mutex_trylock=hp_mutex_trylock \
	-Dpthread_mutex_unlock=hp_mutex_unlock -I$(JE_HDRS)/include -Isrc -MMD -MP
$(JE_NS): $(wildcard $(JE_PIC)) scripts/jemalloc-headers scripts/jemalloc-source | $(BUILD)
	scripts/jemalloc-headers $(JE_HDRS) $(JE_PIC)
JE_INTERNAL := jetc jefast jectl jefill jeexit jefork
$(patsubst %,$(BUILD)/obj/je/%.o,$(JE_INTERNAL)): $(BUILD)/obj/je/%.o: src/je/%.c $(JE_NS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(JE_CFLAGS) $(LTO) -c $< -o $@
$(patsubst %,$(DEBUG)/obj/je/%.o,$(JE_INTERNAL)): $(DEBUG)/obj/je/%.o: src/je/%.c $(JE_NS)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer $(JE_CFLAGS) -c $< -o $@

$(DEBUG)/libhugepreload.so: $(DBG_OBJS) $(BUILD)/libjemalloc_hp.a src/api/exports.map
	$(call LINK_LIB,$(DBG_OBJS))

# The command: the wrapper, stat, doctor, enable and disable.
TOOL_SRCS := tools/hugepreload.c tools/cli.c tools/stat.c tools/statpage.c tools/doctor.c tools/unit.c
TOOL_OBJS := $(patsubst %,$(BUILD)/obj/base/%.o,stats_print conf escape os fmt)
$(BUILD)/hugepreload: $(TOOL_SRCS) tools/cli.h $(TOOL_OBJS)
	$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Isrc -Iinclude \
		-DHP_LIB_FROM_BIN='"../lib/$(MULTIARCH)/hugepreload"' \
		-DHP_BUILD_DIR='"$(abspath $(BUILD))"' \
		-DHP_SRC_DIR='"$(abspath .)"' -o $@ $(TOOL_SRCS) $(TOOL_OBJS)

# The reference of every key and counter (tools/gendoc.c): the man page
# hugepreload(7), and docs/reference.md, which make test checks is its
# output ("make reference" writes it).
$(BUILD)/gendoc: tools/gendoc.c $(TOOL_OBJS)
	$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Isrc -Iinclude -o $@ $< $(TOOL_OBJS)
$(BUILD)/hugepreload.7: $(BUILD)/gendoc
	$< man > $@
$(BUILD)/reference.md: $(BUILD)/gendoc
	$< md > $@
reference: $(BUILD)/reference.md
	cp $< docs/reference.md
MANPAGES := docs/hugepreload.1 $(BUILD)/hugepreload.7
all: $(BUILD)/hugepreload.7

$(BUILD):
	@mkdir -p $(BUILD)

# ---- tests -----------------------------------------------------------------
ABS_BUILD := $(abspath $(BUILD))
TCFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Iinclude -Isrc -Itest/progs
PROGS := place_large place_small rss_return nosplit policy threads forkmt \
	dlopen boot lazythread exhaust pool_threads forkcow strand consist \
	sleeper lifetime reallocs dliter sidefx aligned pool_later mallinfo truth progmap \
	craftpage fakepage cgfork exitsig shortlived zeroed
TEST_BINS = $(UNIT_BINS) $(BUILD)/test_contract $(BUILD)/test_integ
TEST_FILES := $(PROGS:%=$(BUILD)/%) $(BUILD)/cxx $(BUILD)/cxxops $(BUILD)/hugepreload $(BUILD)/policy_linked \
	$(BUILD)/libdlalloc.so $(BUILD)/bigdict.py $(BUILD)/gcc-input.c \
	$(BUILD)/promcheck.py $(BUILD)/libltsite.so $(BUILD)/jeapi \
	$(BUILD)/pymap.py $(BUILD)/cleancheck.py

$(PROGS:%=$(BUILD)/%): $(BUILD)/%: test/progs/%.c test/progs/probe.c test/progs/*.h src/base/types.h
	$(CC) $(TCFLAGS) -o $@ $< test/progs/probe.c -ldl -lpthread

# Linked with Debian's libjemalloc, as Redis is.
$(BUILD)/jeapi: test/progs/jeapi.c
	$(CC) $(TCFLAGS) -o $@ $< -ljemalloc

$(BUILD)/cxx: test/progs/cxx.cpp
	$(CXX) -O2 -o $@ $<
$(BUILD)/cxxops: test/progs/cxxops.cpp
	$(CXX) -std=c++17 -O2 -Wall -o $@ $< -ldl -lpthread

# Linked (not preloaded) with an absolute rpath: it also runs setuid.
POLICY_LINKED = $(CC) $(TCFLAGS) -o $@ $< test/progs/probe.c -L$(dir $@) \
	-lhugepreload -Wl,-rpath,$(abspath $(dir $@)) -ldl
$(BUILD)/policy_linked: test/progs/policy.c test/progs/probe.c $(BUILD)/libhugepreload.so
	$(POLICY_LINKED)
$(BUILD)/debug/policy_linked: test/progs/policy.c test/progs/probe.c $(BUILD)/debug/libhugepreload.so
	$(POLICY_LINKED)

$(BUILD)/libltsite.so: test/progs/ltlib.c
	$(CC) $(TCFLAGS) -fno-optimize-sibling-calls -shared -fPIC -o $@ $<

$(BUILD)/libdlalloc.so: test/progs/dlalloc.c
	$(CC) $(TCFLAGS) -shared -fPIC -o $@ $<

$(BUILD)/bigdict.py: test/progs/bigdict.py
	cp $< $@
$(BUILD)/promcheck.py: test/progs/promcheck.py
	cp $< $@
$(BUILD)/cleancheck.py: test/progs/cleancheck.py
	cp $< $@
$(BUILD)/gcc-input.c: test/progs/threads.c
	cp $< $@
$(BUILD)/pymap.py: test/progs/pymap.py
	cp $< $@

# One unit suite per module, test/unit/test_MODULE.c, linked with that
# module's debug object and what src/layers puts below it only: the files
# before it in its folder, and the folders before that (archives of their
# debug objects; the embedded jemalloc is the je layer's). A module that
# reached up would not link. Each runs as build/unit/test_MODULE.
UNIT := conf escape fmt lock ranges thread tally cgroup hpage jemath region slot site profile
$(foreach l,$(LAYERS),$(eval $(DEBUG)/lib/$(l).a: $(filter $(DEBUG)/obj/$(l)/%,$(DBG_OBJS)) ; \
	@mkdir -p $$(dir $$@) && rm -f $$@ && ar rcs $$@ $$^))
# MODULE -> its object, the objects before it in its folder, the archives
# of the folders before that (and jemalloc's, from the je layer up).
unit_link = $(shell awk -v m=$(1) -v d=$(DEBUG) -v je=$(BUILD)/libjemalloc_hp.a \
	'!/^\#/ && NF { for (i = 2; i <= NF; i++) if ($$i == m) { \
	  for (j = i; j >= 2; j--) printf "%s/obj/%s/%s.o ", d, $$1, $$j; \
	  for (k = n; k >= 1; k--) printf "%s/lib/%s.a ", d, l[k]; \
	  if (seenje || $$1 == "je") printf "%s", je; exit } \
	  l[++n] = $$1; if ($$1 == "je") seenje = 1 }' src/layers)
UNIT_BINS := $(UNIT:%=$(BUILD)/unit/test_%)
.SECONDEXPANSION:
$(UNIT_BINS): $(BUILD)/unit/test_%: test/unit/test_%.c $$(call unit_link,$$*) src/layers
	@mkdir -p $(dir $@)
	$(CC) $(TCFLAGS) -DHP_DEBUG -o $@ $< $(filter %.o,$(call unit_link,$*)) \
		-Wl,--start-group $(filter %.a,$(call unit_link,$*)) \
		-Wl,--end-group -lcriterion -lunwind -lpthread -ldl -lm

# Links the library first, so this process's malloc is hugepreload's.
# (It asks for impossible sizes and reads memory back on purpose.)
CONTRACT = $(CC) $(TCFLAGS) -Wno-alloc-size-larger-than -Wno-use-after-free \
	-Wno-maybe-uninitialized -o $@ $< -L$(dir $@) -lhugepreload \
	-Wl,-rpath,$(abspath $(dir $@)) -lcriterion
$(BUILD)/test_contract: test/integ/test_contract.c $(BUILD)/libhugepreload.so
	$(CONTRACT)
$(DEBUG)/test_contract: test/integ/test_contract.c $(DEBUG)/libhugepreload.so
	$(CONTRACT) -DHP_TEST_DEBUG

INTEG_SRCS := $(filter-out test/integ/test_contract.c,$(wildcard test/integ/*.c))
$(BUILD)/test_integ: $(INTEG_SRCS) test/integ/harness.h
	$(CC) $(TCFLAGS) -o $@ $(INTEG_SRCS) -lcriterion

# Everything a test may run, for the debug suite: copies (the tests and the
# wrapper find the library beside themselves), with the debug library.
DBG_COPIES := $(filter-out $(DEBUG)/policy_linked,\
	$(TEST_FILES:$(BUILD)/%=$(DEBUG)/%)) $(DEBUG)/test_integ
DBG_FILES := $(DBG_COPIES) $(DEBUG)/policy_linked
$(DBG_COPIES): $(DEBUG)/%: $(BUILD)/%
	@mkdir -p $(dir $@)
	cp -p $< $@

# The release suite, then the debug one: both summaries, and a failure of
# either fails the target. The failed tests' reports (run-tests keeps them
# in BUILD/failed-tests.txt) are repeated last, where a cut log keeps them.
# What they run is built one job per CPU unless make was given -j (on 2
# cores, 40-57 s instead of 69-78 s).
test:
	scripts/setup-deps test
	$(MAKE) $(if $(findstring -j,$(MAKEFLAGS)),,-j$$(nproc)) tests
	scripts/check-layers $(BUILD) $(DEBUG) && scripts/test-check-layers $(BUILD); \
	l=$$?; scripts/run-tests $(BUILD); r=$$?; scripts/run-tests $(DEBUG); d=$$?; \
	for f in $(BUILD)/failed-tests.txt $(DEBUG)/failed-tests.txt; do \
		[ ! -s $$f ] || { echo "== failed, $$f:"; cat $$f; }; done; \
	[ $$r -eq 0 ] && [ $$d -eq 0 ] && exit $$l

# The layers of src/ (src/layers, docs/design.md): includes and the
# objects' symbols checked, then the check itself on a scratch copy made
# to reach up (scripts/test-check-layers). Run by make test.
check-layers: $(OBJS) $(DBG_OBJS) $(BUILD)/libjemalloc_hp.a
	scripts/check-layers $(BUILD) $(DEBUG)
	scripts/test-check-layers $(BUILD)

# Everything the tests run, built and not run (then, say,
# build/test_integ --filter 'truth/*').
tests: all $(TEST_BINS) $(TEST_FILES) $(BUILD)/reference.md $(DEBUG)/libhugepreload.so \
    $(DEBUG)/test_contract $(DBG_FILES)

check-debug:
	scripts/setup-deps test
	$(MAKE) $(DEBUG)/libhugepreload.so $(DEBUG)/test_contract $(DBG_FILES)
	scripts/run-tests $(DEBUG)

# CPython's regression suite with and without the library (not part of
# make test: about 23 minutes; see docs/host-view.md).
check-python:
	scripts/setup-deps python
	$(MAKE) all
	scripts/check-python $(BUILD)

# Debian's Redis (linked with libjemalloc.so.2) with and without the
# library: INFO memory against the kernel, MEMORY PURGE and DOCTOR,
# BGSAVE while writing, a restart from the RDB (not part of make test:
# about 2 minutes, 3.5 GB of memory).
check-redis:
	scripts/setup-deps redis
	$(MAKE) all
	scripts/check-redis $(BUILD)

# Lifetime learning on Debian's Redis, which allocates through zmalloc:
# the dataset on huge pages, churn on 4 KiB pages, in 5 fresh servers
# after mixed traffic and 5 after a fill alone (about 8 minutes).
check-redis-lifetime:
	scripts/setup-deps redis
	$(MAKE) all
	scripts/check-redis-lifetime $(BUILD)

# Redis throughput and memory beside jemalloc and jemalloc thp:always:
# fresh servers, 2,000,000 keys of 256 B, 5 interleaved rounds (about 10
# minutes; scripts/bench-redis says how).
bench-redis:
	scripts/setup-deps redis
	$(MAKE) all
	scripts/bench-redis --build $(BUILD)

# Real programs (Redis, memcached, gcc, a JVM, Python, numpy) under
# hugepreload and the settings a user would try instead, with the host's
# own gain beside them (scripts/bench-real says how): the full sizes
# (several GiB, 3 interleaved rounds, about two hours), or the quick ones
# (about 10 minutes).
bench-real:
	scripts/setup-deps real
	$(MAKE) all $(BUILD)/chase
	scripts/bench-real --build $(BUILD)
bench-real-quick:
	scripts/setup-deps real
	$(MAKE) all $(BUILD)/chase
	scripts/bench-real --build $(BUILD) --quick

# Debian's OpenJDK 17 filling a 2 GiB heap with and without the library:
# the heap on huge pages through the program's own mmap calls (about 15 s).
check-java:
	scripts/setup-deps java
	$(MAKE) all
	scripts/check-java $(BUILD)

# jemalloc 5.3's integration tests of its public API, from Debian's
# source package (apt-get source, version pinned) into build/, run under
# jemalloc and under the library, side by side (not part of make test:
# about 4 minutes the first time, most of it jemalloc's configure; 9 s
# after).
check-jemalloc:
	scripts/setup-deps jemalloc
	$(MAKE) all
	scripts/check-jemalloc $(BUILD)

# ---- demo and benchmarks --------------------------------------------------
$(BUILD)/chase: bench/chase.c test/progs/probe.c
	$(CC) $(TCFLAGS) -o $@ $< test/progs/probe.c -ldl
$(BUILD)/sizes: bench/sizes.c test/progs/probe.c
	$(CC) $(TCFLAGS) -o $@ $< test/progs/probe.c
$(BUILD)/workloads: bench/workloads.c test/progs/probe.c
	$(CC) $(TCFLAGS) -o $@ $< test/progs/probe.c -lpthread
$(BUILD)/probe.o: test/progs/probe.c test/progs/probe.h
	$(CC) $(TCFLAGS) -c -o $@ $<
$(BUILD)/mfloop: bench/mfloop.c
	$(CC) -O2 -fno-builtin -o $@ $<
$(BUILD)/maint: bench/maint.c
	$(CC) -O2 -Wall -o $@ $<
$(BUILD)/mtpromoted: bench/mtpromoted.c
	$(CC) -O2 -Wall -o $@ $< -lpthread
# C++14's sized deallocation (g++'s default there), spelled out.
$(BUILD)/cxxnew: bench/cxxnew.cpp
	$(CXX) -std=c++17 -O2 -fsized-deallocation -Wall -o $@ $<

demo:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/chase
	scripts/demo

bench-callgrind:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/mfloop
	scripts/bench-callgrind

# The library with src/api/cxx.c built as HP_CXX_OPERATORS=N (0: no C++
# operators, libstdc++'s serve; 1: sized delete is free(); 3: sized delete
# always sdallocx), for scripts/bench-cxx; the default build is 2.
CXX_VARIANTS := $(patsubst %,$(BUILD)/cxx%/libhugepreload.so,0 1 3)
$(BUILD)/cxx%/cxx.o: src/api/cxx.c | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HP_CFLAGS) -MMD -MP $(LTO) -DHP_CXX_OPERATORS=$* -c $< -o $@
-include $(patsubst %,$(BUILD)/cxx%/cxx.d,0 1 3)
$(CXX_VARIANTS): $(BUILD)/cxx%/libhugepreload.so: $(BUILD)/cxx%/cxx.o \
    $(filter-out $(BUILD)/obj/api/cxx.o,$(OBJS)) $(BUILD)/libjemalloc_hp.a src/api/exports.map
	$(call LINK_LIB,$(filter %.o,$^))

bench-cxx:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/cxxnew $(CXX_VARIANTS)
	scripts/bench-cxx

bench-maint:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/maint
	scripts/bench-maint

bench-mtpromoted:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/mtpromoted
	scripts/bench-mtpromoted

# The chapter's stride demo in Python/numpy, with and without the library,
# beside a hand-advised control (about a minute).
bench-stride:
	scripts/setup-deps numpy
	$(MAKE) all
	scripts/bench-stride

bench-embedding:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/workloads
	scripts/bench-embedding

bench-threshold:
	scripts/setup-deps demo
	$(MAKE) all $(BUILD)/sizes
	scripts/bench-threshold

$(BUILD)/hashmap: bench/hashmap.cpp $(BUILD)/probe.o
	$(CXX) -std=c++17 -O3 -msse4.2 -DNDEBUG -Itest/progs -o $@ $< \
		$(BUILD)/probe.o $$(pkg-config --cflags --libs absl_flat_hash_map absl_hash)

# Server-shaped workloads (W10-W15): sized delete spelled out, as cxxnew.
$(BUILD)/servers: bench/servers.cpp $(BUILD)/probe.o
	$(CXX) -std=c++17 -O2 -fsized-deallocation -Wall -Itest/progs -o $@ $< \
		$(BUILD)/probe.o -lpthread

BENCH_BINS := $(BUILD)/chase $(BUILD)/workloads $(BUILD)/hashmap $(BUILD)/mfloop \
	$(BUILD)/servers
bench:
	scripts/setup-deps demo numpy
	$(MAKE) all $(BENCH_BINS)
	scripts/bench.py
bench-quick:
	scripts/setup-deps demo numpy
	$(MAKE) all $(BENCH_BINS)
	scripts/bench.py --quick

# ---- install ------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=] [LIBDIR=PREFIX/lib/MULTIARCH]:
# the library in LIBDIR/hugepreload (libhugepreload.so.1 and the link
# libhugepreload.so that LD_PRELOAD names; preloaded, not linked by
# default), the command, the header, hugepreload.pc, the man pages
# hugepreload(1) and (7), and in PREFIX/share/hugepreload the systemd
# drop-in example and the textfile-collector service and timer, with this
# PREFIX's paths in them. Installs no packages. The command finds the
# library and the drop-in from where it is (PREFIX/bin/../lib/...,
# ../share/...), so LIBDIR must stay PREFIX/lib/MULTIARCH.
PREFIX     ?= /usr/local
MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR     ?= $(PREFIX)/lib/$(MULTIARCH)
BINDIR     ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
PKGDIR     ?= $(LIBDIR)/pkgconfig
MANDIR     ?= $(PREFIX)/share/man
SHAREDIR   ?= $(PREFIX)/share/hugepreload
VERSION    := $(shell sed -n 's/.*HUGEPRELOAD_VERSION "\(.*\)".*/\1/p' include/hugepreload.h)
SHARED     := hugepreload.conf hugepreload-textfile.service hugepreload-textfile.timer
INSTALLED  := $(LIBDIR)/hugepreload/libhugepreload.so.$(SOVERSION) \
	$(LIBDIR)/hugepreload/libhugepreload.so $(BINDIR)/hugepreload \
	$(INCLUDEDIR)/hugepreload.h $(PKGDIR)/hugepreload.pc \
	$(MANDIR)/man1/hugepreload.1 $(MANDIR)/man7/hugepreload.7 \
	$(SHARED:%=$(SHAREDIR)/%)

# hugepreload.pc, and the paths in the drop-in and the units, are written
# at install time, for the PREFIX given then.
install: all
	install -d $(DESTDIR)$(LIBDIR)/hugepreload $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(SHAREDIR)
	install -m 644 $(BUILD)/libhugepreload.so \
	    $(DESTDIR)$(LIBDIR)/hugepreload/libhugepreload.so.$(SOVERSION)
	ln -sf libhugepreload.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/hugepreload/libhugepreload.so
	install -m 755 $(BUILD)/hugepreload $(DESTDIR)$(BINDIR)/
	install -m 644 include/hugepreload.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 docs/hugepreload.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(BUILD)/hugepreload.7 $(DESTDIR)$(MANDIR)/man7/
	sed 's|^Environment=LD_PRELOAD=.*|Environment=LD_PRELOAD=$(LIBDIR)/hugepreload/libhugepreload.so|' \
	    hugepreload.conf > $(DESTDIR)$(SHAREDIR)/hugepreload.conf
	for u in hugepreload-textfile.service hugepreload-textfile.timer; do \
	    sed 's|/usr/bin/hugepreload|$(BINDIR)/hugepreload|' systemd/$$u \
	        > $(DESTDIR)$(SHAREDIR)/$$u || exit 1; done
	chmod 644 $(SHARED:%=$(DESTDIR)$(SHAREDIR)/%)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)/hugepreload' \
	    'includedir=$(INCLUDEDIR)' '' 'Name: hugepreload' \
	    'Description: malloc interposer that places memory on huge pages by policy' \
	    'Version: $(VERSION)' 'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lhugepreload' \
	    'Cflags: -I$${includedir}' > $(DESTDIR)$(PKGDIR)/hugepreload.pc
	chmod 644 $(DESTDIR)$(PKGDIR)/hugepreload.pc

# Removes what install put there and its own directories; under a
# DESTDIR, also the directories left empty, up to DESTDIR (never the
# system's).
uninstall:
	rm -f $(INSTALLED:%=$(DESTDIR)%)
	-rmdir $(DESTDIR)$(LIBDIR)/hugepreload $(DESTDIR)$(SHAREDIR) 2>/dev/null
	@if [ -n "$(DESTDIR)" ]; then \
	    for d in $(BINDIR) $(INCLUDEDIR) $(PKGDIR) $(LIBDIR) \
	        $(MANDIR)/man1 $(MANDIR)/man7; do \
	        d=$(DESTDIR)$$d; \
	        while [ "$$d" != "$(DESTDIR)" ] && [ "$$d" != / ] && \
	            rmdir "$$d" 2>/dev/null; do d=$$(dirname "$$d"); done; \
	    done; fi

# ---- Debian package --------------------------------------------------------
# A native package built from this tree (debian/, debhelper): installs
# what make install PREFIX=/usr does. Lands in build/.
deb:
	scripts/setup-deps deb
	scripts/make-deb

# The package built, linted, installed and purged on this machine
# (scripts/check-deb).
check-deb: deb
	scripts/check-deb

clean:
	rm -rf $(BUILD)
