/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Sparse flows ahead of the class backlog. With one clock per class every flow of the class
 * waits behind the whole backlog: a ping behind eight bulk TCP flows waits as long as they do.
 * A flow whose packets have all left (its last departure time is past) has nothing of its own
 * queued: it is sparse, and its packet may leave now instead of at the back of the backlog. A
 * bulk flow always has packets waiting, so it never is.
 *
 * The packet is still charged to the class clock like any other, so the bulk flows behind it
 * leave later by its cost. What sparse packets may take early is itself a token bucket at the
 * class rate, two frames deep: over any interval T the class releases at most
 * burst + two frames + rate * T plus one packet.
 */
#ifndef SHAPER_SPARSE_H
#define SHAPER_SPARSE_H

#include "maps.h"

static __always_inline struct shaper_flow_key flow_key(struct __sk_buff *skb, __u32 class_id)
{
	__u32 hash = skb->hash;
	struct shaper_flow_key key = { .class_id = class_id };

	key.hash = hash ? hash : bpf_get_hash_recalc(skb);
	return key;
}

/*
 * Whether this packet's flow is sparse and the allowance can take it (then charged to it).
 * *last_departure points at the flow's entry, for sparse_record(); NULL when it has none yet.
 */
static __always_inline bool sparse_departure(const struct shaper_flow_key *key,
					     const struct shaper_class_config *cfg,
					     struct shaper_class_clock *clk, __u64 cost_ns, __u64 now,
					     __u64 **last_departure)
{
	*last_departure = bpf_map_lookup_elem(&shaper_flows, key);
	if (*last_departure && **last_departure > now)
		return false;

	/* The allowance: one compare-and-swap; a lost race just means no early departure. */
	__u64 seen = *(volatile __u64 *)&clk->sparse_tat_ns;
	__u64 base = seen > now ? seen : now;

	if (base + cost_ns > now + cfg->sparse_allowance_ns)
		return false;
	return __sync_val_compare_and_swap(&clk->sparse_tat_ns, seen, base + cost_ns) == seen;
}

/* Remembers when the flow's latest packet leaves. */
static __always_inline void sparse_record(const struct shaper_flow_key *key, __u64 *last_departure,
					  __u64 departure)
{
	if (last_departure)
		*last_departure = departure;
	else
		bpf_map_update_elem(&shaper_flows, key, &departure, BPF_ANY);
}

#endif /* SHAPER_SPARSE_H */
