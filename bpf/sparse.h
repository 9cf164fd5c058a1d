/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Sparse flows ahead of the class backlog. With one clock per class every flow of the class
 * waits behind the whole backlog: a ping behind eight bulk TCP flows waits as long as they do.
 * A flow whose packets have all left (its last departure time is past, or the flow table has no
 * record of it) has nothing of its own queued: it is sparse, and its packet may leave now instead of at the back of the backlog. A
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
#include "parse.h"

/*
 * The flow's slot in the flow table, and the owner word that marks the slot as the flow's.
 * Direct-mapped rather than a hash map: the lookup is a few inlined instructions instead of a
 * hash and a bucket walk. Two flows sharing a slot each find the other's mark and count as new:
 * at worst a bulk flow is taken for sparse, which the allowance bounds.
 */
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

/* Whether this packet's flow is sparse and the allowance can take it (then charged to it). */
static __always_inline bool sparse_departure(const struct shaper_flow *flow, __u64 owner,
					     const struct shaper_class_config *cfg,
					     struct shaper_class_clock *clk, __u64 cost_ns, __u64 now)
{
	if (!flow || (flow->owner == owner && flow->last_departure_ns > now))
		return false;

	/* The allowance: one compare-and-swap; a lost race just means no early departure. */
	__u64 seen = *(volatile __u64 *)&clk->sparse_tat_ns;
	__u64 base = seen > now ? seen : now;

	if (base + cost_ns > now + cfg->sparse_allowance_ns)
		return false;
	return __sync_val_compare_and_swap(&clk->sparse_tat_ns, seen, base + cost_ns) == seen;
}

/* Remembers when the flow's latest packet leaves. */
static __always_inline void sparse_record(struct shaper_flow *flow, __u64 owner, __u64 departure)
{
	if (flow->owner != owner)
		flow->owner = owner;
	flow->last_departure_ns = departure;
}

#endif /* SHAPER_SPARSE_H */
