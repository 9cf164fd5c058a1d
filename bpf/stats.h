/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-class counters: per-CPU, so that CPUs charging one class never share a counter line. */
#ifndef SHAPER_STATS_H
#define SHAPER_STATS_H

#include "maps.h"

#define SHAPER_STATS_UNCLASSIFIED 0

static __always_inline struct shaper_class_stats *stats_of(__u32 class_id)
{
	return bpf_map_lookup_elem(&shaper_class_stats, &class_id);
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

static __always_inline void stats_aqm(__u32 class_id, bool marked)
{
	struct shaper_class_stats *st = bpf_map_lookup_elem(&shaper_class_stats, &class_id);

	if (!st)
		return;
	if (marked)
		st->ecn_marks++;
	else
		st->drops_aqm++;
}

static __always_inline void stats_fair(__u32 class_id, bool marked)
{
	struct shaper_class_stats *st = stats_of(class_id);

	if (!st)
		return;
	if (marked)
		st->fair_marks++;
	else
		st->drops_fair++;
}

static __always_inline void stats_sparse(__u32 class_id)
{
	struct shaper_class_stats *st = bpf_map_lookup_elem(&shaper_class_stats, &class_id);

	if (st)
		st->sparse++;
}

#endif /* SHAPER_STATS_H */
