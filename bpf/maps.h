/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The datapath's maps, laid out as shaper_abi.h documents them. */
#ifndef SHAPER_MAPS_H
#define SHAPER_MAPS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"

/* An array pinned by name: a newer program loaded into the same pin directory reuses it, so
 * classes and their clocks survive an upgrade. The loader resizes those sized by classes. */
#define SHAPER_PINNED_ARRAY(name, array_type, value_type, entries, flags)                  \
	struct {                                                                           \
		__uint(type, array_type);                                                  \
		__uint(max_entries, entries);                                              \
		__uint(map_flags, flags);                                                  \
		__type(key, __u32);                                                        \
		__type(value, value_type);                                                 \
		__uint(pinning, LIBBPF_PIN_BY_NAME);                                       \
	} name SEC(".maps")

SHAPER_PINNED_ARRAY(shaper_settings, BPF_MAP_TYPE_ARRAY, struct shaper_settings, 1, 0);

/* The control plane's record of each class: declared here so that it is pinned with the rest;
 * the packet path reads shaper_classes instead. */
SHAPER_PINNED_ARRAY(shaper_class_config, BPF_MAP_TYPE_ARRAY, struct shaper_class_config,
		    SHAPER_DEFAULT_MAX_CLASSES, 0);

/* Mmapable: its values start on a page, so each 192-byte entry is three cache lines of its own
 * (an ordinary array's values start 56 bytes into a line), and the control plane writes configs
 * and moves clocks with atomics of its own through the mapping (a rate change rescales the
 * backlog). */
SHAPER_PINNED_ARRAY(shaper_classes, BPF_MAP_TYPE_ARRAY, struct shaper_class,
		    SHAPER_DEFAULT_MAX_CLASSES, BPF_F_MMAPABLE);

/* Mmapable for the same reason: values start on a page (stats.h). The loader sizes it to
 * cpus * max_classes. */
SHAPER_PINNED_ARRAY(shaper_class_stats, BPF_MAP_TYPE_ARRAY, struct shaper_class_stats,
		    SHAPER_DEFAULT_MAX_CLASSES, BPF_F_MMAPABLE);

SHAPER_PINNED_ARRAY(shaper_class_aqm, BPF_MAP_TYPE_ARRAY, struct shaper_class_aqm,
		    SHAPER_DEFAULT_MAX_CLASSES, 0);

/* An array, not a hash: its lookup is a few inlined instructions (see bpf/flow.h). */
SHAPER_PINNED_ARRAY(shaper_flows, BPF_MAP_TYPE_ARRAY, struct shaper_flow, 2 * SHAPER_FLOW_BUCKETS, 0);

SHAPER_PINNED_ARRAY(shaper_flow_boxes, BPF_MAP_TYPE_ARRAY, struct shaper_flow_box, SHAPER_FLOW_BOXES, 0);

SHAPER_PINNED_ARRAY(shaper_rules, BPF_MAP_TYPE_ARRAY, struct shaper_rule, SHAPER_MAX_RULES, 0);

SHAPER_PINNED_ARRAY(shaper_rule_stats, BPF_MAP_TYPE_PERCPU_ARRAY, struct shaper_rule_stats,
		    SHAPER_MAX_RULES, 0);

SHAPER_PINNED_ARRAY(shaper_tuples, BPF_MAP_TYPE_ARRAY, struct shaper_tuple, 2 * SHAPER_MAX_TUPLES, 0);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SHAPER_MAX_RULE_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct shaper_rule_key);
	__type(value, struct shaper_rule_match);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_rule_index SEC(".maps");

SHAPER_PINNED_ARRAY(shaper_port_segs, BPF_MAP_TYPE_ARRAY, __u16, 2 * SHAPER_PORT_SEGS_PER_GEN, 0);

/* Not pinned: a cache, private to each loaded program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHAPER_CLASSIFY_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct shaper_classify_cache);
} shaper_classify_cache SEC(".maps");

#endif /* SHAPER_MAPS_H */
