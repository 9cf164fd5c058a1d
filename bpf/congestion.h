/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What a class does to a packet when it must slow a flow down. A packet a local TCP socket sent
 * through another device (a bridge; edt mode, send side) can wait and must: its socket cannot
 * queue more than TCP small queues let it until the packet leaves, so a later departure slows
 * the flow by itself, while a drop here would be a loss (the bridge's transmit has succeeded);
 * fair shares hold such a flow to its share (fair.h), and CoDel marks it or lets it pass
 * (aqm.h). Any other packet is CE-marked when it is ECN-capable and the class has ECN on, and
 * dropped otherwise: a local socket's on its own device is then refused to its transmit, which
 * keeps it and sends it again (a signal, not a loss); a forwarded one has nothing behind it to
 * hold. On the receive side a packet that cannot be marked passes: there a lone drop slows its
 * sender little, and drops are the box's (ingress.h).
 */
#ifndef SHAPER_CONGESTION_H
#define SHAPER_CONGESTION_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"

/* Set by the loader: the program runs on the device's receive side. */
const volatile bool ingress = false;

enum congestion_verdict {
	CONGESTION_PASS,
	CONGESTION_MARKED, /* CE set; the packet is sent and charged */
	CONGESTION_DROP,   /* charged nowhere */
};

/* Who signalled: each counts its marks and drops apart. */
enum congestion_cause {
	CAUSE_AQM,
	CAUSE_FAIR,
};

/* `can_wait` non-zero: a local socket's packet (shaper.bpf.c's packet_refusal). */
static __always_inline enum congestion_verdict congestion_signal(struct __sk_buff *skb,
								 const struct shaper_class *cls,
								 __u64 can_wait)
{
	if ((cls->flags & SHAPER_CLASS_ECN) && bpf_skb_ecn_set_ce(skb))
		return CONGESTION_MARKED;
	return ingress || can_wait ? CONGESTION_PASS : CONGESTION_DROP;
}

#endif /* SHAPER_CONGESTION_H */
