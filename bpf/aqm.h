/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * CoDel on a class's virtual backlog. With EDT a packet's queueing delay is known when it is
 * stamped: departure - now. CoDel's state machine runs on that delay at enqueue: once it has
 * stayed above target for an interval, CoDel marks (ECN-capable packets, ECN on) or drops one
 * packet, then the next after interval/sqrt(count), until the delay falls below target. This
 * keeps the standing backlog near target, so no flow of the class waits behind seconds of it.
 * A local TCP socket's packet sent through another device (a bridge) that cannot be marked is
 * not dropped (congestion.h): its socket already waits for it, and what each such flow can add
 * to the backlog is what TCP small queues allow, which the horizon still bounds.
 */
#ifndef SHAPER_AQM_H
#define SHAPER_AQM_H

#include "maps.h"
#include "congestion.h"

#define AQM_SQRT_STEPS 32

/* 65536 / sqrt(n) for n = 1..32: CoDel's control law without a division or a sqrt. */
static const __u32 aqm_inv_sqrt_q16[AQM_SQRT_STEPS + 1] = {
	65536, 65536, 46341, 37837, 32768, 29309, 26755, 24770, 23170, 21845, 20724,
	19760, 18919, 18176, 17515, 16921, 16384, 15895, 15447, 15036, 14654, 14300,
	13972, 13665, 13377, 13107, 12852, 12612, 12385, 12170, 11966, 11771, 11585,
};

static __always_inline __u64 aqm_control_law(__u64 interval, __u32 count)
{
	__u32 n = count < AQM_SQRT_STEPS ? count : AQM_SQRT_STEPS;

	/* Bound the index on the very register that indexes: older verifiers (6.1) lose the bound
	 * when clang copies it before the clamp. */
	barrier_var(n);
	if (n > AQM_SQRT_STEPS)
		n = AQM_SQRT_STEPS;
	return (interval * aqm_inv_sqrt_q16[n]) >> 16;
}

static __always_inline enum congestion_verdict aqm_decide(struct __sk_buff *skb, __u32 class_id,
						   const struct shaper_class *cls,
						   __u64 delay, __u64 now, __u64 can_wait)
{
	struct shaper_class_aqm *st;
	bool act = false;

	if (!(cls->flags & SHAPER_CLASS_AQM))
		return CONGESTION_PASS;
	st = bpf_map_lookup_elem(&shaper_class_aqm, &class_id);
	if (!st)
		return CONGESTION_PASS;
	const bool above = delay > cls->aqm_target_ns && delay > cls->aqm_floor_ns;

	/* The common case, below target with nothing to reset, takes no lock. */
	if (!above && !*(volatile __u64 *)&st->first_above_ns && !*(volatile __u32 *)&st->dropping)
		return CONGESTION_PASS;

	bpf_spin_lock(&st->lock);
	if (!above) {
		st->first_above_ns = 0;
		st->dropping = 0;
	} else {
		bool ok_to_act = false;

		if (!st->first_above_ns)
			st->first_above_ns = now + cls->aqm_interval_ns;
		else if (now >= st->first_above_ns)
			ok_to_act = true;

		if (st->dropping) {
			if (!ok_to_act) {
				st->dropping = 0;
			} else if (now >= st->drop_next_ns) {
				act = true;
				st->count++;
				st->drop_next_ns += aqm_control_law(cls->aqm_interval_ns, st->count);
			}
		} else if (ok_to_act) {
			act = true;
			st->dropping = 1;
			/* Resume near the last episode's rate if it ended recently. */
			st->count = (st->count > 2 && now - st->drop_next_ns < 16 * cls->aqm_interval_ns)
					    ? st->count - 2
					    : 1;
			st->drop_next_ns = now + aqm_control_law(cls->aqm_interval_ns, st->count);
		}
	}
	bpf_spin_unlock(&st->lock);

	if (!act)
		return CONGESTION_PASS;
	return congestion_signal(skb, cls, can_wait);
}

#endif /* SHAPER_AQM_H */
