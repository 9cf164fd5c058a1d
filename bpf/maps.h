/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The datapath's maps, laid out as shaper_abi.h documents them. */
#ifndef SHAPER_MAPS_H
#define SHAPER_MAPS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "shaper_abi.h"

/* Pinned by name: a newer program loaded into the same pin directory reuses these maps,
 * so classes and their clocks survive an upgrade. max_entries is resized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shaper_settings);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_settings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SHAPER_DEFAULT_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct shaper_class_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_class_config SEC(".maps");

/* Mmapable: its values start on a page, so each 64-byte clock is one cache line of its own (an
 * ordinary array's values start 56 bytes into a line), and the control plane can move a clock
 * with atomics of its own (a rate change rescales the backlog). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SHAPER_DEFAULT_MAX_CLASSES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct shaper_class_clock);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_class_clock SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHAPER_DEFAULT_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct shaper_class_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_class_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SHAPER_DEFAULT_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct shaper_class_aqm);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_class_aqm SEC(".maps");

/* An array, not a hash: its lookup is a few inlined instructions (see bpf/flow.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SHAPER_FLOW_BUCKETS);
	__type(key, __u32);
	__type(value, struct shaper_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SHAPER_MAX_RULES);
	__type(key, __u32);
	__type(value, struct shaper_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHAPER_MAX_RULES);
	__type(key, __u32);
	__type(value, struct shaper_rule_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_rule_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SHAPER_MAX_TUPLES);
	__type(key, __u32);
	__type(value, struct shaper_tuple);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_tuples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SHAPER_MAX_RULE_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct shaper_rule_key);
	__type(value, struct shaper_rule_match);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_rule_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SHAPER_PORT_SEGS_PER_GEN);
	__type(key, __u32);
	__type(value, __u16);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} shaper_port_segs SEC(".maps");

/* Not pinned: a cache, private to each loaded program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHAPER_CLASSIFY_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct shaper_classify_cache);
} shaper_classify_cache SEC(".maps");

#endif /* SHAPER_MAPS_H */
