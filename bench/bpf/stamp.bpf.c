// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Bench reference (b): the floor of any EDT shaper — read the clock, write the departure time.
 *   bench_stamp_field:  the plain skb->tstamp store (every kernel; keeps the packet's clock type)
 *   bench_stamp_helper: bpf_skb_set_tstamp(..., BPF_SKB_TSTAMP_DELIVERY_MONO) (5.18+: also marks
 *                       the stamp as a monotonic delivery time)
 *   bench_stamp_typed:  what shaperctl does on 5.18+: the store when the packet is marked
 *                       monotonic already (TCP), the helper otherwise (bench/README.md, "floor")
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

SEC("tc")
int bench_stamp_typed(struct __sk_buff *skb)
{
	__u64 now = bpf_ktime_get_ns();

	if (skb->tstamp_type == BPF_SKB_TSTAMP_DELIVERY_MONO)
		skb->tstamp = now;
	else
		bpf_skb_set_tstamp(skb, now, BPF_SKB_TSTAMP_DELIVERY_MONO);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
