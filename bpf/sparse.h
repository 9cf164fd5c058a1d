/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Sparse flows ahead of the class backlog. With one clock per class every flow of the class
 * waits behind the whole backlog: a ping behind eight bulk TCP flows waits as long as they do.
 * A flow whose packets have all left (its last departure time is past, or it is new to the flow
 * table) has nothing of its own queued: it is sparse, and its packet may leave now instead of at
 * the back of the backlog. A bulk flow always has packets waiting, so it never is; nor is a flow
 * the table has no record for (bpf/flow.h): not knowing, it waits behind the backlog.
 *
 * The packet is still charged to the class clock like any other, so the bulk flows behind it
 * leave later by its cost. What sparse packets may take early is itself a token bucket at the
 * class rate, two frames deep (the allowance): over any interval T sparse packets leave at most
 * two frames + rate * T, and one the bucket cannot take at once waits until it can, unless the
 * backlog would let it leave sooner.
 */
#ifndef SHAPER_SPARSE_H
#define SHAPER_SPARSE_H

#include "maps.h"
#include "flow.h"

#define SPARSE_CAS_TRIES 4

/*
 * When this packet of a sparse flow leaves (and is charged to the allowance), or 0: its flow is
 * not sparse, or the allowance cannot take it soon. The allowance is a token bucket at the class
 * rate: a packet it cannot take at once waits until it can, if that is within the bucket's depth
 * (a frame or two) and before `backlog_departure`. Sent behind the backlog, it would leave its
 * flow busy for as long as the backlog stands, and every later packet of the flow (a ping each
 * 50 ms behind 64 bulk flows' 100 ms) would wait as long. More sparse traffic than that joins
 * the backlog: one-packet flows never get more than the bucket ahead of the bulk ones.
 */
static __always_inline __u64 sparse_departure(const struct shaper_flow *flow,
					      struct shaper_class *cls, __u64 cost_ns, __u64 now,
					      __u64 backlog_departure)
{
	if (!flow || flow->last_departure_ns > now)
		return 0; /* no record (flow.h), or a packet of its own still queued */

	/* The allowance's clock moves by compare-and-swap; a race lost to another CPU is retried
	 * (a packet refused here would wait behind the backlog, and its flow with it). */
	__u64 seen = *(volatile __u64 *)&cls->sparse_tat_ns;

	for (int i = 0; i < SPARSE_CAS_TRIES; i++) {
		__u64 next = (seen > now ? seen : now) + cost_ns;
		__u64 leave = next > now + cls->sparse_allowance_ns ? next - cls->sparse_allowance_ns : now;

		if (leave >= backlog_departure || leave > now + cls->sparse_allowance_ns)
			return 0;
		__u64 was = __sync_val_compare_and_swap(&cls->sparse_tat_ns, seen, next);

		if (was == seen)
			return leave;
		seen = was;
	}
	return 0;
}

/* Remembers when the flow's latest packet leaves. */
static __always_inline void sparse_record(struct shaper_flow *flow, __u64 departure)
{
	flow->last_departure_ns = departure;
}

#endif /* SHAPER_SPARSE_H */
