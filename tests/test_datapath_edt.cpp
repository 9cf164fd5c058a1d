// The datapath's charges under hostile and real traffic, through BPF_PROG_TEST_RUN on the host
// kernel: GSO packets without a segment count, CPUs racing for the horizon, TCP's own departure
// times, sparse packets under a backlogged parent, the clocks' layout, rate changes.
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

}  // namespace
