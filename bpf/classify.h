/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Which class a packet belongs to: tuple-space search over the rules.
 *
 * The control plane groups rules by shape (a tuple: which fields, prefix lengths, mark mask,
 * cgroup level) and indexes every rule in one hash map under its tuple and its masked field
 * values. A packet costs one hash lookup per tuple, at most SHAPER_MAX_TUPLES, however many
 * rules there are; tuples are sorted by their best pref, so the search stops as soon as no
 * remaining tuple can beat the match in hand. Port ranges are mapped to segment ids first (one
 * array lookup per port), so a range is an exact key, not a mask. The lowest pref wins; a packet
 * no rule matches goes to the default class (0: unclassified).
 */
#ifndef SHAPER_CLASSIFY_H
#define SHAPER_CLASSIFY_H

#include "maps.h"
#include "parse.h"

static __always_inline __u16 port_segment(__u32 gen, __u32 side, __u16 port)
{
	__u32 index = gen * SHAPER_PORT_SEGS_PER_GEN + side * 65536 + port;
	__u16 *seg = bpf_map_lookup_elem(&shaper_port_segs, &index);

	return seg ? *seg : 0;
}

static __always_inline void count_rule_hit(__u32 slot, __u32 len)
{
	struct shaper_rule_stats *st = bpf_map_lookup_elem(&shaper_rule_stats, &slot);

	if (st) {
		st->packets++;
		st->bytes += len;
	}
}

/*
 * The rule search: a global function, so the verifier checks it once on its own instead of
 * once per path through the rest of the program. Returns the class id, 0 when no rule matches.
 */
__noinline __u32 classify_by_rules(struct __sk_buff *skb, __u32 rules_gen, __u32 len)
{
	if (!skb)
		return 0;
	__u32 gen = rules_gen & SHAPER_RULES_GEN_MASK;
	struct packet_fields f = {};
	__u32 best_pref = SHAPER_PREF_NONE, best_class = 0, best_slot = 0;
	__u16 sport_seg = 0, dport_seg = 0;

	parse_packet(skb, &f);
	/* Segment ids start at 1: a packet without ports (0) never meets a port rule. */
	if (f.has_ports) {
		sport_seg = port_segment(gen, 0, f.sport);
		dport_seg = port_segment(gen, 1, f.dport);
	}

	/* The packet's key once; each tuple masks it (8 word ANDs, no branches per field). */
	struct shaper_rule_key packet = {
		.proto = f.proto,
		.dscp = f.dscp,
		.family = f.family,
		.vlan = f.vlan,
		.sport_seg = sport_seg,
		.dport_seg = dport_seg,
		.mark = skb->mark,
		.priority = skb->priority,
	};
	__builtin_memcpy(packet.src, f.src, 16);
	__builtin_memcpy(packet.dst, f.dst, 16);

	for (__u32 t = 0; t < SHAPER_MAX_TUPLES; t++) {
		__u32 index = gen * SHAPER_MAX_TUPLES + t;
		struct shaper_tuple *tuple = bpf_map_lookup_elem(&shaper_tuples, &index);

		if (!tuple || !tuple->present || tuple->min_pref >= best_pref)
			break;
		struct shaper_rule_key key;
		const __u64 *p = (const __u64 *)&packet, *m = (const __u64 *)&tuple->mask;
		__u64 *k = (__u64 *)&key;

		for (int w = 0; w < (int)(sizeof(key) / 8); w++)
			k[w] = p[w] & m[w];
		key.tuple = index;
		if (tuple->fields & SHAPER_RULE_F_CGROUP)
			key.cgroup = bpf_skb_ancestor_cgroup_id(skb, tuple->cgroup_level);

		struct shaper_rule_match *match = bpf_map_lookup_elem(&shaper_rule_index, &key);

		if (match && match->pref < best_pref) {
			best_pref = match->pref;
			best_class = match->class_id;
			best_slot = match->slot;
		}
	}
	if (best_pref == SHAPER_PREF_NONE)
		return 0;
	count_rule_hit(best_slot, len);
	return best_class;
}

/* Returns the class id, or 0 when the packet is unclassified (passes unshaped). */
static __always_inline __u32 classify(struct __sk_buff *skb, const struct shaper_settings *settings,
				      __u32 len)
{
	__u32 rules_gen = settings->rules_gen;
	__u32 class_id = 0;

	if (rules_gen & SHAPER_RULES_PRESENT)
		class_id = classify_by_rules(skb, rules_gen, len);
	return class_id ? class_id : settings->default_class;
}

#endif /* SHAPER_CLASSIFY_H */
