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
 * Held ACKs also offer the sender no more than its share of the class for a round trip of the
 * path plus a sixteenth of the horizon (ack_pace_window): the sender's window is the receiver's
 * to set, so a paced flow holds about that backlog without a mark or a loss (without ECN, losses
 * were all that held it, and each cost a burst: its later data held by the receiver until the
 * retransmission, a backlog later). The window is rewritten only downward, only in ACKs that are
 * held, and only for a flow whose handshake the device saw (both window scales and the path's
 * round trip: SYN or SYN-ACK out, the peer's answer in); never below two of its segments. A
 * flow whose window is set is never sparse (ack_pace_sets_window). Where the receiver lies beyond
 * the device (a pod's uploads shaped on its host's veth), its ACKs come back a round trip after
 * the data passed, and are held, so capped, only while the backlog is longer than that: the
 * window then binds only while the sender has more in flight than its share needs.
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
 * the other's class horizon (so within the largest ingress horizon of the device), or with the
 * other's window and scale: one ACK may then offer another window than its flow's, which the
 * flow's next held ACK corrects.
 */
#ifndef SHAPER_ACK_PACE_H
#define SHAPER_ACK_PACE_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"
#include "parse.h"
#include "tcp_options.h"

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

/* A TCP packet's flags, its payload bytes (as its IP lengths give them) and where its TCP header
 * starts, when it is TCP in the shapes GRO and TCP build: IPv4, or IPv6 without extension
 * headers, right after the L2 header (a VLAN tag in the frame, not in the skb's metadata, would
 * move every offset: such a packet is left alone, never rewritten at the wrong place). */
static __always_inline bool ack_pace_tcp(struct __sk_buff *skb, const struct packet_fields *f,
					 __u8 *flags, __s32 *payload, __u32 *tcp_off)
{
	const __u32 l2 = network_offset();
	__u8 ip[4], tcp[2];
	__u32 l3 = 40;
	__s32 ip_payload;

	if (f->proto != 6 || !f->has_ports)
		return false;
	if (l2_header_len == 14) {
		__be16 ethertype;

		if (parse_load(skb, 12, &ethertype, 2) ||
		    ethertype != bpf_htons(f->family == 4 ? ETH_P_IP_ : ETH_P_IPV6_))
			return false;
	}
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
	*tcp_off = l2 + l3;
	return true;
}

/* The bytes a held ACK of a flow with round trip `rtt_ns` may offer: its share of the class
 * (fair.h's share of the last epoch, the whole class while there is none) for the round trip
 * plus a sixteenth of the horizon, at least two of its segments. */
static __always_inline __u32 ack_pace_window(const struct shaper_class *cls, __u32 rtt_ns, __u16 seg_bytes)
{
	const __u64 epoch = cls->fair_epoch_len_ns ? cls->fair_epoch_len_ns : SHAPER_FAIR_EPOCH_NS;
	const __u64 share = cls->fair_share_ns;
	__u64 t = rtt_ns + cls->horizon_ns / SHAPER_ACK_WINDOW_SHARE;

	if (share && share < epoch)
		t = t * share / epoch;
	if (t > 0xffffffffull)
		t = 0xffffffffull;
	/* Bytes in t at the class rate: t * 2^32 / (ns per byte * 2^32). */
	__u64 bytes = cls->ns_per_byte_fp ? (t << 32) / cls->ns_per_byte_fp : 0xffffffffull;
	const __u64 least = (__u64)SHAPER_ACK_WINDOW_MIN_SEGS * seg_bytes;

	if (bytes < least)
		bytes = least;
	return bytes < 0xffffffffull ? (__u32)bytes : 0xffffffffu;
}

/* Starts the slot's record afresh: flow `tag`, nothing measured yet. */
static __always_inline void ack_pace_restart(struct shaper_ack_pace *r, __u64 tag, __u64 until_ns,
					     __u64 syn_ns, __u8 wscale)
{
	r->flow = tag;
	r->until_ns = until_ns;
	r->syn_ns = syn_ns;
	r->rtt_ns = 0;
	r->window_cap = 0;
	r->seg_bytes = 0;
	r->wscale = wscale;
}

/* Ingress: a passed packet of `segs` segments of class `cls`, leaving the virtual queue at
 * `departure`. Data records it; the peer's first answer to the receiver's SYN or SYN-ACK gives
 * the path's round trip; a SYN starts the tuple afresh. */
static __always_inline void ack_pace_record(struct __sk_buff *skb, const struct packet_fields *f,
					    const struct shaper_class *cls, __u32 segs, __u64 departure,
					    __u64 now)
{
	__u8 flags;
	__s32 payload;
	__u32 tcp_off;

	if (!ack_pace_tcp(skb, f, &flags, &payload, &tcp_off))
		return;
	const bool data = segs > 1 || payload > 0;
	const __u64 tag = ack_pace_tag(f->dst, f->src, f->dport, f->sport);
	struct shaper_ack_pace *r = ack_pace_slot(tag);

	if (!r)
		return;
	if (r->flow != tag) {
		if (!data)
			return;
		/* A flow whose handshake this device did not see (or another's slot): paced, its
		 * window left as the receiver offers it. */
		ack_pace_restart(r, tag, departure, 0, 0);
		return;
	}
	if ((flags & (TCP_FLAG_SYN_ | TCP_FLAG_ACK_)) == TCP_FLAG_SYN_) {
		/* A new connection on the tuple: its SYN-ACK, on its way out, starts the record. */
		ack_pace_restart(r, tag, 0, 0, 0);
		return;
	}
	const __u64 syn = r->syn_ns;

	if (syn && !r->rtt_ns && now > syn)
		r->rtt_ns = now - syn < 0xffffffffull ? (__u32)(now - syn) : 0xffffffffu;
	if (flags & TCP_FLAG_SYN_) {
		/* The peer's SYN-ACK: without a window scale of its own, neither side scales. */
		r->until_ns = 0;
		if (r->wscale > 1 && tcp_window_scale(skb, tcp_off) < 0)
			r->wscale = 1;
		return;
	}
	if (!data)
		return;
	r->until_ns = departure;
	const __u32 seg = segs > 1 ? (__u32)payload / segs : (__u32)payload;

	if (seg > r->seg_bytes && seg <= 0xffff)
		r->seg_bytes = (__u16)seg;
	if (r->rtt_ns && r->wscale)
		r->window_cap = ack_pace_window(cls, r->rtt_ns, r->seg_bytes);
}

/* Egress: the receiver's SYN or SYN-ACK of flow `tag` starts its record: when it left, and the
 * window scale it offers (a SYN-ACK's is the connection's; a SYN's, until the peer's SYN-ACK
 * says it scales too). */
static __always_inline void ack_pace_handshake(struct __sk_buff *skb, __u64 tag, __u32 tcp_off, __u64 now)
{
	struct shaper_ack_pace *r = ack_pace_slot(tag);

	if (!r)
		return;
	const int scale = tcp_window_scale(skb, tcp_off);

	ack_pace_restart(r, tag, 0, now, scale >= 0 && scale <= 14 ? scale + 1 : 1);
}

/* Egress: a held ACK offers at most its flow's window_cap (in its window's scaled units, rounded
 * up), never more than it offered; its TCP checksum follows (nothing to do where it is left to
 * the device: CHECKSUM_PARTIAL). */
static __always_inline void ack_pace_cap_window(struct __sk_buff *skb, const struct shaper_ack_pace *r,
						__u32 tcp_off)
{
	const __u32 cap = r->window_cap;
	const __u8 wscale = r->wscale;

	if (!cap || !wscale || wscale > 15 || l2_header_len == SHAPER_L2_AT_NETWORK_HEADER)
		return;
	const __u32 shift = wscale - 1;
	const __u32 field = (__u32)(((__u64)cap + (1u << shift) - 1) >> shift);
	__be16 old;

	if (field > 0xffff || parse_load(skb, tcp_off + 14, &old, 2) || field >= bpf_ntohs(old))
		return;
	__be16 win = bpf_htons((__u16)field);

	if (bpf_l4_csum_replace(skb, tcp_off + 16, old, win, sizeof(win)))
		return;
	bpf_skb_store_bytes(skb, tcp_off + 14, &win, sizeof(win), 0);
}

/* Egress: when a packet of `segs` segments may leave at the earliest for ACK pacing; 0 when it
 * is not a pure ACK of a flow with a record ahead of now. */
static __always_inline __u64 ack_pace_until(struct __sk_buff *skb, const struct packet_fields *f,
					    __u32 segs, __u64 now)
{
	__u8 flags;
	__s32 payload;
	__u32 tcp_off;

	if (segs > 1 || !ack_pace_tcp(skb, f, &flags, &payload, &tcp_off))
		return 0;
	const __u64 tag = ack_pace_tag(f->src, f->dst, f->sport, f->dport);

	if ((flags & (TCP_FLAG_SYN_ | TCP_FLAG_RST_)) == TCP_FLAG_SYN_) {
		ack_pace_handshake(skb, tag, tcp_off, now);
		return 0;
	}
	if (payload > 0 || (flags & (TCP_FLAG_SYN_ | TCP_FLAG_FIN_ | TCP_FLAG_RST_ | TCP_FLAG_ACK_)) != TCP_FLAG_ACK_)
		return 0;
	struct shaper_ack_pace *r = ack_pace_slot(tag);

	if (!r || r->flow != tag)
		return 0;
	const __u64 until = *(volatile __u64 *)&r->until_ns;

	if (until <= now)
		return 0;
	ack_pace_cap_window(skb, r, tcp_off);
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

/* Ingress: whether the flow's held ACKs offer a window the shaper sets. Such a flow sends a
 * window per round trip, all of it through the class before its ACK leaves, so each window's
 * first packet finds nothing of its own queued: it is not sparse (sparse.h), which would let it
 * past the backlog and its ACK go unheld, offering the receiver's whole window. A global
 * function, as tcp_window_scale is. */
__noinline int ack_pace_sets_window(struct packet_fields *f)
{
	if (!f || f->proto != 6 || !f->has_ports)
		return 0;
	const __u64 tag = ack_pace_tag(f->dst, f->src, f->dport, f->sport);
	struct shaper_ack_pace *r = ack_pace_slot(tag);

	return r && r->flow == tag && r->window_cap;
}

/* Ingress: whether the send side held an ACK lately, so senders feel the virtual backlog in
 * their round trip. */
static __always_inline bool ack_pace_active(__u64 now)
{
	struct shaper_ack_pace *gate = ack_pace_gate();

	return gate && *(volatile __u64 *)&gate->until_ns + SHAPER_ACK_PACE_FRESH_NS > now;
}

#endif /* SHAPER_ACK_PACE_H */
