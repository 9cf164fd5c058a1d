// Test helper: the datapath program loaded unpinned, run through BPF_PROG_TEST_RUN on the host
// kernel, with the token bucket's rule to check its runs against.
//
// Timing: a run reads the clock (CLOCK_MONOTONIC, the one bpf_ktime_get_ns reads) at a `now`
// the test cannot see, only bound: now is in [before, after], read around the run. Expectations
// are the model at that unknown now, never an assumption that runs are fast; time scales
// (seconds of backlog, 8 kbit rates) make the bound collapse to the exact value on any machine
// that runs a program in less than a second.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/class_config.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "program_cache.h"

namespace shaperctl::test {

constexpr uint64_t kSec = 1'000'000'000ull;

inline uint64_t now_ns()
{
    return monotonic_ns();
}

// The first `most` CPUs this process may run on, to race packets on.
inline std::vector<int> allowed_cpus(size_t most)
{
    cpu_set_t allowed;
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < most; cpu++)
            if (CPU_ISSET(cpu, &allowed))
                cpus.push_back(cpu);
    return cpus;
}

// Keeps the calling thread on one CPU: a BPF run's per-CPU state is that CPU's.
inline void pin_thread(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

// An Ethernet + IPv4 + TCP frame: the program reads lengths from the context, not the bytes.
inline std::array<uint8_t, 54> tcp_frame()
{
    std::array<uint8_t, 54> frame{};
    ethhdr eth{};
    eth.h_proto = htons(ETH_P_IP);
    iphdr ip{};
    ip.version = 4;
    ip.ihl = 5;
    ip.protocol = IPPROTO_TCP;
    ip.tot_len = htons(40);
    // Copied, not cast: the IP header sits at an odd offset of the byte array.
    std::memcpy(frame.data(), &eth, sizeof eth);
    std::memcpy(frame.data() + sizeof eth, &ip, sizeof ip);
    return frame;
}

struct Verdict {
    int action;
    uint64_t tstamp;
    uint64_t before, after;  // the run's `now` lay between these
};

// The token bucket for one run whose now lay in [v.before, v.after]: the packet leaves at
// max(now, earliest), where earliest = tat - burst (the latest over the levels it is charged at).
inline void expect_departure(const Verdict& v, uint64_t earliest)
{
    EXPECT_GE(v.tstamp, std::max(v.before, earliest));
    EXPECT_LE(v.tstamp, std::max(v.after, earliest));
}

// ...and moves a clock read as tat_before to max(tat_before, now) + cost_ns.
inline void expect_charged(const Verdict& v, uint64_t tat_before, uint64_t tat_after, uint64_t cost_ns)
{
    EXPECT_GE(tat_after, std::max(tat_before, v.before) + cost_ns);
    EXPECT_LE(tat_after, std::max(tat_before, v.after) + cost_ns);
}

class Datapath : public ::testing::Test {
protected:
    void SetUp() override
    {
        program_ = &fresh_program(program_options());
        maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*program_));
        set_default_class(1);
    }

    virtual ProgramOptions program_options() const { return {}; }

    void set_default_class(uint32_t id, uint32_t mode = SHAPER_MODE_EDT)
    {
        shaper_settings settings{};
        settings.default_class = id;
        settings.mode = mode;
        settings.abi_version = SHAPER_ABI_VERSION;
        maps_->set_settings(settings);
    }

    // Token-bucket tests put clocks seconds ahead by hand: CoDel, the sparse-flow path (which
    // would let a first packet jump that backlog) and fair shares stay off unless asked for.
    void add_class(ClassSpec spec, bool aqm = false, bool sparse = false, bool fair = false)
    {
        spec.aqm = aqm;
        spec.sparse = sparse;
        spec.fair = fair;
        maps_->write_class_config(spec.id,
                                  make_class_config(spec, maps_->max_classes(), 2 * kSec));
    }

    // Puts a class's clock `ahead_ns` in the future so stamps don't depend on when runs happen.
    uint64_t backlog_class(uint32_t id, uint64_t ahead_ns) { return set_tat(id, now_ns() + ahead_ns); }

    // Clocks that must stand a set distance apart are written from one reading of now: two
    // readings lie milliseconds apart in a guest the host deschedules.
    uint64_t set_tat(uint32_t id, uint64_t tat_ns)
    {
        ClassClock clock{};
        clock.tat_ns = tat_ns;
        maps_->write_clock(id, clock);
        return clock.tat_ns;
    }

    uint64_t tat(uint32_t id) const { return maps_->clock(id).tat_ns; }

    Verdict run_ctx(__sk_buff ctx, const uint8_t* frame, uint32_t frame_len, uint32_t repeat = 1)
    {
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = frame_len,
                    .ctx_in = &ctx, .ctx_out = &ctx, .ctx_size_in = sizeof ctx,
                    .ctx_size_out = sizeof ctx, .repeat = static_cast<int>(repeat));
        const uint64_t before = now_ns();
        int err = bpf_prog_test_run_opts(program_->prog_fd(), &opts);
        const uint64_t after = now_ns();
        EXPECT_EQ(err, 0) << strerror(errno);
        return {static_cast<int>(opts.retval), ctx.tstamp, before, after};
    }

    Verdict run(uint32_t wire_len, uint32_t segs, uint64_t tstamp = 0, uint32_t repeat = 1)
    {
        auto frame = tcp_frame();
        __sk_buff ctx{};
        ctx.wire_len = wire_len;
        ctx.gso_segs = segs;
        ctx.gso_size = segs > 1 ? 1448 : 0;
        ctx.tstamp = tstamp;
        return run_ctx(ctx, frame.data(), uint32_t(frame.size()), repeat);
    }

    Program* program_ = nullptr;  // fresh_program(): loaded once, emptied for each test
    std::unique_ptr<ShaperMaps> maps_;
};

}  // namespace shaperctl::test
