// The queue a class with a ceil keeps of what local TCP sockets send on its device (bpf/borrow.h):
// within two lending epochs of now, or one packet at the class's rate; beyond, the packet is
// refused (TCP keeps it) and counted as a horizon drop at the class. Judged on the datapath's
// own clock (the stamps and the run's now), never on how fast the runs went.
#include "charge.h"
#include "datapath_fixture.h"
#include "packets.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr int kPass = -1;  // on to the next program: the packet passes
constexpr int kShot = 2;   // TC_ACT_SHOT: refused to dev_queue_xmit
constexpr uint32_t kFrame = 1514;
constexpr uint64_t kMs = 1'000'000ull;
constexpr uint64_t kBound = 2 * SHAPER_LEND_EPOCH_NS;  // BORROW_QUEUE_NS in bpf/borrow.h

class BorrowQueue : public Datapath {
protected:
    ProgramOptions program_options() const override { return {.every_packet_kept = kept_}; }

    void add(uint32_t id, uint64_t rate, uint64_t ceil = 0, uint32_t parent = 10)
    {
        add_class({.id = id, .rate_bps = rate, .ceil_bps = ceil, .parent = parent, .horizon_ns = 60 * kSec});
    }

    Verdict send(uint32_t id, uint32_t segs = 1)
    {
        set_default_class(id);
        return run(kFrame * segs, segs);
    }

    // Class time of `bytes` at a rate, as the datapath charges it.
    static uint64_t cost_ns(uint64_t bytes, uint64_t bps)
    {
        __u32 frac;
        return shaper_cost_time(bytes, ns_per_byte_fp(bps), &frac);
    }

    // Sends frames of class 1 until `n` have been refused: each passed frame's stamp, past the
    // run's now, is the queue it joined (the most any joined is returned); a refused frame found
    // the class or its parent (10) beyond the bound.
    uint64_t send_until_refused(unsigned n, unsigned* passed)
    {
        uint64_t deepest = 0;
        unsigned refused = 0;
        *passed = 0;
        while (refused < n && *passed < 1'000) {
            const Verdict v = send(1);
            if (v.action == kShot) {
                refused++;
                EXPECT_GT(std::max(tat(1), tat(10)) - v.before, kBound) << "refused within the bound";
                continue;
            }
            EXPECT_EQ(v.action, kPass);
            (*passed)++;
            deepest = std::max(deepest, v.tstamp > v.after ? v.tstamp - v.after : 0);
        }
        return deepest;
    }

    bool kept_ = true;
};

// Frames of a borrowing class, back to back: each joins a queue of at most two lending epochs
// (one frame's cost at the rate past them at most), the rest are refused and counted at the
// class alone. Rates low enough that a slow guest's runs still outpace the clock.
TEST_F(BorrowQueue, AClassWithACeilQueuesWhatSocketsKeepWithinTwoEpochs)
{
    add(10, 2'000'000, 0, 0);
    add(1, 500'000, 2'000'000);
    unsigned passed = 0;
    const uint64_t deepest = send_until_refused(5, &passed);

    EXPECT_LE(deepest, kBound + cost_ns(kFrame, 500'000));
    EXPECT_EQ(maps_->counters(1).drops_horizon, 5u);
    EXPECT_EQ(maps_->counters(10).drops_horizon, 0u) << "counted at the class, not its parent";
    EXPECT_EQ(maps_->counters(1).packets, passed) << "a refused frame is charged nowhere";
}

// A GSO packet that costs more than two epochs at the class's rate (64 KB at 5 Mbit: 105 ms)
// is queued behind one such packet: a single TCP flow keeps its two packets in the class.
TEST_F(BorrowQueue, OnePacketLargerThanTheBoundIsQueued)
{
    add(10, 20'000'000, 0, 0);
    add(1, 5'000'000, 20'000'000);
    constexpr uint32_t kSegs = 43;
    ASSERT_GT(cost_ns(kFrame * kSegs, 5'000'000), kBound);

    EXPECT_EQ(send(1, kSegs).action, kPass);
    EXPECT_EQ(send(1, kSegs).action, kPass) << "behind one packet at the rate";
    EXPECT_EQ(send(1, kSegs).action, kShot) << "behind two";
}

// A class without a ceil (a cap, as always) queues up to its horizon.
TEST_F(BorrowQueue, AClassWithoutACeilIsNotBounded)
{
    add(10, 2'000'000, 0, 0);
    add(1, 500'000);
    for (int i = 0; i < 40; i++)
        ASSERT_EQ(send(1).action, kPass) << "frame " << i;
    EXPECT_GT(tat(1), now_ns() + kBound);
}

// Packets their sender does not keep (forwarded, UDP, a socket routed by another device) are
// never refused for the bound: a refusal would be a loss.
class BorrowQueueNotKept : public BorrowQueue {
protected:
    BorrowQueueNotKept() { kept_ = false; }
};

TEST_F(BorrowQueueNotKept, PacketsNotKeptAreQueuedToTheHorizon)
{
    add(10, 2'000'000, 0, 0);
    add(1, 500'000, 2'000'000);
    for (int i = 0; i < 40; i++)
        ASSERT_EQ(send(1).action, kPass) << "frame " << i;
    EXPECT_EQ(maps_->counters(1).drops_horizon, 0u);
}

}  // namespace
