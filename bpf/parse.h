/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The fields rules match on, read from a packet's headers. */
#ifndef SHAPER_PARSE_H
#define SHAPER_PARSE_H

#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"

#define ETH_P_IP_ 0x0800
#define ETH_P_IPV6_ 0x86DD
#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8
#define ETH_P_ARP_ 0x0806
#define IPPROTO_HOPOPTS_ 0
#define IPPROTO_ROUTING_ 43
#define IPPROTO_FRAGMENT_ 44
#define IPPROTO_AH_ 51
#define IPPROTO_ICMPV6_ 58
#define IPPROTO_DSTOPTS_ 60
#define PARSE_MAX_VLAN_TAGS 2
/* RFC 8200's order: hop-by-hop, destination, routing, fragment, AH, destination options. */
#define PARSE_MAX_IPV6_EXT 6
/* The protocol of an IPv6 packet whose extension headers go on past PARSE_MAX_IPV6_EXT (IANA's
 * reserved 255): no transport header was found, so no port is read. */
#define PARSE_PROTO_UNKNOWN 255

/*
 * Set by the loader from the device type: bytes before the network header. 14 on Ethernet and
 * loopback; 0 where packets start at it (tun, WireGuard, PPP, IP-in-IP); on any other device
 * (IPoIB, a GRE device without a remote, whose headers the kernel pushes before egress)
 * SHAPER_L2_AT_NETWORK_HEADER: headers are read relative to the kernel's network header, and
 * the protocol is skb->protocol.
 */
const volatile __u32 l2_header_len = 14;

/* Where the network header starts for parse_load: after the L2 header, or at 0 where
 * parse_load reads relative to the network header itself. */
static __always_inline __u32 network_offset(void)
{
	return l2_header_len == SHAPER_L2_AT_NETWORK_HEADER ? 0 : l2_header_len;
}

/* Headers lie within this many bytes of the frame's start, or are read through the helper. */
#define PARSE_MAX_DIRECT_OFF 256

/*
 * Copies `len` header bytes at `off`: straight from the packet's linear data when they are
 * there (nearly always: the kernel builds headers in the linear area), else through
 * bpf_skb_load_bytes (non-linear headers). The direct read is a few loads; the helper a call
 * and a copy, several times the cost.
 */
static __always_inline int parse_load(struct __sk_buff *skb, __u32 off, void *to, __u32 len)
{
	if (l2_header_len == SHAPER_L2_AT_NETWORK_HEADER)
		return bpf_skb_load_bytes_relative(skb, off, to, len, BPF_HDR_START_NET);
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;

	if (off <= PARSE_MAX_DIRECT_OFF && data + off + len <= data_end) {
		__builtin_memcpy(to, data + off, len);
		return 0;
	}
	/* Stored to before the helper fills it, so that the verifier meets a store on this path
	 * too. The copy above spills words; the helper's bytes are not spills. Where a state that
	 * copied meets one that called the helper, the verifier traces the copied words' precision
	 * back into this path, past the helper, and 7.x stops with a "verifier bug" (-EFAULT) on
	 * reaching a state whose stack never held the buffer. The stores end that trace here. */
	__builtin_memset(to, 0, len);
	return bpf_skb_load_bytes(skb, off, to, len);
}

struct packet_fields {
	__u8 family; /* 4, 6, or 0: not IP */
	__u8 proto;
	__u8 dscp;
	__u8 has_ports; /* TCP, UDP or SCTP, and not a later fragment */
	__u16 vlan;     /* outermost VLAN id (accelerated tag first), 0 when untagged */
	__u16 sport, dport; /* 0 when the packet has no ports */
	__u8 neighbour; /* ARP, or IPv6 neighbour or router discovery (ICMPv6 133-137) */
	__u32 src[4], dst[4]; /* network order; IPv4 in [0] */
};

static __always_inline bool proto_has_ports(__u8 proto)
{
	return proto == 6 || proto == 17 || proto == 132;
}

/* The extension headers walked, as bits of a mask: tested without a branch per type (each
 * would be one more verifier state per header walked). */
#define IPV6_EXTENSIONS                                                                        \
	(1ull << IPPROTO_HOPOPTS_ | 1ull << IPPROTO_ROUTING_ | 1ull << IPPROTO_FRAGMENT_ |     \
	 1ull << IPPROTO_AH_ | 1ull << IPPROTO_DSTOPTS_)

static __always_inline __u32 ipv6_is_extension(__u8 next)
{
	__u32 below_64 = (((__u32)next >> 6) - 1) >> 31;

	return (__u32)(IPV6_EXTENSIONS >> (next & 63)) & below_64;
}

/* 1 for ICMPv6 router solicitation and advertisement, neighbour solicitation and
 * advertisement, redirect (types 133-137), else 0, without a branch. */
static __always_inline __u32 icmpv6_is_neighbour_discovery(__u8 type)
{
	return ((__u32)(__u8)(type - 133) - 5) >> 31;
}

static __always_inline void parse_ports(struct __sk_buff *skb, __u32 off, struct packet_fields *f)
{
	__be16 ports[2];

	if (proto_has_ports(f->proto) && !parse_load(skb, off, ports, sizeof(ports))) {
		f->sport = bpf_ntohs(ports[0]);
		f->dport = bpf_ntohs(ports[1]);
		f->has_ports = 1;
	}
}

static __always_inline void parse_ipv4(struct __sk_buff *skb, __u32 off, struct packet_fields *f)
{
	struct iphdr ip;

	if (parse_load(skb, off, &ip, sizeof(ip)))
		return;
	f->family = 4;
	f->proto = ip.protocol;
	f->dscp = ip.tos >> 2;
	f->src[0] = ip.saddr;
	f->dst[0] = ip.daddr;
	/* Later fragments carry no ports: they match on addresses alone. */
	if (!(bpf_ntohs(ip.frag_off) & 0x1fff))
		parse_ports(skb, off + ip.ihl * 4, f);
}

static __always_inline void parse_ipv6(struct __sk_buff *skb, __u32 off, struct packet_fields *f)
{
	struct ipv6hdr ip6;
	__u8 next;

	if (parse_load(skb, off, &ip6, sizeof(ip6)))
		return;
	f->family = 6;
	f->dscp = (bpf_ntohl(*(__be32 *)&ip6) >> 22) & 0x3f;
	__builtin_memcpy(f->src, &ip6.saddr, 16);
	__builtin_memcpy(f->dst, &ip6.daddr, 16);
	next = ip6.nexthdr;
	off += sizeof(ip6);

	for (int i = 0; i < PARSE_MAX_IPV6_EXT; i++) {
		__u8 ext[8];

		if (!ipv6_is_extension(next))
			break;
		if (parse_load(skb, off, ext, sizeof(ext)))
			return;
		if (next == IPPROTO_FRAGMENT_) {
			next = ext[0];
			if ((((__u16)ext[2] << 8) | ext[3]) & 0xfff8) {
				/* A later fragment: what follows is not the transport header. */
				f->proto = ipv6_is_extension(next) ? PARSE_PROTO_UNKNOWN : next;
				return;
			}
			off += 8;
		} else {
			/* AH counts its length in 4-byte words less two, the others in 8 bytes less one
			 * (picked without a branch: one verifier state per header walked). */
			__u32 words8 = ((__u32)ext[1] + 1) * 8, words4 = ((__u32)ext[1] + 2) * 4;
			__u32 is_ah = (((__u32)next ^ IPPROTO_AH_) - 1) >> 31;

			off += words8 + ((words4 - words8) & -is_ah);
			next = ext[0];
		}
	}
	if (ipv6_is_extension(next)) {
		f->proto = PARSE_PROTO_UNKNOWN; /* more extension headers than walked */
		return;
	}
	f->proto = next;
	if (next == IPPROTO_ICMPV6_) {
		__u8 type;

		if (!parse_load(skb, off, &type, sizeof(type)))
			f->neighbour = icmpv6_is_neighbour_discovery(type);
		return;
	}
	parse_ports(skb, off, f);
}

/*
 * A global function: the verifier checks it once on its own. Inlined, its paths multiplied
 * with the rest of the program's and attach took 1.3 s of verification instead of 0.3 s.
 */
__noinline int parse_headers(struct __sk_buff *skb, struct packet_fields *f)
{
	if (!skb || !f)
		return 0;
	__u32 off = network_offset();
	__u16 proto = bpf_ntohs(skb->protocol);

	if (skb->vlan_present)
		f->vlan = skb->vlan_tci & 0x0fff;
	if (l2_header_len == 14) {
		__be16 ethertype;

		if (parse_load(skb, 12, &ethertype, sizeof(ethertype)))
			return 0;
		proto = bpf_ntohs(ethertype);
	}
	for (int i = 0; i < PARSE_MAX_VLAN_TAGS; i++) {
		__be16 tci_type[2]; /* the tag's TCI, then the ethertype it encloses */

		if (proto != ETH_P_8021Q_ && proto != ETH_P_8021AD_)
			break;
		if (parse_load(skb, off, tci_type, sizeof(tci_type)))
			return 0;
		if (!f->vlan)
			f->vlan = bpf_ntohs(tci_type[0]) & 0x0fff;
		proto = bpf_ntohs(tci_type[1]);
		off += 4;
	}
	if (proto == ETH_P_IP_)
		parse_ipv4(skb, off, f);
	else if (proto == ETH_P_IPV6_)
		parse_ipv6(skb, off, f);
	else if (proto == ETH_P_ARP_)
		f->neighbour = 1;
	return 0;
}

/*
 * The packet nearly every host sends, parsed inline: untagged Ethernet (or a device without L2
 * header), IPv4 without options or IPv6 without extension headers, not a later fragment, its headers
 * and ports in the linear data. Any other shape is left to parse_headers (false, *f untouched).
 * Inline because calling parse_headers costs more than parsing this shape (a call and a return,
 * and the return goes through a mitigation thunk on many CPUs); its few branches add little
 * to what the verifier explores.
 */
static __always_inline bool parse_common(struct __sk_buff *skb, struct packet_fields *f)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	const __u32 off = l2_header_len; /* a load-time constant */
	__u16 proto;

	if (off != 0 && off != 14)
		return false;
	if (off == 14) {
		if (data + 14 > data_end)
			return false;
		proto = bpf_ntohs(*(__be16 *)(data + 12));
	} else {
		proto = bpf_ntohs(skb->protocol);
	}

	__u8 l4;
	__be16 *ports;

	if (proto == ETH_P_IP_) {
		struct iphdr *ip = data + off;

		ports = (__be16 *)(ip + 1);
		if ((void *)(ports + 2) > data_end || ip->ihl != 5 ||
		    (ip->frag_off & bpf_htons(0x1fff)))
			return false;
		l4 = ip->protocol;
		f->family = 4;
		f->dscp = ip->tos >> 2;
		f->src[0] = ip->saddr;
		f->dst[0] = ip->daddr;
	} else if (proto == ETH_P_IPV6_) {
		struct ipv6hdr *ip6 = data + off;
		const __u32 *words = (const __u32 *)ip6;

		ports = (__be16 *)(ip6 + 1);
		if ((void *)(ports + 2) > data_end)
			return false;
		l4 = ip6->nexthdr;
		if (ipv6_is_extension(l4))
			return false;
		f->family = 6;
		f->dscp = (bpf_ntohl(words[0]) >> 22) & 0x3f;
		f->src[0] = words[2];
		f->src[1] = words[3];
		f->src[2] = words[4];
		f->src[3] = words[5];
		f->dst[0] = words[6];
		f->dst[1] = words[7];
		f->dst[2] = words[8];
		f->dst[3] = words[9];
		/* Without a branch, as below: ICMPv6, and neighbour discovery. */
		f->neighbour = ((((__u32)l4 ^ IPPROTO_ICMPV6_) - 1) >> 31) &
			       icmpv6_is_neighbour_discovery(*(__u8 *)ports);
	} else {
		return false;
	}
	/* Every field written, without branches: one state for the verifier to carry on. */
	__u32 has_ports = proto_has_ports(l4);
	__u32 both_ports = *(__u32 *)ports & -has_ports;

	f->proto = l4;
	f->has_ports = has_ports;
	f->sport = bpf_ntohs((__u16)both_ports);
	f->dport = bpf_ntohs((__u16)(both_ports >> 16));
	f->vlan = skb->vlan_present ? skb->vlan_tci & 0x0fff : 0;
	return true;
}

/* Fills *f (zeroed by the caller) from the packet's headers. */
static __always_inline void parse_packet(struct __sk_buff *skb, struct packet_fields *f)
{
	if (!parse_common(skb, f))
		parse_headers(skb, f);
}

/*
 * A packet's fields, parsed once by the program's entry when anything needs them (the
 * classifier, a flow hash the kernel did not set, the sch_fq flow of a socketless packet):
 * one call of the parser, and no packet parsed twice.
 */
struct packet_view {
	struct packet_fields fields;
	__u32 flow_hash; /* bpf/flow.h's, once computed; 0: not yet */
};

#endif /* SHAPER_PARSE_H */
