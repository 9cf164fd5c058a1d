/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Flow identity: which flow a packet belongs to, and its record in the flow table. Sparse flows
 * (sparse.h), fair shares (fair.h) and the separation of sch_fq's flows (shaper.bpf.c) key on it.
 *
 * The hash is the kernel's skb->hash (sockets set it), or else one of the addresses, protocol and
 * ports, cheaper than having the kernel dissect the packet for it.
 *
 * The table is two-way set-associative: SHAPER_FLOW_BUCKETS buckets of two ways, each way tagged
 * with its flow's owner word (class id << 32 | hash). A packet's record is the way bearing its
 * tag, so two flows sharing a bucket never take each other's record. A flow without one takes
 * a free way, else the way whose flow has nothing queued (its last departure is past), the one
 * that left first. When both ways' flows have packets queued the new flow gets no record.
 *
 * Bounds:
 *  - a flow with a packet queued keeps its way: it is never taken for sparse, and its fair
 *    charge is never lost while it has packets waiting;
 *  - a flow that lost its way had nothing queued, so it is rightly sparse when it returns; it
 *    starts its epoch's fair charge again (what a way counts toward fair shares: fair.h);
 *  - a flow without a record (a third flow with packets queued in one bucket at once) is taken
 *    for bulk: it waits behind the backlog, held by the class clock, CoDel and the horizon, but
 *    is neither counted nor acted on for fair shares.
 * Records are read and written without atomics: two CPUs inserting different flows into one
 * way at once leave one owner, and the other's packet updates that owner's record.
 *
 * The hash and the bucket are plain arithmetic, shared with the C++ tests (which craft flows
 * that collide); the rest is the datapath's.
 */
#ifndef SHAPER_FLOW_H
#define SHAPER_FLOW_H

#include "shaper_abi.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* The hash of a packet the kernel has not hashed: addresses (network order words, IPv4 in the
 * first), ports and protocol, multiplied apart. Never 0 (0 means "not computed"). */
static __always_inline __u32 flow_hash_of_fields(const __u32 src[4], const __u32 dst[4],
						 __u16 sport, __u16 dport, __u8 proto)
{
	__u64 h = ((__u64)src[0] ^ src[1] ^ src[2] ^ src[3]) * 0x9e3779b97f4a7c15ull +
		  ((__u64)dst[0] ^ dst[1] ^ dst[2] ^ dst[3]) * 0xc2b2ae3d27d4eb4full +
		  ((__u64)sport << 16 | dport | (__u64)proto << 32) * 0x165667b19e3779f9ull;

	return (__u32)(h >> 32) | 1;
}

/* The flow's bucket. skb->hash is already well mixed; the multiply spreads one flow's classes
 * apart. */
static __always_inline __u32 flow_bucket_of(__u32 hash, __u32 class_id)
{
	return (hash ^ (class_id * 0x9e3779b9u)) & (SHAPER_FLOW_BUCKETS - 1);
}

#ifdef __bpf__
#include "maps.h"
#include "parse.h"

static __always_inline __u32 flow_hash(struct __sk_buff *skb, struct packet_view *view)
{
	__u32 hash = skb->hash;

	if (hash)
		return hash;
	if (!view->flow_hash) { /* parsed: the kernel set no hash */
		const struct packet_fields *f = &view->fields;

		view->flow_hash = flow_hash_of_fields(f->src, f->dst, f->sport, f->dport, f->proto);
	}
	return view->flow_hash;
}

/*
 * The flow's record: found by its tag, or taken for it (its departure 0 and its fair counts
 * reset); NULL when the flow has none (both ways hold flows with packets queued at `now`).
 */
static __always_inline struct shaper_flow *flow_slot(struct __sk_buff *skb, struct packet_view *view,
						     __u32 class_id, __u64 now)
{
	__u32 hash = flow_hash(skb, view);
	__u64 owner = (__u64)class_id << 32 | hash;
	/* Each way looked up apart (two inlined array indexings): pointers of one kind, so the
	 * verifier goes on from them once, not once per way. */
	__u32 index = flow_bucket_of(hash, class_id) * 2;
	struct shaper_flow *first = bpf_map_lookup_elem(&shaper_flows, &index);

	index++;
	struct shaper_flow *second = bpf_map_lookup_elem(&shaper_flows, &index);

	if (!first || !second)
		return NULL;
	if (first->owner == owner)
		return first;
	if (second->owner == owner)
		return second;
	/* A free way has departure 0: it is taken first. */
	struct shaper_flow *way =
		first->last_departure_ns <= second->last_departure_ns ? first : second;

	if (way->last_departure_ns > now)
		return NULL;
	way->owner = owner;
	way->last_departure_ns = 0;
	way->fair_epoch = 0;
	way->fair_charged_ns = 0;
	way->fair_acted_epoch = 0;
	way->fair_flood = 0;
	return way;
}
#endif /* __bpf__ */

#endif /* SHAPER_FLOW_H */
