/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Per-class counters, one set per CPU, so that CPUs charging one class never share a counter
 * line. A CPU's counters of class `id` are entry cpu * max_classes + id of one array: found by
 * arithmetic alone, where a per-CPU array would first load the class's pointer (for a cold class,
 * a second trip to memory after the first).
 */
#ifndef SHAPER_STATS_H
#define SHAPER_STATS_H

#include "maps.h"
#include "congestion.h"

#define SHAPER_STATS_UNCLASSIFIED 0

/* max_classes, set by the loader: the stride between two CPUs' counters. */
const volatile __u32 stats_classes = SHAPER_DEFAULT_MAX_CLASSES;

static __always_inline struct shaper_class_stats *stats_of(__u32 class_id)
{
	__u32 key = bpf_get_smp_processor_id() * stats_classes + class_id;

	if (class_id >= stats_classes)
		return NULL;
	return bpf_map_lookup_elem(&shaper_class_stats, &key);
}

static __always_inline void stats_add(struct shaper_class_stats *st, __u32 segs, __u64 bytes)
{
	st->packets++;
	st->segments += segs;
	st->bytes += bytes;
}

static __always_inline void stats_count(__u32 class_id, __u32 segs, __u64 bytes)
{
	struct shaper_class_stats *st = stats_of(class_id);

	if (st)
		stats_add(st, segs, bytes);
}

/* A drop, counted by its cause at the class whose counters `st` are. */
static __always_inline void stats_drop(struct shaper_class_stats *st, enum congestion_cause cause)
{
	if (st)
		(*(cause == CAUSE_FAIR ? &st->drops_fair : &st->drops_aqm))++;
}

/* The marks of a packet that is sent (bit `cause` set: that cause marked it). Counted only once
 * it leaves: a packet marked and then refused at a horizon (another CPU charged the class in
 * between) is a drop alone, so that every mark counted reached the receiver as CE. */
static __always_inline void stats_marks(struct shaper_class_stats *st, __u32 marks)
{
	if (!st)
		return;
	st->fair_marks += marks >> CAUSE_FAIR & 1;
	st->ecn_marks += marks >> CAUSE_AQM & 1;
}

#endif /* SHAPER_STATS_H */
