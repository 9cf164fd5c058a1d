/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * How long the shaper holds each packet it stamps, per class: EDT knows it when it stamps
 * (departure - now; police mode and the receive side hold nothing and record nothing). A
 * histogram in the class's counters of this CPU (stats.h), so no line is shared between CPUs
 * per packet: the delay's sum and one of SHAPER_DELAY_BUCKETS buckets.
 *
 * Buckets, by upper bound (a delay equal to a bound counts in that bound's bucket, as a
 * Prometheus `le`): bucket 0 up to 2^14 ns (16.4 us); the bound doubles to bucket 11's 2^25 ns
 * (33.6 ms); then it quadruples, so that 16 buckets reach past the default horizon (2 s):
 * 2^27 (134 ms), 2^29 (537 ms), 2^31 ns (2.15 s); bucket 15 holds everything longer. A delay read
 * from a bucket is off by at most the bucket's width: a factor of 2 up to 33.6 ms, of 4 above.
 *
 * The bucket is found without a branch (the verifier checks the caller's paths once): the
 * delay's significant bits counted by halving, 6 steps.
 */
#ifndef SHAPER_DELAY_H
#define SHAPER_DELAY_H

#include "stats.h"

/* 1 if x > limit, else 0, for x and limit below 2^63: the sign of limit - x. */
#define DELAY_ABOVE(x, limit) ((__u32)(((__u64)(limit) - (x)) >> 63))

static __always_inline __u32 delay_bucket(__u64 delay_ns)
{
	/* One less, so that a delay on a bound falls in its bucket; 0 stays 0. */
	__u64 d = delay_ns - 1;

	d &= ~(__u64)((__s64)d >> 63);
	__u64 x = d >> SHAPER_DELAY_FIRST_SHIFT; /* below 2^50 */
	__u32 bits = 0, s;

	s = DELAY_ABOVE(x, 0xffffffffull) << 5, x >>= s, bits += s;
	s = DELAY_ABOVE(x, 0xffff) << 4, x >>= s, bits += s;
	s = DELAY_ABOVE(x, 0xff) << 3, x >>= s, bits += s;
	s = DELAY_ABOVE(x, 0xf) << 2, x >>= s, bits += s;
	s = DELAY_ABOVE(x, 0x3) << 1, x >>= s, bits += s;
	s = DELAY_ABOVE(x, 0x1), x >>= s, bits += s;
	bits += (__u32)x; /* x is 0 or 1 now: bits is x's bit length, 0 for a delay up to 2^14 ns */

	/* Past SHAPER_DELAY_DOUBLINGS, one bucket per two bits; then at most the last bucket. */
	__u32 t = bits - SHAPER_DELAY_DOUBLINGS;

	bits -= (t & ~(__u32)((__s32)t >> 31)) >> 1;
	t = bits - (SHAPER_DELAY_BUCKETS - 1);
	bits -= t & ~(__u32)((__s32)t >> 31);
	return bits & (SHAPER_DELAY_BUCKETS - 1);
}

static __always_inline void delay_record(__u32 class_id, __u64 delay_ns)
{
	struct shaper_class_stats *st = stats_of(class_id);

	if (!st)
		return;
	st->delay_sum_ns += delay_ns;
	st->delay_buckets[delay_bucket(delay_ns)]++;
}

#endif /* SHAPER_DELAY_H */
