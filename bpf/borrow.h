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
 *  - who borrowed in the last epoch: each borrowing child adds its rate to the parent's count
 *    for every epoch its backlog spans (its clock ahead of now), once per epoch (an atomic on
 *    the parent's lending line, not per packet; up to three epochs ahead); only the lowest prio
 *    counted keeps its weight: it is offered the spare, higher prios keep their rate. A
 *    backlogged class asks only when it sends, 35 ms apart for one TCP flow's 64 KB GSO
 *    packets at 15 Mbit: its backlog keeps it counted between them, and a class whose queue
 *    has gone stops counting when the epoch it emptied in ends;
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
 *  - A borrower reaches its allotment within two epochs of a sibling's queue emptying (the
 *    epoch it emptied in ends, the next turn no longer counts it; its clock stops charging P
 *    at once), and gives it back when the sibling returns within two (counted again);
 *    meanwhile P's clock arbitrates.
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
#define LEND_WEIGHT_MASK ((1ull << SHAPER_LEND_PRIO_SHIFT) - 1) /* of lend_last */
#define LEND_RATIO_MAX (1ull << 25)         /* borrowers' rates over one's, 2^-16, at most 512 */
#define BORROW_QUEUE_NS (2 * SHAPER_LEND_EPOCH_NS) /* what a class with a ceil queues of what sockets keep */
/* An epoch's count (lend_count0-3, by serial mod 4): prio + 1 above SHAPER_LEND_PRIO_SHIFT, the
 * epoch's serial (its low 20 bits) above LEND_TAG_SHIFT, how many of its borrowers want more
 * (0, 1, 2: two or more) above LEND_WANT_SHIFT, their rates in kbit below (2^38 kbit at most).
 * A count of another serial is four epochs old, or more, and counts nothing. */
#define LEND_TAG_SHIFT 40
#define LEND_TAG_MASK ((1ull << (SHAPER_LEND_PRIO_SHIFT - LEND_TAG_SHIFT)) - 1)
#define LEND_WANT_SHIFT 38
#define LEND_RATES_MASK ((1ull << LEND_WANT_SHIFT) - 1)

static __always_inline __u64 *lend_count_of(struct shaper_class *p, __u32 serial)
{
	const __u32 i = serial & 3;

	return i == 0 ? &p->lend_count0 : i == 1 ? &p->lend_count1 : i == 2 ? &p->lend_count2 : &p->lend_count3;
}

/* Epoch `serial`'s count with its tag, or 0 if its slot holds another serial's. */
static __always_inline __u64 lend_counted_in(struct shaper_class *p, __u32 serial)
{
	const __u64 v = *(volatile __u64 *)lend_count_of(p, serial);

	return ((v >> LEND_TAG_SHIFT) & LEND_TAG_MASK) == (serial & LEND_TAG_MASK) ? v : 0;
}

/* Adds a borrower to epoch `serial`: `add` (prio + 1 above SHAPER_LEND_PRIO_SHIFT, 1 above
 * LEND_WANT_SHIFT if it wants more, its rate below) joins the epoch's count at its prio,
 * replaces a higher prio's (and who of it wanted more: only the lowest prio water-fills), or
 * starts a slot of an older serial afresh. An atomic loop (CPUs count at once), in a global
 * function: the 6.1 verifier walked it in every iteration of lend_count's. */
__noinline int lend_slot_add(__u32 parent_id, __u32 serial, __u64 add)
{
	const __u64 prio = add >> SHAPER_LEND_PRIO_SHIFT, tag = (__u64)(serial & LEND_TAG_MASK) << LEND_TAG_SHIFT;
	struct shaper_class *p = gcra_class(parent_id);
	__u64 *slot = p ? lend_count_of(p, serial) : NULL;

	for (int i = 0; slot && i < 4; i++) {
		const __u64 old = *(volatile __u64 *)slot, held = old >> SHAPER_LEND_PRIO_SHIFT;
		const bool same = (old & (LEND_TAG_MASK << LEND_TAG_SHIFT)) == tag;
		const __u64 want = (old >> LEND_WANT_SHIFT & 3) < 2 ? add & (1ull << LEND_WANT_SHIFT) : 0;

		if (same && held && held < prio)
			return 0;
		const __u64 next = same && held == prio ? old + want + (add & LEND_RATES_MASK) : tag | add;

		if (__sync_val_compare_and_swap(slot, old, next) == old)
			return 1;
	}
	return 0;
}

/* A lender's clock jumped `skipped` ns (if any) to now: time nobody took, which `taken` must not
 * count. All of it, though the part before the epoch's start lies outside the advance measured:
 * that errs toward a larger spare, which the parent's clock caps, where the exact figure made a
 * lone borrower's allotment its exact share, with nothing to make up what its TCP flow left
 * unused (measured: prio 0 sinking from 13.8 to 7.9 Mbit/s of its 15 over 2 s). */
static __always_inline void lend_idle(struct shaper_class *p, __u64 skipped)
{
	/* A parent idle for an hour adds two epochs: enough to free the next allotment. */
	if (skipped && (p->lend_last | lend_counted_in(p, *(volatile __u32 *)&p->lend_serial)))
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
	p->lend_epoch_tat_ns = tat > now ? tat : now;
	/* The epochs that end: this one and `missed` more nobody turned (every count was made in
	 * this one's first SHAPER_LEND_EPOCH_NS: a later one would have turned it first). Each
	 * borrower was counted through its backlog, in this one and up to three after it: the last
	 * that ended stands. The serial first: a CPU that reads the old one and counts after the
	 * reading below is missed by this turn, not counted twice. */
	const __u64 missed = span / SHAPER_LEND_EPOCH_NS - 1;
	const __u32 ended = __sync_fetch_and_add(&p->lend_serial, missed < 4 ? missed + 1 : 5) + missed;
	const __u64 last = missed < 4 ? lend_counted_in(p, ended) : 0;

	p->lend_last = last >> SHAPER_LEND_PRIO_SHIFT << SHAPER_LEND_PRIO_SHIFT | (last & LEND_RATES_MASK);
	p->lend_wanting_last = last >> LEND_WANT_SHIFT & 3;
}

/* A sharing child's use of parent `p` since it was last counted, as a share of the parent's rate
 * over that period, moves its average (over SHAPER_LEND_USE_AVG_NS, by time); an
 * average near its rate (three quarters of it) makes it one that wants more, counted at the
 * parent. A class new to borrowing, or back after a pause of four times that, is presumed to
 * want more until its use says otherwise. By the counting CPU, once per epoch. */
static __always_inline __u32 lend_roll_use(struct shaper_class *p, struct shaper_class *c, __u64 now)
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
	return wanting;
}

/* Counts borrower `c` (a class that asked, lent or not) at its parent, charged, its clock at
 * `through`: in every epoch its backlog spans, this one and up to three after it, once (the
 * epochs it was counted through already are skipped). A backlogged class asks only when it
 * sends, and one TCP flow on a path of tiny RTT sends 64 KB GSO packets (TCP's autosizing), 35
 * ms apart at 15 Mbit; counted through its backlog it is counted in every epoch between them,
 * and no longer once its queue has gone. Its rate joins its prio's weight there if no lower
 * prio is counted, and replaces a higher prio's. */
static __always_inline void lend_count(struct shaper_class *p, struct shaper_class *c, __u64 now,
					__u64 through)
{
	const __u32 serial = *(volatile __u32 *)&p->lend_serial;
	const __u64 start = *(volatile __u64 *)&p->lend_epoch_ns;

	/* A borrower stays one for two epochs, backlogged or not: a class just able to keep up
	 * with its allotment would otherwise flip to its guarantee and go uncounted. Written at
	 * most once an epoch. */
	if (now + SHAPER_LEND_EPOCH_NS > c->borrowing_until_ns)
		c->borrowing_until_ns = now + 2 * SHAPER_LEND_EPOCH_NS;

	const __u64 ahead = through > start ? (through - start) / SHAPER_LEND_EPOCH_NS : 0;
	const __u32 last = ahead < 3 ? ahead : 3, mark = *(volatile __u32 *)&c->lend_counted;
	/* The mark: the serial of the last epoch it was counted in; one more than three ahead is
	 * from long ago (the serial wrapped). */
	const __s32 counted = (__s32)(mark - serial);
	const __u32 first = counted >= 0 && counted <= 3 ? counted + 1 : 0;

	/* Once: of CPUs sending the class at once, the one that moves the mark counts it. */
	if (first > last || __sync_val_compare_and_swap(&c->lend_counted, mark, serial + last) != mark)
		return;
	const __u64 wanting = lend_roll_use(p, c, now);
	const __u64 prio = (__u64)(c->prio & 7) + 1, rate = c->rate_kbit ? c->rate_kbit : 1;
	const __u64 add = prio << SHAPER_LEND_PRIO_SHIFT | wanting << LEND_WANT_SHIFT | rate;

#pragma clang loop unroll(disable)
	for (__u32 i = first; i <= last && i < 4; i++)
		lend_slot_add(c->parent_id, serial + i, add);
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

/* The class walk's two calls into lending are global functions: the verifier checks each once,
 * and each has its own stack (inlined in a level's, lend_count's atomic loops took the stack
 * past the verifier's 512 bytes). Both start from class `id` and its parent. */
static __always_inline struct shaper_class *lend_parent_of(__u32 id, struct shaper_class **c)
{
	*c = gcra_class(id);
	return *c ? gcra_class((*c)->parent_id) : NULL;
}

/* Counts class `id`, which asked to borrow, at its parent through its clock as charged. */
__noinline int lend_count_class(__u32 id, __u64 now)
{
	struct shaper_class *c, *p = lend_parent_of(id, &c);

	if (!c || !p)
		return 0;
	lend_count(p, c, now, *(volatile __u64 *)&c->tat_ns);
	return 1;
}

/* The ns per byte a lent packet of class `id` is charged at: its allotment, or its rate. */
__noinline __u64 borrow_lent_ns_per_byte(__u32 id)
{
	struct shaper_class *c, *p = lend_parent_of(id, &c);

	if (!c)
		return 0;
	return p ? lend_allotment(p, c) : c->ns_per_byte_fp;
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
		const __u64 allot = lend_allotment(cls, child);
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
