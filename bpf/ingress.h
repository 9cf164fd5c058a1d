/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The receive side: the same classes, clocks and verdicts as egress, with no queue to hold a
 * packet. A received packet is charged to its class clock exactly as a sent one (every segment's
 * wire bytes plus overhead, at every level), and its verdict comes from the virtual backlog it
 * would wait behind, clock minus now: below the CoDel target it passes; above, CoDel's control
 * law and fair shares CE-mark ECN-capable packets (the sender halves its window as on a loss,
 * and nothing is lost) and drop the others; beyond the class horizon everything is dropped and
 * charged nowhere. So a class admits at most burst + rate * (T + horizon) over any interval T,
 * as egress's police mode, and TCP is told to slow down before that bound bites.
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
#include "charge.h"
#include "parse.h"

/* Set by the loader: the program runs on the device's receive side. */
const volatile bool ingress = false;

/* Bytes of each segment's headers, L2 through L4, of an untagged IPv4 or IPv6 packet (the shape
 * GRO builds); the L2 header alone for any other. */
static __always_inline __u32 ingress_segment_headers(struct __sk_buff *skb)
{
	const __u32 l2 = l2_header_len == SHAPER_L2_AT_NETWORK_HEADER ? 0 : l2_header_len;
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

#endif /* SHAPER_INGRESS_H */
