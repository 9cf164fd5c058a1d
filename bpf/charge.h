/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What a packet costs and how far it moves a class clock. Pure integer arithmetic shared by
 * the datapath and the control plane's tests, so both compute bit-identical charges.
 *
 * Rounding: a class's per-byte time is rounded up to 2^-32 ns, and each packet's time is
 * rounded to whole ns, up or down, so that what a CPU has charged stays within one ns above
 * the exact sum (shaper_round_time). So the class is never faster than its rate, and slower
 * by less than 1 ns per CPU plus 2^-32 ns per byte, however many packets it sends.
 */
#ifndef SHAPER_CHARGE_H
#define SHAPER_CHARGE_H

#include "shaper_abi.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/*
 * Bytes charged for a packet of `segs` segments (a GSO super-packet; 0 means 1) whose L2
 * length over all segments is `wire_len` (the qdisc length: each segment's headers counted).
 * Every segment pays `overhead`; the mean segment is charged at least `mpu`, and at least one
 * byte (as tc does after a negative overhead). Capped below 2^32 so that the time arithmetic
 * below cannot overflow; real packets are below 2^20.
 */
static __always_inline __u64 shaper_packet_cost(__u32 wire_len, __u32 segs, __s32 overhead,
						__u32 mpu)
{
	__u64 s = segs ? segs : 1;
	__s64 cost = (__s64)wire_len + (__s64)s * overhead;
	__s64 floor = (__s64)(s * (mpu ? mpu : 1));

	if (cost < floor)
		cost = floor;
	if (cost > 0xffffffffll)
		cost = 0xffffffffll;
	return (__u64)cost;
}

/*
 * Segments of a packet of `len` bytes whose qdisc length is `wire_len`. GSO packets from VMs and
 * packet sockets (virtio, tap, AF_PACKET with a vnet header) are DODGY: they carry gso_segs = 0
 * until segmented, though the kernel counted their segments' headers into the qdisc length
 * (qdisc_pkt_len_init):
 *     wire_len = len + (S - 1) * hdr,   S = ceil((len - hdr) / gso_size)
 * with hdr the headers up to the L4 payload, which the program does not know. S is at most
 * S0 = ceil(len / gso_size), and at least S0 - 1 while hdr <= gso_size. A candidate fits when
 * hdr = (wire_len - len) / (S - 1) is whole and gives S back; the larger fitting one is taken,
 * else S0. So S is never undercounted; it is one too many only when both fit, which needs the
 * last segment within hdr / (S - 1) bytes of a segment boundary (0.05 % of lengths): one
 * segment's overhead and mpu charged too many.
 */
static __always_inline __u32 shaper_ceil_div(__u32 a, __u32 b)
{
	return a / b + (a % b != 0);
}

/* Whether S segments of headers `extra / (S - 1)` make up a packet of `len` bytes. */
static __always_inline bool shaper_gso_segs_fit(__u32 len, __u32 extra, __u32 gso_size, __u32 s)
{
	if (s < 2 || extra % (s - 1))
		return false;
	const __u32 hdr = extra / (s - 1);

	return hdr < len && shaper_ceil_div(len - hdr, gso_size) == s;
}

static __always_inline __u32 shaper_gso_segs(__u32 len, __u32 wire_len, __u32 gso_segs,
					     __u32 gso_size)
{
	if (gso_segs)
		return gso_segs;
	if (!gso_size || wire_len <= len)
		return 1; /* no headers added: one segment, as the kernel counted it */
	const __u32 extra = wire_len - len, most = shaper_ceil_div(len, gso_size);

	if (!shaper_gso_segs_fit(len, extra, gso_size, most) &&
	    shaper_gso_segs_fit(len, extra, gso_size, most - 1))
		return most - 1;
	return most > 1 ? most : 1;
}

/* Time a cost takes at a class rate: whole ns, and the remainder in 2^-32 ns. */
static __always_inline __u64 shaper_cost_time(__u64 cost, __u64 ns_per_byte_fp, __u32 *frac)
{
	/* cost < 2^32 and ns_per_byte_fp < 2^53 (8 kbit): split the 96-bit product. */
	__u64 low = cost * (ns_per_byte_fp & 0xffffffffull);

	*frac = (__u32)low;
	return cost * (ns_per_byte_fp >> SHAPER_NS_FRAC_BITS) + (low >> SHAPER_NS_FRAC_BITS);
}

/*
 * `whole` ns + `frac` 2^-32 ns as whole ns. *carry is what this CPU has charged above the exact
 * times so far, in 2^-32 ns, kept in [0, 2^32): round down while it covers the fraction, else
 * round up and bank the excess.
 */
static __always_inline __u64 shaper_round_time(__u64 whole, __u32 frac, __u64 *carry)
{
	if (*carry >= frac) {
		*carry -= frac;
		return whole;
	}
	*carry += (1ull << SHAPER_NS_FRAC_BITS) - frac;
	return whole + 1;
}

#endif /* SHAPER_CHARGE_H */
