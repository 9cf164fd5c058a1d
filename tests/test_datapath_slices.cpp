// Per-CPU slices of a class clock (bpf/slice.h): one test thread pins itself to one CPU, then
// another, so that the program runs as two CPUs charging one class in turn.
#include <sched.h>

#include <algorithm>
#include <vector>

#include "datapath_fixture.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

class Slices : public Datapath {
protected:
    void SetUp() override
    {
        Datapath::SetUp();
        ASSERT_EQ(sched_getaffinity(0, sizeof allowed_, &allowed_), 0);
        for (int cpu = 0; cpu < CPU_SETSIZE && cpus_.size() < 2; cpu++)
            if (CPU_ISSET(cpu, &allowed_))
                cpus_.push_back(cpu);
        if (cpus_.size() < 2)
            GTEST_SKIP() << "two CPUs needed";
    }
    void TearDown() override { sched_setaffinity(0, sizeof allowed_, &allowed_); }

    // Runs one 1000-byte packet on the n-th CPU of two.
    Verdict send_on(size_t n)
    {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus_[n % 2], &one);
        EXPECT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
        return run(1000, 1);
    }

    // 8 Gbit, no burst: a 1000-byte packet is 1000 ns exactly, a slice 8 of them (8 us).
    static constexpr uint64_t kCost = 1000, kRate = 8'000'000'000ull;

    void add_paced_class(uint64_t rate_bps = kRate)
    {
        add_class({.id = 1, .rate_bps = rate_bps, .horizon_ns = 10 * kSec});
    }

    cpu_set_t allowed_{};
    std::vector<int> cpus_;
};

// Departures of a class without burst are its charges' starts: disjoint, so no two closer than
// one packet's cost.
void expect_spaced(std::vector<uint64_t> departures, uint64_t cost)
{
    std::sort(departures.begin(), departures.end());
    for (size_t i = 1; i < departures.size(); i++)
        ASSERT_GE(departures[i] - departures[i - 1], cost) << "departures " << i - 1 << ", " << i;
}

// Two CPUs charging a backlogged class in turn, packet by packet: never faster than one clock
// (no two departures closer than a packet), and the clock ahead of what was sent by no more
// than the two open slices, in whole packets (alike packets leave no tail unused).
TEST_F(Slices, TwoCpusInTurnReleaseWhatOneClockAllows)
{
    add_paced_class();
    const uint64_t start = backlog_class(1, kSec);
    constexpr size_t kPackets = 64;
    std::vector<uint64_t> departures;
    size_t in_slice = 0;  // packets right behind the same CPU's previous one, the other between
    for (size_t i = 0; i < kPackets; i++) {
        const Verdict v = send_on(i);
        ASSERT_EQ(v.action, -1);
        if (i >= 2 && v.tstamp == departures[i - 2] + kCost)
            in_slice++;
        departures.push_back(v.tstamp);
    }
    expect_spaced(departures, kCost);
    EXPECT_GE(departures.front(), start);
    const uint64_t sent_until = start + kPackets * kCost, clock = tat(1);
    EXPECT_GE(clock, sent_until);
    EXPECT_LE(clock, sent_until + 2 * SHAPER_SLICE_MAX_NS) << "at most two open slices";
    EXPECT_EQ((clock - start) % kCost, 0u) << "no tail unused";
    EXPECT_LE(*std::max_element(departures.begin(), departures.end()) + kCost, clock);
    EXPECT_GE(in_slice, kPackets / 2) << "the CPUs charged their slices";
}

// A CPU that keeps a slice and falls idle has no credit left when it comes back: its packets,
// and the other CPU's, leave no closer than one clock allows from their now on.
TEST_F(Slices, AnIdleCpusCreditIsNotBanked)
{
    add_paced_class();
    for (size_t i = 0; i < 8; i++)
        ASSERT_EQ(send_on(i).action, -1);  // both CPUs hold slices now, the clock idle soon
    const uint64_t idle_until = now_ns() + 2'000'000;
    while (now_ns() < idle_until) {
    }
    std::vector<uint64_t> departures;
    for (size_t i = 0; i < 32; i++) {
        const Verdict v = send_on(i / 4);  // CPU 0 sends 4, CPU 1 sends 4, ...
        ASSERT_EQ(v.action, -1);
        EXPECT_GE(v.tstamp, v.before);
        departures.push_back(v.tstamp);
    }
    // Credit banked in the pause would let packets leave at their now together.
    expect_spaced(departures, kCost);
}

// A raised rate rescales the clock: slices taken before hold clock time the rescale moved, and
// no CPU sends from one after the change. A lowered rate keeps the slices, charged at it.
TEST_F(Slices, ARateChangeReachesTheSlices)
{
    add_paced_class();
    backlog_class(1, kSec);
    for (size_t i = 0; i < 16; i++)
        ASSERT_EQ(send_on(i).action, -1);  // both CPUs hold slices a second ahead
    ClassSpec faster{.id = 1, .rate_bps = 2 * kRate, .horizon_ns = 10 * kSec};
    faster.sparse = faster.fair = false;
    maps_->change_class(1, make_class_config(faster, maps_->max_classes(), 2 * kSec));
    const uint64_t rescaled = tat(1);  // about half a second ahead
    std::vector<uint64_t> departures;
    for (size_t i = 0; i < 16; i++) {
        const Verdict v = send_on(i);
        ASSERT_EQ(v.action, -1);
        EXPECT_GE(v.tstamp, rescaled) << "packet " << i;
        EXPECT_LT(v.tstamp, rescaled + 16 * kCost / 2 + 2 * SHAPER_SLICE_MAX_NS) << "packet " << i;
        departures.push_back(v.tstamp);
    }
    expect_spaced(departures, kCost / 2);

    ClassSpec slower = faster;
    slower.rate_bps = kRate / 4;  // 4 us a packet: slices of four (16 us)
    maps_->change_class(1, make_class_config(slower, maps_->max_classes(), 2 * kSec));
    departures.clear();
    for (size_t i = 0; i < 16; i++)
        departures.push_back(send_on(i).tstamp);
    expect_spaced(departures, 4 * kCost);
}

// A class deleted and added again starts from an idle clock: no CPU keeps a slice of the old
// one, and one CPU alone charges it exactly.
TEST_F(Slices, AClassAddedAgainKeepsNoSlice)
{
    add_paced_class();
    backlog_class(1, kSec);
    for (size_t i = 0; i < 16; i++)
        ASSERT_EQ(send_on(i).action, -1);
    maps_->erase_class(1);
    add_paced_class();
    for (size_t i = 0; i < 2; i++) {
        const uint64_t before = tat(1);
        const Verdict v = send_on(i);
        expect_departure(v, before);
        expect_charged(v, before, tat(1), kCost);
    }
}

// A GSO packet longer than a slice takes just its own charge: two CPUs sending them in turn
// leave nothing unused on the clock.
TEST_F(Slices, APacketLongerThanASliceTakesItsOwnCharge)
{
    add_paced_class();
    const uint64_t start = backlog_class(1, kSec);
    std::vector<uint64_t> departures;
    for (size_t i = 0; i < 8; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus_[i % 2], &one);
        ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
        departures.push_back(run(40 * 1000, 40).tstamp);  // 40 us at 8 Gbit
    }
    expect_spaced(departures, 40 * kCost);
    EXPECT_EQ(tat(1), start + 8 * 40 * kCost);
}

}  // namespace
