/* src/lifetime/slot.c: the fast path's per-thread credits, one per slot
 * (the low byte of the malloc call's return address). The fast path
 * itself (SLOT_TAKE, in api/entry.c) is played here by take(): subtract,
 * and come to the slow path on a borrow or on exactly zero. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include "lifetime/lifetime.h"

/* What SLOT_TAKE does with slot i; true when it jumps to the slow path. */
static bool take(unsigned i, size_t size) {
	uint64_t before = hp_slots[i];
	hp_slots[i] -= size;
	return before <= size;
}

/* The credit a slot gets now: what a refill leaves in it. */
static uint64_t credit_now(unsigned i) {
	bool pinned;
	take(i, 1);
	hp_slot_refill(i, 1, &pinned);
	cr_assert_not(pinned);
	return hp_slots[i];
}

/* min(threshold - 1, pace / 4), at least 1 with a pace; at most 2^62. */
Test(slot, credit_is_the_lesser_of_threshold_and_pace) {
	static const struct {
		size_t threshold, pace;
		uint64_t credit;
	} c[] = {
		{1 << 20, 0, (1 << 20) - 1},        /* nothing sampled */
		{1 << 20, 1 << 16, 1 << 14},        /* sampling paces */
		{1 << 20, 1 << 24, (1 << 20) - 1},  /* the threshold binds */
		{100, 400, 99},                     /* equal: either */
		{100, 396, 99},
		{100, 392, 98},
		{1 << 20, 3, 1},                    /* pace under 4: still 1 */
		{SIZE_MAX, 0, (uint64_t)1 << 62},   /* no huge class */
		{SIZE_MAX, 1 << 12, 1 << 10},
	};
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		hp_slot_init(c[k].threshold, c[k].pace);
		cr_assert_eq(credit_now(k), c[k].credit, "threshold %zu pace %zu: "
		    "%lu", c[k].threshold, c[k].pace,
		    (unsigned long)hp_slots[k]);
	}
}

/* Before start-up every credit is 0: the first call of every slot takes
 * the slow path, and counts only itself. */
Test(slot, first_call_takes_the_slow_path) {
	hp_slot_init(1 << 20, 0);
	for (unsigned i = 0; i < HP_SLOTS; i++) {
		cr_assert_eq(hp_slots[i], 0);
		cr_assert(take(i, 16), "slot %u", i);
		bool pinned;
		cr_assert_eq(hp_slot_refill(i, 16, &pinned), 16, "slot %u", i);
		cr_assert_eq(hp_slots[i], (1 << 20) - 1);
	}
}

/* A refill returns the bytes the slot served since it was last credited,
 * this call's included, and credits the slot again. */
Test(slot, refill_returns_the_bytes_used_and_resets) {
	hp_slot_init(1001, 0);                   /* credit 1000 */
	bool pinned;
	cr_assert(take(5, 10));
	cr_assert_eq(hp_slot_refill(5, 10, &pinned), 10);
	cr_assert_eq(hp_slots[5], 1000);
	cr_assert_not(take(5, 300));
	cr_assert_not(take(5, 300));
	cr_assert_not(take(5, 300));
	cr_assert(take(5, 150), "a borrow");
	cr_assert_eq(hp_slot_refill(5, 150, &pinned), 1050);
	cr_assert_eq(hp_slots[5], 1000);
	cr_assert(take(5, 1000), "exactly zero left: slow path too");
	cr_assert_eq(hp_slot_refill(5, 1000, &pinned), 1000);
	cr_assert_eq(hp_slots[5], 1000);
	cr_assert_eq(hp_slots[6], 0, "other slots untouched");
}

/* Over many calls of random sizes, every byte is counted once: what the
 * refills returned plus what the current credit has served since. */
Test(slot, every_byte_counted_once) {
	const uint64_t credit = 4096;
	hp_slot_init(credit + 1, 0);
	uint64_t r = 0x452821e638d01377ull, asked[4] = {0}, counted[4] = {0};
	unsigned refills = 0;
	for (int n = 0; n < 200000; n++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		unsigned i = (unsigned)(r % 4) * 67;
		size_t size = 1 + (r >> 8) % (r % 16 == 0 ? credit + 100 : 256);
		asked[i / 67] += size;
		if (take(i, size)) {
			bool pinned;
			counted[i / 67] += hp_slot_refill(i, size, &pinned);
			refills++;
		}
	}
	for (unsigned k = 0; k < 4; k++)
		cr_assert_eq(asked[k], counted[k] + (credit - hp_slots[k * 67]),
		    "slot %u: %lu asked, %lu counted", k * 67,
		    (unsigned long)asked[k], (unsigned long)counted[k]);
	cr_assert_gt(refills, 1000);
}

/* A request that goes elsewhere (the huge class) gives back what the fast
 * path took: the credit stands, and the next refill does not count it. */
Test(slot, undo_gives_the_request_back) {
	hp_slot_init(1 << 20, 0);
	bool pinned;
	take(9, 1);
	hp_slot_refill(9, 1, &pinned);
	cr_assert_not(take(9, 1000));
	cr_assert(take(9, 1 << 20), "over the threshold: always a borrow");
	hp_slot_undo(9, 1 << 20);
	cr_assert_eq(hp_slots[9], (1 << 20) - 1 - 1000);
	cr_assert(take(9, (1 << 20) - 1 - 1000));
	cr_assert_eq(hp_slot_refill(9, (1 << 20) - 1 - 1000, &pinned),
	    (1 << 20) - 1, "the undone request is not counted");
	/* Before start-up (credit 0) the same: back to 0. */
	cr_assert(take(10, 64));
	hp_slot_undo(10, 64);
	cr_assert_eq(hp_slots[10], 0);
}

/* A slot that some promoted key falls in gets no credit: every call of it
 * comes back to be looked up, until the last key is taken off. */
Test(slot, pinned_slot_gets_no_credit) {
	hp_slot_init(1 << 20, 0);
	bool pinned;
	const uintptr_t key = 0x7f0000401234, same = 0x55550000ab34;
	cr_assert_eq((uint8_t)key, (uint8_t)same);
	take(0x34, 8);
	hp_slot_refill(0x34, 8, &pinned);
	cr_assert_not(pinned);
	hp_slot_pin(key, true);
	hp_slot_pin(same, true);                 /* two keys, one slot */
	cr_assert_not(take(0x34, 8), "credited before: lasts till it runs out");
	cr_assert(take(0x34, 1 << 20));
	cr_assert_eq(hp_slot_refill(0x34, 1 << 20, &pinned), (1 << 20) + 8);
	cr_assert(pinned);
	cr_assert_eq(hp_slots[0x34], 0);
	for (int n = 0; n < 3; n++) {
		cr_assert(take(0x34, 24), "every call comes back");
		cr_assert_eq(hp_slot_refill(0x34, 24, &pinned), 24,
		    "uncredited: counts only itself");
		cr_assert(pinned);
	}
	/* Another slot is not affected. */
	take(0x35, 8);
	hp_slot_refill(0x35, 8, &pinned);
	cr_assert_not(pinned);
	cr_assert_eq(hp_slots[0x35], (1 << 20) - 1);
	hp_slot_pin(key, false);
	take(0x34, 8);
	hp_slot_refill(0x34, 8, &pinned);
	cr_assert(pinned, "one key is still on");
	hp_slot_pin(same, false);
	take(0x34, 8);
	cr_assert_eq(hp_slot_refill(0x34, 8, &pinned), 8);
	cr_assert_not(pinned);
	cr_assert_eq(hp_slots[0x34], (1 << 20) - 1);
}

/* The pinned slot's path (core/route.c) takes a call only where the
 * refill would count the call alone: pinned, and no credit of this
 * thread's left in the slot; settling leaves the slot as the refill
 * would. */
Test(slot, pinned_path_only_for_uncredited_pinned_slots) {
	hp_slot_init(1 << 20, 0);
	bool pinned;
	const uintptr_t key = 0x7f0000405678;
	take(0x78, 8);
	hp_slot_refill(0x78, 8, &pinned);                /* credited */
	cr_assert_not(hp_slot_pinned(0x78), "not pinned");
	hp_slot_pin(key, true);
	cr_assert_not(hp_slot_pinned(0x78), "pinned, but credited still");
	cr_assert(take(0x78, 1 << 20));
	cr_assert_eq(hp_slot_refill(0x78, 1 << 20, &pinned), 1 << 20);
	cr_assert(pinned);
	for (int n = 0; n < 3; n++) {
		cr_assert(take(0x78, 40));
		cr_assert(hp_slot_pinned(0x78));
		hp_slot_settle(0x78);
		cr_assert_eq(hp_slots[0x78], 0);
	}
	cr_assert_not(hp_slot_pinned(0x79), "another slot");
	hp_slot_pin(key, false);
	cr_assert_not(hp_slot_pinned(0x78), "no key left");
	take(0x78, 8);
	cr_assert_eq(hp_slot_refill(0x78, 8, &pinned), 8);
	cr_assert_not(pinned);
}

/* Credits are per thread: a new thread starts with none, and its refill
 * counts only its own calls. */
static void *other_thread(void *arg) {
	uint64_t *out = arg;
	bool pinned;
	out[0] = hp_slots[3];
	take(3, 40);
	out[1] = hp_slot_refill(3, 40, &pinned);
	out[2] = hp_slots[3];
	return NULL;
}

Test(slot, credits_are_per_thread) {
	hp_slot_init(1001, 0);
	bool pinned;
	take(3, 1);
	hp_slot_refill(3, 1, &pinned);
	take(3, 500);
	uint64_t out[3];
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, other_thread, out), 0);
	pthread_join(t, NULL);
	cr_assert_eq(out[0], 0, "a new thread has no credit");
	cr_assert_eq(out[1], 40, "nor this thread's use");
	cr_assert_eq(out[2], 1000);
	cr_assert_eq(hp_slots[3], 500, "this thread's credit untouched");
}

/* The debug build's checks: a key taken off more often than placed, and a
 * slot index past the table. */
Test(slot, unpin_of_an_unpinned_slot_aborts, .signal = SIGABRT) {
	hp_slot_pin(0x1234, true);
	hp_slot_pin(0x1234, false);
	hp_slot_pin(0x1234, false);
}

Test(slot, refill_past_the_table_aborts, .signal = SIGABRT) {
	bool pinned;
	hp_slot_refill(HP_SLOTS, 8, &pinned);
}
