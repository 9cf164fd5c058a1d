// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * shaperctl's tc clsact egress program: classify -> edt -> stamp.
 * The kernel's sch_fq holds each packet until the stamped departure time; in police mode
 * (no sch_fq) the horizon check alone limits the class, by dropping.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"
#include "maps.h"
#include "classify.h"
#include "flow.h"
#include "edt.h"
#include "stats.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

/* Set by the loader from a probe: bpf_skb_set_tstamp (5.18+) marks the stamp as a monotonic
 * delivery time, which survives forwarding into another namespace. */
const volatile bool have_set_tstamp = false;

static __always_inline __u64 honour_own_departure(const struct __sk_buff *skb, __u64 departure,
						 __u64 now)
{
	__u64 own = skb->tstamp;

	if (own > departure && own - now < SHAPER_FOREIGN_TSTAMP_MAX_NS)
		return own;
	return departure;
}

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

static __always_inline void stamp(struct __sk_buff *skb, __u64 departure)
{
	if (have_set_tstamp)
		bpf_skb_set_tstamp(skb, departure, BPF_SKB_TSTAMP_DELIVERY_MONO);
	else
		skb->tstamp = departure;
}

SEC("tc")
int shaper_egress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct shaper_settings *settings = bpf_map_lookup_elem(&shaper_settings, &zero);
	/* Each context field read on its own: clang would otherwise select between two context
	 * offsets, which the verifier refuses. */
	__u32 wire_len = skb->wire_len, len = skb->len, segs = skb->gso_segs;
	barrier_var(wire_len);
	struct packet_view view = {};
	struct edt_packet pkt = {
		.view = &view,
		.now = bpf_ktime_get_ns(),
		.wire_len = wire_len ? wire_len : len,
		.segs = segs ? segs : 1,
	};
	__u64 departure = 0;

	if (!settings)
		return TC_ACT_OK;

	__u32 rules_gen = settings->rules_gen, class_id = 0;
	/* sch_fq keys a connected socket's packets by the socket, any other packet by its hash. */
	struct bpf_sock *sk = skb->sk;
	bool fq_by_hash = !sk || sk->state == BPF_TCP_CLOSE || sk->state == BPF_TCP_LISTEN;
	bool edt = settings->mode == SHAPER_MODE_EDT;

	if ((rules_gen & SHAPER_RULES_PRESENT) || !skb->hash || (edt && fq_by_hash))
		parse_packet(skb, &view.fields);
	if (rules_gen & SHAPER_RULES_PRESENT)
		class_id = classify_packet(skb, &view.fields, rules_gen, pkt.wire_len);
	if (!class_id)
		class_id = settings->default_class;

	pkt.aqm = edt;
	switch (class_id ? edt_schedule(skb, class_id, &pkt, &departure) : EDT_UNSHAPED) {
	case EDT_DROP:
		return TC_ACT_SHOT;
	case EDT_SEND:
		if (edt) {
			stamp(skb, honour_own_departure(skb, departure, pkt.now));
			if (fq_by_hash)
				separate_fq_flows(skb, &view, class_id);
		}
		return TC_ACT_OK;
	default:
		stats_count(SHAPER_STATS_UNCLASSIFIED, pkt.segs,
			    shaper_packet_cost(pkt.wire_len, pkt.segs, 0, 0));
		return TC_ACT_OK;
	}
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
