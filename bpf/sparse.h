/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Sparse flows ahead of the class backlog. With one clock per class every flow of the class
 * waits behind the whole backlog: a ping behind eight bulk TCP flows waits as long as they do.
 * A flow whose packets have all left (its last departure time is past, or the flow table has no
 * record of it) has nothing of its own queued: it is sparse, and its packet may leave now instead
 * of at the back of the backlog. A bulk flow always has packets waiting, so it never is.
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
#include "parse.h"

#define SPARSE_CAS_TRIES 4

/*
 * The flow's hash: the kernel's (sockets set it), or else one of the addresses, protocol and
 * ports, cheaper than having the kernel dissect the packet for it.
 */
static __always_inline __u32 flow_hash(struct __sk_buff *skb, struct packet_view *view)
{
	__u32 hash = skb->hash;

	if (hash)
		return hash;
	if (view->flow_hash)
		return view->flow_hash;
	const struct packet_fields *f = &view->fields; /* parsed: the kernel set no hash */
	__u64 h = ((__u64)f->src[0] ^ f->src[1] ^ f->src[2] ^ f->src[3]) * 0x9e3779b97f4a7c15ull +
		  ((__u64)f->dst[0] ^ f->dst[1] ^ f->dst[2] ^ f->dst[3]) * 0xc2b2ae3d27d4eb4full +
		  ((__u64)f->sport << 16 | f->dport | (__u64)f->proto << 32) * 0x165667b19e3779f9ull;

	view->flow_hash = (__u32)(h >> 32) | 1;
	return view->flow_hash;
}

/*
 * The flow's slot in the flow table, and the owner word that marks the slot as the flow's.
 * Direct-mapped rather than a hash map: the lookup is a few inlined instructions instead of a
 * hash and a bucket walk. Two flows sharing a slot each find the other's mark and count as new:
 * at worst a bulk flow is taken for sparse, which the allowance bounds.
 */
static __always_inline struct shaper_flow *flow_slot(struct __sk_buff *skb,
						     struct packet_view *view, __u32 class_id,
						     __u64 *owner)
{
	__u32 hash = flow_hash(skb, view);

	*owner = (__u64)class_id << 32 | hash;
	/* skb->hash is already well mixed; the multiply spreads one flow's classes apart. */
	__u32 index = (hash ^ (class_id * 0x9e3779b9u)) & (SHAPER_FLOW_SLOTS - 1);

	return bpf_map_lookup_elem(&shaper_flows, &index);
}

/*
 * When this packet of a sparse flow leaves (and is charged to the allowance), or 0: its flow is
 * not sparse, or the allowance cannot take it soon. The allowance is a token bucket at the class
 * rate: a packet it cannot take at once waits until it can, if that is within the bucket's depth
 * (a frame or two) and before `backlog_departure`. Sent behind the backlog, it would leave its
 * flow busy for as long as the backlog stands, and every later packet of the flow (a ping each
 * 50 ms behind 64 bulk flows' 100 ms) would wait as long. More sparse traffic than that joins
 * the backlog: one-packet flows never get more than the bucket ahead of the bulk ones.
 */
static __always_inline __u64 sparse_departure(const struct shaper_flow *flow, __u64 owner,
					      const struct shaper_class_config *cfg,
					      struct shaper_class_clock *clk, __u64 cost_ns,
					      __u64 now, __u64 backlog_departure)
{
	if (!flow || (flow->owner == owner && flow->last_departure_ns > now))
		return 0;

	/* The allowance's clock moves by compare-and-swap; a race lost to another CPU is retried
	 * (a packet refused here would wait behind the backlog, and its flow with it). */
	__u64 seen = *(volatile __u64 *)&clk->sparse_tat_ns;

	for (int i = 0; i < SPARSE_CAS_TRIES; i++) {
		__u64 next = (seen > now ? seen : now) + cost_ns;
		__u64 leave = next > now + cfg->sparse_allowance_ns ? next - cfg->sparse_allowance_ns : now;

		if (leave >= backlog_departure || leave > now + cfg->sparse_allowance_ns)
			return 0;
		__u64 was = __sync_val_compare_and_swap(&clk->sparse_tat_ns, seen, next);

		if (was == seen)
			return leave;
		seen = was;
	}
	return 0;
}

/* Remembers when the flow's latest packet leaves. */
static __always_inline void sparse_record(struct shaper_flow *flow, __u64 owner, __u64 departure)
{
	if (flow->owner != owner)
		flow->owner = owner;
	flow->last_departure_ns = departure;
}

#endif /* SHAPER_SPARSE_H */
