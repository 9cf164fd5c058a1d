/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The receive side: the same classes, clocks and verdicts as egress, with no queue to hold a
 * packet. A received packet is charged to its class clock exactly as a sent one (every segment's
 * wire bytes plus overhead, at every level), and its verdict comes from the virtual backlog it
 * would wait behind, clock minus now. Beyond the class horizon everything is dropped and charged
 * nowhere, so a class admits at most burst + rate * (T + horizon) over any interval T, as
 * egress's police mode. Below that bound:
 *
 *  - above the CoDel target, CoDel's control law and fair shares CE-mark ECN-capable packets:
 *    the sender halves its window as on a loss, and nothing is lost;
 *  - neither drops a packet it cannot mark (congestion.h); only a flow past twice its fair
 *    share (a flood that never backs off) is still dropped, as on egress. Without a queue, a
 *    lone drop costs its sender a retransmission and slows it little: it recovers within a
 *    round trip (fast retransmit, or its loss probe), and a window of two segments per round
 *    trip, TCP's least, is far above a slow class's rate when the round trip is short. The
 *    backlog is what carries a class through its senders' pauses, so it is let grow to half the
 *    horizon;
 *  - above half the horizon, one flow at a time is boxed: the packet is dropped and so is every
 *    packet of its flow for SHAPER_BOX_NS (50 ms), long enough that its loss probe is lost too
 *    and the sender waits for its retransmission timeout (200 ms at least) before it sends
 *    again; a few retransmissions buy a fifth of a second of silence. The class's next box
 *    opens no sooner than SHAPER_BOX_NS later (its turn kept in the class's CoDel entry), so
 *    the class silences at most one flow per box length, and the backlog left carries it while
 *    they come back. (A turn that came sooner near the horizon, and fair shares boxing floods,
 *    measured worse: bench/README.md.)
 *    A flow out of its box is not boxed again for SHAPER_BOX_RESPITE_NS (250 ms): its timeout's
 *    retransmission gets through, and the timeout does not back off to twice as long. A paced
 *    flow's box (ACK pacing, below) holds only the packet that opened it: its window is the
 *    backlog, one loss halves it, and a 50 ms box cost it a timeout and many GRO packets' worth
 *    of segments for nothing; and a paced packet that cannot be marked is boxed past a third of
 *    the horizon (ingress_past_box_line);
 *  - a box's drops are CoDel's drops (counted as such) and, as every drop, charged nowhere.
 *
 * With ACKs paced (below), a sender's round trip is the backlog itself: in slow start its
 * window doubles in one, so the backlog doubles before a mark reaches it, and CoDel's first mark
 * comes an interval after the target is passed (with four initial windows at once the backlog
 * starts above it). So while the send side holds ACKs (ack_pace_active), past an eighth of the
 * horizon every ECN-capable packet is CE-marked (a step, as DCTCP's): a sender halves once per
 * round trip there, and a doubling from an eighth stops below the quarter, far from the half
 * where boxes start. A packet the step cannot mark (not ECN-capable, or the class's ECN off) is
 * dropped if it is its flow's first there (ingress_first_loss): one loss ends the flow's slow
 * start as a mark would, where without it four flows' doublings ran past the boxes into the
 * horizon, a heap of losses and timeouts at low rates (bench/README.md, ingress). A flow takes
 * its first loss once: later, only boxes drop its packets.
 * Senders that are not paced never see the step: marked down to their least
 * window they still outrun a class whose backlog they do not feel, and only boxes hold them
 * (applied to them in one run, the step changed nothing measurable: bench/README.md, ingress).
 *
 * Boxes live in a table of SHAPER_FLOW_BOXES slots by (class, flow hash), tagged with the flow:
 * two flows sharing a slot never take each other's box; a new box may take a slot whose flow is
 * in its respite (that flow only loses the respite). The hash is of addresses and ports, never
 * the kernel's skb->hash: a sender picks a new one at each retransmission timeout, and its flow
 * would leave its box (or respite) under another name.
 *
 * ACK pacing (ack_pace.h): all of the above holds a sender by marks and drops alone, since its
 * round trip never grows. Where the device's send side is attached in edt mode, a passed TCP
 * data packet also records when it would have been through the class (its departure plus its
 * time at the class rate, at most the class horizon past now), and the receiver's pure ACKs of
 * its flow leave sch_fq no sooner: the sender's round trip carries the virtual backlog, it is
 * ACK-clocked at the class rate, and CoDel's marks act on a backlog it feels. No ACK waits
 * beyond the class horizon; without the send side attached (or in police mode) nothing waits.
 *
 * Lengths: at tc ingress the kernel's qdisc length (wire_len) lacks the L2 header (pulled
 * before tc runs; the program sees it pushed back, in len), and a GRO packet's len counts one
 * set of headers for all its segments, where egress's qdisc length counts every segment's. The
 * same bytes are charged here: len, plus the headers of the S - 1 merged segments, read from
 * the packet (TCP's data offset, UDP's 8 bytes). GRO packets carry their segment count
 * (gso_segs); a packet with a segment size and no count (LRO) is counted in segments of it.
 */
#ifndef SHAPER_INGRESS_H
#define SHAPER_INGRESS_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include "ack_pace.h"
#include "aqm.h"
#include "charge.h"
#include "flow.h"
#include "parse.h"

/* Bytes of each segment's headers, L2 through L4, of an untagged IPv4 or IPv6 packet (the shape
 * GRO builds); the L2 header alone for any other. */
static __always_inline __u32 ingress_segment_headers(struct __sk_buff *skb)
{
	const __u32 l2 = network_offset();
	__u16 proto = bpf_ntohs(skb->protocol);
	__u32 l3 = 0;
	__u8 l4 = 0;

	if (proto == ETH_P_IP_) {
		__u8 vihl, protocol;

		if (parse_load(skb, l2, &vihl, 1) || parse_load(skb, l2 + 9, &protocol, 1))
			return l2;
		l3 = (vihl & 15) * 4;
		l4 = protocol;
	} else if (proto == ETH_P_IPV6_) {
		__u8 next;

		if (parse_load(skb, l2 + 6, &next, 1))
			return l2;
		l3 = 40;
		l4 = next;
	} else {
		return l2;
	}
	if (l4 == 17)
		return l2 + l3 + 8;
	if (l4 == 6) {
		__u8 doff;

		if (l3 < 20 || l3 > 60 || parse_load(skb, l2 + l3 + 12, &doff, 1))
			return l2 + l3;
		return l2 + l3 + (doff >> 4) * 4;
	}
	return l2 + l3;
}

/* A received packet's segments and its L2 length over all of them, as egress would count it. */
static __always_inline void ingress_measure(struct __sk_buff *skb, __u32 len, __u32 segs,
					    __u32 gso_size, __u32 *out_wire, __u32 *out_segs)
{
	__u32 wire = len;

	if (segs > 1 || (!segs && gso_size)) {
		const __u32 hdr = ingress_segment_headers(skb);

		if (!segs)
			segs = wire > hdr ? shaper_ceil_div(wire - hdr, gso_size) : 1;
		if (segs > 1)
			wire += (segs - 1) * hdr;
	}
	*out_wire = wire;
	*out_segs = segs ? segs : 1;
}

/* Takes the class's turn to box a flow: once per SHAPER_BOX_NS, whichever CPU wins it. */
static __always_inline bool ingress_box_turn(__u32 class_id, __u64 now)
{
	struct shaper_class_aqm *st = bpf_map_lookup_elem(&shaper_class_aqm, &class_id);

	if (!st)
		return false;
	__u32 turn = *(volatile __u32 *)&st->box_turn;

	/* In units of 2^20 ns, compared modulo 2^32 (wraps every 52 days). */
	if (turn && (__s32)((__u32)(now >> 20) - turn) < 0)
		return false;
	return __sync_val_compare_and_swap(&st->box_turn, turn,
					   (__u32)((now + SHAPER_BOX_NS) >> 20) | 1) == turn;
}

/* Whether the class may CE-mark the packet: ECN on, and ECN-capable in its IP header (ECT(0),
 * ECT(1) or CE already). */
static __always_inline bool ingress_markable(struct __sk_buff *skb, const struct packet_fields *f,
					     const struct shaper_class *cls)
{
	const __u32 l2 = network_offset();
	__u8 b[2];

	if (!(cls->flags & SHAPER_CLASS_ECN))
		return false;
	if (f->family == 4)
		return !parse_load(skb, l2 + 1, b, 1) && (b[0] & 3);
	if (f->family == 6)
		return !parse_load(skb, l2, b, 2) && ((b[1] >> 4) & 3);
	return false;
}

/* Whether a packet's flow may be boxed at this backlog: past half the horizon; a paced sender's
 * packet that cannot be marked past a third. Paced, the backlog is the sender's round trip:
 * after a loss the receiver holds the flow's later data until the retransmission, about one
 * backlog, then hands it to the application at once. Boxing at a third keeps that burst to the
 * flow's share of a third of the horizon, where a half made a receiver's 1 s windows 1.10-1.16
 * x the rate at 2 Mbit/s (and 3.5 % retransmits instead of 2 %: bench/README.md, ingress).
 * Markable packets need no such line: the step holds their senders below a quarter. */
static __always_inline bool ingress_past_box_line(struct __sk_buff *skb, const struct packet_view *view,
						  const struct shaper_class *cls, __u64 delay, __u64 now)
{
	if (delay > cls->horizon_ns / 2)
		return true;
	return delay > cls->horizon_ns / 3 && ack_pace_active(now) &&
	       !ingress_markable(skb, &view->fields, cls);
}

/* The box slot of the packet's flow, and the flow's tag in *owner. */
static __always_inline struct shaper_flow_box *ingress_box_of(const struct packet_view *view,
							      __u32 class_id, __u64 *owner)
{
	const struct packet_fields *f = &view->fields;
	const __u32 hash = flow_hash_of_fields(f->src, f->dst, f->sport, f->dport, f->proto);
	__u32 slot = flow_bucket_of(hash, class_id) & (SHAPER_FLOW_BOXES - 1);

	*owner = (__u64)class_id << 32 | hash;
	return bpf_map_lookup_elem(&shaper_flow_boxes, &slot);
}

/* A paced flow's first loss, past an eighth of the horizon, for a TCP data segment that cannot
 * be marked: dropped if the flow has never been boxed (its slot holds another flow's tag, or
 * none), and the slot taken as if it had been, so its respite follows. One loss per flow ends
 * its slow start before its window doubles past the half of the horizon where boxes begin.
 * Never a SYN, FIN, RST or pure ACK: their loss ends no slow start and costs a timeout. */
static __always_inline enum congestion_verdict ingress_first_loss(struct __sk_buff *skb,
								  const struct packet_view *view,
								  __u32 class_id, __u64 now)
{
	__u8 flags;
	__s32 payload;
	__u32 tcp_off;
	__u64 owner;

	if (!ack_pace_tcp(skb, &view->fields, &flags, &payload, &tcp_off) || payload <= 0 ||
	    (flags & (TCP_FLAG_SYN_ | TCP_FLAG_FIN_ | TCP_FLAG_RST_)))
		return CONGESTION_PASS;
	struct shaper_flow_box *box = ingress_box_of(view, class_id, &owner);

	if (!box || box->owner == owner || now < *(volatile __u64 *)&box->until_ns)
		return CONGESTION_PASS;
	box->owner = owner;
	box->until_ns = now;
	return CONGESTION_DROP;
}

/* The verdict on a received packet of a backlogged class that is neither sparse nor neighbour
 * discovery, `delay` the virtual backlog it would wait behind. */
static __always_inline enum congestion_verdict ingress_decide(struct __sk_buff *skb,
							      const struct packet_view *view,
							      __u32 class_id,
							      const struct shaper_class *cls,
							      __u64 delay, __u64 now)
{
	if (delay > cls->aqm_target_ns) {
		__u64 owner;
		struct shaper_flow_box *box = ingress_box_of(view, class_id, &owner);

		if (box) {
			const __u64 until = *(volatile __u64 *)&box->until_ns;
			const bool mine = box->owner == owner;

			if (mine && now < until)
				return CONGESTION_DROP;
			/* Not in its respite, nor in a box another flow of the slot is in. */
			if (now >= until + (mine ? SHAPER_BOX_RESPITE_NS : 0) &&
			    ingress_past_box_line(skb, view, cls, delay, now) && ingress_box_turn(class_id, now)) {
				box->owner = owner;
				box->until_ns = now + (ack_pace_active(now) ? 0 : SHAPER_BOX_NS);
				return CONGESTION_DROP;
			}
		}
	}
	enum congestion_verdict v = aqm_decide(skb, class_id, cls, delay, now, false);

	/* Paced senders: past an eighth of the horizon every ECN-capable packet is marked, and a
	 * flow's first packet there that cannot be marked is dropped (ingress_first_loss). */
	if (v == CONGESTION_PASS && delay > cls->horizon_ns / 8 && ack_pace_active(now)) {
		v = congestion_signal(skb, cls, false);
		if (v == CONGESTION_PASS)
			v = ingress_first_loss(skb, view, class_id, now);
	}
	return v;
}

#endif /* SHAPER_INGRESS_H */
