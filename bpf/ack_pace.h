/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ACK pacing: the receive side's virtual queue made felt by the sender. Ingress classes queue
 * nothing (ingress.h), so a sender's round trip stays as short as the path's and it is held by
 * marks and drops alone. Where the device's send side runs in edt mode (sch_fq), the receiver's
 * pure ACKs of a shaped flow leave no sooner than the data they acknowledge would have left the
 * virtual queue: the sender sees the backlog in its round trip, exactly as behind a real queue,
 * and is clocked by its ACKs at the class rate.
 *
 *  - ingress: a TCP packet with payload that passes (or is marked) records its flow's virtual
 *    departure: when it would have been through its class's queue (its departure plus its
 *    time at the class rate: a queue's receiver acks a segment once it has all arrived),
 *    capped at now + the class horizon;
 *    a SYN clears its flow's record (a new connection on an old tuple starts undelayed);
 *  - egress (edt mode only): a pure ACK (no payload; no SYN, FIN or RST) of a flow with a
 *    record leaves at the later of its own departure and the record. Packets that carry data,
 *    and any other, leave as egress shaping alone has them leave.
 *
 * Records live in one table per device shared by both sides' programs (pinned beside their pin
 * directories, made by whichever side loads first, removed with the last side's detach): slot
 * by a hash of the flow's addresses and ports as its ACKs carry them (the ingress side hashes
 * the data's tuple reversed), tagged with a 64-bit hash of the same, so a flow sharing another's
 * slot finds a foreign tag and is never delayed by it. Slot 0 is the table's gate: non-zero
 * while the ingress side is attached, so the send side of a device without it costs one load.
 *
 * Bound: a record is at most the class horizon past its own now, and an ACK is stamped with it
 * only while it is ahead of the ACK's now (a past time is no delay): no ACK waits longer than
 * the horizon of the ingress class of its flow. Records are written without atomics: two CPUs
 * writing one slot at once may pair one flow's tag with the other's time, which is still within
 * the other's class horizon (so within the largest ingress horizon of the device).
 */
#ifndef SHAPER_ACK_PACE_H
#define SHAPER_ACK_PACE_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"
#include "parse.h"

#define TCP_FLAG_FIN_ 0x01
#define TCP_FLAG_SYN_ 0x02
#define TCP_FLAG_RST_ 0x04
#define TCP_FLAG_ACK_ 0x10

/* Not in the side's pin directory: the loader pins it at the device's shared path. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SHAPER_ACK_PACE_SLOTS + 1);
	__type(key, __u32);
	__type(value, struct shaper_ack_pace);
} shaper_ack_pace SEC(".maps");

/* The flow's tag as its ACKs carry the tuple (never 0), and its slot in 1..SHAPER_ACK_PACE_SLOTS. */
static __always_inline __u64 ack_pace_tag(const __u32 src[4], const __u32 dst[4], __u16 sport,
					  __u16 dport)
{
	__u64 h = ((__u64)src[0] ^ src[1] ^ src[2] ^ src[3]) * 0x9e3779b97f4a7c15ull +
		  ((__u64)dst[0] ^ dst[1] ^ dst[2] ^ dst[3]) * 0xc2b2ae3d27d4eb4full +
		  ((__u64)sport << 16 | dport) * 0x165667b19e3779f9ull;

	return (h ^ (h >> 29)) | 1;
}

static __always_inline struct shaper_ack_pace *ack_pace_slot(__u64 tag)
{
	__u32 slot = 1 + (__u32)(tag >> 40) % SHAPER_ACK_PACE_SLOTS;

	return bpf_map_lookup_elem(&shaper_ack_pace, &slot);
}

/* The table's gate (slot 0): until_ns non-zero while the ingress side is attached (only then
 * has any flow a record), and from the send side's first held ACK on, when it last held one;
 * flow always 0. */
static __always_inline struct shaper_ack_pace *ack_pace_gate(void)
{
	__u32 gate = 0;

	return bpf_map_lookup_elem(&shaper_ack_pace, &gate);
}

/* A TCP packet's flags and its payload bytes (as its IP lengths give them), when it is TCP in the
 * shapes GRO and TCP build: IPv4, or IPv6 without extension headers. */
static __always_inline bool ack_pace_tcp(struct __sk_buff *skb, const struct packet_fields *f,
					 __u8 *flags, __s32 *payload)
{
	const __u32 l2 = network_offset();
	__u8 ip[4], tcp[2];
	__u32 l3 = 40;
	__s32 ip_payload;

	if (f->proto != 6 || !f->has_ports)
		return false;
	if (f->family == 4) {
		if (parse_load(skb, l2, ip, 4))
			return false;
		l3 = (ip[0] & 15) * 4;
		ip_payload = (__s32)((__u32)ip[2] << 8 | ip[3]) - (__s32)l3;
	} else if (f->family == 6) {
		if (parse_load(skb, l2 + 4, ip, 4) || ip[2] != 6)
			return false;
		ip_payload = (__s32)((__u32)ip[0] << 8 | ip[1]);
	} else {
		return false;
	}
	if (l3 < 20 || parse_load(skb, l2 + l3 + 12, tcp, 2))
		return false;
	*flags = tcp[1];
	*payload = ip_payload - (__s32)((tcp[0] >> 4) * 4);
	return true;
}

/* Ingress: a passed packet of `segs` segments leaving the virtual queue at `departure`. */
static __always_inline void ack_pace_record(struct __sk_buff *skb, const struct packet_fields *f,
					    __u32 segs, __u64 departure)
{
	__u8 flags;
	__s32 payload;

	if (!ack_pace_tcp(skb, f, &flags, &payload))
		return;
	const bool data = segs > 1 || payload > 0;

	if (!data && !(flags & TCP_FLAG_SYN_))
		return;
	const __u64 tag = ack_pace_tag(f->dst, f->src, f->dport, f->sport);
	struct shaper_ack_pace *r = ack_pace_slot(tag);

	if (!r)
		return;
	if (data) {
		r->flow = tag;
		r->until_ns = departure;
	} else if (r->flow == tag) {
		r->until_ns = 0;
	}
}

/* Egress: when a packet of `segs` segments may leave at the earliest for ACK pacing; 0 when it
 * is not a pure ACK of a flow with a record ahead of now. */
static __always_inline __u64 ack_pace_until(struct __sk_buff *skb, const struct packet_fields *f,
					    __u32 segs, __u64 now)
{
	__u8 flags;
	__s32 payload;

	if (segs > 1 || !ack_pace_tcp(skb, f, &flags, &payload) || payload > 0 ||
	    (flags & (TCP_FLAG_SYN_ | TCP_FLAG_FIN_ | TCP_FLAG_RST_ | TCP_FLAG_ACK_)) != TCP_FLAG_ACK_)
		return 0;
	const __u64 tag = ack_pace_tag(f->src, f->dst, f->sport, f->dport);
	struct shaper_ack_pace *r = ack_pace_slot(tag);

	if (!r || r->flow != tag)
		return 0;
	const __u64 until = *(volatile __u64 *)&r->until_ns;

	if (until <= now)
		return 0;
	/* Tell the receive side its ACKs are being held (ack_pace_active), rarely enough that the
	 * gate's line is not written per packet; never reopening a gate its detach closed. */
	struct shaper_ack_pace *gate = ack_pace_gate();

	if (gate) {
		const __u64 seen = *(volatile __u64 *)&gate->until_ns;

		if (seen && seen + SHAPER_ACK_PACE_NOTE_NS < now)
			__sync_val_compare_and_swap(&gate->until_ns, seen, now);
	}
	return until;
}

/* Ingress: whether the send side held an ACK lately, so senders feel the virtual backlog in
 * their round trip. */
static __always_inline bool ack_pace_active(__u64 now)
{
	struct shaper_ack_pace *gate = ack_pace_gate();

	return gate && *(volatile __u64 *)&gate->until_ns + SHAPER_ACK_PACE_FRESH_NS > now;
}

#endif /* SHAPER_ACK_PACE_H */
