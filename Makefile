# hugepreload: build, test, demo. See README.md.
CC      ?= gcc
CFLAGS  ?= -O2 -g
BUILD   := build
LIBDIR  := $(shell pkg-config --variable=libdir jemalloc 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
JE_PIC  := $(LIBDIR)/libjemalloc_pic.a

HP_CFLAGS := -std=gnu11 -Wall -Wextra -Wshadow -fPIC -fvisibility=hidden \
	-fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc \
	-fno-builtin-realloc -ftls-model=initial-exec -Iinclude -Isrc
SRCS := $(wildcard src/*.c)
OBJS := $(SRCS:src/%.c=$(BUILD)/obj/%.o)

# jemalloc's public API, renamed NAME -> hp_je_NAME in our copy of the
# archive so that nothing of it is exported or interposed.
JE_SYMS := malloc calloc realloc posix_memalign aligned_alloc memalign \
	valloc malloc_usable_size mallocx rallocx xallocx sallocx dallocx \
	sdallocx nallocx mallctl mallctlnametomib mallctlbymib \
	malloc_stats_print malloc_message malloc_conf malloc_conf_2_conf_harder

.PHONY: all deps test unit integ real demo bench-callgrind clean
all: $(BUILD)/libhugepreload.so

deps:
	scripts/setup-deps

$(BUILD)/je.syms: Makefile | $(BUILD)
	@for s in $(JE_SYMS); do echo "$$s hp_je_$$s"; done > $@

$(BUILD)/libjemalloc_hp.a: $(JE_PIC) $(BUILD)/je.syms
	objcopy --redefine-syms=$(BUILD)/je.syms $(JE_PIC) $@

$(BUILD)/obj/%.o: src/%.c src/*.h include/hugepreload.h | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(HP_CFLAGS) -c $< -o $@

$(BUILD)/libhugepreload.so: $(OBJS) $(BUILD)/libjemalloc_hp.a src/exports.map
	$(CC) -shared -o $@ $(OBJS) $(BUILD)/libjemalloc_hp.a \
		-Wl,--version-script=src/exports.map \
		-Wl,-z,now -Wl,-z,relro -Wl,-soname,libhugepreload.so \
		-lpthread -ldl -lm

$(BUILD):
	@mkdir -p $(BUILD)

clean:
	rm -rf $(BUILD)
