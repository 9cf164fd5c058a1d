// ACK pacing through BPF_PROG_TEST_RUN: the receive side's program records when a TCP data
// packet would have been through its class's virtual queue; the send side's program (edt mode)
// holds that flow's pure ACKs until then, and nothing else. Both programs share one table, as a
// device's two attached sides do.
#include <chrono>
#include <thread>

#include "datapath_fixture.h"
#include "core/direction.h"
#include "packets.h"
#include "program_cache.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr int kPass = -1;
constexpr uint8_t kAck = 0x10, kSyn = 0x02, kFin = 0x01;
constexpr uint64_t kRate = 20'000'000;
constexpr uint64_t kMs = kSec / 1000;
constexpr uint64_t kHorizon = 2 * kSec;
constexpr uint64_t kBacklog = kSec / 2;  // below half the horizon: no flow is boxed

// A TCP frame from src:sport to dst:dport with `payload` bytes and these flags.
std::vector<uint8_t> tcp(const std::string& src, uint16_t sport, const std::string& dst, uint16_t dport,
                         uint32_t payload, uint8_t flags = kAck)
{
    auto frame = build_frame({.src = src, .dst = dst, .sport = sport, .dport = dport});
    const bool v6 = src.find(':') != std::string::npos;
    const size_t l3 = 14, l4 = l3 + (v6 ? 40 : 20);
    frame.resize(l4 + 20);  // no padding: the IP length is the frame's
    frame.resize(l4 + 20 + payload, 0xab);
    if (v6) {
        frame[l3 + 4] = uint8_t((20 + payload) >> 8);
        frame[l3 + 5] = uint8_t(20 + payload);
    } else {
        frame[l3 + 2] = uint8_t((40 + payload) >> 8);
        frame[l3 + 3] = uint8_t(40 + payload);
    }
    frame[l4 + 13] = flags;
    return frame;
}

// The TCP checksum of `frame` (Ethernet, IPv4 or IPv6 without extension headers) as it stands:
// 0 when the checksum field is right.
uint16_t tcp_checksum_residue(const std::vector<uint8_t>& frame)
{
    const bool v6 = frame[12] == 0x86 && frame[13] == 0xdd;
    const size_t l3 = 14, l4 = l3 + (v6 ? 40 : 20), len = frame.size() - l4;
    uint32_t sum = 0;
    auto add = [&](const uint8_t* p, size_t n) {
        for (size_t i = 0; i < n; i += 2)
            sum += uint32_t(p[i]) << 8 | (i + 1 < n ? p[i + 1] : 0);
    };
    add(&frame[v6 ? l3 + 8 : l3 + 12], v6 ? 32 : 8);  // the addresses
    sum += 6 + uint32_t(len);
    add(&frame[l4], len);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(~sum);
}

// Sets `frame`'s TCP checksum right.
void fix_tcp_checksum(std::vector<uint8_t>& frame)
{
    const bool v6 = frame[12] == 0x86 && frame[13] == 0xdd;
    const size_t l4 = 14 + (v6 ? 40 : 20);
    frame[l4 + 16] = frame[l4 + 17] = 0;
    const uint16_t sum = tcp_checksum_residue(frame);
    frame[l4 + 16] = uint8_t(sum >> 8);
    frame[l4 + 17] = uint8_t(sum);
}

// A TCP frame with these options after its 20-byte header (a multiple of 4 bytes), window field
// `window`, its checksum right.
std::vector<uint8_t> tcp_with(const std::string& src, uint16_t sport, const std::string& dst, uint16_t dport,
                              uint8_t flags, const std::vector<uint8_t>& options, uint16_t window = 0xffff)
{
    auto frame = tcp(src, sport, dst, dport, 0, flags);
    const bool v6 = src.find(':') != std::string::npos;
    const size_t l3 = 14, l4 = l3 + (v6 ? 40 : 20);
    frame.insert(frame.end(), options.begin(), options.end());
    const size_t ip_len = frame.size() - l3 - (v6 ? 40 : 0);
    frame[l3 + (v6 ? 4 : 2)] = uint8_t(ip_len >> 8);
    frame[l3 + (v6 ? 5 : 3)] = uint8_t(ip_len);
    frame[l4 + 12] = uint8_t((20 + options.size()) / 4 << 4);
    frame[l4 + 14] = uint8_t(window >> 8);
    frame[l4 + 15] = uint8_t(window);
    fix_tcp_checksum(frame);
    return frame;
}

// A SYN's options as Linux sends them (MSS, SACK permitted, timestamps, NOP, window scale), with
// window scale `scale`, or none (NOPs in its place) when negative.
std::vector<uint8_t> syn_options(int scale)
{
    std::vector<uint8_t> o = {2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, uint8_t(scale)};
    if (scale < 0)
        o[17] = o[18] = o[19] = 1;
    return o;
}

const std::vector<uint8_t> kData = tcp("10.0.0.1", 40000, "10.0.0.2", 80, 1460);
const std::vector<uint8_t> kPureAck = tcp("10.0.0.2", 80, "10.0.0.1", 40000, 0);
const std::vector<uint8_t> kPeerAck = tcp("10.0.0.1", 40000, "10.0.0.2", 80, 0);  // the sender's
// Another flow's data, ECT(0).
const std::vector<uint8_t> kEctData = [] {
    auto frame = tcp("10.0.0.4", 40002, "10.0.0.2", 80, 1460);
    frame[15] = 2;
    return frame;
}();

class AckPace : public Datapath {
protected:
    void SetUp() override
    {
        ProgramOptions in;
        in.ingress = true;
        ingress_ = &fresh_program(in);
        in_maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*ingress_));
        ProgramOptions out;
        out.ack_pace_fd = ingress_->map_fd("shaper_ack_pace");
        program_ = &fresh_program(out);
        maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*program_));
        ingress_->set_ack_pacing(true);  // as an attached receive side

        ingress_class(kRate, kHorizon);
        shaper_settings settings{};
        settings.default_class = 1;
        settings.mode = SHAPER_MODE_POLICE;
        settings.abi_version = SHAPER_ABI_VERSION;
        in_maps_->set_settings(settings);
        set_default_class(0);  // the send side: edt mode, its packets unclassified
    }

    // Backlogs are set by hand, seconds long (the table is read back slot by slot, slowly):
    // CoDel, sparse flows and fair shares off.
    void ingress_class(uint64_t rate_bps, uint64_t horizon_ns)
    {
        ClassSpec spec = class_defaults(Direction::Ingress);
        spec.id = 1;
        spec.rate_bps = rate_bps;
        spec.burst_bytes = 0;
        spec.horizon_ns = horizon_ns;
        spec.aqm = spec.sparse = spec.fair = false;
        in_maps_->write_class_config(1, make_class_config(spec, in_maps_->max_classes(), 2 * kSec));
    }

    // CoDel on, its interval so long it never acts itself: the step, boxes and first losses
    // alone, at `target`; ECN as given, sparse flows and fair shares off, the horizon kHorizon.
    void ingress_aqm_class(uint64_t target_ns, bool ecn = true)
    {
        ClassSpec spec = class_defaults(Direction::Ingress);
        spec.id = 1;
        spec.rate_bps = kRate;
        spec.burst_bytes = 0;
        spec.horizon_ns = kHorizon;
        spec.ecn = ecn;
        spec.sparse = spec.fair = false;
        spec.aqm_target_ns = target_ns;
        spec.aqm_interval_ns = 10 * kSec;
        in_maps_->write_class_config(1, make_class_config(spec, in_maps_->max_classes(), 2 * kSec));
    }

    // Paces the receive side from now: kData passes (not paced yet: nothing held), and its ACK
    // is held. The held ACK's verdict.
    Verdict start_pacing()
    {
        ingress_backlog(300 * kMs);
        EXPECT_EQ(receive(kData).action, kPass) << "no ACK held yet: not paced";
        const Verdict held = send(kPureAck);
        EXPECT_GT(held.tstamp, held.after) << "the ACK is held: the receive side is paced from now";
        return held;
    }

    // Whether the receive side was still paced when `v` ran: the send side held an ACK (`held`)
    // within SHAPER_ACK_PACE_FRESH_NS of it (a slow machine may take longer between two calls).
    static bool still_paced(const Verdict& held, const Verdict& v)
    {
        return v.after < held.before + SHAPER_ACK_PACE_FRESH_NS;
    }

    static Verdict run_on(const Program& program, const std::vector<uint8_t>& frame, uint32_t segs = 0,
                          uint64_t tstamp = 0)
    {
        __sk_buff ctx{};
        ctx.gso_segs = segs;
        ctx.gso_size = segs > 1 ? 1448 : 0;
        ctx.tstamp = tstamp;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                    .data_size_in = uint32_t(frame.size()), .ctx_in = &ctx, .ctx_out = &ctx,
                    .ctx_size_in = sizeof ctx, .ctx_size_out = sizeof ctx);
        const uint64_t before = now_ns();
        EXPECT_EQ(bpf_prog_test_run_opts(program.prog_fd(), &opts), 0) << strerror(errno);
        return {int(opts.retval), ctx.tstamp, before, now_ns()};
    }

    // An empty table, its gate open as by the receive side's attach.
    void forget_records()
    {
        clear_map(ingress_->map_fd("shaper_ack_pace"));
        ingress_->set_ack_pacing(true);
    }

    // The frame as the send side's program leaves it, and its verdict.
    std::pair<std::vector<uint8_t>, Verdict> send_out(const std::vector<uint8_t>& frame)
    {
        std::vector<uint8_t> out(frame.size());
        __sk_buff ctx{};
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                    .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(out.size()),
                    .ctx_in = &ctx, .ctx_out = &ctx, .ctx_size_in = sizeof ctx, .ctx_size_out = sizeof ctx);
        const uint64_t before = now_ns();
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0) << strerror(errno);
        out.resize(opts.data_size_out);
        return {out, Verdict{int(opts.retval), ctx.tstamp, before, now_ns()}};
    }

    // The window field of a frame send_out returned.
    static uint16_t window_of(const std::vector<uint8_t>& frame)
    {
        const size_t l4 = 14 + (frame[12] == 0x86 ? 40 : 20);
        return uint16_t(frame[l4 + 14] << 8 | frame[l4 + 15]);
    }

    // The class's fair share (bpf/fair.h) as an ended epoch of `epoch_ns` left it; the clock as
    // it is (ingress_backlog writes a clock without one).
    void set_fair_share(uint64_t share_ns, uint64_t epoch_ns)
    {
        ClassClock clock = in_maps_->clock(1);
        clock.fair_share_ns = share_ns;
        clock.fair_epoch_len_ns = epoch_ns;
        in_maps_->write_clock(1, clock);
    }

    Verdict receive(const std::vector<uint8_t>& frame, uint32_t segs = 0) { return run_on(*ingress_, frame, segs); }
    Verdict send(const std::vector<uint8_t>& frame, uint64_t tstamp = 0) { return run_on(*program_, frame, 0, tstamp); }

    uint64_t ingress_tat() const { return in_maps_->clock(1).tat_ns; }
    uint64_t ingress_backlog(uint64_t ahead_ns)
    {
        ClassClock clock{};
        clock.tat_ns = now_ns() + ahead_ns;
        in_maps_->write_clock(1, clock);
        return clock.tat_ns;
    }

    // The records the receive side holds: (tag, until) of every slot in use.
    std::vector<shaper_ack_pace> records() const
    {
        std::vector<shaper_ack_pace> out;
        const int fd = ingress_->map_fd("shaper_ack_pace");
        for (uint32_t slot = 1; slot <= SHAPER_ACK_PACE_SLOTS; slot++) {
            shaper_ack_pace r{};
            EXPECT_EQ(bpf_map_lookup_elem(fd, &slot, &r), 0);
            if (r.flow)
                out.push_back(r);
        }
        return out;
    }

    Program* ingress_ = nullptr;  // fresh_program(): loaded once, emptied for each test
    std::unique_ptr<ShaperMaps> in_maps_;
};



TEST_F(AckPace, APureAckOfTheReverseTupleLeavesWhenItsDataWouldHaveBeenThroughTheClass)
{
    ingress_backlog(kBacklog);
    ASSERT_EQ(receive(kData).action, kPass);
    const Verdict ack = send(kPureAck);
    const std::vector<shaper_ack_pace> recorded = records();
    ASSERT_EQ(recorded.size(), 1u);
    // Departure (the clock before the charge, burst 0) plus the packet's time: the clock after.
    EXPECT_GE(recorded[0].until_ns + 1, ingress_tat());
    EXPECT_LE(recorded[0].until_ns, ingress_tat() + 1);
    EXPECT_GE(recorded[0].until_ns, ack.after + kBacklog - kBacklog / 10);
    EXPECT_EQ(ack.action, kPass);
    EXPECT_EQ(ack.tstamp, recorded[0].until_ns);
    EXPECT_EQ(maps_->counters(0).packets, 1u) << "unclassified on the send side, still paced";
}

TEST_F(AckPace, SackAndDuplicateAcksWaitToo)
{
    ingress_backlog(kBacklog);
    receive(kData);
    std::vector<uint64_t> stamps;
    for (int i = 0; i < 3; i++)
        stamps.push_back(send(kPureAck).tstamp);
    const uint64_t until = records().at(0).until_ns;
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(stamps[i], until) << "ack " << i;
}

TEST_F(AckPace, IPv6FlowsArePacedAlike)
{
    ingress_backlog(kBacklog);
    receive(tcp("fd00::1", 40000, "fd00::2", 443, 1440));
    const uint64_t stamp = send(tcp("fd00::2", 443, "fd00::1", 40000, 0)).tstamp;
    EXPECT_EQ(stamp, records().at(0).until_ns);
    EXPECT_EQ(send(tcp("fd00::2", 443, "fd00::1", 40001, 0)).tstamp, 0u) << "another flow";
}

TEST_F(AckPace, AnotherFlowsAckAndTheSameTuplesDataAreNotDelayed)
{
    ingress_backlog(kBacklog);
    receive(kData);
    EXPECT_GT(send(kPureAck).tstamp, 0u) << "the flow's own ACK waits";
    EXPECT_EQ(send(tcp("10.0.0.2", 81, "10.0.0.1", 40000, 0)).tstamp, 0u) << "other port";
    EXPECT_EQ(send(tcp("10.0.0.3", 80, "10.0.0.1", 40000, 0)).tstamp, 0u) << "other address";
    EXPECT_EQ(send(tcp("10.0.0.1", 40000, "10.0.0.2", 80, 0)).tstamp, 0u) << "the data's own direction";
    EXPECT_EQ(send(tcp("10.0.0.2", 80, "10.0.0.1", 40000, 100)).tstamp, 0u)
        << "a segment with payload leaves as egress shaping has it";
    EXPECT_EQ(send(tcp("10.0.0.2", 80, "10.0.0.1", 40000, 0, kAck | kFin)).tstamp, 0u) << "FIN";
    auto udp = build_frame({.src = "10.0.0.2", .dst = "10.0.0.1", .proto = 17, .sport = 80, .dport = 40000});
    EXPECT_EQ(send(udp).tstamp, 0u) << "not TCP";
}

TEST_F(AckPace, AStaleRecordIsNoDelay)
{
    ingress_backlog(0);
    receive(kData);  // no backlog: through in one packet's time, 606 us
    const uint64_t until = records().at(0).until_ns;
    while (now_ns() <= until + 1000)
        ;
    EXPECT_EQ(send(kPureAck).tstamp, 0u);
}

// 80 kbit: a frame is 151.4 ms of the class; horizon 200 ms, 80 ms of backlog (below half the
// horizon: no box). The packet is accepted (it departs within the horizon) and would be through
// at 231 ms: its record, and so its ACK, stops at the horizon.
TEST_F(AckPace, ARecordNeverLiesBeyondTheClassHorizon)
{
    constexpr uint64_t horizon = 200'000'000;
    ingress_class(80'000, horizon);
    ingress_backlog(80'000'000);
    const Verdict data = receive(kData);
    ASSERT_EQ(data.action, kPass);
    const Verdict ack = send(kPureAck);
    const uint64_t until = records().at(0).until_ns;
    EXPECT_LE(until, data.after + horizon);
    EXPECT_GE(until, data.before + horizon);
    EXPECT_EQ(ack.tstamp, until);
    EXPECT_LE(ack.tstamp - ack.before, horizon) << "no ACK waits beyond the horizon";
}

TEST_F(AckPace, ANewConnectionsSynClearsTheOldTuplesRecord)
{
    ingress_backlog(kBacklog);
    receive(kData);
    EXPECT_GT(send(kPureAck).tstamp, 0u) << "the old connection's ACK waits";
    receive(tcp("10.0.0.1", 40000, "10.0.0.2", 80, 0, kSyn));
    EXPECT_EQ(send(kPureAck).tstamp, 0u);
}

TEST_F(AckPace, AGroPacketRecordsAndAPureAckOfItsOwnDoesNot)
{
    ingress_backlog(kBacklog);
    receive(kPureAck);  // the sender's ACKs arrive on ingress too: no record
    EXPECT_TRUE(records().empty());
    receive(tcp("10.0.0.1", 40000, "10.0.0.2", 80, 2 * 1448), 2);
    EXPECT_EQ(records().size(), 1u);
}

// Where the send side's own departure is later (its class's backlog, TCP's pacing), that holds.
TEST_F(AckPace, TheLaterOfTheSendSidesDepartureAndTheRecord)
{
    ingress_backlog(kBacklog);
    const Verdict data = receive(kData);
    const uint64_t own = data.after + kBacklog + kSec / 4;  // later than the record
    EXPECT_EQ(send(kPureAck, own).tstamp, own);
    const uint64_t early = data.before + kBacklog / 4;  // sooner
    const Verdict ack = send(kPureAck, early);
    EXPECT_EQ(ack.tstamp, records().at(0).until_ns);
}

// An ACK of a send-side class: the later of the class's departure and the record.
TEST_F(AckPace, AnAckOfAShapedSendClassLeavesAtTheLaterOfItsDepartureAndTheRecord)
{
    add_class({.id = 2, .rate_bps = 1'000'000'000, .horizon_ns = 10 * kSec});
    set_default_class(2);
    ingress_backlog(kBacklog);
    receive(kData);
    const Verdict paced = send(kPureAck);
    EXPECT_EQ(paced.tstamp, records().at(0).until_ns) << "the send class has no backlog";
    const uint64_t later = backlog_class(2, 3 * kSec);
    const Verdict behind = send(kPureAck);
    expect_departure(behind, later);
}

TEST_F(AckPace, WithTheGateClosedNothingIsPaced)
{
    ingress_backlog(kBacklog);
    receive(kData);
    EXPECT_GT(send(kPureAck).tstamp, 0u);
    ingress_->set_ack_pacing(false);  // the receive side detached
    EXPECT_EQ(send(kPureAck).tstamp, 0u);
}

// The receive side learns from the gate that its ACKs are held: the send side notes when it held
// one (at most every SHAPER_ACK_PACE_NOTE_NS). Only then, past an eighth of the horizon, every
// ECN-capable packet is CE-marked, whatever CoDel says (its target here far above the backlog).
TEST_F(AckPace, WhileAcksAreHeldEveryEcnPacketPastAnEighthOfTheHorizonIsMarked)
{
    ingress_aqm_class(400 * kMs);  // an eighth: 250 ms
    std::vector<uint8_t> ect = kData;
    ect[15] = 2;  // ECT(0)
    auto gate = [&] {
        const uint32_t zero = 0;
        shaper_ack_pace g{};
        EXPECT_EQ(bpf_map_lookup_elem(ingress_->map_fd("shaper_ack_pace"), &zero, &g), 0);
        return g.until_ns;
    };
    // Received with the ECN field as it leaves the program.
    auto receive_ecn = [&](const std::vector<uint8_t>& frame) {
        std::vector<uint8_t> out(frame.size() + 64);
        __sk_buff ctx{};
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                    .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(out.size()),
                    .ctx_in = &ctx, .ctx_size_in = sizeof ctx);
        EXPECT_EQ(bpf_prog_test_run_opts(ingress_->prog_fd(), &opts), 0);
        EXPECT_EQ(int(opts.retval), kPass);
        return out[15] & 3;
    };

    ingress_backlog(300 * kMs);
    EXPECT_EQ(gate(), 1u) << "opened by the receive side's attach";
    EXPECT_EQ(receive_ecn(ect), 2) << "no ACK held yet: not paced, no step";
    const Verdict held = send(kPureAck);
    ASSERT_GT(held.tstamp, held.after) << "the ACK is held";
    EXPECT_GE(gate(), held.before);
    EXPECT_LE(gate(), held.after);
    ingress_backlog(300 * kMs);
    EXPECT_EQ(receive_ecn(ect), 3) << "paced, past an eighth of the horizon: CE";
    EXPECT_NE(receive(kData).action, kPass) << "not ECN-capable: the flow's first loss";
    EXPECT_EQ(receive_ecn(kData), 0) << "not ECN-capable, its first loss behind it: passes as it is";
    ingress_backlog(200 * kMs);
    EXPECT_EQ(receive_ecn(ect), 2) << "below an eighth";
    EXPECT_EQ(in_maps_->counters(1).ecn_marks, 1u);
    EXPECT_EQ(in_maps_->counters(1).drops_aqm, 1u);

    // A second held ACK within SHAPER_ACK_PACE_NOTE_NS leaves the gate's line alone.
    const uint64_t noted = gate();
    ingress_backlog(300 * kMs);
    receive(kData);
    send(kPureAck);
    if (now_ns() < noted + SHAPER_ACK_PACE_NOTE_NS) {
        EXPECT_EQ(gate(), noted);
    }
    // A detached receive side's gate is never reopened by a held ACK.
    ingress_->set_ack_pacing(false);
    send(kPureAck);
    EXPECT_EQ(gate(), 0u);
}

// A paced sender's window is the backlog: one lost packet halves it. So past half the horizon a
// paced flow's box holds that one packet, where an unpaced flow's holds its packets for
// SHAPER_BOX_NS (Ingress.AboveHalfTheHorizonOneFlowIsBoxedAndTheOthersPass); its respite as ever.
TEST_F(AckPace, APacedFlowsBoxHoldsOnlyThePacketThatOpenedIt)
{
    ingress_aqm_class(400 * kMs);  // half: 1 s
    const Verdict held = start_pacing();

    ingress_backlog(1200 * kMs);
    EXPECT_NE(receive(kData).action, kPass) << "boxed";
    ingress_backlog(1200 * kMs);
    const Verdict next = receive(kData);
    if (still_paced(held, next)) {
        EXPECT_EQ(next.action, kPass) << "the flow's box held one packet, and its respite began";
        EXPECT_EQ(in_maps_->counters(1).drops_aqm, 1u);
    }
}

// Without ECN a paced sender hears nothing from the step, and its slow start doubles its window
// each round trip until boxes (half the horizon) and the horizon drop its packets in heaps. So
// each flow's first packet past an eighth that cannot be marked is dropped, once: its sender
// leaves slow start there. An ECN flow is marked instead and loses nothing; below an eighth,
// or with no ACK held, nothing is dropped.
TEST_F(AckPace, APacedFlowsFirstUnmarkablePacketPastAnEighthIsItsOnlyFirstLoss)
{
    ingress_aqm_class(200 * kMs);  // an eighth: 250 ms; half: 1 s
    const auto other = tcp("10.0.0.3", 40001, "10.0.0.2", 80, 1460);
    const Verdict held = start_pacing();
    ingress_backlog(240 * kMs);
    EXPECT_EQ(receive(kData).action, kPass) << "below an eighth";
    ingress_backlog(300 * kMs);
    const Verdict first = receive(kData);
    if (!still_paced(held, first))
        GTEST_SKIP() << "the machine took a second between two calls: no longer paced";
    EXPECT_NE(first.action, kPass) << "the flow's first packet past an eighth";
    for (int i = 0; i < 3; i++) {
        ingress_backlog(300 * kMs);
        EXPECT_EQ(receive(kData).action, kPass) << "its first loss is behind it";
    }
    for (const uint8_t flags : {uint8_t(kSyn), uint8_t(kAck | kFin), uint8_t(kAck)}) {
        ingress_backlog(300 * kMs);
        EXPECT_EQ(receive(tcp("10.0.0.3", 40001, "10.0.0.2", 80, 0, flags)).action, kPass)
            << "a SYN, a FIN, a pure ACK: no slow start to end";
    }
    ingress_backlog(300 * kMs);
    EXPECT_NE(receive(other).action, kPass) << "another flow's first data";
    ingress_backlog(300 * kMs);
    EXPECT_EQ(receive(other).action, kPass);
    for (int i = 0; i < 3; i++) {
        ingress_backlog(300 * kMs);
        EXPECT_EQ(receive(kEctData).action, kPass) << "an ECN flow is marked, never dropped";
    }
    EXPECT_EQ(in_maps_->counters(1).drops_aqm, 2u);
    EXPECT_EQ(in_maps_->counters(1).ecn_marks, 3u);
}

// A paced flow's packet that cannot be marked is boxed past a third of the horizon, not a half:
// after a loss its receiver holds the flow's later data for about a backlog, and a third keeps
// that burst small. ECN-capable packets are marked there and boxed past the half only.
TEST_F(AckPace, APacedFlowThatCannotBeMarkedIsBoxedPastAThirdOfTheHorizon)
{
    ingress_aqm_class(200 * kMs);  // a third: 667 ms; a half: 1 s
    start_pacing();
    ingress_backlog(300 * kMs);
    EXPECT_NE(receive(kData).action, kPass) << "its first loss";
    ingress_backlog(600 * kMs);
    EXPECT_EQ(receive(kData).action, kPass);
    std::this_thread::sleep_for(std::chrono::nanoseconds(SHAPER_BOX_RESPITE_NS + 10 * kMs));  // its respite ends
    const Verdict held = send(kPureAck);
    ASSERT_GT(held.tstamp, held.after) << "still held: the record is 600 ms ahead";
    ingress_backlog(600 * kMs);
    EXPECT_EQ(receive(kData).action, kPass) << "below a third";
    ingress_backlog(700 * kMs);
    const Verdict boxed = receive(kData);
    if (!still_paced(held, boxed))
        GTEST_SKIP() << "the machine took a second between two calls: no longer paced";
    EXPECT_NE(boxed.action, kPass) << "past a third, out of its respite: boxed";
    ingress_backlog(700 * kMs);
    EXPECT_EQ(receive(kEctData).action, kPass) << "ECN-capable: marked, not boxed below the half";
    EXPECT_EQ(in_maps_->counters(1).drops_aqm, 2u);
    EXPECT_EQ(in_maps_->counters(1).ecn_marks, 1u);
}

// With the class's ECN off nothing can be marked: an ECN-capable packet is boxed past a third too
// (the box takes the class's turn, which a first loss does not).
TEST_F(AckPace, WithTheClassEcnOffAnEcnCapablePacketIsBoxedPastAThird)
{
    ingress_aqm_class(200 * kMs, false);
    const Verdict held = start_pacing();
    ingress_backlog(700 * kMs);
    const Verdict boxed = receive(kEctData);
    if (!still_paced(held, boxed))
        GTEST_SKIP() << "the machine took a second between two calls: no longer paced";
    EXPECT_NE(boxed.action, kPass);
    const uint32_t id = 1;
    shaper_class_aqm state{};
    ASSERT_EQ(bpf_map_lookup_elem(ingress_->map_fd("shaper_class_aqm"), &id, &state), 0);
    EXPECT_NE(state.box_turn, 0u) << "boxed past a third, not a first loss";
}

// The receive window a held ACK offers: its flow's share of the class for the path's round trip
// (the receiver's SYN-ACK out, the peer's ACK in) plus a sixteenth of the horizon, in the window
// scale the SYN-ACK offered, rounded up; the checksum follows; never more than the receiver
// offered. IPv4 and IPv6 alike.
TEST_F(AckPace, AHeldAckOffersTheFlowsShareOfTheClassForItsRoundTripPlusASixteenthOfTheHorizon)
{
    for (const auto& [client, server] : {std::pair<std::string, std::string>{"10.0.0.1", "10.0.0.2"},
                                         {"fd00::1", "fd00::2"}}) {
        SCOPED_TRACE(client);
        forget_records();
        const Verdict synack = send(tcp_with(server, 80, client, 40000, kSyn | kAck, syn_options(7)));
        const Verdict answer = receive(tcp(client, 40000, server, 80, 0));
        ingress_backlog(kBacklog);
        ASSERT_EQ(receive(tcp(client, 40000, server, 80, 1400)).action, kPass);
        const std::vector<shaper_ack_pace> recorded = records();
        ASSERT_EQ(recorded.size(), 1u);
        const shaper_ack_pace r = recorded[0];
        EXPECT_EQ(r.wscale, 8u) << "scale 7, plus one";
        EXPECT_EQ(r.seg_bytes, 1400u);
        EXPECT_GE(r.rtt_ns, answer.before - synack.after);
        EXPECT_LE(r.rtt_ns, answer.after - synack.before);
        // 20 Mbit/s is 2.5 bytes per us; a sixteenth of the 2 s horizon is 125 ms.
        const double expected = 2.5e-3 * double(r.rtt_ns + kHorizon / 16);
        EXPECT_NEAR(r.window_cap, expected, 2.0);

        auto ack = tcp_with(server, 80, client, 40000, kAck, {}, 0xffff);
        const auto [out, verdict] = send_out(ack);
        EXPECT_GT(verdict.tstamp, verdict.after) << "held";
        EXPECT_EQ(window_of(out), (r.window_cap + 127) / 128) << "in units of 2^7, rounded up";
        EXPECT_EQ(tcp_checksum_residue(out), 0u) << "the checksum follows the window";

        const auto narrow = tcp_with(server, 80, client, 40000, kAck, {}, 100);
        EXPECT_EQ(send_out(narrow).first, narrow) << "never more than the receiver offered";
    }
}

// A VLAN tag in the frame (not in the skb's metadata) moves the TCP header: such an ACK is
// neither held nor rewritten, never written at the untagged frame's offsets.
TEST_F(AckPace, AnAckWithItsVlanTagInTheFrameIsLeftAsItIs)
{
    send(tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kSyn | kAck, syn_options(7)));
    receive(kPeerAck);
    ingress_backlog(kBacklog);
    receive(kData);
    ASSERT_GT(records().at(0).window_cap, 0u);
    auto tagged = tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kAck, {}, 0xffff);
    // VLAN 0x5dc: its TCI's first byte would read as an IPv4 header of 20 bytes.
    const uint8_t tag[4] = {0x81, 0x00, 0x05, 0xdc};
    tagged.insert(tagged.begin() + 12, tag, tag + 4);
    const auto [out, verdict] = send_out(tagged);
    EXPECT_EQ(out, tagged);
    EXPECT_EQ(verdict.tstamp, 0u) << "not held";
}

// The flow's share: fair.h's share of the last epoch, here a quarter of the class; at least two
// of its segments.
TEST_F(AckPace, TheWindowIsTheFlowsFairShareAndAtLeastTwoSegments)
{
    send(tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kSyn | kAck, syn_options(0)));
    receive(kPeerAck);
    ingress_backlog(kBacklog);
    set_fair_share(10 * kMs, 100 * kMs);
    receive(kData);
    const shaper_ack_pace r = records().at(0);
    EXPECT_EQ(r.wscale, 1u) << "scale 0";
    EXPECT_NEAR(r.window_cap, 2.5e-3 * double(r.rtt_ns + kHorizon / 16) / 10, 2.0) << "a tenth";
    const auto [out, verdict] = send_out(tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kAck, {}, 0xffff));
    EXPECT_EQ(window_of(out), r.window_cap) << "unscaled";

    // Without a share, the whole class: 312 KB, more than an unscaled window says. (Below an
    // eighth of the horizon: the ACK held above paced the class, and past an eighth this packet
    // would be its flow's first loss.)
    ingress_backlog(200 * kMs);
    receive(kData);
    EXPECT_GT(records().at(0).window_cap, 0xffffu);
    const auto wide = tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kAck, {}, 0xffff);
    EXPECT_EQ(send_out(wide).first, wide);

    ingress_class(80'000, kHorizon);  // 10 bytes per ms: 1.25 KB for 125 ms
    ingress_backlog(kBacklog / 4);
    receive(kData);
    EXPECT_EQ(records().at(0).window_cap, 2u * 1460u) << "two of its segments";
}

// An outgoing connection: the receiver's SYN offers a scale, the peer's SYN-ACK says whether
// both sides scale. Without its word, the window is left alone; without a held ACK too.
TEST_F(AckPace, TheWindowScaleIsTheOneTheHandshakeAgreed)
{
    const auto syn = [&](int scale) {
        send(tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kSyn, syn_options(scale)));
    };
    const auto synack = [&](int scale) {
        receive(tcp_with("10.0.0.1", 40000, "10.0.0.2", 80, kSyn | kAck, syn_options(scale)));
    };
    syn(9);
    synack(5);
    EXPECT_EQ(records().at(0).wscale, 10u) << "the receiver's own scale, the peer scaling too";
    syn(9);
    synack(-1);
    EXPECT_EQ(records().at(0).wscale, 1u) << "the peer does not scale: neither does the receiver";
    syn(-1);
    EXPECT_EQ(records().at(0).wscale, 1u);
    // A scale the walk does not reach (past eight options) or cannot (behind an option of
    // length 0) counts as none: the window then errs wide, never narrow.
    const auto options = [&](std::vector<uint8_t> o) {
        send(tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kSyn | kAck, o));
        return records().at(0).wscale;
    };
    EXPECT_EQ(options({1, 1, 1, 1, 1, 1, 1, 3, 3, 7, 0, 0}), 8u) << "the eighth option";
    EXPECT_EQ(options({1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 7, 0}), 1u) << "the ninth";
    EXPECT_EQ(options({2, 0, 1, 1, 3, 3, 7, 0}), 1u) << "behind a length of 0";
    EXPECT_EQ(options({1, 1, 1, 3, 3, 15, 0, 0}), 1u) << "beyond 14 (RFC 7323's largest)";
    EXPECT_GT(records().at(0).syn_ns, 0u);
    EXPECT_EQ(records().at(0).rtt_ns, 0u) << "no answer yet";

    // Data of a flow whose handshake the device did not see: paced, its window left alone.
    forget_records();
    ingress_backlog(kBacklog);
    receive(kData);
    EXPECT_EQ(records().at(0).window_cap, 0u);
    const auto ack = tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kAck, {}, 0xffff);
    const auto [out, verdict] = send_out(ack);
    EXPECT_GT(verdict.tstamp, verdict.after) << "held";
    EXPECT_EQ(out, ack);

    // A window set, but the ACK not held (its data through the class): left alone.
    send(tcp_with("10.0.0.2", 80, "10.0.0.1", 40000, kSyn | kAck, syn_options(7)));
    receive(kPeerAck);
    ingress_backlog(0);
    receive(kData);
    const uint64_t until = records().at(0).until_ns;
    ASSERT_GT(records().at(0).window_cap, 0u);
    while (now_ns() <= until + 1000)
        ;
    EXPECT_EQ(send_out(ack).first, ack);

    // A new connection's SYN on the tuple forgets the old one's window.
    receive(tcp_with("10.0.0.1", 40000, "10.0.0.2", 80, kSyn, syn_options(7)));
    EXPECT_EQ(records().at(0).window_cap, 0u);
    EXPECT_EQ(records().at(0).wscale, 0u);
}

// A flow whose window the held ACKs set sends one window per round trip, all of it through the
// class before its ACK leaves: each window's first packet finds nothing of its own queued. It
// is not sparse, where a flow without one is.
TEST_F(AckPace, AFlowWhoseWindowIsSetIsNeverSparse)
{
    const Verdict held = start_pacing();  // sparse flows off: kData's packet waits, its ACK is held
    ClassSpec spec = class_defaults(Direction::Ingress);
    spec.id = 1;
    spec.rate_bps = kRate;
    spec.burst_bytes = 0;
    spec.horizon_ns = kHorizon;
    spec.aqm = spec.fair = false;
    spec.sparse = true;
    in_maps_->write_class_config(1, make_class_config(spec, in_maps_->max_classes(), 2 * kSec));

    const auto other = tcp("10.0.0.3", 40001, "10.0.0.2", 80, 1460);
    send(tcp_with("10.0.0.2", 80, "10.0.0.3", 40001, kSyn | kAck, syn_options(7)));
    receive(tcp("10.0.0.3", 40001, "10.0.0.2", 80, 0));
    ingress_backlog(100 * kMs);
    receive(other);
    ASSERT_GT(records().size(), 1u);
    const uint64_t sparse_before = in_maps_->counters(1).sparse;
    ingress_backlog(100 * kMs);
    const Verdict v = receive(other);
    if (!still_paced(held, v))
        GTEST_SKIP() << "the machine took a second between two calls: no longer paced";
    EXPECT_EQ(in_maps_->counters(1).sparse, sparse_before) << "its window set: not sparse";
    ingress_backlog(100 * kMs);
    receive(tcp("10.0.0.5", 40005, "10.0.0.2", 80, 1460));
    EXPECT_EQ(in_maps_->counters(1).sparse, sparse_before + 1) << "a new flow without one: sparse";
}

TEST_F(AckPace, PoliceModeCannotHoldAnAck)
{
    ingress_backlog(kBacklog);
    receive(kData);
    EXPECT_GT(send(kPureAck).tstamp, 0u);
    set_default_class(0, SHAPER_MODE_POLICE);
    EXPECT_EQ(send(kPureAck).tstamp, 0u);
}

}  // namespace
