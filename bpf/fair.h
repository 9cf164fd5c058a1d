/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Fair shares among a class's bulk flows. One clock per class is one FIFO: a flow's throughput
 * is its share of the backlog, so an aggressive flow (or one that stopped backing off) crowds out
 * the others. Fairness acts on admission, the way approximate fair dropping does in switches,
 * except that a flow which can wait is made to wait rather than lose packets:
 *
 *  - time is cut into epochs; in each, the class counts its bulk flows, and at its end the share
 *    is the class time charged in it divided by that count. A flow is a bulk flow of the epoch
 *    once it has asked for more than the sparse allowance (two frames) in it: one-packet flows
 *    (port churn, DNS) would otherwise shrink the share of the flows that do send. It is counted
 *    through its way of the flow table (bpf/flow.h), at most once per epoch whichever flows hold
 *    the way in turn. An epoch lasts 100 ms, or long enough for a share of sixteen frames when
 *    there are many flows (up to 1 s): shares of a packet or two would make every flow look
 *    unfair by chance;
 *  - each flow adds up the class time it is charged in the current epoch; past the last
 *    epoch's share it is above it;
 *  - a flow whose drop would be a loss and which can wait (a local TCP socket's sent through
 *    another device, a bridge: packet_refusal in shaper.bpf.c) is held to its share, and
 *    nothing is lost: each packet leaves no earlier than the flow's own clock, which starts where
 *    the class clock stood when the epoch began and runs at the flows' count times what the
 *    flow was charged before the packet (its share of the class rate), never before its class
 *    slot. Its socket cannot queue more than TCP small queues allow until a packet leaves, so
 *    holding the packets holds the sender. Only while that is at most SHAPER_FAIR_HOLD_MAX_NS
 *    (250 ms) after its class slot: further (64 KB GSO packets at a share of under 2 Mbit/s) a
 *    hold would only delay the flow, not keep it to its share, and it is signalled as below.
 *    Past the horizon a held packet is dropped like any other. A flow's packets leave in order:
 *    every later packet of a held flow leaves after its last one (edt.h);
 *  - any other flow past its share by the class's tolerance (an eighth unless configured
 *    otherwise, per mille of the share) plus a frame (forwarded: no socket to hold; UDP; a local
 *    socket's on its own device, where a drop is refused to its transmit and sent again): one
 *    packet is CE-marked (ECN-capable, ECN on) or dropped, at most once per epoch per flow. A flow past
 *    twice its share in two epochs running has not backed off (a UDP flood): past twice its
 *    share, the rest of its epoch is dropped, and so in every epoch it stays there. The first
 *    such epoch only signals it: TCP leaving slow start, or holding a large window when new
 *    flows shrink the share, halves within a round trip of the signal, and dropping what it
 *    had already sent would cost it retransmissions for nothing. A held flow that a
 *    hold cannot keep to its share is signalled the same way, once per epoch, but never dropped
 *    as a flood: TCP small queues bound what it puts into the class;
 *  - only while the class backlog stands above the CoDel target: below it nobody waits long,
 *    and backing flows off would only leave the class idle;
 *  - a queue no socket of this host holds (forwarded packets, a container's seen on the host
 *    side of its veth: packet_sockless in shaper.bpf.c) is bounded by its senders' losses and
 *    marks alone: past SHAPER_FAIR_EPOCH_NS (100 ms) of backlog, each flow above its share, a
 *    lone flow (no share) too, is signalled once per epoch, tolerance or not; past 200 ms (TCP's
 *    least retransmission timeout), once per 100 ms of the epoch, above its share pro rata
 *    (what the last epoch's share allows by 100 ms from now). The backlog is part of every
 *    round trip, so a sender loses at most one packet per round trip (past 200 ms, one per
 *    100 ms of a round trip that long). Before, a lone forwarded flow filled the class to its
 *    horizon (2 s) and lost a burst there; signalled once per epoch, eight flows into 2 Mbit/s
 *    (an epoch of 0.78 s) stood 0.2-0.5 s deep and lost 8-27 % of the rate to timeouts firing
 *    on data still queued (bench/results/forwarded.md).
 *
 * A flow at or below the share is never touched; a held flow sends at its share from the
 * packet past it on; other TCP flows above it back off until they are at it. A flood
 * holds at most about two shares from its second epoch past them; in its first it takes what its
 * sending rate wins of the class FIFO. Sparse packets, and flows that have asked
 * for no more than the allowance, are neither counted nor acted on. A dropped packet is charged
 * nowhere.
 *
 * Bound on the rate: a held packet is charged at its class slot like any other and leaves up to
 * 250 ms later, so a slot may stand empty and the packet go out beside a later one. Over any
 * interval T every level still releases at most what its clock gave out in T + 250 ms: burst +
 * rate * (T + 250 ms), and the same rate over any long run; only held flows add the 250 ms.
 * 250 ms holds 64 KB GSO packets (what TCP sends on a path of under 0.5 ms) at a share of
 * 2.5 Mbit/s, eight flows in 20 Mbit; at 50 ms those flows were signalled and dropped.
 *
 * Bound on the count: each count stands for a flow that asked for more than the allowance in
 * the epoch, so the count times the allowance stays below the class time asked; and a bucket's
 * two ways count at most twice, and no more often than distinct flows of the class sent into it
 * (unless flows of another class hold a way in between: then once per turn). Colliding flows
 * and port churn can no longer inflate the count and shrink the share of the flows that send.
 */
#ifndef SHAPER_FAIR_H
#define SHAPER_FAIR_H

#include "maps.h"
#include "congestion.h"

/* Ends the epoch once it has run its length: the first packet to see that computes the share. */
static __always_inline void fair_roll_epoch(struct shaper_class *cls, __u64 now)
{
	__u64 start = *(volatile __u64 *)&cls->fair_epoch_ns;
	__u64 len = cls->fair_epoch_len_ns ? cls->fair_epoch_len_ns : SHAPER_FAIR_EPOCH_NS;

	/* Signed: another CPU may have rolled it at a `now` later than ours; rolling it back to an
	 * earlier now would end an epoch that counted almost no flow, and leave no share. */
	if ((__s64)(now - start) < (__s64)len)
		return;
	if (__sync_val_compare_and_swap(&cls->fair_epoch_ns, start, now) != start)
		return; /* another CPU rolls it */

	__u64 tat = *(volatile __u64 *)&cls->tat_ns;
	__u64 flows = __sync_lock_test_and_set(&cls->fair_flows, 0u);
	__u64 charged = tat - cls->fair_epoch_tat_ns;

	cls->fair_epoch_tat_ns = tat;
	/* A share only from a whole epoch that just ended (not after an idle gap), among two flows
	 * at least: a lone flow has nobody to be unfair to. */
	cls->fair_share_ns = (flows >= 2 && now - start < 2 * len) ? charged / flows : 0;
	cls->fair_share_flows = flows;
	/* Sixteen frames per flow: eight times the two frames of the sparse allowance. */
	len = flows * 8 * cls->sparse_allowance_ns;
	cls->fair_epoch_len_ns = len < SHAPER_FAIR_EPOCH_NS	  ? SHAPER_FAIR_EPOCH_NS
				 : len > SHAPER_FAIR_EPOCH_MAX_NS ? SHAPER_FAIR_EPOCH_MAX_NS
								  : len;
	__sync_fetch_and_add(&cls->fair_epoch, 1);
}

/* An epoch as fair_flood keeps it: 1 to 32767, never 0, the value of a fresh record. */
static __always_inline __u16 fair_flood_epoch(__u32 epoch)
{
	return (__u16)((epoch % 0x7fff + 1) << 1);
}

/* Whether a flow past twice its share now was past twice its share in the last epoch as well:
 * the first packet past it in an epoch records the epoch (modulo 32767, so a flow that held its
 * record through a multiple of 32767 epochs, about an hour, may be taken for a flood one epoch
 * early). */
static __always_inline bool fair_flooding(struct shaper_flow *flow, __u32 epoch)
{
	__u16 flood = flow->fair_flood;
	const __u16 now = fair_flood_epoch(epoch);

	if ((flood & ~1) != now) {
		flood = now | ((flood & ~1) == fair_flood_epoch(epoch - 1));
		flow->fair_flood = flood;
	}
	return flood & 1;
}

/* When a held flow's packet leaves: its own clock at its share, started where the class's
 * clock stood when the epoch began, after what the flow was charged before it in the epoch
 * (`before`) times the flows the share was measured among; never before `departure`, the class's.
 * A flow at its share gets the class's slots; each packet above it waits as long as the others'
 * shares take. 0 if that is more than SHAPER_FAIR_HOLD_MAX_NS after the class's departure (a hold
 * that long would not keep the flow to its share, only delay it). */
static __always_inline __u64 fair_held_departure(const struct shaper_class *cls, __u64 before,
						 __u64 departure)
{
	__u64 next = *(volatile __u64 *)&cls->fair_epoch_tat_ns + before * cls->fair_share_flows;

	if (next > departure + SHAPER_FAIR_HOLD_MAX_NS)
		return 0;
	return next > departure ? next : departure;
}

/* Counts a bulk packet of `flow` (cost_ns of class time) and says whether its flow is above its
 * share. `delay` is the class backlog the packet would wait behind; `can_wait`, that a local
 * socket sent it: then a flow above its share is held, and passes. Held means the flow's last
 * departure is moved to when this packet may leave, which edt.h's rule that a flow's packets
 * leave in order then applies to it: carried as a value, the hold would be one more state for
 * the verifier to check pass 2 with (6.1's tracks every scalar exactly here). It is counted in
 * `st` at once. */
static __always_inline enum congestion_verdict fair_decide(struct __sk_buff *skb, struct shaper_flow *flow,
						     struct shaper_class *cls, __u64 cost_ns,
						     __u64 delay, __u64 now, __u64 can_wait,
						     __u64 sockless, struct shaper_class_stats *st)
{
	fair_roll_epoch(cls, now);

	__u32 epoch = *(volatile __u32 *)&cls->fair_epoch;

	if (flow->fair_epoch != epoch) {
		flow->fair_epoch = epoch;
		flow->fair_charged_ns = 0;
	}
	__u64 charged = flow->fair_charged_ns + cost_ns;

	flow->fair_charged_ns = charged < 0xffffffffull ? charged : 0xffffffffull;
	if (charged <= cls->sparse_allowance_ns)
		return CONGESTION_PASS; /* not a bulk flow (yet) */
	/* Once per way and epoch; the compare-and-swap keeps two CPUs from both counting it. */
	__u32 counted = flow->fair_counted_epoch;

	if (counted != epoch &&
	    __sync_val_compare_and_swap(&flow->fair_counted_epoch, counted, epoch) == counted)
		__sync_fetch_and_add(&cls->fair_flows, 1);

	__u64 share = cls->fair_share_ns;

	__u64 tolerance = cls->fair_tolerance_pm ? cls->fair_tolerance_pm : SHAPER_FAIR_TOLERANCE_DEFAULT_PM;

	/* A queue no socket holds, past the shortest epoch (and two frames): its flows above their
	 * share (a lone flow: all of it) are signalled once per epoch, whatever the tolerance. Past
	 * TCP's least retransmission timeout (200 ms), once per 100 ms of the epoch, above their
	 * share pro rata: what it allows by the end of the next 100 ms. */
	const __u64 elapsed = now - *(volatile __u64 *)&cls->fair_epoch_ns; /* < 1 s, or a race */
	const __u64 len = cls->fair_epoch_len_ns ? cls->fair_epoch_len_ns : SHAPER_FAIR_EPOCH_NS;
	const __u64 ahead = elapsed + SHAPER_FAIR_EPOCH_NS;
	const bool deep = delay > 2 * SHAPER_FAIR_EPOCH_NS;
	/* charged > share * by / len, as products (charged < 2^32, len and the share under 2^30) */
	const __u64 by = deep && ahead < len ? ahead : len;
	const bool standing = sockless && delay > SHAPER_FAIR_EPOCH_NS && delay > cls->aqm_floor_ns &&
			      charged * len > share * by;

	if (!standing && (!share || delay <= cls->aqm_target_ns || delay <= cls->aqm_floor_ns || charged <= share))
		return CONGESTION_PASS;
	/* A hold costs a delay, not a loss: it starts at the share itself. A flow sitting between
	 * the share and the signal's tolerance would otherwise keep what it took from the others. */
	__u64 leave = can_wait ? fair_held_departure(cls, charged - cost_ns, now + delay) : 0;

	if (leave) {
		if (leave > now + cls->horizon_ns)
			return CONGESTION_DROP; /* held past the horizon */
		if (leave > *(volatile __u64 *)&cls->fair_held_ns)
			cls->fair_held_ns = leave;
		flow->last_departure_ns = leave;
		if (st)
			st->fair_holds++;
		return CONGESTION_PASS;
	}
	/* Past twice its share for a second epoch running a flow has not backed off (UDP floods
	 * don't): each further packet of the epoch is dropped, so it never holds more than about
	 * two shares. Its drops must not make it look sparse (nothing queued): it counts as queued
	 * up to the backlog. Not a local TCP socket's flow: TCP small queues bound what it puts
	 * into the class, and a burst of drops would cost it a retransmission timeout. */
	if (share && !can_wait && charged > 2 * share + cls->sparse_allowance_ns && fair_flooding(flow, epoch)) {
		if (flow->last_departure_ns < now + delay)
			flow->last_departure_ns = now + delay;
		return CONGESTION_DROP;
	}
	/* Acted on: the epoch (12 bits) and its 100 ms slot; a deep standing queue's signal once a
	 * slot, any other once an epoch. */
	const __u16 now_acting = (__u16)(epoch << 4 | (elapsed / SHAPER_FAIR_EPOCH_NS & 15));
	const __u16 mask = standing && deep ? 0xffff : 0xfff0;

	if ((!standing && charged <= share + share * tolerance / 1000 + cls->sparse_allowance_ns / 2) ||
	    ((flow->fair_acted_epoch ^ now_acting) & mask) == 0)
		return CONGESTION_PASS;
	flow->fair_acted_epoch = now_acting;
	return congestion_signal(skb, cls, false);
}

/* What fair_decide weighs, besides the packet, its flow and its class. */
struct fair_packet {
	__u64 cost_ns;  /* the class time it is charged */
	__u64 delay;    /* the class backlog it would wait behind */
	__u64 now;
	__u64 can_wait; /* a local socket sent it (edt.h's edt_packet) */
	__u64 sockless; /* no socket of this host sent it */
};

/* fair_decide for a packet of class `cls` (its counters `st`, if any), in a global function: the
 * verifier checks its outcomes once, not each again through CoDel and the charging pass that
 * follow it. The caller's class and counters are passed, not looked up again. */
__noinline int fair_verdict(struct __sk_buff *skb, struct shaper_flow *flow, struct shaper_class *cls,
			    struct shaper_class_stats *st, const struct fair_packet *p)
{
	if (!flow || !cls || !p)
		return CONGESTION_PASS;
	return fair_decide(skb, flow, cls, p->cost_ns, p->delay, p->now, p->can_wait, p->sockless, st);
}

#endif /* SHAPER_FAIR_H */
