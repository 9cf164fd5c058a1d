/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Earliest Departure Time from per-class token buckets: what happens to one packet, in order.
 * The class named by classification and its ancestors are walked twice, first to check every
 * level, then to charge each; between the two, the leaf asks sparse.h, fair.h and aqm.h about
 * the packet; stats.h counts. The arithmetic of one level is gcra.h's, in a global function per
 * pass (edt_peek_level, edt_charge_level) that the verifier checks once, whatever the depth.
 *
 * Each level is a token bucket on its class clock (gcra.h): over any interval T it releases at
 * most burst + rate * T plus the one packet that took the last credit.
 *
 * A packet is charged at its class and at every ancestor (up to SHAPER_MAX_DEPTH levels) and
 * leaves at the latest of their departures. If any level's departure lies beyond that level's
 * horizon, the packet is dropped and charged nowhere. A sparse packet (sparse.h) may leave ahead
 * of its own class's backlog, never ahead of an ancestor's departure for it: ancestors have no
 * allowance, so each keeps its bound exactly. A class with a ceil is the exception (borrow.h):
 * its sparse packets go on its guarantee, and a guarantee waits on no level above.
 *
 * Neighbour discovery (ARP; ICMPv6 router and neighbour discovery, types 133-137) must get
 * through however loaded the class is, or every flow to that neighbour stalls: fair shares and
 * CoDel never drop it, and a horizon lets it past while every level's departure stands within
 * that horizon plus SHAPER_NEIGHBOUR_SLACK_BYTES (128 KiB) at the level's rate. It is charged like
 * any packet and leaves by its class's horizon at the latest (ARP at once where the kernel stamps
 * with bpf_skb_set_tstamp, which takes IP packets only). The class's own traffic overshoots a
 * horizon by one packet at most (64 KiB with GSO), so only a flood of neighbour packets finds
 * the clock further on, and is dropped there. Leaving early, neighbour packets may take what a
 * policer of the same horizon would: over any interval T a level releases at most
 * burst + rate * (T + horizon) + 128 KiB.
 *
 * Concurrency (gcra.h, slice.h): clocks move only by atomics, each CPU charging into a slice
 * of its own, and each level's horizon is checked where the packet's own charge starts; a
 * packet refused there gets its charges back at every level charged. So every packet that
 * leaves, leaves within the horizon of its own now, however many CPUs race. Pass 1 reads where
 * the charges would start first, so that a class already beyond its horizon is not charged.
 */
#ifndef SHAPER_EDT_H
#define SHAPER_EDT_H

#include "maps.h"
#include "gcra.h"
#include "stats.h"
#include "aqm.h"
#include "sparse.h"
#include "fair.h"
#include "ingress.h"
#include "borrow.h"

struct edt_packet {
	struct packet_view *view;
	__u64 now;
	__u32 wire_len;
	__u32 segs;
	bool aqm; /* edt mode: the departure is a queueing delay CoDel may act on */
	/* Non-zero: a local socket sent it, so it may wait instead of being dropped (congestion.h).
	 * A value the verifier does not know (shaper.bpf.c): known, it would check what follows
	 * once for each. */
	__u64 can_wait;
	/* Non-zero: no socket of this host sent it (forwarded): its queue is bounded (fair.h). */
	__u64 sockless;
	/* Non-zero: a local TCP socket on this device sent it, which keeps it if refused (borrow.h). */
	__u64 kept;
};

/* The later of two times (below 2^63), without a branch: each would be one more state for the
 * verifier to carry through pass 2. */
static __always_inline __u64 later_of(__u64 a, __u64 b)
{
	const __u64 d = a - b;

	return a - (d & (__u64)((__s64)d >> 63));
}

static __always_inline __u64 edt_level_cost(const struct edt_packet *pkt,
					    const struct shaper_class *cls)
{
	return shaper_packet_cost(pkt->wire_len, pkt->segs, cls->overhead, cls->mpu);
}

enum edt_verdict {
	EDT_UNSHAPED, /* the class is not configured: the packet passes as unclassified */
	EDT_SEND,     /* *departure is set */
	EDT_DROP,     /* beyond a horizon (counted at every level) or by CoDel (at the class) */
};

/* The departure a packet leaves at: its class's, or its own stamp (TCP pacing) when later. An
 * own stamp more than SHAPER_FOREIGN_TSTAMP_MAX_NS ahead is not a pacing time. */
static __always_inline __u64 honour_own_departure(const struct __sk_buff *skb, __u64 departure,
						 __u64 now)
{
	__u64 own = skb->tstamp;

	if (own > departure && own - now < SHAPER_FOREIGN_TSTAMP_MAX_NS)
		return own;
	return departure;
}

/*
 * 1 for ARP and IPv6 neighbour discovery, else 0, without a branch (each would be one more state
 * for the verifier to carry through both passes). ARP is known by its protocol even unparsed.
 */
static __always_inline __u64 edt_neighbour(struct __sk_buff *skb, const struct packet_view *view)
{
	__u32 not_arp = skb->protocol ^ bpf_htons(ETH_P_ARP_);

	return ((not_arp - 1) >> 31) | view->fields.neighbour;
}

/* One level of pass 1, in a global function: the verifier checks it once on its own, not once
 * per level and path of the packet's walk. */
struct edt_peek {
	__u64 now;            /* in */
	__u64 neighbour_mask; /* in: edt_neighbour's, as a mask */
	__u32 wire_len;       /* in */
	__u32 segs;           /* in */
	__u32 child;          /* the level peeked last: the one below the next */
	__u32 parent;         /* out: the level above; 0 at the top */
	struct borrow_walk walk; /* in and out: which levels it waits on, and when (borrow.h) */
};

__noinline int edt_peek_level(__u32 id, struct edt_peek *p)
{
	struct shaper_class *cls = gcra_class(id);
	struct shaper_class_stats *st = stats_of(id);

	if (!p || !gcra_usable(cls))
		return 0;
	/* In this CPU's slice, or on the shared clock. */
	__u64 tat = st ? slice_peek(st, cls, p->now) : *(volatile __u64 *)&cls->tat_ns;
	const __u64 departure = gcra_departure(tat, cls->burst_ns, p->now);

	/* Asked for a loan by the level below: what the packet costs there decides (borrow.h). */
	const struct shaper_class *child = p->walk.asking ? gcra_class(p->child) : NULL;
	const __u64 child_cost = child ? shaper_packet_cost(p->wire_len, p->segs, child->overhead, child->mpu) : 0;

	borrow_step(&p->walk, cls, child, child_cost, p->now, departure,
		    departure > gcra_horizon(cls, p->now, p->neighbour_mask));
	p->child = id;
	p->parent = cls->parent_id;
	return 1;
}

/* One level of pass 2, likewise: the packet charged at class `id`. */
struct edt_charge {
	__u64 now;            /* in */
	__u64 neighbour_mask; /* in */
	__u32 wire_len;       /* in */
	__u32 segs;           /* in */
	__u8 level;           /* in: 0 at the leaf, counted up by each call */
	__u8 waited;          /* in: pass 1's levels waited on, that asked to borrow, lent to */
	__u8 asked;
	__u8 borrowed;
	__u64 departure;      /* out: when the level lets the packet leave; 0 if not waited on */
	__u32 parent;         /* out */
	__u32 rounded_up;     /* out: 1 when the charge was rounded up (charge.h) */
	__u32 refused;        /* out: 1 when a level waited on puts the departure past its horizon */
};

__noinline int edt_charge_level(__u32 id, struct edt_charge *c)
{
	struct shaper_class *cls = gcra_class(id);
	struct shaper_class_stats *st = stats_of(id);

	if (!c || !st || !gcra_usable(cls))
		return 0;
	const __u8 bit = 1u << (c->level++ & 7);
	const __u64 cost = shaper_packet_cost(c->wire_len, c->segs, cls->overhead, cls->mpu);
	/* A class that asked to borrow is counted at its parent once charged (lend_count_class);
	 * lent to, it is charged at its allotment there (borrow.h), else at its rate. */
	struct shaper_class *parent = c->asked & bit ? gcra_class(cls->parent_id) : NULL;
	struct shaper_class *lender = c->borrowed & bit ? parent : NULL;

	if (parent)
		lend_turn(parent, c->now);
	const __u64 per_byte = lender ? lend_allotment(lender, cls) : cls->ns_per_byte_fp;
	__u32 frac;
	const __u64 whole = shaper_cost_time(cost, per_byte, &frac);
	const __u64 charge = shaper_round_time(whole, frac, &st->clock_carry);
	__u64 skipped;
	const __u64 tat = slice_charge(cls, st, c->now, charge, whole + (frac != 0), &skipped);

	lend_idle(cls, skipped);
	const __u64 departure = gcra_departure(tat, cls->burst_ns, c->now);

	stats_add(st, c->segs, cost);
	c->rounded_up = charge != whole;
	c->parent = cls->parent_id;
	c->refused = (c->waited & bit) && departure > gcra_horizon(cls, c->now, c->neighbour_mask);
	if (parent && !c->refused && lend_shares(cls, parent))
		lend_note(parent, cls, shaper_packet_cost(c->wire_len, c->segs, parent->overhead, parent->mpu));
	/* Borrowed: charged faster than its rate. A lent packet held to its rate (a lower prio takes
	 * the spare) is on its guarantee. */
	if (lender && !c->refused && per_byte < cls->ns_per_byte_fp) {
		st->borrowed_bytes += cost;
		st->ceil_held += per_byte == cls->ceil_ns_per_byte_fp && departure > c->now;
	}
	c->departure = c->waited & bit ? departure : 0;
	return 1;
}

/* Shapes a packet of class `class_id`. */
static __always_inline enum edt_verdict edt_schedule(struct __sk_buff *skb, __u32 class_id,
						     const struct edt_packet *pkt, __u64 *departure)
{
	__u32 id = class_id;
	bool beyond = false;
	__u64 estimate = pkt->now, leaf_departure = pkt->now;
	struct shaper_class *leaf = NULL;
	__u64 sparse_leave = 0; /* set: the packet's flow is sparse, and it leaves then */
	__u32 marks = 0;        /* bit CAUSE_*: that cause CE-marked the packet (stats_marks) */
	struct shaper_flow *flow = NULL;
	/* All ones for neighbour discovery: it may pass its horizons by the slack. */
	const __u64 neighbour = edt_neighbour(skb, pkt->view);
	const __u64 neighbour_mask = -neighbour;

	/* The leaf's counters, fetched now and used by every count below: pass 2 writes them after
	 * the clock's atomic, which orders every later load behind it, so a cold entry would be a
	 * second trip to memory. */
	struct shaper_class_stats *leaf_stats = stats_of(class_id);

	if (leaf_stats) {
		__u64 warm = *(volatile __u64 *)&leaf_stats->packets;

		barrier_var(warm);
	}

	/* Pass 1: every level it waits on must accept the packet before any level is charged. */
	__u8 waited, asked, borrowed;
	{
		struct edt_peek peek = {.now = pkt->now, .neighbour_mask = neighbour_mask,
					.wire_len = pkt->wire_len, .segs = pkt->segs,
					.walk = {.waits = 1, .estimate = pkt->now, .leaf_departure = pkt->now}};

#pragma unroll
		for (int i = 0; i < SHAPER_MAX_DEPTH; i++) {
			if (!edt_peek_level(id, &peek))
				break;
			id = peek.parent;
			if (!id)
				break; /* the top level: no lookups spent on class 0 */
		}
		beyond = peek.walk.beyond;
		estimate = peek.walk.estimate;
		leaf_departure = peek.walk.leaf_departure;
		waited = peek.walk.waited;
		asked = peek.walk.asked;
		borrowed = peek.walk.borrowed;
		if (peek.walk.level)
			leaf = gcra_class(class_id);
	}
	if (!gcra_usable(leaf))
		return EDT_UNSHAPED;
	if (beyond) {
		gcra_refund(class_id, 0, pkt->wire_len, pkt->segs);
		return EDT_DROP;
	}

	/* The leaf's charge: the flow decisions weigh it, pass 2 charges it. */
	__u32 leaf_frac;
	/* At the speed the leaf's clock will be charged: a lent packet's is its allotment, and fair
	 * shares and the sparse allowance measure flows on that clock. */
	const __u64 leaf_per_byte = borrowed & 1 ? borrow_lent_ns_per_byte(class_id) : leaf->ns_per_byte_fp;
	const __u64 cost_ns = shaper_cost_time(edt_level_cost(pkt, leaf), leaf_per_byte, &leaf_frac);

	/* A sparse flow's packet leaves now, or as soon as the sparse allowance takes it; only a
	 * backlogged class makes anyone wait. A bulk flow's packet counts toward its fair share.
	 * Its flow is looked up too while a held flow's packet may still wait beyond the class's
	 * backlog: a flow's later packets must not overtake its held ones. */
	if (pkt->aqm && (leaf->flags & (SHAPER_CLASS_SPARSE | SHAPER_CLASS_FAIR)) &&
	    later_of(estimate, *(volatile __u64 *)&leaf->fair_held_ns) >
		    pkt->now + SHAPER_SPARSE_MIN_BACKLOG_NS) {
		flow = flow_slot(skb, pkt->view, class_id, pkt->now);
		/* Only the leaf's own backlog may be jumped: behind an ancestor's there is no gain,
		 * but for a class with a ceil, whose sparse packets go on its guarantee and wait on
		 * no level above (below), lent or not: a lent ping waited for its parent, and each
		 * next one found it still queued. On the receive side a flow whose window the held
		 * ACKs set never is sparse (ack_pace.h). */
		if ((leaf->flags & SHAPER_CLASS_SPARSE) &&
		    (leaf_departure == estimate || (leaf->flags & SHAPER_CLASS_CEIL)) &&
		    !(ingress && ack_pace_active(pkt->now) && ack_pace_sets_window(&pkt->view->fields)))
			sparse_leave = sparse_departure(flow, leaf, cost_ns + 1, pkt->now, leaf_departure);
		if (!sparse_leave && flow && (leaf->flags & SHAPER_CLASS_FAIR) && !neighbour) {
			const struct fair_packet fp = {.cost_ns = cost_ns, .delay = estimate - pkt->now, .now = pkt->now,
						       .can_wait = pkt->can_wait, .sockless = pkt->sockless};
			const int v = fair_verdict(skb, flow, leaf, leaf_stats, &fp);

			if (v == CONGESTION_DROP) {
				stats_drop(leaf_stats, CAUSE_FAIR);
				return EDT_DROP;
			}
			marks |= (__u32)(v == CONGESTION_MARKED) << CAUSE_FAIR;
		}
	}

	/* A class with a ceil queues what its sockets keep within a bound, or one packet at its
	 * rate (borrow.h): its packets' stamps cannot move when its allotment does. */
	if (!sparse_leave && pkt->kept && (leaf->flags & SHAPER_CLASS_CEIL) && !neighbour) {
		__u32 frac;
		const __u64 at_rate = shaper_cost_time(edt_level_cost(pkt, leaf), leaf->ns_per_byte_fp, &frac);

		if (estimate - pkt->now > later_of(BORROW_QUEUE_NS, at_rate)) {
			if (leaf_stats)
				leaf_stats->drops_horizon++;
			return EDT_DROP;
		}
	}

	/* CoDel on the delay this packet would wait (on the receive side, ingress.h's verdict); a
	 * dropped packet is charged nowhere. A sparse packet waits for no backlog and tells CoDel
	 * nothing. */
	if (pkt->aqm && !sparse_leave && !neighbour) {
		const __u64 delay = estimate - pkt->now;
		enum congestion_verdict v = ingress ? ingress_decide(skb, pkt->view, class_id, leaf, delay, pkt->now)
						    : aqm_decide(skb, class_id, leaf, delay, pkt->now, pkt->can_wait);

		if (v == CONGESTION_DROP) {
			stats_drop(leaf_stats, CAUSE_AQM);
			return EDT_DROP;
		}
		marks |= (__u32)(v == CONGESTION_MARKED) << CAUSE_AQM;
	}

	/* Pass 2: charge every level, each checked against its horizon where its charge starts:
	 * other CPUs may have charged it since pass 1. */
	__u64 latest = pkt->now, above = pkt->now; /* above: the ancestors' latest departure */
	bool refused = false;  /* a level's horizon refused the packet */
	__u32 charged = 0;     /* bit i: level i was charged */
	__u32 rounded_up = 0;  /* bit i: level i's charge was rounded up */

	struct edt_charge level = {
		.now = pkt->now, .neighbour_mask = neighbour_mask, .wire_len = pkt->wire_len, .segs = pkt->segs,
		.waited = waited, .asked = asked, .borrowed = borrowed,
	};

	id = class_id;
#pragma unroll
	for (int i = 0; i < SHAPER_MAX_DEPTH; i++) {
		if (!edt_charge_level(id, &level))
			break;
		if (asked >> i & 1) /* a global function: its own stack; a class without a ceil skips it */
			lend_count_class(id, pkt->now);
		/* Without branches, so that they add no verifier paths: */
		charged = charged << 1 | 1;
		rounded_up |= level.rounded_up << i;
		if (level.refused) {
			refused = true;
			break;
		}
		if (level.departure > latest)
			latest = level.departure;
		if (i && level.departure > above)
			above = level.departure;
		id = level.parent;
		if (!id)
			break;
	}
	if (refused) {
		gcra_refund(class_id,
			    charged | rounded_up << GCRA_ROUNDED_UP_SHIFT | (__u32)borrowed << GCRA_BORROWED_SHIFT,
			    pkt->wire_len, pkt->segs);
		return EDT_DROP;
	}
	stats_marks(leaf_stats, marks);
	if (sparse_leave) {
		if (leaf_stats)
			leaf_stats->sparse++;
		/* A sparse packet of a class with a ceil goes on its guarantee (the sparse allowance
		 * runs at the rate): it waits on no level above. */
		latest = sparse_leave > above || (leaf->flags & SHAPER_CLASS_CEIL) ? sparse_leave : above;
	}
	/* Neighbour discovery leaves by its class's horizon at the latest (sch_fq's is no shorter):
	 * the smaller of the two, picked without a branch, as `neighbour` was. */
	const __u64 cap = pkt->now + leaf->horizon_ns;
	const __u64 over = latest - cap;
	const __u64 capped = cap + (over & (__u64)((__s64)over >> 63));

	latest -= (latest - capped) & neighbour_mask;
	latest = honour_own_departure(skb, latest, pkt->now);
	if (flow) {
		/* A flow's packets leave in order: after a packet of its own still waiting, and a held
		 * one at its hold (fair.h). */
		latest = later_of(latest, flow->last_departure_ns);
		sparse_record(flow, latest); /* the departure stamped, TCP's own included */
	}
	*departure = latest;
	return EDT_SEND;
}

#endif /* SHAPER_EDT_H */
