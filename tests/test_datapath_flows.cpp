// Flow identity under colliding and churning flows, neighbour discovery under load, IPv6
// extension headers and devices without an Ethernet header: BPF_PROG_TEST_RUN with crafted
// packets on the host kernel, and real devices (tun, loopback, GRE) in a throw-away namespace.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "flow.h"
#include "core/class_config.h"
#include "loader/fd.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "loader/rules.h"
#include "packets.h"
#include "rule_args.h"
#include "shaperctl_process.h"
#include "program_cache.h"

using namespace shaperctl;
using namespace shaperctl::test;
using nlohmann::json;

namespace {

constexpr int kPass = -1;  // TC_ACT_UNSPEC and TCX_NEXT: on to the next program (the packet passes)
constexpr int kTcActShot = 2;
constexpr uint64_t kSec = 1'000'000'000ull;
constexpr uint64_t kMs = 1'000'000ull;

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * kSec + ts.tv_nsec;
}

struct Sent {
    int action;
    uint64_t tstamp;
};

class FlowsDatapath : public ::testing::Test {
protected:
    void SetUp() override { load({}); }

    void load(const ProgramOptions& options)
    {
        maps_.reset();
        program_ = &fresh_program(options);
        maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*program_));
        set_default_class(1);
    }

    void set_default_class(uint32_t id, uint32_t mode = SHAPER_MODE_EDT)
    {
        shaper_settings settings = maps_->settings();
        settings.default_class = id;
        settings.mode = mode;
        settings.abi_version = SHAPER_ABI_VERSION;
        maps_->set_settings(settings);
    }

    void add_class(ClassSpec spec, bool aqm, bool sparse, bool fair)
    {
        spec.aqm = aqm;
        spec.sparse = sparse;
        spec.fair = fair;
        maps_->write_class_config(spec.id, make_class_config(spec, maps_->max_classes(), 2 * kSec));
    }

    // The class `backlog_ns` behind, in a fair-share epoch that lasts until the test ends it,
    // whose last epoch measured `share_ns`; the sparse allowance spent for as long when
    // `allowance_spent` (heavy churn spends it: every flow goes through the fair shares).
    void backlogged_epoch(uint32_t id, uint64_t backlog_ns, uint64_t share_ns, bool allowance_spent)
    {
        ClassClock clock{};
        const uint64_t now = now_ns();
        clock.tat_ns = now + backlog_ns;
        clock.sparse_tat_ns = allowance_spent ? now + 3600 * kSec : 0;
        clock.fair_epoch_ns = now;
        clock.fair_epoch_len_ns = 3600 * kSec;
        clock.fair_epoch_tat_ns = clock.tat_ns;
        clock.fair_share_ns = share_ns;
        clock.fair_epoch = 5;
        maps_->write_clock(id, clock);
    }

    // Ends the epoch as if it had run its length: the next packet that counts toward fair
    // shares rolls it, and the share is the datapath's own. The new epoch lasts again.
    void end_epoch(uint32_t id, const PacketSpec& next, uint32_t wire_len)
    {
        ClassClock clock = maps_->clock(id);
        const uint32_t epoch = clock.fair_epoch;
        clock.fair_epoch_len_ns = 10 * kSec;
        clock.fair_epoch_ns = now_ns() - 10 * kSec - kMs;
        maps_->write_clock(id, clock);
        send(next, wire_len);
        clock = maps_->clock(id);
        ASSERT_EQ(clock.fair_epoch, epoch + 1);
        clock.fair_epoch_len_ns = 3600 * kSec;
        maps_->write_clock(id, clock);
    }

    Sent send(const PacketSpec& spec, uint32_t wire_len = 0)
    {
        auto frame = build_frame(spec);
        __sk_buff ctx{};
        ctx.wire_len = wire_len ? wire_len : uint32_t(frame.size());
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                    .data_size_in = uint32_t(frame.size()), .ctx_in = &ctx, .ctx_out = &ctx,
                    .ctx_size_in = sizeof ctx, .ctx_size_out = sizeof ctx);
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0) << strerror(errno);
        return {int(opts.retval), ctx.tstamp};
    }

    Program* program_ = nullptr;  // fresh_program(): loaded once, emptied for each test
    std::unique_ptr<ShaperMaps> maps_;
};

// The flow-table bucket of an IPv4 flow of class `class_id`, as the datapath finds it for a
// packet the kernel has not hashed (test runs never are).
uint32_t bucket_of(const PacketSpec& p, uint32_t class_id)
{
    __u32 src[4] = {}, dst[4] = {};
    inet_pton(AF_INET, p.src.c_str(), src);
    inet_pton(AF_INET, p.dst.c_str(), dst);
    return flow_bucket_of(flow_hash_of_fields(src, dst, p.sport, p.dport, p.proto), class_id);
}

// `count` flows of `base`'s addresses whose bucket is `bucket`, none of them `base` itself.
std::vector<PacketSpec> flows_in_bucket(const PacketSpec& base, uint32_t class_id, uint32_t bucket,
                                        size_t count)
{
    std::vector<PacketSpec> found;
    for (uint32_t dport = 1; found.size() < count; dport++)
        for (uint32_t sport = 1024; sport < 65536 && found.size() < count; sport++) {
            PacketSpec p = base;
            p.sport = uint16_t(sport);
            p.dport = uint16_t(dport);
            if ((p.sport != base.sport || p.dport != base.dport) && bucket_of(p, class_id) == bucket)
                found.push_back(p);
        }
    return found;
}

// Four bulk flows of class 1 from `first_sport` on, and `churn` one-packet flows on random ports,
// shuffled with eight crafted to land in each bulk flow's bucket.
struct BulkAndChurn {
    std::vector<PacketSpec> bulk, churn;

    BulkAndChurn(uint16_t first_sport, size_t churn_count, unsigned seed)
    {
        for (uint16_t i = 0; i < 4; i++) {
            bulk.push_back({.sport = uint16_t(first_sport + i), .dport = 443});
            for (const PacketSpec& p : flows_in_bucket(bulk.back(), 1, bucket_of(bulk.back(), 1), 8))
                churn.push_back(p);
        }
        std::mt19937 rng(seed);
        for (size_t i = 0; i < churn_count; i++)
            churn.push_back({.sport = uint16_t(1024 + rng() % 64000), .dport = uint16_t(1 + rng() % 1000)});
        std::shuffle(churn.begin(), churn.end(), rng);
    }
};

// Two flows whose hashes share a bucket: each keeps its own record, so neither is taken for a
// new (sparse) flow while it has packets queued, and each counts once toward the fair shares'
// flows. Before, each took the other's slot: every packet was a new flow, sparse if the
// allowance had room and counted again otherwise.
TEST_F(FlowsDatapath, TwoFlowsSharingABucketKeepTheirOwnRecords)
{
    const PacketSpec a{.sport = 1000};
    const PacketSpec b = flows_in_bucket(a, 1, bucket_of(a, 1), 1).at(0);
    // 80 kbit: 500 bytes are 50 ms, so the sparse allowance (3076 bytes) cannot refill while the
    // test runs. A share of 0: nobody is acted on, the flows are only counted. (Backlogs here
    // are seconds deep: a slow machine must not see them drain while the test runs.)
    add_class({.id = 1, .rate_bps = 80'000, .horizon_ns = 60 * kSec}, false, true, true);
    backlogged_epoch(1, 10 * kSec, 0, false);
    // A first packet the allowance could not take within its depth (more than twice it) joins
    // the backlog: from then on each flow has a packet queued.
    const uint64_t tat = maps_->clock(1).tat_ns;
    ASSERT_EQ(send(a, 8000).tstamp, tat);
    ASSERT_EQ(send(b, 8000).tstamp, tat + 8000 * 100'000ull);
    for (int i = 0; i < 10; i++)
        for (const PacketSpec& flow : {a, b}) {
            const Sent s = send(flow, 500);
            ASSERT_EQ(s.action, kPass);
            EXPECT_GE(s.tstamp, tat) << "packet " << i << ": taken for a sparse flow";
        }
    EXPECT_EQ(maps_->counters(1).sparse, 0u);
    EXPECT_EQ(maps_->clock(1).fair_flows, 2u);
    EXPECT_EQ(maps_->clock(1).tat_ns, tat + (2 * 8000 + 20 * 500) * 100'000ull);
}

// One-packet flows on fresh ports, some of them crafted to land in the bulk flows' buckets:
// the bulk flows are counted once each, the one-packet flows not at all (a flow counts once it
// has asked for more than the sparse allowance in the epoch).
TEST_F(FlowsDatapath, PortChurnDoesNotInflateTheFlowCount)
{
    // 100 Mbit: a 1500-byte packet is 120 us of class time, the allowance 246 us.
    add_class({.id = 1, .rate_bps = 100'000'000, .horizon_ns = 60 * kSec}, false, true, true);
    const BulkAndChurn flows(20000, 2000, 7);
    backlogged_epoch(1, 10 * kSec, 0, true);
    const auto& bulk = flows.bulk;
    const auto& churn = flows.churn;

    std::set<std::pair<uint16_t, uint16_t>> distinct;
    size_t next = 0;
    for (int round = 0; round < 10; round++) {
        for (const PacketSpec& p : bulk) {
            ASSERT_EQ(send(p, 1500).action, kPass);
            distinct.insert({p.sport, p.dport});
        }
        for (int i = 0; i < 203; i++, next++) {
            const PacketSpec& p = churn[next % churn.size()];
            ASSERT_EQ(send(p, 100).action, kPass);
            distinct.insert({p.sport, p.dport});
        }
    }
    const uint64_t counted = maps_->clock(1).fair_flows;
    EXPECT_LE(counted, distinct.size());
    EXPECT_EQ(counted, bulk.size()) << "only the bulk flows asked for more than the allowance";
}

// Bulk flows sending their share while one-packet flows churn, over several epochs: the share
// is the class time over the bulk flows, so none of them is ever marked or dropped. Before,
// every churning flow (and every bulk flow again each time a churning one took its slot)
// counted, the share fell to a few microseconds and the bulk flows were dropped.
TEST_F(FlowsDatapath, BulkFlowsAtTheirShareAreNeverDroppedWhileFlowsChurn)
{
    // ECN off: a signal would be a drop, and show in the verdict.
    add_class({.id = 1, .rate_bps = 100'000'000, .horizon_ns = 60 * kSec, .ecn = false}, false, true,
              true);
    constexpr int kPackets = 10;                       // per bulk flow and epoch
    constexpr uint64_t kShare = kPackets * 120'000ull;  // 1500 bytes are 120 us
    const BulkAndChurn flows(30000, 6000, 11);
    backlogged_epoch(1, 10 * kSec, kShare, true);
    const auto& bulk = flows.bulk;
    const auto& churn = flows.churn;

    size_t next = 0;
    for (int epoch = 0; epoch < 3; epoch++) {
        if (epoch > 0)
            end_epoch(1, churn[next++ % churn.size()], 100);
        for (int round = 0; round < kPackets; round++) {
            for (size_t f = 0; f < bulk.size(); f++)
                ASSERT_EQ(send(bulk[f], 1500).action, kPass)
                    << "epoch " << epoch << ", bulk flow " << f << ", packet " << round
                    << ": share " << maps_->clock(1).fair_share_ns << " ns over "
                    << maps_->clock(1).fair_flows << " flows";
            for (int i = 0; i < 200; i++)
                ASSERT_EQ(send(churn[next++ % churn.size()], 100).action, kPass);
        }
    }
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_fair, 0u);
    EXPECT_EQ(c.fair_marks, 0u);
    EXPECT_GE(maps_->clock(1).fair_share_ns, kShare);
}

// The class's fair tolerance decides how far past the last epoch's share a bulk flow goes before
// it is held back (one packet dropped, ECN off): an eighth by default, more or less as
// configured. 1500 bytes are 120 us at 100 Mbit; the share is ten of them, the allowance two.
TEST_F(FlowsDatapath, FairToleranceDecidesWhenAFlowAboveItsShareIsHeldBack)
{
    constexpr uint64_t kShare = 10 * 120'000ull;
    uint16_t sport = 20000;
    // The packet (1-based) each tolerance drops first: the first whose total exceeds
    // share + share * tolerance / 1000 + one frame.
    for (auto [tolerance, first_drop] : {std::pair{0u, 13}, {125u, 13}, {10u, 12}, {500u, 17}}) {
        ClassSpec spec{.id = 1, .rate_bps = 100'000'000, .horizon_ns = 60 * kSec, .ecn = false};
        if (tolerance)
            spec.fair_tolerance = tolerance;
        add_class(spec, false, false, true);
        backlogged_epoch(1, 10 * kSec, kShare, false);
        const PacketSpec flow{.sport = sport++, .dport = 443};
        int dropped_at = 0;
        for (int i = 1; i <= 20 && !dropped_at; i++)
            if (send(flow, 1500).action == kTcActShot)
                dropped_at = i;
        EXPECT_EQ(dropped_at, first_drop) << "tolerance " << tolerance << " per mille";
    }
}

// Neighbour discovery and ARP: charged like any packet, never dropped by fair shares, CoDel or
// the horizon, up to the slack past the horizon that only a flood of them reaches.
const PacketSpec kArp{.src = "10.0.0.1", .dst = "10.0.0.2", .arp = true};
const PacketSpec kNeighbourSolicitation{.src = "fe80::1", .dst = "ff02::1:ff00:2", .proto = 58,
                                        .icmp_type = 135};
const PacketSpec kEchoRequest{.src = "fe80::1", .dst = "fe80::2", .proto = 58, .icmp_type = 128};

TEST_F(FlowsDatapath, NeighbourDiscoveryPassesBeyondTheHorizonAndIsCharged)
{
    // 800 kbit: a byte is 10 us; the slack (128 KiB) is 1.31 s past the 1 s horizon. The clock
    // half a second past the horizon: as long for the test to run before it would not be.
    add_class({.id = 1, .rate_bps = 800'000, .horizon_ns = kSec}, false, false, false);
    ClassClock clock{};
    clock.tat_ns = now_ns() + 1500 * kMs;
    maps_->write_clock(1, clock);
    EXPECT_EQ(send({.proto = 17}, 100).action, kTcActShot) << "an ordinary packet is beyond the horizon";
    EXPECT_EQ(send(kEchoRequest, 100).action, kTcActShot) << "an echo request is no neighbour discovery";
    uint64_t tat = maps_->clock(1).tat_ns;
    ASSERT_EQ(send(kArp, 100).action, kPass);
    EXPECT_EQ(maps_->clock(1).tat_ns, tat + kMs) << "charged";
    tat += kMs;
    // Stamped by the horizon (ARP is not: bpf_skb_set_tstamp takes IP packets only).
    const uint64_t before = now_ns();
    const Sent solicitation = send(kNeighbourSolicitation, 100);
    ASSERT_EQ(solicitation.action, kPass);
    EXPECT_GE(solicitation.tstamp, before + kSec);
    EXPECT_LE(solicitation.tstamp, now_ns() + kSec);
    EXPECT_EQ(maps_->clock(1).tat_ns, tat + kMs) << "charged";
    tat += kMs;
    ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.packets, 2u);
    EXPECT_EQ(c.bytes, 200u);
    EXPECT_EQ(c.drops_horizon, 2u);

    // Police mode: the same, and nothing is stamped.
    set_default_class(1, SHAPER_MODE_POLICE);
    const Sent policed = send(kArp, 100);
    EXPECT_EQ(policed.action, kPass);
    EXPECT_EQ(policed.tstamp, 0u);
    EXPECT_EQ(maps_->clock(1).tat_ns, tat + kMs);

    // A flood of them finds the clock past the slack: dropped there.
    clock.tat_ns = now_ns() + kSec + (128 << 10) * 10'000ull + kSec;
    maps_->write_clock(1, clock);
    EXPECT_EQ(send(kArp, 100).action, kTcActShot);
    EXPECT_EQ(send(kNeighbourSolicitation, 100).action, kTcActShot);
}

TEST_F(FlowsDatapath, NeighbourDiscoveryIsNeverDroppedForItsShare)
{
    // A share of 2 ms at 8 Mbit: a flow past twice that (and the allowance) is dropped.
    add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 60 * kSec, .ecn = false}, false, false,
              true);
    backlogged_epoch(1, 10 * kSec, 2 * kMs, false);
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(send(kArp, 1000).action, kPass) << "ARP " << i;
        ASSERT_EQ(send(kNeighbourSolicitation, 1000).action, kPass) << "solicitation " << i;
    }
    int dropped = 0;
    for (int i = 0; i < 20; i++)
        dropped += send({.proto = 17}, 1000).action == kTcActShot;
    EXPECT_GT(dropped, 0) << "an ordinary flow as large is dropped";
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.drops_fair, uint64_t(dropped));
    EXPECT_EQ(c.packets, 40u + 20u - dropped);
}

TEST_F(FlowsDatapath, NeighbourDiscoveryIsNeverDroppedByCoDel)
{
    add_class({.id = 1, .rate_bps = 1'000'000'000, .horizon_ns = 10 * kSec, .ecn = false,
               .aqm_target_ns = kMs, .aqm_interval_ns = 20 * kMs},
              true, false, false);
    ClassClock clock{};
    clock.tat_ns = now_ns() + 5 * kSec;
    maps_->write_clock(1, clock);
    ASSERT_EQ(send({.proto = 17}, 100).action, kPass);  // the delay goes above target
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    // An interval later CoDel acts on the next packet it sees: never a neighbour packet.
    EXPECT_EQ(send(kArp, 100).action, kPass);
    EXPECT_EQ(send(kNeighbourSolicitation, 100).action, kPass);
    EXPECT_EQ(send({.proto = 17}, 100).action, kTcActShot);
    EXPECT_EQ(maps_->counters(1).drops_aqm, 1u);
}

// Classification of crafted packets: IPv6 extension headers, and devices without an Ethernet
// header.
class Classify : public FlowsDatapath {
protected:
    void SetUp() override { reload({}); }

    void reload(const ProgramOptions& options)
    {
        load(options);
        for (uint32_t id = 1; id <= 3; id++)
            add_class({.id = id, .rate_bps = 400'000'000'000ull}, false, false, false);
        set_default_class(0);
    }

    void rule(uint32_t pref, uint32_t class_id, RuleArgs args)
    {
        args.pref = std::to_string(pref);
        args.class_id = std::to_string(class_id);
        add_rule(*maps_, parse_rule(args));
    }

    // The class the packet was charged to; 0 when it went unclassified.
    uint32_t class_of(const PacketSpec& spec)
    {
        std::vector<uint64_t> before;
        for (uint32_t id = 0; id <= 3; id++)
            before.push_back(maps_->counters(id).packets);
        send(spec);
        for (uint32_t id = 0; id <= 3; id++)
            if (maps_->counters(id).packets != before[id])
                return id;
        ADD_FAILURE() << "no class counted the packet";
        return 99;
    }
};

// AH is walked with its own length unit (4-byte words, less two) to the transport header.
TEST_F(Classify, Ipv6AuthenticationHeaderIsWalkedToThePorts)
{
    rule(10, 2, {.proto = "tcp", .dport = "443"});
    PacketSpec p{.src = "2001:db8::1", .dst = "2001:db8::2", .dport = 443, .ipv6_extensions = {51}};
    EXPECT_EQ(class_of(p), 2u) << "AH, then TCP";
    p.ipv6_hop_by_hop = true;
    p.ipv6_extensions = {60, 51, 60};
    EXPECT_EQ(class_of(p), 2u) << "hop-by-hop, destination options, AH, destination options";
    p.first_fragment = true;
    p.ipv6_extensions = {60, 43};
    EXPECT_EQ(class_of(p), 2u) << "hop-by-hop, destination options, routing, fragment";
    p.dport = 80;
    EXPECT_EQ(class_of(p), 0u);
}

// A chain longer than the parser walks reports no transport protocol (255, reserved) rather
// than an extension header's, and no ports.
TEST_F(Classify, Ipv6PastTheExtensionLimitNoExtensionIsTakenForTheTransport)
{
    rule(10, 3, {.proto = "60"});
    rule(20, 2, {.proto = "tcp", .dport = "443"});
    PacketSpec p{.src = "2001:db8::1", .dst = "2001:db8::2", .dport = 443,
                 .ipv6_extensions = {60, 60, 60, 60, 60, 60}};
    EXPECT_EQ(class_of(p), 2u) << "six extension headers (RFC 8200's whole order is six): walked";
    p.ipv6_extensions.push_back(60);
    EXPECT_EQ(class_of(p), 0u) << "seven: no transport protocol, and no ports";
    // A later fragment whose fragmentable part starts with an extension header.
    const PacketSpec later{.src = "2001:db8::1", .dst = "2001:db8::2", .proto = 60, .later_fragment = true};
    EXPECT_EQ(class_of(later), 0u);
    rule(5, 1, {.proto = "255"});
    EXPECT_EQ(class_of(p), 1u) << "reported as protocol 255";
    EXPECT_EQ(class_of(later), 1u);
}

// Devices whose packets start at the network header (tun, WireGuard), through a test run. The
// kernel's harness takes the first 14 bytes for an Ethernet header and the protocol from bytes
// 12-13, here the source address's: 8.0.x.x reads as IPv4, 2001:db8:86dd:: as IPv6.
TEST_F(Classify, PacketsStartingAtTheNetworkHeader)
{
    reload({.l2_header_len = 0});
    rule(10, 2, {.dst = "10.9.0.2", .proto = "udp", .dport = "5001"});
    rule(20, 3, {.dst = "fd09::2", .proto = "udp", .dport = "5002"});
    EXPECT_EQ(class_of({.src = "8.0.0.1", .dst = "10.9.0.2", .proto = 17, .dport = 5001, .l2 = false}), 2u);
    EXPECT_EQ(class_of({.src = "2001:db8:86dd::1", .dst = "fd09::2", .proto = 17, .dport = 5002, .l2 = false}),
              3u);
    EXPECT_EQ(class_of({.src = "8.0.0.1", .dst = "10.9.0.2", .proto = 17, .dport = 5009, .l2 = false}), 0u);
}

// Any other device type: headers are read relative to the kernel's network header (the harness
// sets it after 14 bytes), whatever lies before it.
TEST_F(Classify, PacketsReadFromTheNetworkHeader)
{
    reload({.l2_header_len = SHAPER_L2_AT_NETWORK_HEADER});
    rule(10, 2, {.dst = "10.9.0.2", .proto = "udp", .dport = "5001"});
    rule(20, 3, {.dst = "fd09::2", .proto = "tcp", .dport = "443"});
    EXPECT_EQ(class_of({.dst = "10.9.0.2", .proto = 17, .dport = 5001}), 2u);
    EXPECT_EQ(class_of({.src = "fd09::1", .dst = "fd09::2", .dport = 443, .ipv6_extensions = {51}}), 3u);
    EXPECT_EQ(class_of({.dst = "10.9.0.3", .proto = 17, .dport = 5001}), 0u);
}

// Real devices in a namespace, shaperctl run as an operator would, in police mode (the host
// kernel has no sch_fq): rules by address and port must see the packets sent through each.
class Devices : public DeviceTest {
protected:
    // Detaches the device when the test ends, whatever it asserted.
    struct Attached {
        Devices* test;
        std::string dev;
        ~Attached() { test->sh("detach --dev " + dev); }
    };

    // Attaches police mode; rule i sends to class i + 1.
    void shape(const std::string& dev, const std::vector<std::string>& rules)
    {
        ok("attach --dev " + dev + " --mode police");
        for (size_t i = 0; i < rules.size(); i++) {
            const std::string id = std::to_string(i + 1);
            ok("add-class --dev " + dev + " --id " + id + " --rate 1gbit");
            ok("add-rule --dev " + dev + " --class " + id + " --pref " + id + "0 " + rules[i]);
        }
    }

    // UDP datagrams from this thread's namespace.
    static void send_udp(const std::string& address, uint16_t port, int count)
    {
        const bool v6 = address.find(':') != std::string::npos;
        Fd sock(socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        ASSERT_TRUE(sock) << strerror(errno);
        sockaddr_in in{};
        sockaddr_in6 in6{};
        in.sin_family = AF_INET;
        in.sin_port = htons(port);
        in6.sin6_family = AF_INET6;
        in6.sin6_port = htons(port);
        ASSERT_EQ(inet_pton(v6 ? AF_INET6 : AF_INET, address.c_str(),
                            v6 ? static_cast<void*>(&in6.sin6_addr) : &in.sin_addr),
                  1);
        const sockaddr* to = v6 ? reinterpret_cast<sockaddr*>(&in6) : reinterpret_cast<sockaddr*>(&in);
        for (int i = 0; i < count; i++)
            ASSERT_EQ(sendto(sock.get(), "shaperctl", 9, 0, to, v6 ? sizeof in6 : sizeof in), 9)
                << address << ": " << strerror(errno);
    }

    // Rules for UDP to `v4` port `port` and to `v6` (unless "") port + 1, then three and two
    // datagrams sent: each rule, and its class, must see its own.
    void expect_rules_see_udp(const std::string& dev, const std::string& v4, const std::string& v6,
                              uint16_t port)
    {
        std::vector<std::string> rules{"--dst " + v4 + " --proto udp --dport " + std::to_string(port)};
        if (!v6.empty())
            rules.push_back("--dst " + v6 + " --proto udp --dport " + std::to_string(port + 1));
        shape(dev, rules);
        send_udp(v4, port, 3);
        if (!v6.empty())
            send_udp(v6, uint16_t(port + 1), 2);
        expect_hits(dev, v6.empty() ? std::vector<uint64_t>{3} : std::vector<uint64_t>{3, 2});
    }

    // Each rule's hits, in pref order, and its class charged as many packets.
    void expect_hits(const std::string& dev, const std::vector<uint64_t>& hits)
    {
        Outcome o = sh("status --dev " + dev + " --json --sample 0");
        ASSERT_EQ(o.status, 0) << o.err;
        const json st = json::parse(o.out);
        ASSERT_EQ(st["rules"].size(), hits.size()) << o.out;
        for (size_t i = 0; i < hits.size(); i++) {
            EXPECT_EQ(st["rules"][i]["packets"], hits[i]) << st["rules"][i]["match"];
            EXPECT_EQ(st["classes"][i]["packets"], hits[i]) << "class " << st["classes"][i]["id"];
        }
    }
};

TEST_F(Devices, TunPacketsStartAtTheNetworkHeader)
{
    if (run(ip_tool() + " -n " + ns_->name() + " tuntap add mode tun dev tn0").status != 0)
        GTEST_SKIP() << "this kernel has no tun devices (tun)";
    // Held open by the test, so the device has carrier and the packets go all the way through.
    Fd tun(open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK));
    ASSERT_TRUE(tun) << "/dev/net/tun: " << strerror(errno);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "tn0", IFNAMSIZ - 1);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    ASSERT_EQ(ioctl(tun.get(), TUNSETIFF, &ifr), 0) << strerror(errno);
    ns_->ip("addr add 10.9.0.1/24 dev tn0");
    ns_->ip("-6 addr add fd09::1/64 dev tn0 nodad");
    ns_->ip("link set tn0 up");
    Attached attached{this, "tn0"};
    expect_rules_see_udp("tn0", "10.9.0.2", "fd09::2", 5001);
    // And they reached the other end of the tun device as IP packets.
    int read_back = 0;
    char packet[2048];
    for (ssize_t n; (n = read(tun.get(), packet, sizeof packet)) > 0;)
        read_back += ((packet[0] >> 4) == 4 && packet[9] == 17) || ((packet[0] >> 4) == 6 && packet[6] == 17);
    EXPECT_EQ(read_back, 5);
}

// Loopback frames carry an Ethernet header (ARPHRD_LOOPBACK, not ARPHRD_ETHER).
TEST_F(Devices, LoopbackFramesCarryAnEthernetHeader)
{
    ns_->ip("link set lo up");
    Attached attached{this, "lo"};
    expect_rules_see_udp("lo", "127.0.0.1", "::1", 5003);
}

// A GRE device without a remote builds the outer IP and GRE headers before egress (its
// "link-layer" header): the rule must see the inner packet.
TEST_F(Devices, GreWithoutARemoteIsReadFromTheNetworkHeader)
{
    ns_->ip("addr add 10.8.0.1/24 dev sh0");
    if (run(ip_tool() + " -n " + ns_->name() + " tunnel add gr0 mode gre local 10.8.0.1 ttl 64").status != 0)
        GTEST_SKIP() << "this kernel has no GRE tunnels (ip_gre)";
    ns_->ip("link set gr0 up");
    ns_->ip("addr add 10.10.0.1/24 dev gr0");
    ns_->ip("neigh add 10.10.0.2 lladdr 10.8.0.2 dev gr0 nud permanent");
    Attached attached{this, "gr0"};
    expect_rules_see_udp("gr0", "10.10.0.2", "", 5005);
}

}  // namespace
