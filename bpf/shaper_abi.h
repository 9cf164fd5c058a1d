/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The ABI between the BPF datapath and the C++ control plane: map layouts, limits, flags.
 * Included by both sides; every change here is a change of the pinned maps' format.
 *
 * Maps (all pinned by name under the device's pin directory, so a newer program reuses them):
 *   shaper_settings     ARRAY[1]            struct shaper_settings     written by control plane
 *   shaper_class_config ARRAY[max_classes]  struct shaper_class_config written by control plane
 *   shaper_class_clock  ARRAY[max_classes]  struct shaper_class_clock  written by datapath only
 *   shaper_class_stats  PERCPU_ARRAY[max_classes] struct shaper_class_stats  datapath only
 * Arrays are indexed by class id; id 0 is never a class: its stats slot counts unclassified
 * packets.
 */
#ifndef SHAPER_ABI_H
#define SHAPER_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SHAPER_ABI_VERSION 1

/* Limits, enforced by the control plane before anything reaches a map. */
#define SHAPER_DEFAULT_MAX_CLASSES 16384u   /* ids 1..max_classes-1 */
#define SHAPER_LIMIT_MAX_CLASSES (1u << 20)
#define SHAPER_MAX_DEPTH 8                  /* levels a packet is charged at: leaf + 7 parents */
#define SHAPER_RATE_MIN_BPS 8000ull         /* 8 kbit */
#define SHAPER_RATE_MAX_BPS 400000000000ull /* 400 Gbit */
#define SHAPER_BURST_MAX_BYTES (1u << 30)   /* 1 GiB */
#define SHAPER_BURST_MAX_NS (3600ull * 1000000000ull) /* at most an hour of credit */
#define SHAPER_OVERHEAD_MIN (-64)           /* same range as tc's stab overhead */
#define SHAPER_OVERHEAD_MAX 256
#define SHAPER_MPU_MAX 65535u
#define SHAPER_HORIZON_MIN_NS 1000ull              /* 1 us */
#define SHAPER_HORIZON_MAX_NS 60000000000ull       /* 60 s */
#define SHAPER_DEFAULT_HORIZON_NS 2000000000ull    /* 2 s, below sch_fq's default 10 s */
#define SHAPER_DEFAULT_POLICE_HORIZON_NS 5000000ull /* 5 ms of tolerance when policing */

/*
 * A packet's own departure time (TCP pacing) is honoured when it lies ahead of now by less
 * than this. Anything further is not a monotonic pacing time (a forwarded packet may carry a
 * realtime receive stamp, ~1.7e18 ns) and is overwritten.
 */
#define SHAPER_FOREIGN_TSTAMP_MAX_NS (1ull << 40)

/* Fixed point of the per-byte clock advance: ns_per_byte_fp = 2^32 * 8e9 / rate_bps. */
#define SHAPER_NS_FRAC_BITS 32

enum shaper_mode {
	SHAPER_MODE_EDT = 0,    /* stamp the departure time; sch_fq holds the packet until then */
	SHAPER_MODE_POLICE = 1, /* no pacing qdisc: drop what would leave beyond the horizon */
};

#define SHAPER_CLASS_PRESENT (1u << 0)

struct shaper_settings {
	__u32 default_class; /* 0: unclassified packets pass unshaped */
	__u32 mode;          /* enum shaper_mode */
	__u32 abi_version;
	__u32 pad;
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
	__u32 pad;
};

/*
 * The class clock (GCRA's theoretical arrival time): the instant at which everything charged
 * to the class has left at its rate. Only the datapath writes it, with atomics; a whole cache
 * line each so that classes on different CPUs do not share one.
 */
struct shaper_class_clock {
	__u64 tat_ns; /* monotonic ns */
	__u64 frac;   /* low 32 bits: sub-ns remainder in 2^-32 ns; carries into tat_ns */
	__u64 pad[6];
};

struct shaper_class_stats {
	__u64 packets;
	__u64 segments;
	__u64 bytes;         /* bytes charged: wire length plus overhead, after mpu */
	__u64 drops_horizon; /* packets dropped for leaving beyond the horizon */
};

#endif /* SHAPER_ABI_H */
