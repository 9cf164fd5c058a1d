// The datapath's charges under hostile and real traffic, through BPF_PROG_TEST_RUN on the host
// kernel: GSO packets without a segment count, CPUs racing for the horizon, TCP's own departure
// times, sparse packets under a backlogged parent, the clocks' layout, rate changes.
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <atomic>
#include <thread>
#include <vector>

#include "charge.h"
#include "datapath_fixture.h"
#include "packets.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr int kTcActShot = 2;

// A frame of `len` bytes: Ethernet, IPv4 and TCP headers (54 bytes), then zeros.
std::vector<uint8_t> long_frame(uint32_t len)
{
    const auto head = tcp_frame();
    std::vector<uint8_t> frame(len);
    std::copy(head.begin(), head.end(), frame.begin());
    return frame;
}

// GSO packets from VMs and packet sockets are DODGY: gso_segs is 0 until they are segmented,
// while the kernel has counted every segment's headers into wire_len. BPF_PROG_TEST_RUN takes
// at most a page of data, so the datapath is run on 45 segments of 80 bytes; 45 segments of
// 1448 bytes are checked on the same arithmetic (shaper_gso_segs is the datapath's code).
TEST(Gso, ADodgyPacketIsChargedForEverySegment)
{
    EXPECT_EQ(shaper_gso_segs(44 * 1448 + 1000 + 66, 44 * 1448 + 1000 + 45 * 66, 0, 1448), 45u);
    EXPECT_EQ(shaper_gso_segs(45 * 1448 + 66, 45 * 1448 + 45 * 66, 0, 1448), 45u);
    EXPECT_EQ(shaper_gso_segs(1000, 1000, 0, 1448), 1u);   // one segment: no headers added
    EXPECT_EQ(shaper_gso_segs(1000, 1000, 0, 0), 1u);      // not GSO
    EXPECT_EQ(shaper_gso_segs(66000, 69000, 45, 1448), 45u);  // the kernel's count, when it has one
}

// Header lengths, segment sizes and counts, with the last segment anywhere near a boundary or
// in the middle: the count is never too low, and one too high only where two counts explain the
// lengths, which needs the last segment within hdr / (S - 1) bytes of a segment boundary.
TEST(Gso, TheSegmentCountIsNeverTooLowAndExactUnlessAmbiguous)
{
    uint64_t cases = 0, ambiguous = 0;
    for (uint32_t hdr : {42u, 54u, 66u, 86u, 94u, 128u, 200u})
        for (uint32_t size : {88u, 100u, 536u, 1208u, 1428u, 1448u, 8948u})
            for (uint32_t segs = 1; segs <= 64; segs++)
                for (uint32_t last : {1u, 2u, 3u, 5u, 8u, 13u, 21u, 34u, size / 2, size - 34,
                                      size - 13, size - 5, size - 2, size - 1, size}) {
                    if (hdr > size)
                        continue;
                    const uint32_t len = hdr + (segs - 1) * size + last;
                    const uint32_t wire_len = len + (segs - 1) * hdr;
                    const uint32_t got = shaper_gso_segs(len, wire_len, 0, size);
                    cases++;
                    ASSERT_GE(got, segs) << hdr << " " << size << " " << segs << " " << last;
                    ASSERT_LE(got, segs + 1) << hdr << " " << size << " " << segs << " " << last;
                    if (got == segs)
                        continue;
                    ambiguous++;
                    // `got` explains the lengths as well: a header length that divides the
                    // added bytes and gives its count back...
                    const uint32_t other_hdr = (wire_len - len) / (got - 1);
                    EXPECT_EQ((wire_len - len) % (got - 1), 0u);
                    EXPECT_EQ((len - other_hdr + size - 1) / size, got);
                    // ...which only a last segment this near a boundary allows.
                    EXPECT_LE(std::min(last, size - last), hdr / (segs - 1) + 1)
                        << hdr << " " << size << " " << segs << " " << last;
                }
    std::printf("segment counts: %lu cases, %lu ambiguous (one segment too many)\n",
                (unsigned long)cases, (unsigned long)ambiguous);
}

TEST_F(Datapath, ADodgyGsoPacketPaysTheOverheadOfEverySegment)
{
    add_class({.id = 1, .rate_bps = 8'000'000, .overhead = 24});
    const uint32_t segs = 45, size = 80, hdr = 54;
    const uint32_t len = hdr + segs * size, wire_len = len + (segs - 1) * hdr;
    auto frame = long_frame(len);
    __sk_buff ctx{};
    ctx.wire_len = wire_len;
    ctx.gso_segs = 0;
    ctx.gso_size = size;
    ASSERT_NE(run_ctx(ctx, frame.data(), len).action, kTcActShot);
    const ClassCounters c = maps_->counters(1);
    EXPECT_EQ(c.segments, segs);
    EXPECT_EQ(c.bytes, wire_len + segs * 24u) << "the overhead of every segment";
}

// Two CPUs hammer one police class. Whatever they race, every packet let through left the
// clock, as its own atomic found it, within the horizon of its now; so by any instant t the
// packets admitted number at most 1 + (t + horizon - start) / cost, start being the clock at
// the outset (on the datapath's clock: a run's now is at most the `after` read behind it).
// The class is a parent: a packet it refuses after its child was charged gives the child's
// charge back, rounding and counters included.
TEST_F(Datapath, RacingCpusAdmitNothingBeyondTheHorizon)
{
    set_default_class(1, SHAPER_MODE_POLICE);
    // 8 Mbit: a 1000-byte packet is 1 ms of clock, far longer than a run, so a packet admitted
    // past the horizon shows. 10 s of horizon: the clock never falls idle between runs.
    const uint64_t cost = 1'000'000, horizon = 10 * kSec;
    add_class({.id = 10, .rate_bps = 8'000'000, .horizon_ns = horizon});
    // The child: 300 Mbit (1000 bytes are 26,666.67 ns, rounded per packet), never beyond.
    add_class({.id = 1, .rate_bps = 300'000'000, .parent = 10, .horizon_ns = 60 * kSec});
    const uint64_t child_start = backlog_class(1, 30 * kSec);
    const uint64_t start = backlog_class(10, horizon);  // full: admits one packet per ms from now

    const std::vector<int> cpus = allowed_cpus(2);

    constexpr uint64_t kAdmissions = 500;  // half a second of the class's clock
    std::atomic<uint64_t> admitted{0};
    std::vector<std::vector<uint64_t>> admitted_by(cpus.size());
    std::vector<std::thread> threads;
    for (size_t t = 0; t < cpus.size(); t++)
        threads.emplace_back([&, t] {
            pin_thread(cpus[t]);
            auto frame = tcp_frame();
            __sk_buff ctx{};
            ctx.wire_len = 1000;
            while (admitted.load() < kAdmissions) {
                LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                            .data_size_in = uint32_t(frame.size()), .ctx_in = &ctx,
                            .ctx_size_in = sizeof ctx);
                if (bpf_prog_test_run_opts(program_->prog_fd(), &opts))
                    break;
                const uint64_t after = now_ns();
                if (int(opts.retval) != kTcActShot) {
                    admitted_by[t].push_back(after);
                    admitted++;
                }
            }
        });
    for (auto& t : threads)
        t.join();

    std::vector<uint64_t> afters;
    for (const auto& a : admitted_by)
        afters.insert(afters.end(), a.begin(), a.end());
    std::sort(afters.begin(), afters.end());
    ASSERT_GE(afters.size(), kAdmissions);
    for (size_t k = 1; k <= afters.size(); k++) {
        const uint64_t allowed_by_then = 1 + (afters[k - 1] + horizon - start) / cost;
        ASSERT_LE(k, allowed_by_then) << "admission " << k << " of " << afters.size();
    }
    // Every packet let through is charged once at both levels; every packet refused after its
    // charge was given it back, to the clock, or to its CPU's slice when another CPU had charged
    // the clock since (bpf/slice.h): each clock holds the admitted packets' cost, plus at most
    // one given-back charge per CPU.
    const ClassCounters parent = maps_->counters(10), child = maps_->counters(1);
    EXPECT_EQ(parent.packets, afters.size());
    EXPECT_EQ(child.packets, afters.size());
    EXPECT_EQ(child.bytes, afters.size() * 1000);
    EXPECT_EQ(child.drops_horizon, parent.drops_horizon);
    const uint64_t held = tat(10) - start - parent.packets * cost;
    EXPECT_EQ(held % cost, 0u);
    EXPECT_LE(held, cpus.size() * cost);
    const unsigned __int128 exact = (unsigned __int128)child.packets * 1000 * ns_per_byte_fp(300'000'000);
    const unsigned __int128 child_clock = (unsigned __int128)(tat(1) - child_start) << 32;
    EXPECT_GE(child_clock, exact + child.clock_carry);
    EXPECT_LE(child_clock, exact + child.clock_carry + ((unsigned __int128)cpus.size() * 26'667 << 32));
    EXPECT_LT(child.clock_carry, uint64_t(cpus.size()) << 32);
    std::printf("%lu admitted, %lu refused\n", (unsigned long)parent.packets,
                (unsigned long)parent.drops_horizon);
}

// A parent already beyond its horizon: nothing is charged anywhere, the drop counts at both.
TEST_F(Datapath, APacketAParentRefusesIsChargedNowhere)
{
    add_class({.id = 10, .rate_bps = 8'000'000, .horizon_ns = 10'000'000});
    // 300 Mbit: 1000 bytes are 26,666.67 ns, so the child's charge is rounded.
    add_class({.id = 1, .rate_bps = 300'000'000, .parent = 10, .horizon_ns = 60 * kSec});
    const uint64_t child_tat = backlog_class(1, kSec);
    const uint64_t parent_tat = backlog_class(10, 60 * kSec);
    EXPECT_EQ(run(1000, 1).action, kTcActShot);
    EXPECT_EQ(tat(1), child_tat);
    EXPECT_EQ(tat(10), parent_tat);
    for (uint32_t id : {1u, 10u}) {
        const ClassCounters c = maps_->counters(id);
        EXPECT_EQ(c.drops_horizon, 1u) << id;
        EXPECT_EQ(c.packets + c.bytes + c.segments + c.clock_carry, 0u) << id;
    }
}

// A flow of the same sport: the Sparse tests' frames, with a TCP pacing time of its own.
class Flows : public Datapath {
protected:
    Verdict send(uint16_t sport, uint32_t wire_len, uint64_t own_tstamp = 0)
    {
        auto frame = build_frame({.sport = sport});
        __sk_buff ctx{};
        ctx.wire_len = wire_len;
        ctx.tstamp = own_tstamp;
        return run_ctx(ctx, frame.data(), uint32_t(frame.size()));
    }
};

// TCP paces its own packets: the stamp it asks for is later than the class's. Until that stamp
// the flow has a packet queued, so its next packet is no sparse flow's.
TEST_F(Flows, APacedTcpFlowWithAPacketQueuedIsNotSparse)
{
    // 8 kbit: 500 bytes are half a second; 10 s of backlog.
    add_class({.id = 1, .rate_bps = 8'000, .horizon_ns = 60 * kSec}, false, true);
    backlog_class(1, 10 * kSec);
    const uint64_t paced = now_ns() + 5 * kSec;
    const Verdict first = send(1000, 500, paced);
    EXPECT_EQ(first.tstamp, paced) << "its own departure time is honoured";
    EXPECT_EQ(maps_->counters(1).sparse, 1u) << "the flow's first packet is sparse";
    const uint64_t backlog = tat(1);
    const Verdict second = send(1000, 500);
    if (second.after < paced) {
        expect_departure(second, backlog);
        EXPECT_EQ(maps_->counters(1).sparse, 1u) << "its first packet has not left yet";
    }
}

// Sparse flows jump their own class's backlog, never an ancestor's: a parent has no allowance
// of its own, so each packet through it leaves no earlier than the parent's token bucket
// allows, and the parent keeps its bound (burst + rate x T) exactly.
TEST_F(Flows, ASparsePacketNeverLeavesBeforeItsParentAllows)
{
    const uint64_t horizon = 60 * kSec;
    add_class({.id = 10, .rate_bps = 8'000'000, .horizon_ns = horizon});
    add_class({.id = 1, .rate_bps = 8'000'000, .parent = 10, .horizon_ns = horizon}, false, true);
    // The parent is 10 s behind (a sibling's backlog); the child itself is idle.
    backlog_class(10, 10 * kSec);
    for (uint16_t flow = 1; flow <= 5; flow++) {
        const uint64_t parent = tat(10);
        expect_departure(send(flow, 1000), parent);
    }
    EXPECT_EQ(maps_->counters(1).sparse, 0u) << "behind the parent there is nothing to jump";
    // The child 20 s behind, the parent 10 s: a sparse packet jumps the child's backlog as far
    // as the parent's departure for it, no further.
    backlog_class(1, 20 * kSec);
    for (uint16_t flow = 11; flow <= 15; flow++) {
        const uint64_t parent = tat(10);
        const Verdict v = send(flow, 1000);
        expect_departure(v, parent);
    }
    EXPECT_EQ(maps_->counters(1).sparse, 5u);
    // An idle parent: the sparse packet leaves now, ahead of the child's backlog.
    backlog_class(10, 0);
    backlog_class(1, 20 * kSec);  // and a full allowance
    const Verdict v = send(21, 1000);
    EXPECT_GE(v.tstamp, v.before);
    EXPECT_LE(v.tstamp, v.after);
}

// A class's entry is five whole cache lines: 320 bytes in an mmapable array, whose values
// start on a page (an ordinary array's start 56 bytes into a line). The config a packet reads
// is on the first; the clocks, which every charge writes, are on a line of their own, so that
// CPUs charging one class do not take the config's line from each other; a lender's state,
// which changes once per lending epoch, on the fourth; a borrower's use, which its packets
// add to, on the last.
TEST_F(Datapath, ClassEntriesAreWholeCacheLines)
{
    EXPECT_EQ(sizeof(shaper_class), 320u);
    EXPECT_EQ(alignof(shaper_class), 64u);
    EXPECT_LT(offsetof(shaper_class, flags), 64u);
    EXPECT_LT(offsetof(shaper_class, aqm_interval_ns), 64u);
    EXPECT_EQ(offsetof(shaper_class, sparse_allowance_ns), 64u);
    EXPECT_EQ(offsetof(shaper_class, tat_ns), 128u);
    EXPECT_EQ(offsetof(shaper_class, sparse_tat_ns), 136u);
    EXPECT_EQ(offsetof(shaper_class, lend_epoch_ns), 192u);
    EXPECT_EQ(offsetof(shaper_class, lend_used_ns), 256u);
    const int fd = program_->class_entries_fd();
    bpf_map_info info{};
    uint32_t len = sizeof info;
    ASSERT_EQ(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
    EXPECT_EQ(info.value_size, 320u);
    EXPECT_TRUE(info.map_flags & BPF_F_MMAPABLE);
    // Entry i is at i * 320 from the mapping's start, which is page-aligned in the kernel too.
    const size_t bytes = size_t(info.max_entries) * 320;
    void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(map, MAP_FAILED) << strerror(errno);
    add_class({.id = 5, .rate_bps = 8'000'000});
    ClassClock clock{};
    clock.tat_ns = 0x1234567890ull;
    clock.fair_epoch_len_ns = 77;
    maps_->write_clock(5, clock);
    const auto* mapped = static_cast<const shaper_class*>(map) + 5;
    EXPECT_EQ(mapped->tat_ns, clock.tat_ns);
    EXPECT_EQ(mapped->fair_epoch_len_ns, 77u);
    EXPECT_EQ(mapped->ns_per_byte_fp, maps_->class_config(5)->ns_per_byte_fp);
    EXPECT_TRUE(mapped->flags & SHAPER_CLASS_PRESENT);
    maps_->erase_class(5);
    EXPECT_EQ(mapped->flags, 0u) << "an erased class is gone from the packet path";
    EXPECT_EQ(mapped->tat_ns, 0u);
    munmap(map, bytes);
}

// Each CPU counts a class's packets in its own set, entry cpu * max_classes + id of one mmapable
// array: found by arithmetic (no per-CPU pointer to load first), four cache lines from a page boundary
// (what every packet writes, the first 32, on one cache line; no line written by two CPUs; the
// delay histogram, bpf/delay.h, after the counters).
TEST_F(Datapath, EachCpuCountsInItsOwnSet)
{
    EXPECT_EQ(sizeof(shaper_class_stats), 256u);
    EXPECT_EQ(offsetof(shaper_class_stats, clock_carry), 24u);
    set_default_class(7);
    add_class({.id = 7, .rate_bps = 8'000'000});
    const int fd = program_->class_stats_fd();
    bpf_map_info info{};
    uint32_t len = sizeof info;
    ASSERT_EQ(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
    EXPECT_TRUE(info.map_flags & BPF_F_MMAPABLE);
    EXPECT_EQ(info.value_size, sizeof(shaper_class_stats));
    const uint32_t classes = maps_->max_classes();
    const uint32_t possible = uint32_t(libbpf_num_possible_cpus());
    ASSERT_EQ(info.max_entries, classes * possible);
    cpu_set_t allowed;
    ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < int(possible); cpu++)
        if (CPU_ISSET(cpu, &allowed))
            cpus.push_back(cpu);
    for (size_t i = 0; i < cpus.size(); i++)  // CPU cpus[i] sends i + 1 packets
        std::thread([&, i] {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[i], &one);
            ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
            for (size_t n = 0; n <= i; n++)
                EXPECT_EQ(run(100, 1).action, -1) << "passed on (TC_ACT_UNSPEC)";
        }).join();
    const size_t bytes = size_t(info.max_entries) * sizeof(shaper_class_stats);
    void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(map, MAP_FAILED) << strerror(errno);
    const auto* sets = static_cast<const shaper_class_stats*>(map);
    uint64_t sent = 0;
    for (size_t i = 0; i < cpus.size(); i++) {
        EXPECT_EQ(sets[size_t(cpus[i]) * classes + 7].packets, i + 1) << "CPU " << cpus[i];
        EXPECT_EQ(sets[size_t(cpus[i]) * classes + 7].bytes, 100 * (i + 1)) << "CPU " << cpus[i];
        sent += i + 1;
    }
    EXPECT_EQ(maps_->counters(7).packets, sent);
    munmap(map, bytes);
}

// A rate change through the control plane's path (change-class, apply).
class RateChange : public Datapath {
protected:
    // Changes class 1's rate as change-class does; returns when it was done.
    Verdict change_rate(uint64_t rate_bps)
    {
        ClassSpec spec{.id = 1, .rate_bps = rate_bps, .horizon_ns = 10 * kSec};
        spec.sparse = spec.fair = false;
        const uint64_t before = now_ns();
        maps_->change_class(1, make_class_config(spec, maps_->max_classes(), 2 * kSec));
        return {0, 0, before, now_ns()};
    }
};

// A second of backlog at 8 Mbit is 1 MB queued; at 16 Mbit those bytes are half a second, and
// the next packet leaves then, not after the second the old rate charged.
TEST_F(RateChange, ARaisedRateRescalesTheBacklog)
{
    add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 10 * kSec});
    const uint64_t tat0 = backlog_class(1, kSec);
    const Verdict change = change_rate(16'000'000);
    const uint64_t tat1 = tat(1);
    // tat1 = now + (tat0 - now) / 2 for the change's now.
    EXPECT_GE(tat1, (tat0 + change.before) / 2);
    EXPECT_LE(tat1, (tat0 + change.after) / 2 + 1);
    const Verdict next = run(1000, 1);
    expect_departure(next, tat1);
    expect_charged(next, tat1, tat(1), 500'000);  // and the new rate from then on
    EXPECT_LE(next.tstamp, next.after + kSec / 2) << "half a second ahead at most";
}

// Lowering a rate keeps the clock: the packets already stamped keep their times, the next ones
// follow them at the new rate; nothing already admitted is held longer.
TEST_F(RateChange, ALoweredRateKeepsTheClock)
{
    add_class({.id = 1, .rate_bps = 16'000'000, .horizon_ns = 10 * kSec});
    const uint64_t tat0 = backlog_class(1, kSec);
    change_rate(8'000'000);
    EXPECT_EQ(tat(1), tat0);
    const Verdict next = run(1000, 1);
    expect_departure(next, tat0);
    expect_charged(next, tat0, tat(1), 1'000'000);
}

}  // namespace
