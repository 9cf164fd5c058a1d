/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Guaranteed rates that borrow up to a ceiling, with priority: HTB's model on EDT clocks.
 *
 * A class with a ceil keeps one clock, like any class, but charges it at one of two speeds. A
 * packet that finds the clock behind now (the class sends less than its rate) is the class's
 * own: charged at the rate, it waits on no level above (which it still charges): HTB's green
 * class. A packet that finds the clock ahead (a backlog), or of a class that borrowed within
 * two epochs, asks its parent for a loan, which is granted when waiting for the parent costs
 * the class less than its guarantee would (borrow_step): it is then charged at the class's
 * allotment, between its rate and its ceil, and waits on its parent too, whose clock every
 * child's packets charge, so the parent stays a cap. Refused, it goes on the guarantee. A class
 * without a ceil is a cap at its rate and waits on every level above, as always.
 *
 * Allotments are set per lending epoch (SHAPER_LEND_EPOCH_NS) by the parent, from two figures:
 *  - who borrowed in the last four epochs: each borrowing child adds its rate to the parent's
 *    count once per epoch (an atomic on the parent's lending line, not per packet); only the
 *    lowest prio counted keeps its weight: it is offered the spare, higher prios keep their
 *    rate. Of the last four epochs' counts the lowest prio's, and at that prio the largest,
 *    stands: a backlogged class asks only when it sends, and one TCP flow on a path of tiny RTT
 *    sends 64 KB GSO packets (TCP's autosizing), 35 ms apart at 15 Mbit, missing every second
 *    epoch, where the sibling would be lent the whole spare. The largest sum is not the union:
 *    of two borrowers asking in alternate epochs only the larger's weight counts, and their
 *    allotments over-promise the spare, which P's clock then arbitrates. Epochs nobody asked
 *    in (a turn comes with a borrower's packet) age the counts as the others do;
 *  - how much of the parent the others take: the share `taken` of the epoch that the parent's
 *    clock advanced for packets of classes not sharing the spare (without a backlog, without
 *    a ceil, or of a prio above the one borrowing); the sharers' packets, lent or on their
 *    guarantee, add their cost on the parent's clock to a sum apart (one atomic each): their
 *    guarantees are part of what they split, so a sharer refused a loan does not shrink its
 *    own next allotment.
 * A borrower's allotment is parent rate * (1 - taken) * its rate / the borrowers' rates, at
 * least its rate and at most its ceil: the spare split in proportion to the guarantees, as
 * HTB's quantum does by default. A borrower the last epoch did not count (the first to ask)
 * is alone: its allotment is the whole spare. Water-filling: while no other sharer wants more
 * than its rate (each child's use of the parent is averaged over ~160 ms; one whose average
 * nears its rate wants more, as does one new to borrowing), a borrower is allotted the whole
 * spare, R * (1 - taken): a sibling writing bursts under its guarantee asks in each burst, and
 * would otherwise hold the borrower to a share. The others' packets leave on their guarantees
 * (a loan never leaves one behind them), and the borrower's wait on the parent's clock, which
 * theirs charge as they come: what they take in an epoch, not what they took in the last.
 *
 * Bounds, for a parent P of rate R whose children's rates sum to at most R:
 *  - A child sending at least its rate gets it: its clock advances at most at its rate per
 *    byte, and it waits on P only for what its own loans booked there.
 *  - Each class's ceil holds as a rate does (gcra.h): no packet is charged faster than it.
 *  - P's bound: borrowed packets wait on its clock, which every packet charges; packets sent on
 *    guarantees sum to R at most. A guarantee's packet leaves by its own clock, ahead of its
 *    slot on P's when lent packets keep P ahead (their stamps cannot move), so over any
 *    interval P releases at most R * T plus what guarantees sent ahead so: their rates times
 *    P's lead, which the loan rule keeps within the borrowers' own backlogs.
 *  - A borrower reaches its allotment when a sibling goes idle within five epochs (the
 *    sibling's count ages out of the four; its clock stops charging P at once), and gives it
 *    back when the sibling returns within two (counted again); meanwhile P's clock arbitrates.
 *    Packets stamped before leave at the pace they were stamped at (sch_fq holds them by their
 *    stamps), so a class with a ceil queues what local TCP sockets send on its device, which
 *    they keep when refused, within BORROW_QUEUE_NS of now or one packet's cost: beyond, the
 *    packet is refused (a horizon drop; TCP sends it again and shrinks its window, as for a
 *    mark). Departures follow a decision within that much more; without the bound, eight flows
 *    at TCP small queues' two packets each stood 200 ms deep at a 5 Mbit guarantee.
 * Children whose rates sum above R (apply warns) are each still served at their rate: P is then
 * exceeded by that excess while all of them send, as HTB's parent is.
 *
 * Across CPUs: the epoch turns by one compare-and-swap on its start; counts are compare-and-
 * swap loops; allotments are read without locks (one epoch's figures, or the next's).
 */
#ifndef SHAPER_BORROW_H
#define SHAPER_BORROW_H

#include "maps.h"
#include "charge.h"
#include "gcra.h"

#define LEND_ONE (1ull << 16)               /* taken_fp of the whole rate */
#define LEND_WEIGHT_MASK ((1ull << SHAPER_LEND_PRIO_SHIFT) - 1)
#define LEND_RATIO_MAX (1ull << 25)         /* borrowers' rates over one's, 2^-16, at most 512 */
#define BORROW_QUEUE_NS (2 * SHAPER_LEND_EPOCH_NS) /* what a class with a ceil queues of what sockets keep */

/* Of two epochs' counts, the one that borrows: the lower prio, or at one prio the more weight. */
static __always_inline __u64 lend_best(__u64 a, __u64 b)
{
	const __u64 pa = a >> SHAPER_LEND_PRIO_SHIFT, pb = b >> SHAPER_LEND_PRIO_SHIFT;

	if (!pa || (pb && (pb < pa || (pb == pa && b > a))))
		return b;
	return a;
}

/* A lender's clock jumped `skipped` ns to now: time nobody took, which `taken` must not count.
 * All of it, though the part before the epoch's start lies outside the advance measured: that
 * errs toward a larger spare, which the parent's clock caps, where the exact figure made a lone
 * borrower's allotment its exact share, with nothing to make up what its TCP flow left unused
 * (measured: prio 0 sinking from 13.8 to 7.9 Mbit/s of its 15 over 2 s). */
static __always_inline void lend_idle(struct shaper_class *p, __u64 skipped)
{
	/* A parent idle for an hour adds two epochs: enough to free the next allotment. */
	if (p->lend_now | p->lend_seen1 | p->lend_seen2 | p->lend_seen3)
		__sync_fetch_and_add(&p->lend_idle_ns, skipped < 2 * SHAPER_LEND_EPOCH_NS ? skipped : 2 * SHAPER_LEND_EPOCH_NS);
}

/* Turns the lender's epoch when it is due: the borrowers counted become the last epoch's, and
 * `taken` becomes the share of the epoch's clock advance that was not lent. */
static __always_inline void lend_turn(struct shaper_class *p, __u64 now)
{
	const __u64 start = *(volatile __u64 *)&p->lend_epoch_ns;

	/* Signed: another CPU may have turned it at a `now` later than ours, and a turn back to an
	 * earlier now would end an epoch that counted almost nobody. */
	if ((__s64)(now - start) < (__s64)SHAPER_LEND_EPOCH_NS ||
	    __sync_val_compare_and_swap(&p->lend_epoch_ns, start, now) != start)
		return;
	const __u64 tat = *(volatile __u64 *)&p->tat_ns, from = p->lend_epoch_tat_ns;
	const __u64 lent = __sync_lock_test_and_set(&p->lend_lent_ns, 0);
	const __u64 idle = __sync_lock_test_and_set(&p->lend_idle_ns, 0);
	const __u64 used = tat > from ? tat - from : 0, others = used > lent + idle ? used - lent - idle : 0;
	const __u64 span = now - start;
	const __u64 taken = start ? (others << 16) / span : 0; /* the first epoch measures nothing */

	p->lend_taken_fp = taken > LEND_ONE ? LEND_ONE : taken;
	/* Of the last four epochs, the most that wanted more: one asks only in epochs it sends in. */
	const __u32 wanting = __sync_lock_test_and_set(&p->lend_wanting_now, 0), w1 = p->lend_wanting_seen1,
		    w2 = p->lend_wanting_seen2, w3 = p->lend_wanting_seen3, w12 = w1 > w2 ? w1 : w2;
	const __u32 w123 = w12 > w3 ? w12 : w3, most = wanting > w123 ? wanting : w123;

	p->lend_wanting_last = most > 0xffff ? 0xffff : most;
	p->lend_wanting_seen3 = w2;
	p->lend_wanting_seen2 = w1;
	p->lend_wanting_seen1 = wanting;
	p->lend_epoch_tat_ns = tat > now ? tat : now;
	/* The serial first: a CPU that reads the new one and counts before the swap below lands in
	 * the epoch ending, which the next four turns still read; after it, in the new one. */
	__sync_fetch_and_add(&p->lend_serial, 1);
	const __u64 counted = __sync_lock_test_and_set(&p->lend_now, 0);

	/* Epochs nobody asked in age the counts too: every count in `counted` was made in the
	 * epoch's first SHAPER_LEND_EPOCH_NS (a later one would have turned it first), and
	 * `missed` epochs without a count followed. Of those, the last four make lend_last. */
	const __u64 missed = span / SHAPER_LEND_EPOCH_NS - 1;
	const __u64 s1 = p->lend_seen1, s2 = p->lend_seen2, s3 = p->lend_seen3;

	if (missed == 0) {
		p->lend_last = lend_best(lend_best(counted, s1), lend_best(s2, s3));
		p->lend_seen3 = s2;
		p->lend_seen2 = s1;
		p->lend_seen1 = counted;
	} else if (missed == 1) {
		p->lend_last = lend_best(lend_best(counted, s1), s2);
		p->lend_seen3 = s1;
		p->lend_seen2 = counted;
		p->lend_seen1 = 0;
	} else if (missed == 2) {
		p->lend_last = lend_best(counted, s1);
		p->lend_seen3 = counted;
		p->lend_seen2 = p->lend_seen1 = 0;
	} else {
		p->lend_last = missed == 3 ? counted : 0;
		p->lend_seen3 = p->lend_seen2 = p->lend_seen1 = 0;
	}
}

/* A sharing child's use of parent `p` since it was last counted, as a share of the parent's rate
 * over that period, moves its average (over SHAPER_LEND_USE_AVG_NS, by time); an
 * average near its rate (three quarters of it) makes it one that wants more, counted at the
 * parent. A class new to borrowing, or back after a pause of four times that, is presumed to
 * want more until its use says otherwise. By the counting CPU, once per epoch. */
static __always_inline void lend_roll_use(struct shaper_class *p, struct shaper_class *c, __u64 now)
{
	const __u64 used = __sync_lock_test_and_set(&c->lend_used_ns, 0), since = c->lend_used_since_ns;
	const __u64 period = now - since;
	/* Its rate as a share of the parent's: the ratio of their times per byte. */
	const __u64 t_c = c->ns_per_byte_fp >> 16;
	const __u64 rate = t_c ? (p->ns_per_byte_fp >> 16) * LEND_ONE / t_c : 0;
	__u64 avg = rate > LEND_ONE ? LEND_ONE : rate;

	c->lend_used_since_ns = now;
	if (since && now > since && period < 4 * SHAPER_LEND_USE_AVG_NS) {
		const __u64 span = period < SHAPER_LEND_USE_AVG_NS ? period : SHAPER_LEND_USE_AVG_NS;

		/* Capped below 2^47 ns, so that the shift cannot overflow. */
		__u64 share = ((used < (1ull << 47) ? used : (1ull << 47)) << 16) / period;

		share = share > LEND_ONE ? LEND_ONE : share;
		avg = c->lend_use_avg_fp;
		if (share > avg)
			avg += (share - avg) * span / SHAPER_LEND_USE_AVG_NS;
		else
			avg -= (avg - share) * span / SHAPER_LEND_USE_AVG_NS;
	}
	c->lend_use_avg_fp = avg;
	const __u32 wanting = avg >= rate - rate / 4;

	c->lend_wanting = wanting;
	if (wanting)
		__sync_fetch_and_add(&p->lend_wanting_now, 1);
}

/* Counts borrower `c` (a class that asked, lent or not) at its parent once per epoch, turning the
 * epoch first when due: its rate joins its prio's weight if no lower prio is counted, and
 * replaces a higher prio's. */
static __always_inline void lend_count(struct shaper_class *p, struct shaper_class *c, __u64 now)
{
	lend_turn(p, now);
	const __u32 serial = *(volatile __u32 *)&p->lend_serial;

	/* A borrower stays one for two epochs, backlogged or not: a class just able to keep up
	 * with its allotment would otherwise flip to its guarantee and go uncounted. Written at
	 * most once an epoch. */
	if (now + SHAPER_LEND_EPOCH_NS > c->borrowing_until_ns)
		c->borrowing_until_ns = now + 2 * SHAPER_LEND_EPOCH_NS;

	const __u32 counted = *(volatile __u32 *)&c->lend_counted;

	/* Once: of CPUs sending the class at once, the one that moves the mark counts it. */
	if (counted == serial || __sync_val_compare_and_swap(&c->lend_counted, counted, serial) != counted)
		return;
	lend_roll_use(p, c, now);
	const __u64 prio = (__u64)(c->prio & 7) + 1, rate = c->rate_kbit ? c->rate_kbit : 1;

	for (int i = 0; i < 4; i++) {
		const __u64 old = *(volatile __u64 *)&p->lend_now, held = old >> SHAPER_LEND_PRIO_SHIFT;

		if (held && held < prio)
			return;
		const __u64 next = held == prio ? old + rate : prio << SHAPER_LEND_PRIO_SHIFT | rate;

		if (__sync_val_compare_and_swap(&p->lend_now, old, next) == old)
			return;
	}
}

/* The cost on the lender's clock of a packet of class `c` sharing the spare (lent or not: its
 * guarantee is part of what the sharers split), counted apart from what others take, and as
 * the class's own use. */
static __always_inline void lend_note(struct shaper_class *p, struct shaper_class *c, __u64 cost)
{
	__u32 frac;
	const __u64 t = shaper_cost_time(cost, p->ns_per_byte_fp, &frac);

	__sync_fetch_and_add(&p->lend_lent_ns, t);
	__sync_fetch_and_add(&c->lend_used_ns, t);
}

/* Whether class `c` shares the spare under `p`: no lower prio than its own was counted last. */
static __always_inline bool lend_shares(const struct shaper_class *c, const struct shaper_class *p)
{
	const __u64 held = *(volatile __u64 *)&p->lend_last >> SHAPER_LEND_PRIO_SHIFT;

	return !held || held >= (__u64)(c->prio & 7) + 1;
}

/*
 * The ns per byte (2^-32 ns) a borrowed packet of a class (prio, rate in kbit, its rate and ceil
 * as ns per byte) is charged under parent `p`: its allotment, R * (1 - taken) * rate / weight,
 * as a time per byte: t_p * (weight / rate) / (1 - taken); never slower than its rate, never
 * faster than its ceil.
 */
static __always_inline __u64 lend_allotment(const struct shaper_class *p, const struct shaper_class *c)
{
	const __u64 last = *(volatile __u64 *)&p->lend_last, held = last >> SHAPER_LEND_PRIO_SHIFT;
	const __u64 prio = (__u64)(c->prio & 7) + 1, rate = c->rate_kbit ? c->rate_kbit : 1;
	const __u64 t_rate = c->ns_per_byte_fp, t_ceil = c->ceil_ns_per_byte_fp;

	if (held && held < prio)
		return t_rate; /* a lower prio takes the spare: the guarantee alone */
	/* Counted last epoch at its prio: its share of their weight; else it borrowed alone. */
	const __u64 weight = held == prio ? (last & LEND_WEIGHT_MASK) : rate;
	__u64 ratio = (weight << 16) / rate;
	const __u64 spare = LEND_ONE - (p->lend_taken_fp > LEND_ONE ? LEND_ONE : p->lend_taken_fp);

	if (ratio > LEND_RATIO_MAX)
		ratio = LEND_RATIO_MAX;
	/* Water-filling: none of the other sharers wants more than its rate, so their packets leave
	 * on their guarantees, and the borrower may have all the spare, waiting on the parent's
	 * clock for what they send meanwhile. */
	if (*(volatile __u16 *)&p->lend_wanting_last <= *(volatile __u8 *)&c->lend_wanting && ratio > LEND_ONE)
		ratio = LEND_ONE;
	if (spare == 0)
		return t_rate;
	/* t_p >> 16 times the ratio (2^16) is t_p * ratio; over spare (2^-16) is times 2^16. */
	const __u64 scaled = (p->ns_per_byte_fp >> 16) * ratio / spare;

	if (scaled >= t_rate >> 16)
		return t_rate;
	const __u64 t = scaled << 16;

	return t < t_ceil ? t_ceil : t;
}

static __always_inline __u64 borrow_ns_per_byte(const struct shaper_class *c, const struct shaper_class *p)
{
	return lend_allotment(p, c);
}

/* Pass 1's walk (edt.h), level by level from the leaf: which levels the packet waits on, which
 * ask to borrow and which are lent to, and its departure so far. Bit i is level i. */
struct borrow_walk {
	__u8 level;    /* the level being peeked (0: the leaf) */
	__u8 waits;    /* 1: the packet waits on this level */
	__u8 asking;   /* 1: the level below asks this one for a loan */
	__u8 asked;    /* levels that asked (counted as borrowers at their parent) */
	__u8 borrowed; /* levels lent to: they wait on the level above */
	__u8 waited;   /* levels whose departure the packet waits for */
	__u8 beyond;   /* a level waited on lies past its horizon */
	__u64 asking_departure; /* the asking level's own departure */
	__u64 estimate; /* the latest departure of the levels waited on */
	__u64 leaf_departure;
};

/*
 * One level: `departure` is where its charge would start, `beyond` whether that lies past its
 * horizon; `child` the level below when it asks for a loan, `cost` the packet's bytes there. A level with a ceil and a parent asks to borrow when
 * it has a backlog (or borrowed within two epochs), else it sends on its guarantee and the
 * packet waits on nothing above. The parent lends when waiting for it costs the class less than
 * its guarantee would: when the parent's departure is no later than the class's own plus what
 * the packet would add to the class's clock on its guarantee beyond what it adds at the
 * allotment. So a loan never leaves the class's schedule behind where its guarantee would have
 * it, and a large packet (64 KB of GSO) may wait tens of ms for the parent rather than take
 * 100 ms of its class's clock at the rate. Refused, the packet goes on the class's guarantee,
 * still counted as a borrower, so that the parent's next allotments make room for it.
 */
static __always_inline void borrow_step(struct borrow_walk *w, const struct shaper_class *cls,
					const struct shaper_class *child, __u64 cost, __u64 now,
					__u64 departure, __u8 beyond)
{
	const __u8 bit = 1u << (w->level & 7);

	if (w->asking && child) {
		const __u64 t_rate = child->ns_per_byte_fp;
		const __u64 allot = borrow_ns_per_byte(child, cls);
		__u32 frac;

		w->asking = 0;
		/* allot above t_rate only while the control plane rewrites a class's rate and ceil */
		if (departure <= w->asking_departure +
				 shaper_cost_time(cost, allot < t_rate ? t_rate - allot : 0, &frac))
			w->borrowed |= bit >> 1;
		else
			w->waits = 0;
	}
	if (w->waits) {
		w->waited |= bit;
		w->beyond |= beyond;
		if (departure > w->estimate)
			w->estimate = departure;
		if (w->level == 0)
			w->leaf_departure = departure;
		if ((cls->flags & SHAPER_CLASS_CEIL) && cls->parent_id) {
			if (departure > now || now < *(volatile __u64 *)&cls->borrowing_until_ns) {
				w->asking = 1;
				w->asked |= bit;
				w->asking_departure = departure;
			} else {
				w->waits = 0;
			}
		}
	}
	w->level++;
}

#endif /* SHAPER_BORROW_H */
