// Guaranteed rates that borrow up to a ceiling (bpf/borrow.h), through BPF_PROG_TEST_RUN on the
// host kernel: first each decision on clocks set by hand, then shares over seconds of senders
// that keep a window of packets queued (as TCP small queues do), judged on the datapath's own
// stamps, never on how fast the runs went.
#include <unistd.h>

#include <cmath>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "charge.h"
#include "datapath_fixture.h"
#include "packets.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr int kPass = -1;  // on to the next program: the packet passes
constexpr uint32_t kFrame = 1514;
constexpr uint64_t kMs = 1'000'000ull;

class Borrow : public Datapath {
protected:
    // Parent 10 and its children; every class with a long horizon, nothing but the clocks on.
    void add(uint32_t id, uint64_t rate, uint64_t ceil = 0, uint32_t parent = 10, uint32_t prio = 0)
    {
        add_class({.id = id, .rate_bps = rate, .ceil_bps = ceil, .parent = parent, .prio = prio,
                   .horizon_ns = 60 * kSec});
    }

    // A frame, or a GSO packet of `segs` frames.
    Verdict send(uint32_t id, uint32_t segs = 1)
    {
        set_default_class(id);
        return run(kFrame * segs, segs);
    }

    // Class time of one frame at a rate, as the datapath charges it (to the ns).
    static uint64_t frame_ns(uint64_t bps)
    {
        __u32 frac;
        return shaper_cost_time(kFrame, ns_per_byte_fp(bps), &frac);
    }

    ClassClock clock_of(uint32_t id) const { return maps_->clock(id); }

    // A backlogged class that has used all it was given so far: it wants more than its rate.
    void backlog_wanting(uint32_t id)
    {
        backlog_class(id, 10 * kSec);
        ClassClock clock = clock_of(id);
        clock.lend_use_avg_fp = 1u << 16;
        clock.lend_wanting = 1;
        maps_->write_clock(id, clock);
    }

    // Classes 1 and 2 (ceil 20 Mbit) under a 20 Mbit parent, both backlogged, wanting more and
    // counted for an epoch: what a frame of each is charged then, on their clocks.
    std::pair<uint64_t, uint64_t> charges_after_an_epoch_of_both(uint64_t rate1, uint32_t prio1, uint64_t rate2,
                                                                 uint32_t prio2)
    {
        add(10, 20'000'000, 0, 0);
        add(1, rate1, 20'000'000, 10, prio1);
        add(2, rate2, 20'000'000, 10, prio2);
        backlog_wanting(1);
        backlog_wanting(2);
        send(1);
        send(2);
        next_epoch();
        const uint64_t one = tat(1), two = tat(2);
        send(1);
        send(2);
        return {tat(1) - one, tat(2) - two};
    }

    // Lets the parent's lending epoch turn: the borrowers counted in this one become the last's.
    static void next_epoch() { std::this_thread::sleep_for(std::chrono::nanoseconds(SHAPER_LEND_EPOCH_NS + 5 * kMs)); }
};

// A class with a ceil that sends less than its rate is on its guarantee: it leaves at once though
// its parent is 5 s behind, charged at its rate at both levels; a class without a ceil waits.
TEST_F(Borrow, AClassWithinItsRateWaitsOnNoParent)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000);
    add(2, 5'000'000);
    const uint64_t parent = backlog_class(10, 5 * kSec);

    const Verdict own = send(1);
    ASSERT_EQ(own.action, kPass);
    EXPECT_LE(own.tstamp, own.after) << "within its rate it waits for nobody";
    expect_charged(own, 0, tat(1), frame_ns(5'000'000));
    EXPECT_EQ(tat(10), parent + frame_ns(20'000'000)) << "the parent is charged all the same";
    EXPECT_EQ(maps_->counters(1).borrowed_bytes, 0u);

    const Verdict capped = send(2);
    expect_departure(capped, parent + frame_ns(20'000'000));
}

// A backlogged class borrows: charged at its allotment (alone, the parent's whole rate, here its
// ceil), it leaves by its own clock.
TEST_F(Borrow, ABackloggedClassBorrowsAtItsAllotment)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000);
    const uint64_t own = backlog_class(1, 1 * kSec);

    const Verdict v = send(1);
    ASSERT_EQ(v.action, kPass);
    expect_departure(v, own);
    EXPECT_EQ(tat(1), own + frame_ns(20'000'000)) << "charged at the allotment, not at its rate";
    EXPECT_EQ(maps_->counters(1).borrowed_bytes, kFrame);

}

// A loan never leaves the class behind its guarantee: with the parent 2 s behind and the class
// 1 s, the packet goes on the guarantee (charged at the rate, leaving by its own clock), and the
// class is counted as a borrower all the same.
TEST_F(Borrow, ALoanNeverLeavesTheClassBehindItsGuarantee)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000);
    const uint64_t own = backlog_class(1, 1 * kSec);
    backlog_class(10, 2 * kSec);

    const Verdict v = send(1);
    expect_departure(v, own);
    EXPECT_EQ(tat(1), own + frame_ns(5'000'000));
    EXPECT_EQ(maps_->counters(1).borrowed_bytes, 0u);
    const ClassClock parent = clock_of(10);
    const uint64_t counts[] = {parent.lend_count0, parent.lend_count1, parent.lend_count2, parent.lend_count3};
    const uint64_t count = counts[parent.lend_serial & 3];  // this epoch's
    EXPECT_EQ(count >> SHAPER_LEND_PRIO_SHIFT, 1u) << "counted at prio 0";
    EXPECT_EQ(count & ((1ull << 38) - 1), 5'000u) << "its rate in kbit";
}

// A ping in a lent class: the parent's departure just past the class's own, so the ping is lent
// (waiting that long costs less than its guarantee would). Sparse, it still leaves now, ahead of
// both: it is charged at both levels like any packet. Taken for bulk, it would wait for the
// parent, and every next ping of its flow behind it.
TEST_F(Borrow, ASparsePacketOfALentClassLeavesAheadOfTheParent)
{
    add(10, 20'000'000, 0, 0);
    add_class({.id = 1, .rate_bps = 5'000'000, .ceil_bps = 20'000'000, .parent = 10, .horizon_ns = 60 * kSec},
              true, true);
    const uint64_t own = backlog_class(1, 100 * kMs);
    const uint64_t parent = set_tat(10, own + 10'000);
    auto frame = test::build_frame({.sport = 7});
    __sk_buff ctx{};
    ctx.wire_len = 100;
    const Verdict v = run_ctx(ctx, frame.data(), uint32_t(frame.size()));
    ASSERT_EQ(v.action, kPass);
    EXPECT_LE(v.tstamp, v.after) << "sparse: ahead of its class's backlog and of the parent's";
    EXPECT_EQ(maps_->counters(1).sparse, 1u);
    EXPECT_GT(tat(1), own);
    EXPECT_GT(tat(10), parent) << "the parent is charged all the same";
}

// A 64 KB GSO packet would take 105 ms of a 5 Mbit class's clock on its guarantee and 26 ms at
// its allotment (20 Mbit, alone): it is lent while the parent makes it wait less than the 79 ms
// between, leaving with the parent, and refused beyond that.
TEST_F(Borrow, ALargePacketWaitsForTheParentWhileThatCostsLessThanItsGuarantee)
{
    constexpr uint32_t kSegs = 43;
    const uint64_t at_rate = frame_ns(5'000'000) * kSegs, at_ceil = frame_ns(20'000'000) * kSegs;
    for (const uint64_t wait : {at_rate - at_ceil - 2 * kMs, at_rate - at_ceil + 2 * kMs}) {
        const bool lent = wait < at_rate - at_ceil;
        add(10, 20'000'000, 0, 0);
        add(1, 5'000'000, 20'000'000);
        const uint64_t own = backlog_class(1, 1 * kSec);
        const uint64_t parent = set_tat(10, own + wait);
        const uint64_t before = tat(1), borrowed = maps_->counters(1).borrowed_bytes;

        const Verdict v = send(1, kSegs);
        ASSERT_EQ(v.action, kPass);
        expect_departure(v, lent ? parent : own);
        EXPECT_NEAR(double(tat(1) - before), double(lent ? at_ceil : at_rate), 50.0) << (lent ? "lent" : "refused");
        EXPECT_EQ(maps_->counters(1).borrowed_bytes - borrowed, lent ? kFrame * kSegs : 0u);
    }
}

// An allotment never passes the ceil: alone under an idle parent of 20 Mbit, a class of ceil
// 10 Mbit is charged at 10 Mbit.
TEST_F(Borrow, TheCeilCapsABorrower)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 10'000'000);
    const uint64_t own = backlog_class(1, 1 * kSec);
    send(1);
    EXPECT_EQ(tat(1), own + frame_ns(10'000'000));
    EXPECT_GT(maps_->counters(1).ceil_held, 0u) << "it waited at its ceil";
}

// Borrowers of one prio split the spare by their rates: 2 and 8 Mbit under 20 get 4 and 16.
TEST_F(Borrow, TheSpareSplitsInProportionToTheRates)
{
    const auto [one, two] = charges_after_an_epoch_of_both(2'000'000, 0, 8'000'000, 0);
    EXPECT_NEAR(double(one), double(frame_ns(4'000'000)), frame_ns(4'000'000) * 0.001);
    EXPECT_NEAR(double(two), double(frame_ns(16'000'000)), frame_ns(16'000'000) * 0.001);
}

// A lower prio is offered the spare first: while prio 0 borrows, prio 1 keeps its rate.
TEST_F(Borrow, ALowerPrioTakesTheSpareFirst)
{
    const auto [one, two] = charges_after_an_epoch_of_both(5'000'000, 0, 5'000'000, 1);
    EXPECT_EQ(one, frame_ns(20'000'000)) << "prio 0 is offered all the spare";
    EXPECT_EQ(two, frame_ns(5'000'000)) << "prio 1 keeps its guarantee alone";
}

// A borrower is counted through its backlog (a class sending 64 KB GSO packets asks tens of ms
// apart): prio 0, its clock 30 ms ahead of the epoch's start, holds prio 1 to its rate while the
// epochs it spans are the last ones ended, and no longer at the turn after. Turns are made by
// writing the epoch's start an epoch back, so that no sleep of the test decides where they fall.
TEST_F(Borrow, ABorrowerStaysCountedThroughItsBacklog)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000, 10, 0);
    add(2, 5'000'000, 20'000'000, 10, 1);
    backlog_wanting(2);
    ClassClock parent = clock_of(10);  // its clock ahead, so it advances by charges alone
    parent.tat_ns = now_ns() + kSec;
    maps_->write_clock(10, parent);
    send(2);  // opens the parent's first epoch
    ClassClock one = clock_of(1);
    one.tat_ns = clock_of(10).lend_epoch_ns + 30 * kMs;
    maps_->write_clock(1, one);
    send(1);  // asks with a backlog to 30 ms: counted in this epoch and the next
    ASSERT_LT(tat(1), clock_of(10).lend_epoch_ns + 2 * SHAPER_LEND_EPOCH_NS);
    for (int turn = 1; turn <= 3; turn++) {
        ClassClock p = clock_of(10);
        p.lend_epoch_ns = now_ns() - SHAPER_LEND_EPOCH_NS - kMs;
        maps_->write_clock(10, p);
        const uint64_t before = tat(2);
        send(2);
        if (turn < 3)
            EXPECT_EQ(tat(2) - before, frame_ns(5'000'000)) << "prio 0 still counted at turn " << turn;
        else
            EXPECT_LT(tat(2) - before, frame_ns(15'000'000)) << "its queue gone: the spare is prio 1's";
    }
}

// A borrower that keeps sending is counted in every epoch it asks in, its backlog short or long.
TEST_F(Borrow, ABorrowerThatKeepsAskingStaysCounted)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000, 10, 0);
    add(2, 5'000'000, 20'000'000, 10, 1);
    backlog_wanting(1);
    backlog_wanting(2);
    send(2);
    for (int turn = 1; turn <= 6; turn++) {
        ClassClock one = clock_of(1);
        one.tat_ns = now_ns() + (turn % 2 ? 1 : 90) * kMs;  // a short backlog, then a long one
        maps_->write_clock(1, one);
        send(1);
        ClassClock p = clock_of(10);
        p.lend_epoch_ns = now_ns() - SHAPER_LEND_EPOCH_NS - kMs;
        maps_->write_clock(10, p);
        const uint64_t before = tat(2);
        send(2);
        EXPECT_EQ(tat(2) - before, frame_ns(5'000'000)) << "prio 0 counted at turn " << turn;
    }
}

// Counts age with the time nobody asked in, not only with turns: a prio 0 borrower that stopped
// five epochs ago no longer holds prio 1 to its rate at the next turn.
TEST_F(Borrow, CountsAgeWithTheEpochsNobodyAskedIn)
{
    charges_after_an_epoch_of_both(5'000'000, 0, 5'000'000, 1);
    for (int i = 0; i < 5; i++)
        next_epoch();
    const uint64_t before = tat(2);
    send(2);
    EXPECT_LT(tat(2) - before, frame_ns(15'000'000)) << "alone: the spare is prio 1's";
}

// What the parent gives borrowers is what others leave: with three quarters of the last epoch's
// clock advance charged by packets not lent, a borrower alone is allotted the rest.
TEST_F(Borrow, TheSpareIsWhatOthersLeave)
{
    add(10, 20'000'000, 0, 0);
    add(1, 2'000'000, 20'000'000);
    backlog_class(1, 10 * kSec);
    send(1);  // opens the parent's first epoch
    ClassClock parent = clock_of(10);
    const uint64_t now = now_ns();
    parent.lend_epoch_ns = parent.lend_epoch_tat_ns = now - SHAPER_LEND_EPOCH_NS;
    parent.tat_ns = now - SHAPER_LEND_EPOCH_NS / 4;
    parent.lend_lent_ns = parent.lend_idle_ns = 0;  // nobody lent to, never idle: others took it all
    maps_->write_clock(10, parent);
    const uint64_t before = tat(1);
    send(1);
    // The epoch ran from the start written to the turn the datapath stamped (its own clock):
    // others took 15 ms of it.
    const double span = double(clock_of(10).lend_epoch_ns - parent.lend_epoch_ns);
    const double expected = 20e6 * (1 - 0.75 * SHAPER_LEND_EPOCH_NS / span);
    const double allotted = 8.0 * kFrame * 1e9 / double(tat(1) - before);
    EXPECT_NEAR(allotted, expected, expected * 0.01) << "20 Mbit less what others took";
    EXPECT_LT(expected, 10e6) << "the epoch took far longer than 20 ms to turn";
}

// Two CPUs sending one borrowing class for several epochs: the class is counted once per epoch
// (its rate, not twice it), every packet is charged at both levels, and no packet is charged
// faster than the ceil.
TEST_F(Borrow, RacingCpusCountABorrowerOnceAndKeepItsCeil)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 10'000'000);
    const uint64_t start = backlog_class(1, 10 * kSec);
    const std::vector<int> cpus = allowed_cpus(2);
    const uint64_t until = now_ns() + 8 * SHAPER_LEND_EPOCH_NS;
    std::vector<uint64_t> twice;  // lend_last weights seen above the class's rate
    std::mutex seen;
    std::vector<std::thread> threads;
    for (int cpu : cpus)
        threads.emplace_back([&, cpu] {
            pin_thread(cpu);
            while (now_ns() < until) {
                run(kFrame, 1);
                const uint64_t last = clock_of(10).lend_last & ((1ull << SHAPER_LEND_PRIO_SHIFT) - 1);
                if (last > 5'000) {
                    std::lock_guard<std::mutex> lock(seen);
                    twice.push_back(last);
                }
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_TRUE(twice.empty()) << twice.size() << " epochs counted the class more than once, e.g. " << twice[0];
    const ClassCounters child = maps_->counters(1), parent = maps_->counters(10);
    EXPECT_EQ(parent.packets, child.packets);
    EXPECT_EQ(child.borrowed_bytes, child.bytes) << "every packet was lent";
    EXPECT_GE(tat(1) - start, child.packets * frame_ns(10'000'000)) << "never faster than the ceil";
}

// Shares over seconds. Each sender keeps `window` frames of its class queued (a frame leaves the
// queue at its stamp), from `from` to `to` seconds; bytes are counted by stamp.
struct Sender {
    uint32_t id;
    unsigned window;
    double from = 0, to = 99;
    uint32_t segs = 1; // frames per packet: above 1, GSO packets
    double app_mbit = 0; // above 0: an application writing this rate, 200 ms of it at once
    std::deque<uint64_t> queued;
    std::vector<uint64_t> stamps;  // one per packet of `segs` frames
};

class BorrowShares : public Borrow {
protected:
    void drive(std::vector<Sender>& senders, double seconds)
    {
        const uint64_t start = now_ns(), end = start + uint64_t(seconds * kSec);
        for (uint64_t now = start; now < end; now = now_ns()) {
            for (Sender& s : senders) {
                while (!s.queued.empty() && s.queued.front() <= now)
                    s.queued.pop_front();
                const double at = double(now - start) / kSec;
                if (at < s.from || at >= s.to)
                    continue;
                const double written = s.app_mbit * 1e6 / 8 * (std::floor(at / 0.2) + 1) * 0.2;
                while (s.app_mbit > 0 ? double(s.stamps.size()) * s.segs * kFrame < written
                                      : s.queued.size() < s.window) {
                    const Verdict v = send(s.id, s.segs);
                    ASSERT_EQ(v.action, kPass) << "class " << s.id << " dropped a frame";
                    s.queued.push_back(v.tstamp);
                    s.stamps.push_back(v.tstamp);
                }
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        start_ = start;
    }

    void report(const std::vector<Sender>& s, double from, double to) const
    {
        for (const Sender& one : s)
            std::printf("class %u (%u queued): %.3f Mbit/s\n", one.id, one.window, mbit(one, from, to));
    }

    // Mbit/s a sender's stamps say it sent between `from` and `to` seconds.
    double mbit(const Sender& s, double from, double to) const
    {
        uint64_t n = 0;
        for (uint64_t t : s.stamps)
            n += t >= start_ + uint64_t(from * kSec) && t < start_ + uint64_t(to * kSec);
        return n * s.segs * kFrame * 8 / (to - from) / 1e6;
    }

    // Class 1 (16 frames queued, as eight TCP flows keep) and class 2 (2, one flow) under a
    // parent of 2 Mbit, driven for 2.5 s; each must send its expected share over the last 2 s
    // within `tolerance`, and both the parent's rate (its bound).
    void expect_shares(uint64_t rate1, uint32_t prio1, double expected1, uint64_t rate2, uint32_t prio2,
                       double expected2, double tolerance)
    {
        add(10, 2'000'000, 0, 0);
        add(1, rate1, 2'000'000, 10, prio1);
        add(2, rate2, 2'000'000, 10, prio2);
        std::vector<Sender> s = {{1, 16}, {2, 2}};
        drive(s, 2.5);
        report(s, 0.5, 2.5);
        EXPECT_NEAR(mbit(s[0], 0.5, 2.5), expected1, expected1 * tolerance);
        EXPECT_NEAR(mbit(s[1], 0.5, 2.5), expected2, expected2 * tolerance);
        EXPECT_LE(mbit(s[0], 0.5, 2.5) + mbit(s[1], 0.5, 2.5), 2.0 * 1.01) << "the parent's bound";
    }

    uint64_t start_ = 0;
};

// Guarantees 0.5 and 1.5 under 2 Mbit, both with ceil 2: the first with eight flows' worth of
// queue, the second with one; each gets its guarantee within 5 %.
TEST_F(BorrowShares, EachBusyClassGetsItsGuaranteeWhateverItsFlows)
{
    expect_shares(500'000, 0, 0.5, 1'500'000, 0, 1.5, 0.05);
}

// Equal guarantees, one with eight times the queue: the spare splits evenly (within 5 %).
TEST_F(BorrowShares, TheSpareSplitsAsConfiguredNotByFlows)
{
    expect_shares(500'000, 0, 1.0, 500'000, 0, 1.0, 0.05);
}

// Two prios: the lower (class 2's 0) takes the spare, the higher keeps its guarantee.
TEST_F(BorrowShares, TheLowerPrioGetsTheSpareFirst)
{
    expect_shares(500'000, 1, 0.5, 500'000, 0, 1.5, 0.05);
}

// A single TCP flow on a path of tiny RTT sends 64 KB GSO packets (TCP's autosizing), 35 ms
// apart at 15 Mbit: more than a lending epoch. Such a class, prio 0, still takes the spare first;
// the other (prio 1, 16 frames queued) keeps its guarantee. Under 20 Mbit: 5 and 15, within 5 %.
TEST_F(BorrowShares, ABorrowerSendingGsoPacketsEpochsApartStaysCounted)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000, 10, 1);
    add(2, 5'000'000, 20'000'000, 10, 0);
    std::vector<Sender> s = {{1, 80}, {2, 3, 0, 99, 43}};
    drive(s, 3.0);
    report(s, 0.5, 3.0);
    EXPECT_NEAR(mbit(s[0], 0.5, 3.0), 5.0, 0.25);
    EXPECT_NEAR(mbit(s[1], 0.5, 3.0), 15.0, 0.75);
}

// The sibling writing 0.5 of its 1.5 Mbit, 200 ms of it at once: it gets all it writes, and the
// first what it leaves, 1.5 (HTB's figure), within 5 %: the sibling's average use stays below
// its rate, so it is not one that wants more, and the first is lent what the sibling left last
// epoch. The parent's bound over the window: its rate, and one write of the sibling (12.5 KB),
// whose packets leave on its guarantee ahead of their slot on the parent's clock, which the
// first's lent packets keep ahead.
TEST_F(BorrowShares, ASiblingWritingUnderItsShareGetsItAllAndTheBorrowerTheRest)
{
    add(10, 2'000'000, 0, 0);
    add(1, 500'000, 2'000'000);
    add(2, 1'500'000, 2'000'000);
    std::vector<Sender> s = {{1, 16}, {2, 0}};
    s[1].app_mbit = 0.5;
    drive(s, 3.0);
    report(s, 1.0, 3.0);
    EXPECT_NEAR(mbit(s[0], 1.0, 3.0), 1.5, 1.5 * 0.05) << "what the sibling leaves";
    EXPECT_NEAR(mbit(s[1], 1.0, 3.0), 0.5, 0.05) << "all the sibling writes";
    const double write_mbit = 0.5 * 0.2 / 2.0; // one write, over the 2 s window
    EXPECT_LE(mbit(s[0], 1.0, 3.0) + mbit(s[1], 1.0, 3.0), 2.0 * 1.01 + write_mbit) << "the parent's bound";
}

// The sibling idle: the first borrows up to its ceil (within 3 %), reached within 200 ms; when
// the sibling returns the first is back at its guarantee within 200 ms.
TEST_F(BorrowShares, ABorrowerTakesAnIdleSiblingsShareAndGivesItBack)
{
    add(10, 2'000'000, 0, 0);
    add(1, 500'000, 2'000'000);
    add(2, 1'500'000, 2'000'000);
    std::vector<Sender> s = {{1, 16}, {2, 2, 1.5}};
    drive(s, 3.5);
    report(s, 0.2, 1.5);
    report(s, 1.7, 3.5);
    EXPECT_NEAR(mbit(s[0], 0.2, 1.5), 2.0, 0.06) << "alone, up to its ceil";
    EXPECT_NEAR(mbit(s[0], 1.7, 3.5), 0.5, 0.025) << "back at its guarantee";
    EXPECT_NEAR(mbit(s[1], 1.7, 3.5), 1.5, 0.075);
}

// A ceil below the parent caps the borrower (within 3 %).
TEST_F(BorrowShares, ACeilBelowTheParentCapsTheBorrower)
{
    add(10, 2'000'000, 0, 0);
    add(1, 500'000, 1'000'000);
    std::vector<Sender> s = {{1, 16}};
    drive(s, 2.5);
    EXPECT_NEAR(mbit(s[0], 0.5, 2.5), 1.0, 0.03);
}

}  // namespace
