// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * shaperctl's program (TCX link, or tc clsact filter): classify -> edt -> stamp.
 * On egress the kernel's sch_fq holds each packet until the stamped departure time; in police
 * mode (no sch_fq) the horizon check alone limits the class, by dropping. On ingress (ingress.h)
 * nothing is stamped: the virtual backlog decides pass, CE mark or drop, and a passed TCP data
 * packet's virtual departure is recorded, for which its pure ACKs wait on egress (ack_pace.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"
#include "maps.h"
#include "classify.h"
#include "flow.h"
#include "edt.h"
#include "stats.h"
#include "delay.h"
#include "ingress.h"
#include "ack_pace.h"

/* A packet classified and stamped, not dropped, goes on to the programs after ours: -1 is tc's
 * TC_ACT_UNSPEC (next filter) and TCX's TCX_NEXT. Where none follows, the packet passes as with
 * TC_ACT_OK, which would end the chain for everyone else. */
#define SHAPER_PASS -1
#define TC_ACT_SHOT 2

/* Set by the loader from a probe: bpf_skb_set_tstamp (5.18+) marks the stamp as a monotonic
 * delivery time, which survives forwarding into another namespace. */
const volatile bool have_set_tstamp = false;

/*
 * sch_fq queues a packet without a connected socket (forwarded, unconnected UDP, ping) in a
 * flow chosen by its hash. For packets without ports (ICMP, GRE, ESP, later fragments) that is
 * a hash of the two addresses: a ping of one class and a backlogged class's packets to the
 * same host would share one fq flow, and the one stamped earlier would wait behind the other.
 * Mixing the class into such packets' hash keeps classes apart. Packets with ports hash per
 * flow already (and bpf_set_hash costs 10 ns): they keep theirs, as do connected sockets'.
 */
static __always_inline void separate_fq_flows(struct __sk_buff *skb, struct packet_view *view,
					      __u32 class_id)
{
	if (view->fields.has_ports)
		return;
	bpf_set_hash(skb, (flow_hash(skb, view) ^ (class_id * 0x9e3779b9u)) | 1);
}

/*
 * sch_fq paces on skb->tstamp whatever its clock type, so the plain store is all pacing needs,
 * on every kernel. Since 5.18 a stamp also carries a type: one marked a monotonic delivery time
 * keeps its meaning after sch_fq (into another namespace it survives; to a local socket it is
 * replaced by the receive time), an unmarked one is a receive time (a socket of the same
 * namespace behind a veth would be told it was received then). The store keeps the packet's
 * mark, which TCP has set already; only unmarked packets pay the helper's call to get it.
 */
static __always_inline void stamp(struct __sk_buff *skb, __u64 departure)
{
	if (have_set_tstamp && skb->tstamp_type != BPF_SKB_TSTAMP_DELIVERY_MONO)
		bpf_skb_set_tstamp(skb, departure, BPF_SKB_TSTAMP_DELIVERY_MONO);
	else
		skb->tstamp = departure;
}

/*
 * sch_fq before Linux 6.8 sends a packet of priority TC_PRIO_CONTROL (7 in the low four bits;
 * root of a container's network namespace may set it with SO_PRIORITY) from its internal queue
 * at once, whatever its departure time: it would leave its class unpaced. A packet stamped to
 * leave later gets TC_PRIO_INTERACTIVE (6) instead, the rest of its priority kept. Since 6.8
 * sch_fq paces every priority and maps 6 and 7 to the same band (its default priomap), so the
 * rewrite changes nothing there. Rules have matched the original priority already.
 */
#define TC_PRIO_MAX 15
#define TC_PRIO_INTERACTIVE 6
#define TC_PRIO_CONTROL 7

static __always_inline void keep_paced(struct __sk_buff *skb)
{
	__u32 priority = skb->priority;

	if ((priority & TC_PRIO_MAX) == TC_PRIO_CONTROL)
		skb->priority = (priority & ~TC_PRIO_MAX) | TC_PRIO_INTERACTIVE;
}

/* ACK pacing's two halves, global functions: the verifier checks each once on its own (inlined,
 * their branches multiplied the program's paths). */
__noinline __u64 ack_pace_wait(struct __sk_buff *skb, struct packet_fields *f, __u32 segs, __u64 now)
{
	if (!skb || !f)
		return 0;
	return ack_pace_until(skb, f, segs, now);
}

/* A passed packet as ack_pace_note records it. */
struct ack_pace_passed {
	__u64 until;    /* when its ACKs may leave */
	__u64 now;
	__u32 segs;
	__u32 class_id;
};

__noinline int ack_pace_note(struct __sk_buff *skb, struct packet_fields *f, struct ack_pace_passed *p)
{
	if (!skb || !f || !p)
		return 0;
	const struct shaper_class *cls = gcra_class(p->class_id);

	if (cls)
		ack_pace_record(skb, f, cls, p->segs, p->until, p->now);
	return 0;
}

/* Ingress: when a passed packet's ACKs may leave (ack_pace.h): when it would have been through
 * its class's queue, its departure plus its time at the class rate (a queue's receiver acks
 * a segment once it has all arrived), within the class horizon. */
static __always_inline void record_for_acks(struct __sk_buff *skb, const struct edt_packet *pkt,
					    __u32 class_id, __u64 departure)
{
	const struct shaper_class *cls = gcra_class(class_id);

	if (!cls)
		return;
	__u32 frac;
	const __u64 through = departure + shaper_cost_time(edt_level_cost(pkt, cls), cls->ns_per_byte_fp, &frac);
	const __u64 cap = pkt->now + cls->horizon_ns;
	struct ack_pace_passed passed = {
		.until = through < cap ? through : cap,
		.now = pkt->now,
		.segs = pkt->segs,
		.class_id = class_id,
	};

	ack_pace_note(skb, &pkt->view->fields, &passed);
}

/* A GSO packet's segments when it carries no count (charge.h): a global function, so that the
 * verifier checks the rest of the program once for any count, not once per way of finding it. */
__noinline int gso_segments(__u32 len, __u32 wire_len, __u32 gso_size)
{
	return shaper_gso_segs(len, wire_len, 0, gso_size);
}

/* How long the class holds the packet, in its histogram (delay.h): a global function, so that
 * the verifier checks it once, not once per path that stamps. */
__noinline int note_delay(__u32 class_id, __u64 delay_ns)
{
	delay_record(class_id, delay_ns);
	return 0;
}

/* Set by the loader for the datapath tests only: BPF_PROG_TEST_RUN's packets carry a dummy
 * socket of protocol 0, and these tests need packets a local socket sent, or none. */
const volatile bool every_packet_local = false;
const volatile bool every_packet_forwarded = false;
const volatile bool every_packet_kept = false; /* taken for a local TCP socket's on its device */

/* 1 for a packet no socket of this host holds on the send side: forwarded, a container's seen
 * on the host side of its veth (its socket's hold ends there), a bridged frame. Nothing but its
 * sender's loss or mark bounds the queue it builds (fair.h). A global function, as below. */
__noinline int packet_sockless(struct __sk_buff *skb)
{
	if (ingress)
		return 0;
	if (every_packet_forwarded)
		return 1;
	return !every_packet_local && !skb->sk;
}

/* What refusing a packet would do to its sender, on a send side in edt mode (only sch_fq holds
 * a packet), for a local TCP socket's packet from SYN-SENT to LAST-ACK (not a listener's
 * answer, a request socket's or a time-wait one, which no send buffer holds):
 *  - PACKET_MAY_WAIT when the socket's route leaves through another device (a bridge, as for a
 *    container's download from its host): the bridge's transmit has succeeded, and a drop is a
 *    loss the sender must detect and retransmit, so the packet is held rather than dropped;
 *  - PACKET_KEPT on the socket's own device: the hook refuses the packet to dev_queue_xmit, TCP
 *    keeps it, sends it again and shrinks its window as for an ECN mark, so fair shares' drops
 *    stay the signal they are (fairer than holds: bench/results/egress-debian-ecn.md);
 *  - 0 otherwise: forwarded packets have no socket, nor do a container's seen on the host side
 *    of its veth; UDP is left out (a flood held at its share by its send buffer made the TCP
 *    flows beside it unfair, and a refused datagram is lost).
 * A global function, so that the verifier checks the rest of the program once for its answer,
 * not once per way of reaching it. */
#define PACKET_MAY_WAIT 1
#define PACKET_KEPT 2
__noinline int packet_refusal(struct __sk_buff *skb, __u32 mode)
{
	struct bpf_sock *sk = skb->sk;

	if (ingress || mode != SHAPER_MODE_EDT)
		return 0;
	if (every_packet_local)
		return PACKET_MAY_WAIT;
	if (every_packet_kept)
		return PACKET_KEPT;
	if (!sk)
		return 0;
	sk = bpf_sk_fullsock(sk); /* none for request and time-wait sockets */
	if (!sk || sk->protocol != IPPROTO_TCP || sk->state == BPF_TCP_CLOSE || sk->state == BPF_TCP_LISTEN)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);

	if (!tp)
		return 0;
	/* Read through the kernel's own structures (faults read as 0): the socket's cached route. */
	struct dst_entry *dst = tp->inet_conn.icsk_inet.sk.sk_dst_cache;
	struct net_device *dev = dst ? dst->dev : 0;

	if (!dev)
		return 0;
	return dev->ifindex != skb->ifindex ? PACKET_MAY_WAIT : PACKET_KEPT;
}

SEC("tc")
int shaper(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct shaper_settings *settings = bpf_map_lookup_elem(&shaper_settings, &zero);
	/* Each context field read on its own: clang would otherwise select between two context
	 * offsets, which the verifier refuses. */
	__u32 wire_len = skb->wire_len, len = skb->len, segs = skb->gso_segs, gso_size = skb->gso_size;
	barrier_var(wire_len);
	wire_len = wire_len ? wire_len : len;
	struct packet_view view = {};
	struct edt_packet pkt = {
		.view = &view,
		.now = bpf_ktime_get_ns(),
		.wire_len = wire_len,
		.segs = segs ? segs : gso_size ? gso_segments(len, wire_len, gso_size) : 1,
	};
	__u64 departure = 0;

	if (ingress)
		ingress_measure(skb, len, segs, gso_size, &pkt.wire_len, &pkt.segs);
	struct shaper_ack_pace *gate = ack_pace_gate();

	if (!settings || !gate)
		return SHAPER_PASS;

	__u32 rules_gen = settings->rules_gen, class_id = 0;
	/* sch_fq keys a connected socket's packets by the socket, any other packet by its hash. */
	struct bpf_sock *sk = skb->sk;
	bool fq_by_hash = !sk || sk->state == BPF_TCP_CLOSE || sk->state == BPF_TCP_LISTEN;
	bool edt = !ingress && settings->mode == SHAPER_MODE_EDT;
	/* Only sch_fq can hold an ACK, and only an attached ingress side has records. */
	bool pace_acks = edt && *(volatile __u64 *)&gate->until_ns;
	/* 0, read from the gate: a constant would have the verifier check everything after twice,
	 * once for an ACK not paced and once for one paced. */
	__u64 ack_until = *(volatile __u64 *)&gate->flow;

	/* Ingress boxes flows by their addresses and ports (ingress.h): always parsed there. */
	if ((rules_gen & SHAPER_RULES_PRESENT) || !skb->hash || (edt && fq_by_hash) || ingress || pace_acks)
		parse_packet(skb, &view.fields);
	if (pace_acks)
		ack_until = ack_pace_wait(skb, &view.fields, pkt.segs, pkt.now);
	if (rules_gen & SHAPER_RULES_PRESENT)
		class_id = classify_packet(skb, &view.fields, rules_gen, pkt.wire_len);
	if (!class_id)
		class_id = settings->default_class;

	pkt.aqm = edt || ingress; /* ingress: the backlog is virtual, its verdicts are not */
	const __u32 refusal = packet_refusal(skb, settings->mode);

	pkt.can_wait = refusal & PACKET_MAY_WAIT;
	pkt.kept = refusal & PACKET_KEPT;
	pkt.sockless = packet_sockless(skb);
	switch (class_id ? edt_schedule(skb, class_id, &pkt, &departure) : EDT_UNSHAPED) {
	case EDT_DROP:
		return TC_ACT_SHOT;
	case EDT_SEND:
		if (ingress)
			record_for_acks(skb, &pkt, class_id, departure);
		if (edt) {
			if (ack_until > departure)
				departure = ack_until;
			stamp(skb, departure);
			note_delay(class_id, departure - pkt.now); /* never before now: edt.h */
			if (departure > pkt.now)
				keep_paced(skb);
			if (fq_by_hash)
				separate_fq_flows(skb, &view, class_id);
		}
		return SHAPER_PASS;
	default:
		if (!ingress && ack_until) {
			stamp(skb, honour_own_departure(skb, ack_until, pkt.now));
			keep_paced(skb);
		}
		stats_count(SHAPER_STATS_UNCLASSIFIED, pkt.segs,
			    shaper_packet_cost(pkt.wire_len, pkt.segs, 0, 0));
		return SHAPER_PASS;
	}
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
