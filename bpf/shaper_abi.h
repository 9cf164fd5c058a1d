/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The ABI between the BPF datapath and the C++ control plane: map layouts, limits, flags.
 * Included by both sides; every change here is a change of the pinned maps' format.
 *
 * Maps (all pinned by name under the device's pin directory, so a newer program reuses them):
 *   shaper_settings     ARRAY[1]            struct shaper_settings     written by control plane
 *   shaper_class_config ARRAY[max_classes]  struct shaper_class_config the control plane's
 *                       record of each class (rates as given); the datapath never reads it
 *   shaper_classes      ARRAY[max_classes]  struct shaper_class  mmapable: all a packet reads of
 *                       its class (the config it needs, derived from the record) and its clocks,
 *                       five cache lines: config, backlog state, clocks, lending, use.
 *                       The control plane writes the config part and moves clocks with atomics,
 *                       through the mapping
 *   shaper_class_stats  ARRAY[cpus * max_classes] struct shaper_class_stats  mmapable, datapath
 *                       only: entry cpu * max_classes + id holds one CPU's counters of a class
 *                       and its slice of the class clock (bpf/slice.h)
 *   shaper_class_aqm    ARRAY[max_classes]  struct shaper_class_aqm    CoDel state, datapath only
 *   shaper_flows        ARRAY[2 * SHAPER_FLOW_BUCKETS] struct shaper_flow: flows' last departures
 *                       and fair-share counts; bucket b of (class, flow hash) is the two tagged
 *                       ways 2b and 2b + 1, datapath only (bpf/flow.h)
 *   shaper_flow_boxes   ARRAY[SHAPER_FLOW_BOXES] struct shaper_flow_box: the receive side's boxed
 *                       flows (bpf/ingress.h), slot by (class, flow hash), datapath only
 *   shaper_ack_pace     ARRAY[1 + SHAPER_ACK_PACE_SLOTS] struct shaper_ack_pace: one per device,
 *                       shared by both sides' programs and pinned beside their directories, at
 *                       <ns dir>/if<ifindex>-ack-pace: the receive side's flows' virtual
 *                       departures, which the send side's pure ACKs wait for (bpf/ack_pace.h)
 *   shaper_rules        ARRAY[SHAPER_MAX_RULES]   struct shaper_rule   the rules as given (control plane)
 *   shaper_rule_stats   PERCPU_ARRAY[SHAPER_MAX_RULES] struct shaper_rule_stats  hits per rule slot
 *   shaper_tuples       ARRAY[2 * SHAPER_MAX_TUPLES] struct shaper_tuple  rule shapes, per generation
 *   shaper_rule_index   HASH (no prealloc)     shaper_rule_key -> shaper_rule_match, per generation
 *   shaper_port_segs    ARRAY[2 * 2 * 65536]   __u16: port -> segment id, per generation and side
 *   shaper_classify_cache PERCPU_ARRAY[SHAPER_CLASSIFY_CACHE_SLOTS] struct shaper_classify_cache
 *                       recent classifications (not pinned: each program has its own)
 *
 * Rules are compiled by the control plane into the inactive generation of the last three maps,
 * then shaper_settings.rules_gen flips to it: the datapath never sees a half-written rule set.
 * Arrays are indexed by class id; id 0 is never a class: its stats slot counts unclassified
 * packets.
 */
#ifndef SHAPER_ABI_H
#define SHAPER_ABI_H

#ifndef __VMLINUX_H__
#include <linux/bpf.h> /* struct bpf_spin_lock */
#include <linux/types.h>
#endif

#define SHAPER_ABI_VERSION 11

/* Limits, enforced by the control plane before anything reaches a map. */
#define SHAPER_DEFAULT_MAX_CLASSES 16384u   /* ids 1..max_classes-1 */
#define SHAPER_LIMIT_MAX_CLASSES (1u << 20)
#define SHAPER_DELAY_BUCKETS 16            /* the delay histogram's buckets (bpf/delay.h) */
#define SHAPER_DELAY_FIRST_SHIFT 14         /* its first bound: 2^14 ns, 16.4 us */
#define SHAPER_DELAY_DOUBLINGS 11           /* bounds double this often, then quadruple */
#define SHAPER_MAX_DEPTH 8                  /* levels a packet is charged at: leaf + 7 parents */
#define SHAPER_RATE_MIN_BPS 8000ull         /* 8 kbit */
#define SHAPER_RATE_MAX_BPS 400000000000ull /* 400 Gbit */
#define SHAPER_BURST_MAX_BYTES (1u << 30)   /* 1 GiB */
#define SHAPER_BURST_MAX_NS (3600ull * 1000000000ull) /* at most an hour of credit */
#define SHAPER_OVERHEAD_MIN (-64)           /* same range as tc's stab overhead */
#define SHAPER_OVERHEAD_MAX 256
#define SHAPER_FAIR_TOLERANCE_DEFAULT_PM 125 /* an eighth of the share (bpf/fair.h) */
#define SHAPER_FAIR_TOLERANCE_MAX_PM 1000    /* the share again: where floods are dropped */
#define SHAPER_MPU_MAX 65535u
#define SHAPER_HORIZON_MIN_NS 1000ull              /* 1 us */
#define SHAPER_HORIZON_MAX_NS 60000000000ull       /* 60 s */
#define SHAPER_DEFAULT_HORIZON_NS 2000000000ull    /* 2 s, below sch_fq's default 10 s */
#define SHAPER_DEFAULT_POLICE_HORIZON_NS 5000000ull /* 5 ms of tolerance when policing */

/* A packet's own departure time (TCP pacing) is honoured when less than this ahead of now; beyond
 * it is no monotonic pacing time (a forwarded packet's realtime receive stamp, ~1.7e18 ns). */
#define SHAPER_FOREIGN_TSTAMP_MAX_NS (1ull << 40)

/* l2_header_len (bpf/parse.h) where the loader cannot name it: headers from the network header. */
#define SHAPER_L2_AT_NETWORK_HEADER 0xffffffffu

/* Fixed point of the per-byte clock advance: ns_per_byte_fp = 2^32 * 8e9 / rate_bps. */
#define SHAPER_NS_FRAC_BITS 32

/* Classification rules (tuple-space search; see bpf/classify.h). */
#define SHAPER_MAX_RULES 16384u       /* rule slots */
#define SHAPER_MAX_TUPLES 16          /* distinct rule shapes, each one hash lookup per packet */
#define SHAPER_MAX_RULE_ENTRIES (1u << 18)
#define SHAPER_PORT_SEGS_PER_GEN (2u * 65536u) /* [0, 65536): source ports; then destination */
#define SHAPER_PREF_NONE 0xffffffffu

/* Which fields a rule (and a tuple) matches on. */
#define SHAPER_RULE_F_SRC (1u << 0)
#define SHAPER_RULE_F_DST (1u << 1)
#define SHAPER_RULE_F_PROTO (1u << 2)
#define SHAPER_RULE_F_SPORT (1u << 3)
#define SHAPER_RULE_F_DPORT (1u << 4)
#define SHAPER_RULE_F_MARK (1u << 5)
#define SHAPER_RULE_F_CGROUP (1u << 6)
#define SHAPER_RULE_F_PRIORITY (1u << 7)
#define SHAPER_RULE_F_DSCP (1u << 8)
#define SHAPER_RULE_F_VLAN (1u << 9)
#define SHAPER_RULE_F_PORTS (SHAPER_RULE_F_SPORT | SHAPER_RULE_F_DPORT)

/* shaper_settings.rules_gen */
#define SHAPER_RULES_GEN_MASK 1u      /* the active generation */
#define SHAPER_RULES_PRESENT (1u << 1) /* at least one rule: classify at all */
#define SHAPER_RULES_CGROUP (1u << 2)  /* some rule matches a cgroup */
#define SHAPER_RULES_SERIAL_SHIFT 8    /* above: counts publications, so each rule set differs */

#define SHAPER_CLASSIFY_CACHE_SLOTS 4096u /* per-CPU classification cache (bpf/classify.h), direct-mapped */

enum shaper_mode {
	SHAPER_MODE_EDT = 0,    /* stamp the departure time; sch_fq holds the packet until then */
	SHAPER_MODE_POLICE = 1, /* no pacing qdisc: drop what would leave beyond the horizon */
};

#define SHAPER_CLASS_PRESENT (1u << 0)
#define SHAPER_CLASS_AQM (1u << 1) /* CoDel on the class's virtual backlog (edt mode) */
#define SHAPER_CLASS_ECN (1u << 2) /* CE-mark ECN-capable packets instead of dropping them */
#define SHAPER_CLASS_SPARSE (1u << 3) /* sparse flows leave ahead of the class backlog */
#define SHAPER_CLASS_FAIR (1u << 4)   /* bulk flows above their share are marked or dropped */
#define SHAPER_CLASS_CEIL (1u << 5)   /* a guaranteed rate that borrows up to a ceiling (bpf/borrow.h) */
#define SHAPER_PRIO_MAX 7u              /* borrowers' priorities: 0 first, 7 last */
#define SHAPER_LEND_EPOCH_NS 20000000ull /* a lender re-divides its spare this often (bpf/borrow.h) */
#define SHAPER_LEND_PRIO_SHIFT 60        /* lend_last: prio + 1 above, weight below; 0: none */
#define SHAPER_LEND_USE_AVG_NS 160000000ull /* a borrower's use is averaged over about this */

#define SHAPER_FLOW_BUCKETS (1u << 16)          /* flows remembered: two ways per bucket */
#define SHAPER_SPARSE_MIN_BACKLOG_NS 1000000ull /* below 1 ms of backlog nobody needs to jump */
#define SHAPER_SPARSE_ALLOWANCE_BYTES 3076u     /* early departures at most two frames ahead */
#define SHAPER_FLOW_BOXES 4096u                 /* receive side: boxed flows, one slot per bucket */
#define SHAPER_BOX_NS 50000000ull               /* a boxed flow's packets are dropped for 50 ms */
#define SHAPER_BOX_RESPITE_NS 250000000ull      /* then it is not boxed again for 250 ms */
#define SHAPER_ACK_PACE_SLOTS 16384u            /* ACK pacing: flow records per device (bpf/ack_pace.h) */
#define SHAPER_ACK_PACE_FRESH_NS 1000000000ull  /* ACKs are paced if the send side held one this recently */
#define SHAPER_ACK_PACE_NOTE_NS 100000000ull    /* the send side notes a held ACK at most this often */
#define SHAPER_ACK_WINDOW_SHARE 16u             /* held ACKs offer a flow's share of rtt + horizon / 16 */
#define SHAPER_ACK_WINDOW_MIN_SEGS 2u           /* ...and never less than two of its segments */

/* How far past a horizon neighbour discovery still passes, at the level's rate (bpf/edt.h): one
 * largest GSO packet, what a class may overshoot, and as much again; the datapath shifts by it. */
#define SHAPER_NEIGHBOUR_SLACK_LOG2 17
#define SHAPER_NEIGHBOUR_SLACK_BYTES (1u << SHAPER_NEIGHBOUR_SLACK_LOG2) /* 128 KiB */

#define SHAPER_SLICE_MAX_NS 16000ull        /* a CPU's slice of a class clock: at most 16 us (bpf/slice.h) */
#define SHAPER_FAIR_HOLD_MAX_NS 250000000ull /* a held packet leaves at most 250 ms after its class slot */
#define SHAPER_FAIR_EPOCH_NS 100000000ull     /* fair shares are measured over epochs of 100 ms */
#define SHAPER_FAIR_EPOCH_MAX_NS 1000000000ull /* ...or longer with many flows, up to 1 s */

#define SHAPER_DEFAULT_AQM_TARGET_NS 5000000ull     /* 5 ms */
#define SHAPER_DEFAULT_AQM_INTERVAL_NS 100000000ull /* 100 ms */
#define SHAPER_AQM_FLOOR_BYTES 3076u  /* two full frames: below that backlog CoDel never acts */

struct shaper_settings {
	__u32 default_class; /* 0: unclassified packets pass unshaped */
	__u32 mode;          /* enum shaper_mode */
	__u32 abi_version;
	__u32 rules_gen;     /* SHAPER_RULES_* */
};

/* A rule as the operator gave it; slot = index in shaper_rules. */
struct shaper_rule {
	__u32 pref;          /* lowest matching pref wins; 0 marks a free slot */
	__u32 class_id;
	__u32 fields;        /* SHAPER_RULE_F_* */
	__u8 family;         /* 4 or 6 when SRC or DST is set, else 0 */
	__u8 src_plen, dst_plen, proto;
	__u8 src[16];        /* network order; IPv4 in the first 4 bytes */
	__u8 dst[16];
	__u16 sport_lo, sport_hi, dport_lo, dport_hi;
	__u32 mark, mark_mask;
	__u32 priority;
	__u32 cgroup_level;  /* depth below the cgroup2 root */
	__u64 cgroup_id;
	__u8 dscp;
	__u8 pad8;
	__u16 vlan;
	__u32 pad32;
};

struct shaper_rule_stats {
	__u64 packets, bytes;
};

/* A packet's fields, masked by one tuple, with the tuple's index: the rule index key. */
struct shaper_rule_key {
	__u8 tuple;          /* generation * SHAPER_MAX_TUPLES + index */
	__u8 family, proto, dscp;
	__u16 vlan;
	__u16 sport_seg;
	__u16 dport_seg;
	__u16 has_ports;     /* packet keys only (the cache): 1 when sport_seg, dport_seg hold ports */
	__u32 mark, priority, pad32;
	__u64 cgroup;
	__u8 src[16];
	__u8 dst[16];
};

/* A cached classification: a packet's whole key (ports as they are, not as segments; the cgroup
 * when rules match on cgroups) and what the rule set of `rules_gen` made of it. */
struct shaper_classify_cache {
	struct shaper_rule_key packet;
	__u32 rules_gen; /* shaper_settings.rules_gen when computed; 0: empty slot */
	__u32 class_id;  /* 0: no rule matched */
	__u32 slot;      /* the matching rule's slot, for its hit counter */
	__u32 pad;
};

struct shaper_rule_match {
	__u32 pref, class_id, slot, pad;
};

/* One rule shape: which fields, prefix lengths, mark mask, cgroup level. `mask` is ANDed with a
 * packet's key to give the key its rules are indexed under (zero where the shape ignores a
 * field), so building a tuple's key takes no branches. */
struct shaper_tuple {
	__u32 present;       /* 0 ends the generation's list */
	__u32 fields;        /* SHAPER_RULE_F_* */
	__u32 min_pref;      /* the best pref among its rules: tuples are sorted by it */
	__u32 cgroup_level;
	struct shaper_rule_key mask;
};

struct shaper_class_config {
	__u64 rate_bps;       /* wire bits per second */
	__u64 ns_per_byte_fp; /* clock advance per wire byte, 2^-32 ns units, rounded up */
	__u64 burst_ns;       /* burst credit, as time at rate */
	__u64 horizon_ns;     /* the largest queueing delay accepted; beyond: drop */
	__u32 burst_bytes;
	__s32 overhead;       /* bytes added to every segment (L1 framing; negative strips) */
	__u32 mpu;            /* minimum bytes a segment is charged */
	__u32 parent_id;      /* 0: top level */
	__u32 flags;          /* SHAPER_CLASS_* */
	__u32 fair_tolerance_pm; /* a bulk flow's allowance above its fair share, per mille; 0: the default */
	__u64 aqm_target_ns;  /* CoDel: acceptable standing delay */
	__u64 aqm_interval_ns;/* CoDel: how long above target before acting */
	__u64 aqm_floor_ns;   /* SHAPER_AQM_FLOOR_BYTES at rate: slow classes need a larger target */
	__u64 sparse_allowance_ns; /* how far sparse packets may run ahead: two frames at rate */
	/* Borrowing (bpf/borrow.h): with a ceil, the rate is guaranteed; it borrows up to the ceil. */
	__u64 ceil_bps;       /* 0: none, the rate is the class's cap */
	__u64 ceil_ns_per_byte_fp; /* the fastest it may go: the ceil, as ns_per_byte_fp */
	__u32 prio;           /* 0-7: the lowest prio borrowing is offered the spare */
	__u32 pad;
};

/* CoDel's state for one class, under its lock (CPUs enqueue into one class at once). */
struct shaper_class_aqm {
	struct bpf_spin_lock lock;
	__u32 count;          /* marks/drops in the current dropping episode */
	__u32 dropping;
	__u32 box_turn;       /* receive side: no flow is boxed before this, in 2^20 ns; 0: any time */
	__u64 first_above_ns; /* when the delay will have been above target for an interval */
	__u64 drop_next_ns;
};

/*
 * A class as the packet path sees it: one entry, so a class whose entry is out of the caches
 * costs its lines' misses at once, not one map after another. 320 bytes in a map whose values
 * start on a page: five whole cache lines, and classes never share one. Line 0 is the config
 * every packet reads, line 1 what backlogged packets add (sparse flows, fair shares): both
 * change only with the config or once per fair-share epoch, so CPUs charging one class keep
 * them cached together. Line 2 holds the clocks, which every charge writes: apart, so that a
 * CPU taking a slice of the clock (bpf/slice.h) does not take the config's line from the others.
 * Line 3 is a lender's state, which changes once per lending epoch (bpf/borrow.h); line 4 a
 * sharing child's use of its lender, which each of its packets adds to.
 *
 * The config fields are the control plane's copy of shaper_class_config, written field by
 * field (flags last when a class appears, first when it goes). The clocks (GCRA's theoretical
 * arrival time tat_ns, and the others) move only by atomics, the control plane's too. No spin
 * lock: mmapable maps cannot hold one.
 */
struct shaper_class {
	/* Line 0: every packet. */
	__u64 ns_per_byte_fp; /* as shaper_class_config */
	__u64 burst_ns;
	__u64 horizon_ns;
	__u64 aqm_target_ns;
	__u64 aqm_floor_ns;
	__u64 aqm_interval_ns;
	__s16 overhead;       /* SHAPER_OVERHEAD_MIN..MAX */
	__u16 mpu;            /* at most SHAPER_MPU_MAX */
	__u32 parent_id;
	__u32 flags;          /* SHAPER_CLASS_*; 0: no class */
	__u32 fair_tolerance_pm; /* as shaper_class_config */
	/* Line 1: backlogged packets. */
	__u64 sparse_allowance_ns __attribute__((aligned(64)));
	/* Fair shares (bpf/fair.h): the current epoch, and the share the last one measured. */
	__u64 fair_epoch_ns;     /* when the epoch began */
	__u64 fair_epoch_tat_ns; /* the clock then: class time charged since is tat - this */
	__u64 fair_share_ns;     /* class time per bulk flow in the last epoch; 0: unknown */
	__u32 fair_flows;        /* bulk flows counted in the epoch (at most the flow table's ways) */
	__u32 fair_epoch;        /* epoch serial */
	__u64 fair_epoch_len_ns; /* this epoch's length; 0: SHAPER_FAIR_EPOCH_NS */
	__u64 fair_held_ns;      /* the latest departure a flow held to its share was given */
	__u32 fair_share_flows;  /* the bulk flows the last share was measured among */
	/* Line 2: the clocks. */
	__u64 tat_ns __attribute__((aligned(64))); /* the class clock, monotonic ns */
	__u64 sparse_tat_ns;  /* the sparse allowance's own clock (GCRA at the class rate) */
	/* Borrowing's config, beside the clock a lent packet charges; a lender's state moving with it. */
	__u64 ceil_ns_per_byte_fp; /* as shaper_class_config; 0: no ceil */
	__u32 rate_kbit, prio; /* its weight among borrowers (its rate), and its prio */
	__u64 lend_count1, lend_count2, lend_count3; /* as lend_count0 */
	__u64 lend_idle_ns;   /* how far its clock jumped to now this epoch (idle) */
	/* Line 3: lending (bpf/borrow.h) as a parent; as a borrowing child, its last count there. */
	__u64 lend_epoch_ns __attribute__((aligned(64))); /* when this lending epoch began */
	__u64 lend_epoch_tat_ns; /* the clock then (or now, if it was behind) */
	__u32 lend_taken_fp;  /* the share of the rate not left to borrowers, 2^-16 (0: all is spare) */
	__u16 lend_wanting_last; /* sharers that wanted more in the last epoch: 0, 1, 2 (or more) */
	__u8 lend_wanting;    /* as a child: 1 if its average use (line 4) neared its rate */
	__u8 lend_pad;
	__u64 lend_count0;    /* borrowers counted in an epoch of serial 0 mod 4 (bpf/borrow.h) */
	__u64 lend_last;      /* the last epoch's, untagged: the lowest prio's, the one that borrows */
	__u64 lend_lent_ns;   /* clock time charged by the sharers' packets this epoch */
	__u32 lend_serial;    /* epoch serial */
	__u32 lend_counted;   /* as a child: the parent's epoch serial it is counted through */
	__u64 borrowing_until_ns; /* as a child: it borrows, backlogged or not, until then */
	/* Line 4: as a child sharing the spare, its cost on the parent's clock since it was last
	 * counted there, and its average use, as a share of the parent's rate (2^-16). */
	__u64 lend_used_ns __attribute__((aligned(64)));
	__u64 lend_used_since_ns;
	__u32 lend_use_avg_fp;
} __attribute__((aligned(64)));

/*
 * One way of a flow-table bucket: a flow's record while it holds the way (bpf/flow.h). The last
 * field belongs to the way, whoever holds it: it counts toward fair shares once per epoch.
 */
struct shaper_flow {
	__u64 owner;             /* class id << 32 | flow hash; 0: free */
	__u64 last_departure_ns; /* when the flow's latest packet leaves */
	__u32 fair_epoch;        /* the class epoch fair_charged_ns counts */
	__u32 fair_charged_ns;   /* class time its packets asked for in it (dropped ones too) */
	__u16 fair_acted_epoch;  /* when it was last signalled for its share: epoch << 4 | 100 ms slot */
	__u16 fair_flood;        /* the last epoch it was past twice its share (fair.h's form) << 1
				  * | 1 if it was past twice its share in the epoch before too */
	__u32 fair_counted_epoch; /* the last epoch this way counted toward its class's flows */
};

/* The receive side's box (bpf/ingress.h): the flow whose every packet is dropped until until_ns,
 * and which is not boxed again for SHAPER_BOX_RESPITE_NS after. */
struct shaper_flow_box {
	__u64 owner;    /* class id << 32 | flow hash, as shaper_flow's; 0: none */
	__u64 until_ns;
};

/* ACK pacing (bpf/ack_pace.h): when the receive side's virtual queue lets a flow's latest data
 * go, and so its ACKs. Slot 0 is the gate: until_ns non-zero while the ingress side is attached
 * (1 from its attach, then when the send side last held an ACK, noted at most every
 * SHAPER_ACK_PACE_NOTE_NS), flow always 0. */
struct shaper_ack_pace {
	__u64 flow;       /* the flow's tag as its ACKs carry the tuple; 0: none */
	__u64 until_ns;   /* its latest data's virtual departure */
	/* The receive window its held ACKs may offer (bpf/ack_pace.h), from its handshake. */
	__u64 syn_ns;     /* when the receiver's SYN or SYN-ACK left; 0: its handshake not seen */
	__u32 rtt_ns;     /* the path's round trip, SYN(-ACK) out to the peer's answer; 0: unknown */
	__u32 window_cap; /* bytes; 0: none */
	__u16 seg_bytes;  /* the largest segment's payload seen */
	__u8 wscale;      /* the receiver's window scale + 1; 0: unknown */
	__u8 pad[5];
};

/*
 * One CPU's counters of one class. Found by arithmetic (cpu * max_classes + id), not through a
 * per-CPU array's pointer table: a class whose counters are cold costs one miss, not two. Four
 * whole cache lines (256 bytes) from a page boundary: what every packet writes (the first 32
 * bytes) never straddles two lines, and no two CPUs ever write one line.
 */
struct shaper_class_stats {
	/* Every packet. */
	__u64 packets;
	__u64 segments;
	__u64 bytes;         /* bytes charged: wire length plus overhead, after mpu */
	/*
	 * This CPU's clock rounding, in 2^-32 ns: how much more time it has charged the class
	 * clock than its packets' exact cost. Each packet's time is rounded to whole ns, up or
	 * down so that this stays in [0, 2^32): the clock is never behind the exact charge and
	 * never ahead of it by more than 1 ns per CPU. Per-CPU, so it costs no atomic.
	 */
	__u64 clock_carry;
	/* Drops and marks. */
	__u64 drops_horizon; /* packets dropped for leaving beyond the horizon */
	__u64 drops_aqm;     /* packets CoDel dropped (not ECN-capable, or ECN off) */
	__u64 ecn_marks;     /* packets CoDel marked CE instead */
	__u64 sparse;        /* packets of sparse flows sent ahead of the backlog */
	__u64 fair_marks;    /* packets CE-marked for a flow above its fair share */
	__u64 drops_fair;    /* packets dropped for a flow above its fair share (not ECN-capable) */
	__u64 fair_holds;    /* packets of a local socket's flow above its share, sent later instead */
	/* This CPU's slice of the class clock (bpf/slice.h): credit from slice_pos to the end,
	 * whose top bit says the slice was taken behind another CPU's charge. */
	__u64 slice_pos, slice_end;
	/* How long this CPU's packets of the class (its own, not its descendants') were held:
	 * departure - now of each stamped packet, summed and counted in buckets (bpf/delay.h). */
	__u64 delay_sum_ns;
	__u64 delay_buckets[SHAPER_DELAY_BUCKETS];
	__u64 borrowed_bytes; /* bytes sent beyond the guarantee, from the parent's spare */
	__u64 ceil_held;      /* packets that borrowed and then waited for the class's ceil */
};

#endif /* SHAPER_ABI_H */
