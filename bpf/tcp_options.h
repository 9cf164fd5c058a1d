/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The window scale a SYN or SYN-ACK offers, read from its TCP options (RFC 7323), for ACK
 * pacing's window caps (ack_pace.h): -1 without one.
 *
 * The options (at most 40 bytes) are copied out whole, then walked kind by kind: NOP one byte,
 * EOL the end, others kind, length, value. Bound: eight steps at most (TCPOPT_STEPS); Linux,
 * Windows and macOS put the window scale among their first six, and one not found within eight
 * is taken as none.
 *
 * A global function: the verifier checks it once on its own, not at every call. Defined here,
 * in a header, for the program's one translation unit (shaper.bpf.c).
 */
#ifndef SHAPER_TCP_OPTIONS_H
#define SHAPER_TCP_OPTIONS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "parse.h"

/* Options of a SYN or SYN-ACK: kind, length, value; at most 40 bytes of them. */
#define TCPOPT_EOL_ 0
#define TCPOPT_NOP_ 1
#define TCPOPT_WINDOW_ 3
#define TCPOPT_STEPS 8

__noinline int tcp_window_scale(struct __sk_buff *skb, __u32 tcp_off)
{
	__u8 opts[40], doff;
	__u32 len;

	if (!skb || parse_load(skb, tcp_off + 12, &doff, 1))
		return -1;
	len = (doff >> 4) * 4;
	if (len <= 20)
		return -1;
	len -= 20;
	if (len > sizeof(opts))
		return -1;
	__builtin_memset(opts, 0, sizeof(opts));
	if (l2_header_len == SHAPER_L2_AT_NETWORK_HEADER ?
		    bpf_skb_load_bytes_relative(skb, tcp_off + 20, opts, len, BPF_HDR_START_NET) :
		    bpf_skb_load_bytes(skb, tcp_off + 20, opts, len))
		return -1;
	/* Eight options at most (past eight, each step added thousands of instructions to the
	 * verifier's run: ten cost 15,000 more than eight): Linux, Windows and macOS put the window
	 * scale among their first six. One not found is taken as none, which errs on
	 * the safe side: a window read as unscaled is capped at 2^scale times the bytes meant. */
	for (__u32 i = 0, n = 0; n < TCPOPT_STEPS; n++) {
		if (i + 1 >= len || i > sizeof(opts) - 3)
			break;
		const __u8 kind = opts[i];

		if (kind == TCPOPT_EOL_)
			break;
		if (kind == TCPOPT_NOP_) {
			i++;
			continue;
		}
		const __u8 olen = opts[i + 1];

		if (kind == TCPOPT_WINDOW_ && olen == 3 && i + 2 < len)
			return opts[i + 2];
		if (olen < 2)
			break;
		i += olen;
	}
	return -1;
}

#endif /* SHAPER_TCP_OPTIONS_H */
