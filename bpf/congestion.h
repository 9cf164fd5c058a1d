/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What a class does to a packet when it must slow a flow down: CoDel (aqm.h) and fair shares
 * (fair.h) both CE-mark an ECN-capable packet when the class has ECN on, and drop it otherwise.
 * On the receive side a packet that cannot be marked passes: there a lone drop slows its sender
 * little, and drops are the box's (ingress.h).
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

static __always_inline enum congestion_verdict congestion_signal(struct __sk_buff *skb,
								 const struct shaper_class *cls)
{
	if ((cls->flags & SHAPER_CLASS_ECN) && bpf_skb_ecn_set_ce(skb))
		return CONGESTION_MARKED;
	return ingress ? CONGESTION_PASS : CONGESTION_DROP;
}

#endif /* SHAPER_CONGESTION_H */
