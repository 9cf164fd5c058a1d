// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Bench reference (b): the floor of any EDT shaper — read the clock, write the departure time.
 * Two variants, because shaperctl stamps one way or the other depending on the kernel:
 *   bench_stamp_helper: bpf_skb_set_tstamp(..., BPF_SKB_TSTAMP_DELIVERY_MONO) (5.18+, what
 *                       shaperctl uses when its load-time probe finds the helper)
 *   bench_stamp_field:  the plain skb->tstamp store (older kernels)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define TC_ACT_OK 0

SEC("tc")
int bench_stamp_helper(struct __sk_buff *skb)
{
	bpf_skb_set_tstamp(skb, bpf_ktime_get_ns(), BPF_SKB_TSTAMP_DELIVERY_MONO);
	return TC_ACT_OK;
}

SEC("tc")
int bench_stamp_field(struct __sk_buff *skb)
{
	skb->tstamp = bpf_ktime_get_ns();
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
