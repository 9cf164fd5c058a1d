// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Bench reference (a): the cheapest tc program there is. Its BPF_PROG_TEST_RUN time is the
 * harness's own per-run cost (loop, cb save/restore, timer), included in every other row. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define TC_ACT_OK 0

SEC("tc")
int bench_empty(struct __sk_buff *skb)
{
	(void)skb;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
