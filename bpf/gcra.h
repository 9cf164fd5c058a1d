/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * One level's token bucket: GCRA on its class clock, with a horizon.
 *
 * Each class keeps a clock `tat` (GCRA's theoretical arrival time): the instant at which all
 * it has been charged has left at its rate. A packet arriving at `now` may leave at
 *     departure = max(now, tat - burst_ns)
 * and advances the clock to max(tat, now) + cost / rate. So a class idle for burst_ns or more
 * holds `burst` bytes of credit; sustained traffic leaves at `rate`; over any interval T the
 * class releases at most burst + rate * T plus the one packet that took the last credit. A
 * packet bigger than the burst still leaves, taking debt that delays the packets after it.
 *
 * A level accepts a departure up to its horizon past now; neighbour discovery may pass it by
 * SHAPER_NEIGHBOUR_SLACK_BYTES at the level's rate (edt.h says why).
 *
 * Concurrency: the clock only moves through atomics, each CPU charging into a slice of it of
 * its own (slice.h: exact for a CPU alone on a class; with several, never faster, and slower
 * by at most the credit their slices leave unused). No charge is lost or doubled. Sub-ns
 * remainders are rounded per CPU (charge.h), with no atomic. The horizon is checked on where
 * each level's charge starts, behind every charge made before it on any CPU: a packet that
 * lands beyond is given its charges back (to the clock, or to the CPU's slice, at every level
 * charged) and dropped. So every packet that leaves, leaves
 * within the horizon of its own now, however many CPUs race; a charge given back only makes the
 * packets that saw it meanwhile wait (or drop) as if it stood. Pass 1 reads the clocks first so
 * that a class already beyond its horizon is not charged at all.
 */
#ifndef SHAPER_GCRA_H
#define SHAPER_GCRA_H

#include "maps.h"
#include "charge.h"
#include "stats.h"
#include "slice.h"

/* The class a walk may stand on: configured, with a usable rate. */
static __always_inline bool gcra_usable(const struct shaper_class *cls)
{
	return cls && (cls->flags & SHAPER_CLASS_PRESENT) && cls->ns_per_byte_fp;
}

static __always_inline struct shaper_class *gcra_class(__u32 id)
{
	return bpf_map_lookup_elem(&shaper_classes, &id);
}

/* Departure allowed by a clock value read before this packet's charge. */
static __always_inline __u64 gcra_departure(__u64 tat, __u64 burst_ns, __u64 now)
{
	return tat > now + burst_ns ? tat - burst_ns : now;
}

/*
 * A packet refused for a horizon: its drop is counted at every level from class `id` up, and
 * the levels pass 2 had charged (bit i of `levels`: level i, the leaf being 0) get their charges
 * back with their counters and rounding (bit 8 + i: level i's charge was rounded up, charge.h;
 * bit 16 + i: level i borrowed, borrow.h). A global function, so the verifier checks it once on its own instead of once per
 * path that ends in a horizon drop.
 */
#define GCRA_ROUNDED_UP_SHIFT 8
#define GCRA_BORROWED_SHIFT 16

__noinline int gcra_refund(__u32 id, __u32 levels, __u32 wire_len, __u32 segs)
{
	const __u32 charged = levels & 0xff, rounded_up = (levels >> GCRA_ROUNDED_UP_SHIFT) & 0xff;
	const __u32 borrowed = (levels >> GCRA_BORROWED_SHIFT) & 0xff;

	for (int i = 0; i < SHAPER_MAX_DEPTH; i++) {
		struct shaper_class *cls = gcra_class(id);
		struct shaper_class_stats *st = stats_of(id);

		if (!st || !gcra_usable(cls))
			break;
		st->drops_horizon++;
		if ((charged >> i) & 1) {
			const __u64 cost = shaper_packet_cost(wire_len, segs, cls->overhead, cls->mpu);
			__u32 frac;
			/* A borrowed charge (bit i of `borrowed`, borrow.h) lay between the ceil's and
			 * the rate's: given back at the ceil's, never more than was taken. */
			const __u64 per_byte = (borrowed >> i) & 1 ? cls->ceil_ns_per_byte_fp : cls->ns_per_byte_fp;
			const __u64 whole = shaper_cost_time(cost, per_byte, &frac);
			const __u64 up = (rounded_up >> i) & 1;

			slice_refund(cls, st, whole + up);
			st->clock_carry = up ? st->clock_carry - ((1ull << SHAPER_NS_FRAC_BITS) - frac)
					     : st->clock_carry + frac;
			st->packets--;
			st->segments -= segs;
			st->bytes -= cost;
		}
		id = cls->parent_id;
		if (!id)
			break;
	}
	return 0;
}

/* The latest departure a level accepts: its horizon, plus for neighbour discovery (mask all
 * ones) the slack at the level's rate, 2^17 bytes of ns_per_byte_fp's 2^-32 ns. */
static __always_inline __u64 gcra_horizon(const struct shaper_class *cls, __u64 now,
					  __u64 neighbour_mask)
{
	return now + cls->horizon_ns +
	       ((cls->ns_per_byte_fp >> (SHAPER_NS_FRAC_BITS - SHAPER_NEIGHBOUR_SLACK_LOG2)) &
		neighbour_mask);
}

#endif /* SHAPER_GCRA_H */
