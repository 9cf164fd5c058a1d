// Exact datapath behaviour through BPF_PROG_TEST_RUN on the host kernel.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "charge.h"
#include "datapath_fixture.h"
#include "packets.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr int kPass = -1;  // TC_ACT_UNSPEC and TCX_NEXT: on to the next program (the packet passes)
constexpr int kTcActShot = 2;

// BPF_PROG_TEST_RUN refuses wire_len above 65536 (GSO_LEGACY_MAX_SIZE), so a 44 x 1502-byte
// packet (66088) cannot be run; 44 segments of gso_size 1435 (65516 bytes) can. The full-size
// packet is checked on the same arithmetic below (shaper_packet_cost is the datapath's code).
TEST_F(Datapath, GsoPacketCostsEverySegmentWithItsOverhead)
{
    // 8 Mbit: one byte per microsecond, so costs map to whole nanoseconds.
    add_class({.id = 1, .rate_bps = 8'000'000, .overhead = 24});
    const uint64_t tat0 = backlog_class(1, kSec);
    const uint32_t segs = 44, seg_wire = 1435 + 54;
    const uint64_t cost_ns = uint64_t(segs) * (seg_wire + 24) * 1000;
    Verdict first = run(segs * seg_wire, segs);
    const uint64_t tat1 = tat(1);
    Verdict second = run(segs * seg_wire, segs);
    ASSERT_EQ(first.action, kPass);
    expect_departure(first, tat0);
    expect_charged(first, tat0, tat1, cost_ns);
    expect_departure(second, tat1);
    expect_charged(second, tat1, tat(1), cost_ns);
    ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.packets, 2u);
    EXPECT_EQ(c.segments, 2u * segs);
    EXPECT_EQ(c.bytes, 2ull * segs * (seg_wire + 24));
    EXPECT_EQ(shaper_packet_cost(44 * (1448 + 54), 44, 24, 0), 44u * (1448 + 54 + 24));
}

TEST_F(Datapath, BurstLeavesAtOnceThenTheDebtDelays)
{
    // 8 kbit: a 1000-byte packet is a second of clock, the burst ten of them.
    add_class({.id = 1, .rate_bps = 8'000, .burst_bytes = 10'000, .horizon_ns = 10 * kSec});
    const uint64_t burst_ns = 10 * kSec;
    // The first 11 (the burst and the one that takes the last credit) leave at once, however
    // long the runs take; the debt delays the ones after, until when the clock read back says.
    for (int i = 0; i < 13; i++) {
        const uint64_t before = tat(1);
        Verdict v = run(1000, 1);
        ASSERT_EQ(v.action, kPass);
        expect_charged(v, before, tat(1), kSec);
        expect_departure(v, before > burst_ns ? before - burst_ns : 0);
        if (i < 11) {
            EXPECT_LE(v.tstamp, v.after) << "packet " << i << " should leave at once";
        }
    }
}

TEST_F(Datapath, PacketLargerThanBurstLeavesAndTakesDebt)
{
    // 8 kbit: the 9000-byte packet is 9 s of clock, the burst 1 s.
    add_class({.id = 1, .rate_bps = 8'000, .burst_bytes = 1000, .horizon_ns = 10 * kSec});
    Verdict big = run(9000, 1);
    const uint64_t debt = tat(1);
    Verdict next = run(100, 1);
    ASSERT_EQ(big.action, kPass);
    EXPECT_LE(big.tstamp, big.after);
    expect_charged(big, 0, debt, 9 * kSec);
    expect_departure(next, debt - kSec);  // 9 s of debt less 1 s of burst
}

TEST_F(Datapath, LaterOwnTimestampIsKeptEarlierOneIsNot)
{
    add_class({.id = 1, .rate_bps = 8'000'000});
    const uint64_t tat0 = backlog_class(1, kSec);
    Verdict later = run(100, 1, tat0 + 3 * kSec);
    expect_departure(later, tat0 + 3 * kSec);
    const uint64_t tat1 = tat(1);
    Verdict earlier = run(100, 1, tat0 - kSec / 2);
    expect_departure(earlier, tat1);  // the class clock wins
    // A realtime receive stamp (seconds since 1970) on a forwarded packet is not a pacing time.
    const uint64_t tat2 = tat(1);
    Verdict realtime = run(100, 1, 1'700'000'000ull * kSec);
    expect_departure(realtime, tat2);
    expect_charged(realtime, tat2, tat(1), 100'000);
}

TEST_F(Datapath, NeverEarlierThanNow)
{
    add_class({.id = 1, .rate_bps = 400'000'000'000ull});
    Verdict v = run(1500, 1);
    EXPECT_GE(v.tstamp, v.before);
    EXPECT_LE(v.tstamp, v.after);
}

TEST_F(Datapath, BeyondHorizonIsDroppedCountedAndNotCharged)
{
    // A minute of backlog against 10 ms of horizon.
    add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 10'000'000});
    const uint64_t tat = backlog_class(1, 60 * kSec);
    Verdict v = run(1000, 1);
    EXPECT_EQ(v.action, kTcActShot);
    EXPECT_EQ(maps_->clock(1).tat_ns, tat);
    ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_horizon, 1u);
    EXPECT_EQ(c.packets, 0u);
}

TEST_F(Datapath, LargePacketsAtExtremeRatesDoNotOverflow)
{
    // 8 kbit: a 64 KB packet is 65.536 s of clock, exactly.
    add_class({.id = 1, .rate_bps = 8'000, .horizon_ns = SHAPER_HORIZON_MAX_NS});
    Verdict v = run(65536, 45);
    ASSERT_EQ(v.action, kPass);
    expect_charged(v, 0, tat(1), 65'536'000'000'000ull / 1000);
    EXPECT_EQ(maps_->counters(1).clock_carry, 0u);  // exact: nothing to round

    // 400 Gbit: 65536 bytes are 1310.72 ns. Each packet rounds up (banking 0.28 ns) until the
    // bank covers 0.72 ns, then rounds down against it: 1311, 1311, 1311, 1310, 1311.
    add_class({.id = 2, .rate_bps = 400'000'000'000ull});
    set_default_class(2);
    backlog_class(2, kSec);
    const uint64_t rounded[] = {1311, 1311, 1311, 1310, 1311};
    for (int i = 0; i < 5; i++) {
        const uint64_t before = tat(2);
        v = run(65536, 45);
        ASSERT_EQ(v.action, kPass);
        expect_charged(v, before, tat(2), rounded[i]);
        if (i == 0) {
            // Per-byte time is rounded up by < 2^-32 ns: 65536 bytes add < 1.6e-5 ns.
            EXPECT_NEAR(double(maps_->counters(2).clock_carry) / 4294967296.0, 0.28, 2e-5);
        }
    }
    EXPECT_NEAR(double(maps_->counters(2).clock_carry) / 4294967296.0, 0.4, 2e-5);

    // 512 KB (BIG TCP) on the shared arithmetic, against 128-bit references.
    for (uint64_t rate : {8'000ull, 1'000'000ull, 1'000'000'007ull, 400'000'000'000ull}) {
        for (uint32_t len : {64u, 65536u, 524288u}) {
            const uint64_t fp = ns_per_byte_fp(rate);
            uint32_t frac = 0;
            const uint64_t whole = shaper_cost_time(len, fp, &frac);
            const unsigned __int128 exact = (unsigned __int128)len * fp;
            EXPECT_EQ(whole, uint64_t(exact >> 32)) << rate << " " << len;
            EXPECT_EQ(frac, uint32_t(exact)) << rate << " " << len;
            const double seconds = double(len) * 8 / double(rate);
            EXPECT_NEAR(double(whole) / 1e9, seconds, seconds * 1e-9 + 1e-9);
        }
    }
}

TEST_F(Datapath, OverheadNegativeOverheadAndMpu)
{
    add_class({.id = 1, .rate_bps = 8'000'000, .overhead = 24});
    run(100, 1);
    EXPECT_EQ(maps_->counters(1).bytes, 124u);
    add_class({.id = 2, .rate_bps = 8'000'000, .overhead = -20});
    set_default_class(2);
    run(100, 4);
    EXPECT_EQ(maps_->counters(2).bytes, 20u);  // 100 - 4 x 20
    add_class({.id = 3, .rate_bps = 8'000'000, .overhead = 4, .mpu = 64});
    set_default_class(3);
    run(100, 2);  // 2 x 54 bytes each counted at 64
    EXPECT_EQ(maps_->counters(3).bytes, 128u);
    run(200, 2);  // 2 x 104: above the minimum
    EXPECT_EQ(maps_->counters(3).bytes, 128u + 208u);
    EXPECT_EQ(shaper_packet_cost(100, 4, -64, 0), 4u);  // never below a byte per segment
}

TEST_F(Datapath, HierarchyChargesEveryLevelAndDepartsAtTheLatest)
{
    const uint64_t horizon = 10 * kSec;
    add_class({.id = 10, .rate_bps = 15'000'000, .horizon_ns = horizon});
    add_class({.id = 1, .rate_bps = 10'000'000, .parent = 10, .horizon_ns = horizon});
    add_class({.id = 2, .rate_bps = 10'000'000, .parent = 10, .horizon_ns = horizon});
    const uint64_t parent_tat = backlog_class(10, 2 * kSec);
    const uint64_t child_tat = backlog_class(1, kSec);

    Verdict v = run(1500, 1);
    expect_departure(v, parent_tat);  // the parent is further behind: its departure holds
    // 1500 B at 15 Mbit is 800,000 ns and a hair (the per-byte time rounds up): rounded up once,
    // then the banked rest covers the next packet's hair.
    const uint64_t parent_tat1 = tat(10);
    expect_charged(v, parent_tat, parent_tat1, 800'001);
    expect_charged(v, child_tat, tat(1), 1'200'000);  // 1500 B at 10 Mbit

    set_default_class(2);  // the sibling shares the parent's clock
    const uint64_t sibling_tat = backlog_class(2, 3 * kSec);
    v = run(1500, 1);
    expect_departure(v, sibling_tat);  // now the child is the latest
    expect_charged(v, parent_tat1, tat(10), 800'000);
    EXPECT_EQ(maps_->counters(10).packets, 2u);
    EXPECT_EQ(maps_->counters(1).packets, 1u);
    EXPECT_EQ(maps_->counters(2).packets, 1u);
}

TEST_F(Datapath, FiveLevelsAreAllCharged)
{
    for (uint32_t id = 1; id <= 5; id++)
        add_class({.id = id, .rate_bps = 8'000'000 * id, .parent = id < 5 ? id + 1 : 0});
    run(1000, 1);
    for (uint32_t id = 1; id <= 5; id++) {
        EXPECT_EQ(maps_->counters(id).packets, 1u) << "level " << id;
        EXPECT_GT(maps_->clock(id).tat_ns, 0u) << "level " << id;
    }
}

TEST_F(Datapath, ConcurrentChargesAreConserved)
{
    // 300 Mbit: 64 bytes are 1706.67 ns, so the sub-ns carry is exercised on every packet.
    // 40 s of backlog: the clock stays ahead of now (so every charge is a plain add) unless the
    // runs take longer; they add 3.4 s, within the 60 s horizon.
    add_class({.id = 1, .rate_bps = 300'000'000, .horizon_ns = SHAPER_HORIZON_MAX_NS});
    const uint64_t tat = backlog_class(1, 40 * kSec);
    constexpr uint32_t kThreads = 2, kRepeat = 1'000'000;
    std::vector<std::thread> threads;
    std::vector<uint32_t> ns_per_packet(kThreads);
    for (uint32_t t = 0; t < kThreads; t++)
        threads.emplace_back([&, t] {
            auto frame = tcp_frame();
            __sk_buff ctx{};
            ctx.wire_len = 64;
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                        .data_size_in = static_cast<uint32_t>(frame.size()), .ctx_in = &ctx,
                        .ctx_size_in = sizeof ctx, .repeat = kRepeat);
            EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0);
            ns_per_packet[t] = opts.duration;
        });
    for (auto& t : threads)
        t.join();

    const unsigned __int128 total = (unsigned __int128)kThreads * kRepeat * 64 * ns_per_byte_fp(300'000'000);
    ClassClock clock = maps_->clock(1);
    ClassCounters c = maps_->counters(1);
    // Each CPU charged its packets' exact time plus what it banked rounding, under 1 ns. The
    // clock holds that, and what the CPUs' slices left unused (bpf/slice.h): each CPU's open
    // slice, and the tails too short for the next packet (rounding makes charges differ by
    // 1 ns, so a tail of under 1 ns per packet of the slice).
    const unsigned __int128 charged = total + c.clock_carry;
    const unsigned __int128 held = (unsigned __int128)(clock.tat_ns - tat) << 32;
    EXPECT_GE(held, charged);
    EXPECT_LE(held, charged + ((unsigned __int128)(kThreads * SHAPER_SLICE_MAX_NS + kThreads * kRepeat) << 32));
    EXPECT_LT(c.clock_carry, uint64_t(kThreads) << 32);
    EXPECT_EQ(c.packets, uint64_t(kThreads) * kRepeat);
    EXPECT_EQ(c.bytes, uint64_t(kThreads) * kRepeat * 64);
    EXPECT_EQ(c.drops_horizon, 0u);
    std::printf("test_run duration, 1 class, 2 threads: %u and %u ns/packet\n", ns_per_packet[0],
                ns_per_packet[1]);
}

TEST_F(Datapath, UnclassifiedPacketsPassUnshapedAndAreCounted)
{
    set_default_class(0);
    Verdict v = run(1000, 2, 0);
    EXPECT_EQ(v.action, kPass);
    EXPECT_EQ(v.tstamp, 0u);
    set_default_class(7);  // a default class that is not configured counts the same
    run(500, 1, 0);
    ClassCounters c = maps_->counters(0);
    EXPECT_EQ(c.packets, 2u);
    EXPECT_EQ(c.segments, 3u);
    EXPECT_EQ(c.bytes, 1500u);
}

TEST_F(Datapath, PoliceModeDropsBeyondTheHorizonAndDoesNotStamp)
{
    set_default_class(1, SHAPER_MODE_POLICE);
    // 8 kbit: a packet is a second of clock, so the time the runs take (long in an emulated VM)
    // does not free a slot. 5 s of horizon: 5 KB of tolerance.
    add_class({.id = 1, .rate_bps = 8'000, .horizon_ns = 5 * kSec});
    int passed = 0, dropped = 0;
    for (int i = 0; i < 20; i++) {
        const uint64_t clock = tat(1);
        Verdict v = run(1000, 1, 0);
        EXPECT_EQ(v.tstamp, 0u);
        (v.action == kPass ? passed : dropped)++;
        // Admitted while the packet leaves within the horizon of its now, in [before, after].
        if (clock <= v.before + 5 * kSec) {
            EXPECT_EQ(v.action, kPass) << "packet " << i;
        }
        if (clock > v.after + 5 * kSec) {
            EXPECT_EQ(v.action, kTcActShot) << "packet " << i;
        }
    }
    EXPECT_GE(passed, 6);  // the packet at now, then 5 s of tolerance at 1 s each
    EXPECT_EQ(maps_->counters(1).drops_horizon, uint64_t(dropped));
    EXPECT_EQ(maps_->counters(1).packets, uint64_t(passed));
}

// CoDel on the virtual backlog: it acts only after the delay has stayed above target for an
// interval, then every interval/sqrt(count); it marks ECN-capable packets, drops the others,
// and rests once the delay falls below target.
class Aqm : public Datapath {
protected:
    struct Sent {
        int action;
        uint8_t ecn;  // the ECN bits of the frame that left
        uint64_t before, after;  // the run's now lay between these
    };

    Sent send(uint8_t ecn)
    {
        auto frame = test::build_frame({.ecn = ecn});
        std::vector<uint8_t> out(frame.size() + 64);
        __sk_buff ctx{};
        ctx.wire_len = uint32_t(frame.size());
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                    .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(out.size()),
                    .ctx_in = &ctx, .ctx_size_in = sizeof ctx);
        const uint64_t before = now_ns();
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0);
        return {int(opts.retval), uint8_t(out[15] & 3), before, now_ns()};
    }

    // CoDel's state, read back: when it will act (first_above_ns, drop_next_ns).
    shaper_class_aqm aqm_state()
    {
        shaper_class_aqm state{};
        const uint32_t id = 1;
        EXPECT_EQ(bpf_map_lookup_elem(program_->map_fd("shaper_class_aqm"), &id, &state), 0);
        return state;
    }

    // Seconds of delay: the backlog does not drain below target while a test runs.
    static constexpr uint64_t kAqmBacklog = 30 * kSec;

    void add_aqm_class(bool ecn)
    {
        add_class({.id = 1, .rate_bps = 1'000'000'000, .horizon_ns = 60 * kSec, .ecn = ecn,
                   .aqm_target_ns = 1'000'000, .aqm_interval_ns = 20'000'000},
                  true);
    }

    static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
};

// A send CoDel may not act on is one whose run ended before CoDel's next instant, read back;
// each sleep outlasts the interval, so the send after it must be acted on, however slow the runs.
TEST_F(Aqm, ActsAfterAnIntervalAboveTargetThenAtTheControlLawPace)
{
    add_aqm_class(false);
    backlog_class(1, kAqmBacklog);  // target 1 ms
    int drops = 0;
    EXPECT_EQ(send(0).action, kPass);  // the first delay above target starts the interval
    const uint64_t acts_from = aqm_state().first_above_ns;
    for (int i = 0; i < 4; i++) {
        Sent s = send(0);
        drops += s.action == kTcActShot;
        if (s.after < acts_from) {
            EXPECT_EQ(s.action, kPass) << "acting before an interval above target";
        }
    }
    sleep_ms(25);
    EXPECT_EQ(send(0).action, kTcActShot);
    const uint64_t next = aqm_state().drop_next_ns;
    Sent s = send(0);
    drops += s.action == kTcActShot;
    if (s.after < next) {
        EXPECT_EQ(s.action, kPass);  // the next one only interval/sqrt(count) later
    sleep_ms(22);
    }
    EXPECT_EQ(send(0).action, kTcActShot);
    ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_aqm, 2u + drops);
    EXPECT_EQ(c.ecn_marks, 0u);
    EXPECT_EQ(c.drops_horizon, 0u);
}

TEST_F(Aqm, MarksEcnCapablePacketsInsteadOfDropping)
{
    add_aqm_class(true);
    backlog_class(1, kAqmBacklog);
    EXPECT_EQ(send(2).ecn, 2);  // ECT(0) passes untouched before the interval
    sleep_ms(25);
    Sent ect = send(2);
    EXPECT_EQ(ect.action, kPass);
    EXPECT_EQ(ect.ecn, 3);  // CE
    sleep_ms(22);
    EXPECT_EQ(send(0).action, kTcActShot);  // not ECN-capable: dropped even with ECN on
    ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.ecn_marks, 1u);
    EXPECT_EQ(c.drops_aqm, 1u);
}

TEST_F(Aqm, RestsOnceTheDelayFallsBelowTarget)
{
    add_aqm_class(false);
    backlog_class(1, kAqmBacklog);
    send(0);
    sleep_ms(25);
    EXPECT_EQ(send(0).action, kTcActShot);
    backlog_class(1, 0);  // the backlog drained
    EXPECT_EQ(send(0).action, kPass);
    backlog_class(1, kAqmBacklog);
    EXPECT_EQ(send(0).action, kPass) << "a new episode needs a new interval above target";
    const uint64_t acts_from = aqm_state().first_above_ns;
    int drops = 0;
    for (int i = 0; i < 2; i++) {
        Sent s = send(0);
        drops += s.action == kTcActShot;
        if (s.after < acts_from) {
            EXPECT_EQ(s.action, kPass) << "a new episode needs a new interval above target";
        }
    }
    EXPECT_EQ(maps_->counters(1).drops_aqm, 1u + drops);
}

TEST_F(Aqm, OffMeansNoMarksNoDrops)
{
    add_class({.id = 1, .rate_bps = 1'000'000'000, .horizon_ns = 60 * kSec,
               .aqm_target_ns = 1'000'000, .aqm_interval_ns = 20'000'000},
              false);
    backlog_class(1, kAqmBacklog);
    send(2);
    sleep_ms(25);
    EXPECT_EQ(send(2).ecn, 2);
    EXPECT_EQ(send(0).action, kPass);
    EXPECT_EQ(maps_->counters(1).drops_aqm + maps_->counters(1).ecn_marks, 0u);
}

// Fair shares among bulk flows: a flow charged more than the last epoch's share (plus an eighth
// and two frames) in the current epoch is marked (ECN-capable) or dropped, once per epoch; flows
// within their share never are, and nothing happens while the backlog is below the CoDel target.
class Fair : public Aqm {
protected:
    static constexpr uint64_t kLongEpoch = 60 * kSec;

    // 8 Mbit: a 1000-byte packet is 1 ms of class time; the share is 10 ms, so a flow is above
    // it past 10 + 1.25 + 1.538 (a frame) ms: at its 13th packet.
    void add_fair_class(uint64_t backlog_ns, bool ecn = true)
    {
        add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 60 * kSec, .ecn = ecn}, false,
                  false, true);
        ClassClock clock{};
        clock.tat_ns = now_ns() + backlog_ns;
        clock.fair_epoch_ns = now_ns();
        clock.fair_epoch_len_ns = kLongEpoch;  // it does not end while the test runs
        clock.fair_epoch_tat_ns = clock.tat_ns;
        clock.fair_share_ns = 10'000'000;
        clock.fair_epoch = 5;
        maps_->write_clock(1, clock);
    }

    // Ends the current epoch 1 ms ago, after a length long enough (up to a minute) that the
    // packet which rolls it over still sees a whole epoch, however slow the run.
    void end_epoch()
    {
        ClassClock clock = maps_->clock(1);
        const uint64_t now = now_ns();
        clock.fair_epoch_len_ns = std::min(kLongEpoch, now / 2);
        clock.fair_epoch_ns = now - clock.fair_epoch_len_ns - 1'000'000;
        maps_->write_clock(1, clock);
    }

    // Starts the next epoch now with the same share (10 ms) and no flow counted yet.
    void next_epoch()
    {
        ClassClock clock = maps_->clock(1);
        clock.fair_epoch++;
        clock.fair_epoch_ns = now_ns();
        clock.fair_flows = 0;
        maps_->write_clock(1, clock);
    }

    Sent send_flow(uint16_t sport, uint8_t ecn)
    {
        auto frame = test::build_frame({.sport = sport, .ecn = ecn});
        std::vector<uint8_t> out(frame.size() + 64);
        __sk_buff ctx{};
        ctx.wire_len = 1000;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                    .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(out.size()),
                    .ctx_in = &ctx, .ctx_size_in = sizeof ctx);
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0);
        return {int(opts.retval), uint8_t(out[15] & 3)};
    }
};

TEST_F(Fair, AFlowAboveItsShareIsMarkedOncePerEpochOthersNever)
{
    add_fair_class(10 * kSec);
    for (int i = 1; i <= 12; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << " is within the share";
    EXPECT_EQ(send_flow(1000, 2).ecn, 3) << "the 13th is above it: CE";
    for (int i = 14; i <= 30; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2)
            << "packet " << i << ": once per epoch, and past twice the share only signalled "
            << "in a first epoch there (TCP halves a round trip after the mark)";
    next_epoch();
    for (int i = 1; i <= 12; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << " of the next epoch";
    EXPECT_EQ(send_flow(1000, 2).ecn, 3) << "marked again";
    for (int i = 14; i <= 23; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "once per epoch";
    // Past twice the share plus two frames (23.076 ms) in a second epoch running: it has not
    // backed off, and the rest of the epoch is dropped, ECN or not.
    for (int i = 24; i <= 30; i++)
        ASSERT_EQ(send_flow(1000, 2).action, kTcActShot) << "packet " << i;
    for (int i = 0; i < 10; i++)
        ASSERT_EQ(send_flow(2000, 2).ecn, 2) << "another flow within its share";
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.fair_marks, 2u);
    EXPECT_EQ(c.drops_fair, 7u);
    EXPECT_EQ(c.packets, 30u + 23u + 10u);
    EXPECT_EQ(maps_->clock(1).fair_flows, 2u);
}

// A flood is a flow past twice its share epoch after epoch: one that came back within it for an
// epoch (TCP that halved) starts over, with a first epoch past it only signalled.
TEST_F(Fair, AFlowBackWithinTwiceItsShareIsNoFloodAgainUntilTwoEpochsPastIt)
{
    add_fair_class(10 * kSec);
    // 30 packets of 1 ms in an epoch, then the next: how many were dropped.
    auto past_twice = [&] {
        int dropped = 0;
        for (int i = 1; i <= 30; i++)
            dropped += send_flow(1000, 2).action == kTcActShot;
        next_epoch();
        return dropped;
    };
    EXPECT_EQ(past_twice(), 0) << "the first epoch past twice the share";
    EXPECT_EQ(past_twice(), 7) << "the second";
    EXPECT_EQ(past_twice(), 7) << "a flood stays one";
    for (int i = 1; i <= 15; i++)  // within twice its share for a whole epoch
        ASSERT_EQ(send_flow(1000, 2).action, kPass);
    next_epoch();
    EXPECT_EQ(past_twice(), 0) << "back past twice the share after an epoch within it";
    EXPECT_EQ(past_twice(), 7) << "and a second epoch running";
}

TEST_F(Fair, NotEcnCapableIsDroppedAndChargedNowhere)
{
    add_fair_class(10 * kSec, true);
    for (int i = 1; i <= 12; i++)
        ASSERT_EQ(send_flow(1000, 0).action, kPass);
    const uint64_t tat = maps_->clock(1).tat_ns;
    EXPECT_EQ(send_flow(1000, 0).action, kTcActShot);
    EXPECT_EQ(maps_->clock(1).tat_ns, tat);
    EXPECT_EQ(send_flow(1000, 0).action, kPass);
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_fair, 1u);
    EXPECT_EQ(c.packets, 13u);
    // With ECN off even ECN-capable packets are dropped.
    add_fair_class(10 * kSec, false);
    for (int i = 1; i <= 12; i++)
        ASSERT_EQ(send_flow(3000, 2).action, kPass);
    EXPECT_EQ(send_flow(3000, 2).action, kTcActShot);
}

TEST_F(Fair, NothingWhileTheBacklogIsBelowTarget)
{
    add_fair_class(2'000'000);
    for (int i = 0; i < 40; i++) {
        // 2 ms of backlog before each packet, under the 5 ms target: a flow far above its share.
        ClassClock clock = maps_->clock(1);
        clock.tat_ns = now_ns() + 2'000'000;
        maps_->write_clock(1, clock);
        ASSERT_EQ(send_flow(1000, 2).ecn, 2);
    }
    EXPECT_EQ(maps_->counters(1).fair_marks, 0u);
}

TEST_F(Fair, EpochsEndWithTheChargePerFlowAsTheShare)
{
    add_fair_class(10 * kSec);
    for (int i = 0; i < 6; i++)
        send_flow(1000, 2);
    for (int i = 0; i < 4; i++)
        send_flow(2000, 2);
    // End the epoch. Its share is the 10 ms charged over the 2 flows.
    end_epoch();
    send_flow(3000, 2);
    ClassClock clock = maps_->clock(1);
    EXPECT_EQ(clock.fair_epoch, 6u);
    EXPECT_EQ(clock.fair_share_ns, 5'000'000u);
    // The packet that ended it is of the new epoch, but a flow counts once it has asked for more
    // than the sparse allowance (3.076 ms here): at its fourth packet.
    EXPECT_EQ(clock.fair_flows, 0u);
    EXPECT_EQ(clock.fair_epoch_len_ns, SHAPER_FAIR_EPOCH_NS);  // few flows: the shortest epoch
    // An epoch that ended long ago (the class was idle) gives no share: nobody is acted on.
    clock.fair_epoch_ns = now_ns() - 3 * SHAPER_FAIR_EPOCH_NS;
    maps_->write_clock(1, clock);
    send_flow(3000, 2);
    EXPECT_EQ(maps_->clock(1).fair_share_ns, 0u);
    // Many flows: the epoch grows so that a share is sixteen frames (at 8 Mbit two frames are
    // 3.076 ms; 40 flows x 8 x 3.076 ms = 984 ms). The epoch lasts until the test ends it.
    clock = maps_->clock(1);
    clock.fair_epoch_len_ns = kLongEpoch;  // the sends all fall in this epoch
    maps_->write_clock(1, clock);
    for (int i = 0; i < 3; i++)
        send_flow(3000, 2);
    for (uint16_t f = 0; f < 39; f++)
        for (int i = 0; i < 4; i++)
            send_flow(uint16_t(4000 + f), 2);
    EXPECT_EQ(maps_->clock(1).fair_flows, 40u);
    end_epoch();
    send_flow(3000, 2);
    clock = maps_->clock(1);
    EXPECT_EQ(clock.fair_epoch_len_ns, 40 * 8 * 3'076'000u);
    clock.fair_epoch_len_ns = kLongEpoch;  // the next sends all fall in this epoch
    maps_->write_clock(1, clock);
    // An epoch of one flow gives no share: a lone flow has nobody to be unfair to.
    for (int i = 0; i < 3; i++)
        send_flow(3000, 2);
    EXPECT_EQ(maps_->clock(1).fair_flows, 1u);
    end_epoch();
    send_flow(3000, 2);
    EXPECT_EQ(maps_->clock(1).fair_share_ns, 0u);
}

constexpr uint64_t kMs = 1'000'000;

// A lone flow has no share, and a local socket's queue is bounded by TCP small queues: however
// long the backlog (up to the horizon), it is never signalled.
TEST_F(Fair, ALoneLocalFlowIsNeverSignalledWhateverTheBacklog)
{
    add_fair_class(10 * kSec);
    ClassClock clock = maps_->clock(1);
    clock.fair_share_ns = 0;
    maps_->write_clock(1, clock);
    for (int i = 1; i <= 30; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i;
    EXPECT_EQ(maps_->counters(1).fair_marks + maps_->counters(1).drops_fair, 0u);
}

// A queue no socket holds (forwarded packets; every packet here: every_packet_forwarded) is
// bounded by its senders' losses and marks alone. Past 100 ms of backlog (the shortest epoch) a
// flow above its share, a lone flow too, is signalled once per epoch, at most one per round
// trip, where before only the horizon (here a minute) stopped it, with a burst of drops; past
// 200 ms, once per 100 ms of the epoch.
class FairForwarded : public Fair {
protected:
    ProgramOptions program_options() const override { return {.every_packet_forwarded = true}; }

    void backlog_and_no_share(uint64_t backlog_ns)
    {
        ClassClock clock = maps_->clock(1);
        clock.tat_ns = now_ns() + backlog_ns;
        clock.fair_share_ns = 0;
        maps_->write_clock(1, clock);
    }
};

TEST_F(FairForwarded, ALoneFlowPastAStandingBacklogIsSignalledOncePerEpoch)
{
    add_fair_class(0);
    backlog_and_no_share(90 * kMs);
    for (int i = 1; i <= 5; i++)  // 90 to 94 ms of backlog (less, as time passes)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << " waits less than 100 ms";
    backlog_and_no_share(150 * kMs);
    EXPECT_EQ(send_flow(1000, 2).ecn, 3) << "past 100 ms: CE";
    for (int i = 1; i <= 30; i++)  // and no flood: a lone flow has no share to be twice past
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << ": once per epoch";
    // In a new epoch a flow is a bulk flow past the sparse allowance (two frames, 3.08 ms).
    next_epoch();
    for (int i = 1; i <= 3; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << " of the next epoch";
    EXPECT_EQ(send_flow(1000, 2).ecn, 3) << "the next epoch: marked again";
    next_epoch();
    for (int i = 1; i <= 3; i++)
        ASSERT_EQ(send_flow(1000, 0).action, kPass);
    const uint64_t before = tat(1);
    EXPECT_EQ(send_flow(1000, 0).action, kTcActShot) << "not ECN-capable: dropped";
    EXPECT_EQ(tat(1), before) << "and charged nowhere";
    EXPECT_EQ(send_flow(1000, 0).action, kPass) << "once per epoch";
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.fair_marks, 2u);
    EXPECT_EQ(c.drops_fair, 1u);
    EXPECT_EQ(c.drops_horizon + c.drops_aqm, 0u);
}

// Below its share a flow is left alone however long the queue: the flows above it are the ones
// to slow down.
TEST_F(FairForwarded, AFlowWithinItsShareIsLeftAlonePastTheStandingBacklog)
{
    add_fair_class(150 * kMs);  // share 10 ms: a flow is within it up to its 10th packet
    for (int i = 1; i <= 10; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << " is within the share";
    EXPECT_EQ(send_flow(1000, 2).ecn, 3) << "the 11th is above it, past 100 ms of backlog: CE";
    EXPECT_EQ(send_flow(2000, 2).ecn, 2) << "another flow within its share";
}

// An epoch of many flows or at a low rate lasts up to 1 s (sixteen frames a flow): signalled
// once an epoch, eight forwarded flows into 2 Mbit/s stood 0.2-0.5 s deep, past TCP's least
// retransmission timeout. Past 200 ms of backlog a flow is signalled once per 100 ms of the
// epoch, above its share pro rata: what the last epoch's share allows by 100 ms from now.
TEST_F(FairForwarded, PastTheLeastTimeoutAFlowIsSignalledOncePer100MsAboveItsShareProRata)
{
    add_fair_class(250 * kMs);
    ClassClock clock = maps_->clock(1);
    clock.fair_share_ns = 10 * kMs * (kLongEpoch / (100 * kMs));  // 10 ms by 100 ms into it
    maps_->write_clock(1, clock);
    // Packets of 1 ms each until one is marked: past 10 ms, and what the share allows by 100 ms
    // past the packet's time, 0.1 ms more for each ms the run took (checked on the clock).
    int sent = 0;
    auto charge_at_mark = [&] {
        for (int n = 1; n <= 400; n++)
            if (++sent, send_flow(1000, 2).ecn == 3)
                return sent;
        return 0;
    };
    auto allowed_ms = [&](uint64_t slot_ms) {
        return double(slot_ms + 100) / 10 + double(now_ns() - maps_->clock(1).fair_epoch_ns - slot_ms * kMs) / 1e7;
    };
    int at = charge_at_mark();
    EXPECT_GE(at, 11) << "within the share pro rata until its 11th";
    EXPECT_LE(at, allowed_ms(0) + 1) << "past 200 ms of backlog, above it: CE";
    const uint64_t start = maps_->clock(1).fair_epoch_ns;
    int more = 0;
    for (int i = 0; i < 5; i++, sent++)  // at most one a 100 ms, however slow the run
        more += send_flow(1000, 2).ecn == 3;
    EXPECT_LE(uint64_t(more), (now_ns() - start) / (100 * kMs)) << "once per 100 ms";
    clock = maps_->clock(1);
    clock.fair_epoch_ns = now_ns() - 100 * kMs;  // the same epoch, 100 ms on: 20 ms pro rata
    maps_->write_clock(1, clock);
    at = charge_at_mark();
    EXPECT_GE(at, 21) << "within the share pro rata until its 21st";
    EXPECT_LE(at, allowed_ms(100) + 1) << "the epoch's next 100 ms: CE again";
    EXPECT_EQ(maps_->clock(1).fair_epoch, 5u) << "in the same epoch";
    EXPECT_EQ(maps_->counters(1).fair_marks, 2u + more);
}

// Fair shares for packets a local TCP socket sent (every packet here: every_packet_local): a
// flow above its share is held to it, never marked or dropped; its packets leave in order.
class FairHold : public Fair {
protected:
    ProgramOptions program_options() const override { return {.every_packet_local = true}; }

    // The class of Fair's tests, its last share measured among `flows` flows.
    void add_fair_class(uint32_t flows, uint64_t backlog_ns = 10 * kSec, bool aqm = false)
    {
        Fair::add_fair_class(backlog_ns);
        if (aqm)
            add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 60 * kSec,
                       .aqm_target_ns = 1'000'000, .aqm_interval_ns = 20'000'000},
                      true, false, true);
        ClassClock clock = maps_->clock(1);
        clock.fair_share_flows = flows;
        maps_->write_clock(1, clock);
    }

    Verdict send_held(uint16_t sport, uint8_t ecn = 0)
    {
        auto frame = test::build_frame({.sport = sport, .ecn = ecn});
        __sk_buff ctx{};
        ctx.wire_len = 1000;
        return run_ctx(ctx, frame.data(), uint32_t(frame.size()));
    }
};


TEST_F(FairHold, AFlowAboveItsShareIsHeldToItsOwnClockNeverMarkedOrDropped)
{
    add_fair_class(4);
    const uint64_t tat0 = tat(1);  // where the class's clock stood when the epoch began
    for (int i = 1; i <= 10; i++) {  // within the 10 ms share: at the class's slots, 1 ms apart
        const Verdict v = send_held(1000);
        ASSERT_EQ(v.action, kPass);
        EXPECT_EQ(v.tstamp, tat0 + uint64_t(i - 1) * kMs) << "packet " << i;
    }
    // Above it (not ECN-capable, where Fair's class drops): on the flow's own clock at its
    // share, a quarter of the class (4 flows), from the epoch's start: what it was charged
    // before each packet, times 4. Past twice its share too, and never before its class slot.
    for (int i = 11; i <= 28; i++) {
        const uint64_t slot = tat(1);
        const Verdict v = send_held(1000);
        ASSERT_EQ(v.action, kPass) << "packet " << i;
        EXPECT_EQ(v.tstamp, tat0 + uint64_t(i - 1) * 4 * kMs) << "packet " << i;
        EXPECT_GE(v.tstamp, slot) << "never before its class slot";
    }
    // Another flow within its share keeps the class's slots.
    const uint64_t slot = tat(1);
    EXPECT_EQ(send_held(2000).tstamp, slot);
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.fair_holds, 18u);
    EXPECT_EQ(c.drops_fair + c.fair_marks + c.drops_aqm + c.drops_horizon, 0u);
    EXPECT_EQ(c.packets, 29u);
    EXPECT_EQ(tat(1), tat0 + 29 * kMs) << "every packet charged at its class slot";
}

// A held packet leaves at most 250 ms after its class slot: over any interval T the class's
// departures stay within burst + rate x (T + 250 ms). Here the held flow falls 1 ms further
// behind its slots at each packet past its share (its clock 3 ms a packet, its slots 2 ms apart),
// one-packet flows between.
TEST_F(FairHold, HeldPacketsLeaveWithinTheCapOfTheirSlotsAndTheClassWithinItsBound)
{
    add_fair_class(3);
    std::vector<uint64_t> departures;
    for (int i = 0; i < 60; i++) {
        const uint64_t slot = tat(1);
        const Verdict v = send_held(1000);
        ASSERT_EQ(v.action, kPass);
        EXPECT_GE(v.tstamp, slot);
        EXPECT_LE(v.tstamp, slot + SHAPER_FAIR_HOLD_MAX_NS) << "packet " << i;
        departures.push_back(v.tstamp);
        const Verdict other = send_held(uint16_t(3000 + i));  // one-packet flows: never held
        EXPECT_EQ(other.tstamp, tat(1) - kMs);
        departures.push_back(other.tstamp);
    }
    EXPECT_EQ(maps_->counters(1).fair_holds, 50u);
    std::sort(departures.begin(), departures.end());
    // 1000 bytes = 1 ms of class time; the burst (0 here) adds nothing.
    for (size_t a = 0; a < departures.size(); a++)
        for (size_t b = a; b < departures.size(); b++) {
            const uint64_t t = departures[b] - departures[a];
            ASSERT_LE((b - a + 1) * kMs, t + SHAPER_FAIR_HOLD_MAX_NS + kMs)
                << "packets " << a << ".." << b << " within " << t << " ns";
        }
}

// A flow whose share's spacing would hold it more than 250 ms past its class slot (300 flows:
// 300 ms per packet) cannot be kept to its share by a hold: it is signalled as any other flow.
TEST_F(FairHold, AFlowAHoldCannotKeepToItsShareIsSignalledInstead)
{
    add_fair_class(300);
    for (int i = 1; i <= 12; i++)
        ASSERT_EQ(send_flow(1000, 2).ecn, 2) << "packet " << i << " is within the share";
    EXPECT_EQ(send_flow(1000, 2).ecn, 3) << "the 13th is above it: CE, not held";
    EXPECT_EQ(send_flow(1000, 0).action, kPass) << "once per epoch";
    EXPECT_EQ(maps_->counters(1).fair_holds, 0u);
    EXPECT_EQ(maps_->counters(1).fair_marks, 1u);
}

// Once the class's backlog is gone, a held flow's next packet still leaves after its last one:
// sch_fq orders a flow's packets by time, and a reordered TCP flow retransmits.
TEST_F(FairHold, AFlowsLaterPacketsNeverOvertakeItsHeldOnes)
{
    add_fair_class(8);
    uint64_t last = 0;
    for (int i = 1; i <= 16; i++)  // 6 held, each 7 ms further behind its slot
        last = send_held(1000).tstamp;
    ASSERT_GT(maps_->counters(1).fair_holds, 0u);
    ASSERT_GT(maps_->clock(1).fair_held_ns, 0u);
    backlog_class(1, 0);  // the class idle again: its clock behind now
    ClassClock clock = maps_->clock(1);
    clock.fair_held_ns = last;
    maps_->write_clock(1, clock);
    const Verdict v = send_held(1000);
    EXPECT_EQ(v.action, kPass);
    EXPECT_GE(v.tstamp, last) << "after the flow's held packet, not at the idle class's now";
    EXPECT_LT(send_held(2000).tstamp, last) << "another flow does not wait for it";
}

// CoDel acting on the class marks an ECN-capable packet of a local socket and lets one that
// cannot be marked pass: its socket already waits for it.
TEST_F(FairHold, CodelPassesWhatItCannotMark)
{
    add_fair_class(0, kAqmBacklog, true);  // a 10 ms share: these small packets stay within it
    send(0);
    sleep_ms(25);  // the backlog stays above the 1 ms target for the 20 ms interval
    backlog_class(1, kAqmBacklog);
    EXPECT_EQ(send(0).action, kPass) << "CoDel's first act, on a packet it cannot mark";
    EXPECT_EQ(maps_->counters(1).drops_aqm, 0u);
    sleep_ms(25);  // past interval / sqrt(2): its next act
    backlog_class(1, kAqmBacklog);
    EXPECT_EQ(send(2).ecn, 3) << "CoDel still marks an ECN-capable packet";
}

// Sparse flows: a flow with nothing of its own queued leaves ahead of the class backlog, within
// an allowance of two frames at the class rate; it is charged like any other packet.
class Sparse : public Aqm {
protected:
    Verdict send_flow(uint16_t sport, uint32_t wire_len, uint64_t tstamp = 0)
    {
        auto frame = test::build_frame({.sport = sport});
        __sk_buff ctx{};
        ctx.wire_len = wire_len;
        ctx.tstamp = tstamp;
        return run_ctx(ctx, frame.data(), uint32_t(frame.size()));
    }
};

// 8 kbit: 500 bytes are half a second, so the allowance cannot refill while a test runs, even in
// a slow emulated VM.
constexpr uint64_t kSlowRate = 8'000, kNsPerByte = 1'000'000;

TEST_F(Sparse, AFlowWithNothingQueuedLeavesNowOneWithAQueuedPacketWaits)
{
    add_class({.id = 1, .rate_bps = kSlowRate, .horizon_ns = 60 * kSec}, true, true);
    const uint64_t tat0 = backlog_class(1, 10 * kSec);
    const Verdict first = send_flow(1000, 500);
    EXPECT_GE(first.tstamp, first.before);
    EXPECT_LE(first.tstamp, first.after) << "a flow with nothing queued should leave now";
    // The same flow again: its packet has left, so it is still sparse. The allowance (3076
    // bytes) takes six 500-byte packets at once...
    for (int i = 2; i <= 6; i++) {
        const Verdict v = send_flow(1000, 500);
        EXPECT_LE(v.tstamp, v.after) << "packet " << i;
    }
    // ...the seventh waits until the allowance can take it (0.42 s), not behind the backlog...
    const uint64_t allowance_tat = maps_->clock(1).sparse_tat_ns;
    const Verdict seventh = send_flow(1000, 500);
    expect_departure(seventh, allowance_tat + 500 * kNsPerByte + 1 - 3076 * kNsPerByte);
    EXPECT_LT(seventh.tstamp, tat0);
    // ...and until it has left, the flow has a packet queued: the eighth waits behind the backlog
    // and the seven early packets, even once the allowance refills.
    ClassClock clock = maps_->clock(1);
    clock.sparse_tat_ns = 0;
    maps_->write_clock(1, clock);
    const Verdict eighth = send_flow(1000, 500);
    if (eighth.after < seventh.tstamp) {
        expect_departure(eighth, tat0 + 7 * 500 * kNsPerByte);
        EXPECT_EQ(maps_->counters(1).sparse, 7u);
    }
    EXPECT_EQ(maps_->clock(1).tat_ns, tat0 + 8 * 500 * kNsPerByte);  // every packet charged
}

TEST_F(Sparse, EarlyDeparturesStayWithinTheAllowance)
{
    add_class({.id = 1, .rate_bps = kSlowRate, .horizon_ns = 60 * kSec}, true, true);
    const uint64_t tat = backlog_class(1, 10 * kSec);
    const uint64_t start = now_ns();
    int early = 0;
    for (uint16_t flow = 1; flow <= 10; flow++) {
        const uint64_t backlog = maps_->clock(1).tat_ns;
        const Verdict v = send_flow(flow, 1000);
        if (v.tstamp >= backlog)
            continue;
        early++;
        // A token bucket at the class rate, 3076 bytes deep: by each departure, at most the
        // depth plus the rate times the time since the start has left early.
        EXPECT_LE(uint64_t(early) * 1000, 3076 + (v.tstamp - start) / kNsPerByte) << "flow " << flow;
        if (early <= 3) {
            EXPECT_LE(v.tstamp, v.after) << "within the depth: at once";
        }
    }
    // Three 1000-byte packets at once, three more as the bucket refills (1 s each, the last at
    // ~2.92 s); the seventh would wait longer than the bucket's depth (~3.92 s > 3.08 s): it
    // joins the backlog, as do the rest, unless the runs took long enough to refill the bucket.
    // One-packet flows get no more than the bucket.
    EXPECT_GE(early, 6);
    EXPECT_EQ(maps_->counters(1).sparse, uint64_t(early));
    EXPECT_EQ(maps_->clock(1).tat_ns, tat + 10 * 1000 * kNsPerByte);
}

TEST_F(Sparse, OffOrAnIdleClassChangesNothing)
{
    add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 10 * kSec}, true, false);
    const uint64_t tat = backlog_class(1, kSec);
    expect_departure(send_flow(7, 500), tat);
    add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 10 * kSec}, true, true);
    backlog_class(1, 0);
    send_flow(8, 500);
    EXPECT_EQ(maps_->counters(1).sparse, 0u) << "no backlog: nobody needs to jump it";
}

}  // namespace

// Not a timing test: the verifier's work is a count. Paths that multiply (a constant carried
// across the class walk, a parser inlined with all its branches) once made it 190k-860k, four
// times the count of the day and more, near the 1M limit of 6.1's verifier and seconds of
// every attach.
// Kernels walk the same program differently (2026-12-05, fair shares holding flows sent through
// a bridge): 80,462 on 6.18, 81,884 on 6.12, 95,258 on 7.3, 109,332 on 6.1, whose verifier
// tracks every scalar exactly in a program with subprograms: any value carried as a known
// constant on one path and not on another has it check the rest twice. Each level of the class
// walk's two passes is a global function (edt.h), checked once whatever the depth; inlined
// eight times each, they took 6.1 to 189,011. The bound stands 10 % above 6.1 and more above
// the others: a multiplication trips it on every kernel.
TEST_F(Datapath, TheVerifierChecksTheProgramInFewInstructions)
{
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    ASSERT_EQ(bpf_obj_get_info_by_fd(program_->prog_fd(), &info, &len), 0);
    std::printf("verified_insns %u\n", info.verified_insns);
    EXPECT_GT(info.verified_insns, 0u);
    EXPECT_LT(info.verified_insns, 120'000u) << "a change multiplied the verifier's paths";
}
