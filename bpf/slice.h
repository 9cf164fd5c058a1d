/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Per-CPU credit in slices of a class clock. A charge is one atomic on the clock's cache line;
 * when several CPUs charge one class at once (a root shared by every CPU) the line moves between
 * them on each packet. So a CPU charges into a slice of its own: an interval [pos, end) of the
 * clock, taken by one atomic, then used by plain adds on per-CPU memory next to its counters
 * for the class (stats.h), which the packet writes anyway.
 *
 * A CPU takes more than its packet's charge only when the clock has moved under it twice in a
 * row: it is not alone on the class. Then the slice is 8 charges of the packet that takes it,
 * halved until at most SHAPER_SLICE_MAX_NS (16 us of class time), never less than that
 * packet's own charge (a GSO packet longer than that takes just its own). So slices matter
 * where contention does, at short charges: millions of packets a second. A CPU alone on a
 * class takes just each packet's charge, contiguously: the clock and every departure are
 * exactly gcra.h's.
 *
 * Bounds, for N CPUs charging a class:
 *  - Never faster than the rate, exactly: slices are disjoint intervals of the one clock, each
 *    charge lies inside one and starts no earlier than its packet's now, so the departures are
 *    a GCRA schedule of that clock, with gcra.h's bound (burst + rate * T + one packet).
 *  - Slower by the credit left unused: each CPU's open slice (at most SHAPER_SLICE_MAX_NS, or
 *    the charge of a packet given back into it), and the tail of a slice too short for the
 *    CPU's next packet (for packets alike, under 1 ns per packet of sub-ns rounding; shorter
 *    than that packet otherwise). Nothing is banked: a charge starts no earlier than now, so
 *    credit whose clock time has passed is lost with it.
 *  - Order: packets from different CPUs may leave up to a slice out of their arrival order.
 *  - The shared clock runs ahead of what was charged by the open slices, at most
 *    N * SHAPER_SLICE_MAX_NS: fair shares' epoch charge and status's backlog read that much more.
 *  - A packet charged from a slice reads no line another CPU writes: not the shared clock (a
 *    line of its own in the class entry, shaper_abi.h), only its CPU's slice and the class
 *    config. So the control plane clears every CPU's slice when it moves the clock (a rate
 *    change rescales it, a class is reset). A slice taken in the instant between the control
 *    plane's move and its clearing survives them: at most one slice per CPU sent on the old
 *    clock, once per such change.
 *  - A charge given back (a horizon drop) returns to the clock if it is still the clock's
 *    latest, else to the CPU's slice, for the CPU's next packet.
 */
#ifndef SHAPER_SLICE_H
#define SHAPER_SLICE_H

#include "maps.h"

#define SLICE_CHARGES_LOG2 3
#define SLICE_BEHIND (1ull << 63) /* in slice_end: taken behind another CPU's charge */
#define SLICE_IDLE_CAS_TRIES 4

/* Where this CPU's next charge at the class starts if nothing moves meanwhile (pass 1's read;
 * slice_charge decides for good): in its slice while the slice has credit, else at the clock. */
static __always_inline __u64 slice_peek(const struct shaper_class_stats *st,
					const struct shaper_class *cls, __u64 now)
{
	const __u64 end = st->slice_end & ~SLICE_BEHIND;
	const __u64 pos = st->slice_pos > now ? st->slice_pos : now;

	if (pos < end)
		return pos;
	return *(volatile __u64 *)&cls->tat_ns;
}

/* 8 charges, halved until at most SHAPER_SLICE_MAX_NS, at least one: a whole number of charges. */
static __always_inline __u64 slice_size(__u64 charge)
{
	__u64 size = charge << SLICE_CHARGES_LOG2;

	for (int i = 0; i < SLICE_CHARGES_LOG2 && size > SHAPER_SLICE_MAX_NS; i++)
		size >>= 1;
	return size;
}

/*
 * Charges `charge` ns to the class on this CPU; returns where on the clock the charge starts, and
 * in *skipped how far the clock jumped to now from behind it (it was idle), else 0.
 * `most` is the most a packet of this size is charged (charge.h rounds up or down by 1 ns): a
 * slice sized on it holds all its packets, so rounding leaves under 1 ns per packet unused.
 * The clock itself moves only by atomics: once it is at or past now it only grows, so a
 * fetch-and-add is exact; the jump from an idle clock to now is a compare-and-swap.
 */
static __always_inline __u64 slice_charge(struct shaper_class *cls, struct shaper_class_stats *st,
					  __u64 now, __u64 charge, __u64 most, __u64 *skipped)
{
	const __u64 raw_end = st->slice_end, end = raw_end & ~SLICE_BEHIND;
	const __u64 pos = st->slice_pos > now ? st->slice_pos : now;

	*skipped = 0;
	if (pos + charge <= end) {
		st->slice_pos = pos + charge;
		return pos;
	}
	__u64 tat = *(volatile __u64 *)&cls->tat_ns;
	const bool whole = end <= tat; /* not cut back under this CPU */
	const __u64 take = (raw_end & SLICE_BEHIND) && tat != end ? slice_size(most) : charge;
	__u64 start = 0;
	bool taken = false;

	for (int i = 0; i < SLICE_IDLE_CAS_TRIES && tat < now; i++) {
		__u64 seen = __sync_val_compare_and_swap(&cls->tat_ns, tat, now + take);

		if (seen == tat) {
			start = now;
			taken = true;
			*skipped = now - tat;
			break;
		}
		tat = seen;
	}
	if (!taken)
		start = __sync_fetch_and_add(&cls->tat_ns, take);
	/* Right behind this CPU's slice: the slice goes on, nothing of it is lost. */
	const bool contiguous = whole && start == end;
	const __u64 at = contiguous && pos < start ? pos : start;

	st->slice_pos = at + charge;
	st->slice_end = (start + take) | (contiguous ? 0 : SLICE_BEHIND);
	return at;
}

/* Gives back `charge`, this CPU's last charge at the class. */
static __always_inline void slice_refund(struct shaper_class *cls, struct shaper_class_stats *st,
					 __u64 charge)
{
	const __u64 raw_end = st->slice_end, end = raw_end & ~SLICE_BEHIND;

	if (st->slice_pos == end &&
	    __sync_val_compare_and_swap(&cls->tat_ns, end, end - charge) == end)
		st->slice_end = raw_end - charge;
	st->slice_pos -= charge;
}

#endif /* SHAPER_SLICE_H */
