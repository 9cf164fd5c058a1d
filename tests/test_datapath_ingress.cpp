// The receive side's datapath through BPF_PROG_TEST_RUN: the same charge as egress (every
// segment's wire bytes, GRO packets included, at every level), and a verdict from the virtual
// backlog instead of a departure time: pass below the CoDel target, CE-mark ECN-capable packets
// at the control law's pace above it, box one flow at a time above half the horizon, drop
// beyond the horizon uncharged.
#include <chrono>
#include <thread>

#include "datapath_fixture.h"
#include "core/direction.h"
#include "packets.h"
#include "program_cache.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr int kPass = -1;  // TC_ACT_UNSPEC: on to the next program
constexpr int kTcActShot = 2;
constexpr uint32_t kFrame = 1514;  // a full Ethernet frame: 14 + 20 + 20 + 1460

class Ingress : public Datapath {
protected:
    void SetUp() override
    {
        ProgramOptions options;
        options.ingress = true;
        program_ = &fresh_program(options);
        maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*program_));
        set_default_class(1, SHAPER_MODE_POLICE);
    }

    struct Received {
        int action;
        uint8_t ecn;      // the ECN bits of the packet passed on
        uint64_t tstamp;  // as the program left it
        uint64_t before, after;
    };

    // A received TCP frame of `len` bytes (headers as build_frame makes them: 54 bytes), `segs`
    // GRO segments of `gso_size` payload.
    Received receive(uint8_t ecn, uint32_t len = kFrame, uint32_t segs = 0, uint32_t gso_size = 0,
                     uint16_t sport = 40000)
    {
        auto frame = test::build_frame({.sport = sport, .ecn = ecn});
        frame.resize(len, 0xab);
        std::vector<uint8_t> out(frame.size() + 64);
        __sk_buff ctx{};
        // wire_len stays 0 (the test run's len): ingress charges from len, which counts the L2
        // header tc ingress pulls from wire_len.
        ctx.gso_segs = segs;
        ctx.gso_size = gso_size;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                    .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(out.size()),
                    .ctx_in = &ctx, .ctx_out = &ctx, .ctx_size_in = sizeof ctx,
                    .ctx_size_out = sizeof ctx);
        const uint64_t before = now_ns();
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0) << strerror(errno);
        return {int(opts.retval), uint8_t(out[15] & 3), ctx.tstamp, before, now_ns()};
    }

    // Ingress classes as the CLI makes them: CoDel on, fair shares and sparse flows as egress.
    void add_ingress_class(ClassSpec spec)
    {
        ClassSpec full = class_defaults(Direction::Ingress);
        full.id = spec.id;
        full.rate_bps = spec.rate_bps;
        full.parent = spec.parent;
        full.overhead = spec.overhead;
        full.horizon_ns = spec.horizon_ns;
        full.ecn = spec.ecn;
        full.aqm_target_ns = spec.aqm_target_ns;
        full.aqm_interval_ns = spec.aqm_interval_ns;
        full.sparse = spec.sparse;
        full.fair = spec.fair;
        maps_->write_class_config(spec.id, make_class_config(full, maps_->max_classes(), 2 * kSec));
    }

    void expect_one_flow_boxed(bool ecn);

    // The boxes of a class's flows (shaper_flow_boxes), in slot order.
    std::vector<shaper_flow_box> boxes_of(uint32_t class_id)
    {
        std::vector<shaper_flow_box> out;
        for (uint32_t slot = 0; slot < SHAPER_FLOW_BOXES; slot++) {
            shaper_flow_box box{};
            EXPECT_EQ(bpf_map_lookup_elem(program_->map_fd("shaper_flow_boxes"), &slot, &box), 0);
            if (box.owner >> 32 == class_id)
                out.push_back(box);
        }
        return out;
    }

    shaper_class_aqm aqm_state()
    {
        shaper_class_aqm state{};
        const uint32_t id = 1;
        EXPECT_EQ(bpf_map_lookup_elem(program_->map_fd("shaper_class_aqm"), &id, &state), 0);
        return state;
    }

    // ns a cost takes at a rate, rounded either way (charge.h): the clock moves by this or one more.
    static uint64_t cost_ns(uint64_t bytes, uint64_t rate_bps)
    {
        return bytes * 8'000'000'000ull / rate_bps;
    }

    static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

    // A CoDel class with seconds of virtual backlog: it stays above target while a test runs.
    // One flow sends every packet here, slower than the class rate: sparse flows and fair shares
    // (which would let it past CoDel, egress's tests alike) are off.
    static constexpr uint64_t kBacklog = 30 * kSec;
    void add_codel_class(bool ecn)
    {
        add_ingress_class({.id = 1, .rate_bps = 1'000'000'000, .horizon_ns = 60 * kSec, .ecn = ecn,
                           .sparse = false, .fair = false, .aqm_target_ns = 1'000'000,
                           .aqm_interval_ns = 20'000'000});
    }
};

TEST_F(Ingress, BelowTargetEveryPacketPassesUntouchedAndIsCharged)
{
    add_ingress_class({.id = 1, .rate_bps = 20'000'000, .horizon_ns = 50'000'000});
    for (int i = 0; i < 5; i++) {
        const uint64_t before = tat(1);
        Received r = receive(2);
        EXPECT_EQ(r.action, kPass);
        EXPECT_EQ(r.ecn, 2) << "packet " << i;
        EXPECT_EQ(r.tstamp, 0u) << "nothing is stamped on ingress";
        const uint64_t after = tat(1);
        EXPECT_GE(after, std::max(before, r.before) + cost_ns(kFrame, 20'000'000));
        EXPECT_LE(after, std::max(before, r.after) + cost_ns(kFrame, 20'000'000) + 1);
        backlog_class(1, 0);  // drained: the next one finds no backlog either
    }
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.packets, 5u);
    EXPECT_EQ(c.bytes, 5u * kFrame) << "charged with the L2 header tc ingress pulls";
    EXPECT_EQ(c.ecn_marks + c.drops_aqm + c.drops_horizon + c.fair_marks + c.drops_fair, 0u);
}

// CoDel's control law on the virtual backlog: after an interval above target it marks one
// ECN-capable packet, then the next after interval/sqrt(count); a send it may not act on is
// one whose run ended before its next instant (read back).
TEST_F(Ingress, AboveTargetEcnCapablePacketsAreMarkedAtTheControlLawPace)
{
    add_codel_class(true);
    backlog_class(1, kBacklog);
    EXPECT_EQ(receive(2).ecn, 2) << "the first delay above target starts the interval";
    const uint64_t acts_from = aqm_state().first_above_ns;
    for (int i = 0; i < 3; i++) {
        Received r = receive(2);
        if (r.after < acts_from) {
            EXPECT_EQ(r.ecn, 2) << "marked before an interval above target";
        }
    }
    sleep_ms(25);
    Received first = receive(2);
    EXPECT_EQ(first.action, kPass);
    EXPECT_EQ(first.ecn, 3) << "CE";
    const uint64_t next = aqm_state().drop_next_ns;
    int marks = 1;
    Received r = receive(2);
    EXPECT_EQ(r.action, kPass);
    marks += r.ecn == 3;
    if (r.after < next) {
        EXPECT_EQ(r.ecn, 2) << "the next mark only interval/sqrt(2) later";
    }
    sleep_ms(22);
    Received second = receive(2);
    EXPECT_EQ(second.ecn, 3);
    marks++;
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.ecn_marks, uint64_t(marks));
    EXPECT_EQ(c.drops_aqm + c.drops_horizon, 0u);
}

// Without a queue a lone drop slows a sender little and costs it a retransmission: CoDel
// only marks here, and a packet it cannot mark passes while the backlog is below half the
// horizon (CoDel used to drop it an interval after the target).
TEST_F(Ingress, BelowHalfTheHorizonPacketsNotEcnCapablePassWhereCoDelWouldAct)
{
    add_codel_class(true);
    const uint64_t start = backlog_class(1, kBacklog / 2);  // a quarter of the horizon
    EXPECT_EQ(receive(0).action, kPass);
    sleep_ms(25);
    const uint64_t acts_from = aqm_state().first_above_ns;
    for (int i = 0; i < 3; i++) {
        Received r = receive(0);
        EXPECT_GE(r.before, acts_from) << "CoDel may act: an interval above target has passed";
        EXPECT_EQ(r.action, kPass) << "packet " << i;
        EXPECT_EQ(r.ecn, 0);
    }
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_aqm + c.drops_horizon + c.ecn_marks, 0u);
    EXPECT_EQ(c.packets, 4u);
    EXPECT_GE(tat(1), start + 4 * cost_ns(kFrame, 1'000'000'000));
}

TEST_F(Ingress, EcnOffPacketsBelowHalfTheHorizonPassUnmarked)
{
    add_codel_class(false);
    backlog_class(1, kBacklog / 2);
    receive(2);
    sleep_ms(25);
    Received r = receive(2);
    EXPECT_EQ(r.action, kPass);
    EXPECT_EQ(r.ecn, 2) << "ECN off: never marked";
    EXPECT_EQ(maps_->counters(1).drops_aqm + maps_->counters(1).ecn_marks, 0u);
}

// Above half the horizon one flow is boxed: its packet and every later one of that flow are
// dropped (ECN-capable or not) until the box ends, uncharged; other flows pass, since the class
// boxes no second flow before its next turn (read back from the CoDel entry).
void Ingress::expect_one_flow_boxed(bool ecn)
{
    add_codel_class(ecn);
    const uint64_t clock = backlog_class(1, kBacklog + kBacklog / 4);  // 5/8 of the horizon
    Received boxed = receive(0, kFrame, 0, 0, 40001);
    EXPECT_EQ(boxed.action, kTcActShot);
    EXPECT_EQ(tat(1), clock) << "a boxed packet is charged nowhere";
    const std::vector<shaper_flow_box> boxes = boxes_of(1);
    ASSERT_EQ(boxes.size(), 1u);
    EXPECT_GE(boxes[0].until_ns, boxed.before + SHAPER_BOX_NS);
    EXPECT_LE(boxes[0].until_ns, boxed.after + SHAPER_BOX_NS);
    const uint64_t turn = uint64_t(aqm_state().box_turn) << 20;
    EXPECT_GE(turn + (1u << 20), boxed.before + SHAPER_BOX_NS) << "the next box a box's length later";
    EXPECT_LE(turn, boxed.after + SHAPER_BOX_NS + (1u << 20));

    uint64_t drops = 1, passed = 0;
    for (uint8_t mark : {0, 2}) {
        Received r = receive(mark, kFrame, 0, 0, 40001);
        drops += r.action == kTcActShot;
        passed += r.action == kPass;  // a run stalled past its box: the flow's respite
        if (r.after < boxes[0].until_ns) {
            EXPECT_EQ(r.action, kTcActShot) << "ecn bits " << int(mark) << ": still in its box";
        }
    }
    Received other = receive(0, kFrame, 0, 0, 40002);
    passed += other.action == kPass;
    drops += other.action == kTcActShot;
    if (other.after < turn) {
        EXPECT_EQ(other.action, kPass) << "one flow at a time";
        EXPECT_EQ(boxes_of(1).size(), 1u);
    }
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_aqm, drops);
    EXPECT_EQ(c.drops_horizon + c.ecn_marks, 0u);
    EXPECT_EQ(c.packets, passed) << "only what passes is charged";
}

TEST_F(Ingress, AboveHalfTheHorizonOneFlowIsBoxedAndTheOthersPass)
{
    expect_one_flow_boxed(true);
}

TEST_F(Ingress, EcnOffAboveHalfTheHorizonOneFlowIsBoxedAndTheOthersPass)
{
    expect_one_flow_boxed(false);
}

// Out of its box the flow is let be for the respite: its retransmission timeout's packet gets
// through (another drop would double the sender's timeout), while the class's next box takes
// another flow.
TEST_F(Ingress, AFlowOutOfItsBoxIsNotBoxedAgainInItsRespite)
{
    add_codel_class(false);
    backlog_class(1, kBacklog + kBacklog / 4);
    EXPECT_EQ(receive(0, kFrame, 0, 0, 40001).action, kTcActShot);
    const uint64_t until = boxes_of(1).at(0).until_ns;
    sleep_ms(int(SHAPER_BOX_NS / 1'000'000) + 5);
    backlog_class(1, kBacklog + kBacklog / 4);
    Received back = receive(0, kFrame, 0, 0, 40001);
    ASSERT_GE(back.before, until);
    ASSERT_GE(back.before, uint64_t(aqm_state().box_turn) << 20) << "the class may box again";
    if (back.after < until + SHAPER_BOX_RESPITE_NS) {
        EXPECT_EQ(back.action, kPass) << "in its respite";
    }
    Received next = receive(0, kFrame, 0, 0, 40002);
    EXPECT_EQ(next.action, kTcActShot) << "the class's next box takes another flow";
    EXPECT_EQ(boxes_of(1).size(), 2u);
}

// Fair shares mark a flow above its share; one that cannot be marked passes here (a lone drop
// would cost a retransmission for little), while a flood (past twice its share two epochs
// running) is still dropped.
// 8 Mbit: a 1000-byte packet is 1 ms of class time; the share 10 ms, so the 13th packet is above
// it and the 24th past twice it (as egress's Fair tests).
TEST_F(Ingress, AFlowAboveItsFairShareThatCannotBeMarkedPassesAFloodIsDropped)
{
    add_ingress_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 60 * kSec, .ecn = true,
                       .sparse = false, .fair = true, .aqm_target_ns = 1'000'000,
                       .aqm_interval_ns = 20'000'000});
    ClassClock clock{};
    clock.tat_ns = now_ns() + 10 * kSec;  // a sixth of the horizon: no box
    clock.fair_epoch_ns = now_ns();
    clock.fair_epoch_len_ns = 60 * kSec;
    clock.fair_epoch_tat_ns = clock.tat_ns;
    clock.fair_share_ns = 10'000'000;
    clock.fair_epoch = 5;
    maps_->write_clock(1, clock);
    for (int i = 1; i <= 26; i++)
        ASSERT_EQ(receive(0, 1000, 0, 0, 1000).action, kPass)
            << "packet " << i << ": a first epoch past twice the share is only signalled";
    clock = maps_->clock(1);
    clock.fair_epoch++;
    clock.fair_epoch_ns = now_ns();
    maps_->write_clock(1, clock);
    for (int i = 1; i <= 23; i++)
        ASSERT_EQ(receive(0, 1000, 0, 0, 1000).action, kPass) << "packet " << i << " of the next epoch";
    for (int i = 24; i <= 26; i++)
        ASSERT_EQ(receive(0, 1000, 0, 0, 1000).action, kTcActShot)
            << "packet " << i << ": past twice its share a second epoch running, a flood";
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_fair, 3u);
    EXPECT_EQ(c.fair_marks + c.ecn_marks + c.drops_aqm, 0u);
    EXPECT_EQ(c.packets, 26u + 23u);
}

TEST_F(Ingress, BeyondTheHorizonEverythingIsDroppedUncharged)
{
    add_ingress_class({.id = 1, .rate_bps = 20'000'000, .horizon_ns = 10'000'000});
    // 5 s of backlog, horizon 10 ms: still beyond it however slowly a busy host's guest runs.
    const uint64_t clock = backlog_class(1, 5 * kSec);
    for (uint8_t ecn : {0, 2}) {
        Received r = receive(ecn);
        EXPECT_EQ(r.action, kTcActShot) << "ecn " << int(ecn) << ": ECN-capable or not";
        EXPECT_EQ(r.ecn, ecn);
    }
    EXPECT_EQ(tat(1), clock);
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_horizon, 2u);
    EXPECT_EQ(c.packets + c.bytes + c.ecn_marks, 0u);
}

// GRO merges segments into one packet of one set of headers; each segment crossed the wire with
// its own, as egress's qdisc length counts them. Headers: 14 + 20 + 20 = 54 bytes.
TEST_F(Ingress, AGroPacketIsChargedEverySegmentsHeadersAndOverhead)
{
    add_ingress_class({.id = 1, .rate_bps = 1'000'000'000, .overhead = 24, .horizon_ns = kSec});
    const uint32_t len = 54 + 2 * 1448;  // two full segments merged
    receive(2, len, 2, 1448);
    ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.segments, 2u);
    EXPECT_EQ(c.bytes, 2u * (54 + 1448 + 24));
    // Without a count (LRO): the payload in segments of gso_size, the last one short.
    backlog_class(1, 0);
    receive(2, 54 + 1448 + 700, 0, 1448);
    c = maps_->counters(1);
    EXPECT_EQ(c.segments, 4u);
    EXPECT_EQ(c.bytes, 2u * (54 + 1448 + 24) + (54 + 1448 + 24) + (54 + 700 + 24));
}

TEST_F(Ingress, AChildsPacketIsChargedAtEveryLevelAndAParentsHorizonDropsItUncharged)
{
    add_ingress_class({.id = 1, .rate_bps = 10'000'000, .horizon_ns = 50'000'000});
    add_ingress_class({.id = 2, .rate_bps = 20'000'000, .parent = 1, .horizon_ns = 50'000'000});
    set_default_class(2, SHAPER_MODE_POLICE);
    const uint64_t parent_before = tat(1), child_before = tat(2);
    Received r = receive(2);
    EXPECT_EQ(r.action, kPass);
    EXPECT_GE(tat(1), std::max(parent_before, r.before) + cost_ns(kFrame, 10'000'000));
    EXPECT_GE(tat(2), std::max(child_before, r.before) + cost_ns(kFrame, 20'000'000));
    EXPECT_EQ(maps_->counters(1).bytes, kFrame);
    EXPECT_EQ(maps_->counters(2).bytes, kFrame);

    const uint64_t parent = backlog_class(1, 5 * kSec);  // beyond the parent's horizon, by seconds
    const uint64_t child = tat(2);
    EXPECT_EQ(receive(2).action, kTcActShot);
    EXPECT_EQ(tat(1), parent);
    EXPECT_EQ(tat(2), child) << "the child gets its charge back";
    EXPECT_EQ(maps_->counters(2).bytes, kFrame);
    EXPECT_EQ(maps_->counters(1).drops_horizon, 1u);
    EXPECT_EQ(maps_->counters(2).drops_horizon, 1u);
}

}  // namespace
