/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Which class a packet belongs to: tuple-space search over the rules, behind a cache.
 *
 * The control plane groups rules by shape (a tuple: which fields, prefix lengths, mark mask,
 * cgroup level) and indexes every rule in one hash map under its tuple and its masked field
 * values. A packet costs one hash lookup per tuple, at most SHAPER_MAX_TUPLES, however many
 * rules there are; tuples are sorted by their best pref, so the search stops as soon as no
 * remaining tuple can beat the match in hand. Port ranges are mapped to segment ids first (one
 * array lookup per port), so a range is an exact key, not a mask. The lowest pref wins; a packet
 * no rule matches goes to the default class (0: unclassified).
 *
 * The search's result depends only on the packet's key (addresses, ports, protocol, DSCP,
 * VLAN, mark, priority, cgroup) and the rule set, so a per-CPU direct-mapped cache keyed by the
 * whole key answers the packets of a flow after its first: one multiply-mix hash, one array
 * slot, eight word compares. An entry is valid for the rule set it was computed under only
 * (rules_gen counts publications). Per-CPU entries are written by one program run at a time
 * (tc egress runs with bottom halves off), so a reader never sees half an entry.
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
 * The packet's key with its ports as they are (the search swaps in their segments). Written a
 * whole word at a time, in struct shaper_rule_key's little-endian layout: narrow stores read
 * back as words would stall store forwarding on every packet.
 */
static __always_inline void packet_key(struct __sk_buff *skb, const struct packet_fields *f,
				       __u32 rules_gen, struct shaper_rule_key *key)
{
	__u64 *w = (__u64 *)key;

	/* tuple 0, family, proto, dscp, vlan, sport | dport, has_ports, mark | priority, 0. Ports
	 * are 0 when the packet has none (both parsers leave them so). */
	w[0] = (__u64)f->family << 8 | (__u64)f->proto << 16 | (__u64)f->dscp << 24 |
	       (__u64)f->vlan << 32 | (__u64)f->sport << 48;
	w[1] = f->dport | (__u64)f->has_ports << 16 | (__u64)skb->mark << 32;
	w[2] = skb->priority;
	w[3] = (rules_gen & SHAPER_RULES_CGROUP) ? bpf_skb_cgroup_id(skb) : 0;
	w[4] = (__u64)f->src[1] << 32 | f->src[0];
	w[5] = (__u64)f->src[3] << 32 | f->src[2];
	w[6] = (__u64)f->dst[1] << 32 | f->dst[0];
	w[7] = (__u64)f->dst[3] << 32 | f->dst[2];
}

/* Spreads a key over the cache: eight independent multiplies, folded. */
static __always_inline __u32 packet_key_slot(const struct shaper_rule_key *key)
{
	const __u64 *w = (const __u64 *)key;
	__u64 h = w[0] * 0x9e3779b97f4a7c15ull + w[1] * 0xc2b2ae3d27d4eb4full +
		  w[2] * 0x165667b19e3779f9ull + w[3] * 0xd6e8feb86659fd93ull +
		  w[4] * 0xff51afd7ed558ccdull + w[5] * 0xc4ceb9fe1a85ec53ull +
		  w[6] * 0x94d049bb133111ebull + w[7] * 0xbf58476d1ce4e5b9ull;

	h ^= h >> 32;
	h *= 0x9e3779b97f4a7c15ull;
	return (__u32)(h >> 40) & (SHAPER_CLASSIFY_CACHE_SLOTS - 1);
}

static __always_inline bool packet_key_equal(const struct shaper_rule_key *a,
					     const struct shaper_rule_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 diff = 0;

	for (int w = 0; w < (int)(sizeof(*a) / 8); w++)
		diff |= x[w] ^ y[w];
	return diff == 0;
}

struct rule_verdict {
	__u32 class_id; /* 0: no rule matched */
	__u32 slot;
};

/*
 * The rule search: a global function, so the verifier checks it once on its own instead of
 * once per path through the rest of the program. Fills *out (class 0 when no rule matches).
 */
__noinline int classify_by_rules(struct __sk_buff *skb, const struct shaper_rule_key *packet_in,
				 __u32 rules_gen, struct rule_verdict *out)
{
	if (!skb || !packet_in || !out)
		return 0;
	__u32 gen = rules_gen & SHAPER_RULES_GEN_MASK;
	__u32 best_pref = SHAPER_PREF_NONE;
	struct shaper_rule_key packet = *packet_in;

	out->class_id = 0;
	out->slot = 0;
	/* Segment ids start at 1: a packet without ports (0) never meets a port rule. */
	if (packet.has_ports) {
		packet.sport_seg = port_segment(gen, 0, packet.sport_seg);
		packet.dport_seg = port_segment(gen, 1, packet.dport_seg);
	}

	for (__u32 t = 0; t < SHAPER_MAX_TUPLES; t++) {
		__u32 index = gen * SHAPER_MAX_TUPLES + t;
		struct shaper_tuple *tuple = bpf_map_lookup_elem(&shaper_tuples, &index);

		if (!tuple || !tuple->present || tuple->min_pref >= best_pref)
			break;
		/* Each tuple masks the key: 8 word ANDs, no branches per field. */
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
			out->class_id = match->class_id;
			out->slot = match->slot;
		}
	}
	return 0;
}

/* The class of the rule set `rules_gen` (rules present) for a parsed packet; 0: no rule. */
static __always_inline __u32 classify_packet(struct __sk_buff *skb, const struct packet_fields *f,
					     __u32 rules_gen, __u32 len)
{
	struct shaper_rule_key packet;
	struct rule_verdict verdict;

	packet_key(skb, f, rules_gen, &packet);
	__u32 slot = packet_key_slot(&packet);
	struct shaper_classify_cache *cached = bpf_map_lookup_elem(&shaper_classify_cache, &slot);

	if (cached && cached->rules_gen == rules_gen && packet_key_equal(&cached->packet, &packet)) {
		verdict.class_id = cached->class_id;
		verdict.slot = cached->slot;
	} else {
		classify_by_rules(skb, &packet, rules_gen, &verdict);
		if (cached) {
			cached->packet = packet;
			cached->class_id = verdict.class_id;
			cached->slot = verdict.slot;
			cached->rules_gen = rules_gen;
		}
	}
	if (!verdict.class_id)
		return 0;
	count_rule_hit(verdict.slot, len);
	return verdict.class_id;
}

#endif /* SHAPER_CLASSIFY_H */
