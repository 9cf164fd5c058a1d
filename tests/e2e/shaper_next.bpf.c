// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * A "newer build" of the datapath for the upgrade test (e2e case upgrade): bpf/shaper.bpf.c
 * unchanged but for one store of SHAPER_PROGRAM_REVISION on each clock read. The store is an
 * instruction the current build does not have, so this program's tag differs and
 * `shaperctl_next attach` over a running shaperctl swaps it in (same tag: "nothing changed").
 * The revision can be read back from the program's .bss (bpftool map dump).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#ifndef SHAPER_PROGRAM_REVISION
#error "build with -DSHAPER_PROGRAM_REVISION=N"
#endif

volatile __u32 shaper_program_revision;

static __always_inline __u64 revision_ktime_get_ns(void)
{
	shaper_program_revision = SHAPER_PROGRAM_REVISION;
	return bpf_ktime_get_ns();
}
#define bpf_ktime_get_ns revision_ktime_get_ns

#include "shaper.bpf.c"
