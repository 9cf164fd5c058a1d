// What the shaper owes sch_fq, which enforces its departure times: no packet stamped to leave
// later may carry the priority sch_fq sends unpaced (BPF_PROG_TEST_RUN), and no class horizon
// may lie beyond fq's, where fq would drop what the class has charged (the check itself, and a
// file's classes against the file's fq horizon). End to end: tests/e2e (case prio7) and the
// fq-horizon tests of test_cli.cpp and test_apply.cpp, which need sch_fq.
#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <ctime>
#include <string>

#include "core/config_file.h"
#include "core/class_config.h"
#include "core/error.h"
#include "loader/cgroup.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "loader/rules.h"
#include "packets.h"
#include "rule_args.h"
#include "program_cache.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr uint64_t kSec = 1'000'000'000ull;
constexpr uint64_t kAhead = 30 * kSec;
constexpr uint32_t kPrioControl = 7;  // TC_PRIO_CONTROL: sch_fq before 6.8 sends it unpaced

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * kSec + uint64_t(ts.tv_nsec);
}

// Class 1 (the default) and class 2 (packets of priority 7, by rule); both 8 Mbit, plain EDT,
// with the longest horizon: a clock put 30 s ahead stays ahead however slowly the tests run.
class FqPriority : public ::testing::Test {
protected:
    void SetUp() override
    {
        program_ = &fresh_program({});
        maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*program_));
        set_mode(SHAPER_MODE_EDT);
        for (uint32_t id : {1u, 2u})
            maps_->write_class_config(id, make_class_config({.id = id, .rate_bps = 8'000'000,
                                                             .horizon_ns = SHAPER_HORIZON_MAX_NS,
                                                             .sparse = false, .fair = false},
                                                            maps_->max_classes(), 2 * kSec));
        add_rule(*maps_, parse_rule({.pref = "10", .class_id = "2", .priority = std::to_string(kPrioControl)}));
    }

    void set_mode(uint32_t mode)
    {
        shaper_settings settings = maps_->settings();
        settings.default_class = 1;
        settings.mode = mode;
        settings.abi_version = SHAPER_ABI_VERSION;
        maps_->set_settings(settings);
    }

    // The class clock `ahead_ns` in the future: the next departure is that clock.
    uint64_t backlog(uint32_t id, uint64_t ahead_ns)
    {
        ClassClock clock{};
        clock.tat_ns = now_ns() + ahead_ns;
        maps_->write_clock(id, clock);
        return clock.tat_ns;
    }

    struct Out {
        uint32_t priority;
        uint64_t tstamp;
    };
    Out run(uint32_t priority)
    {
        const std::vector<uint8_t> frame = build_frame({.proto = 17, .dport = 9});
        __sk_buff ctx{};
        ctx.priority = priority;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                    .data_size_in = uint32_t(frame.size()), .ctx_in = &ctx, .ctx_out = &ctx,
                    .ctx_size_in = sizeof ctx, .ctx_size_out = sizeof ctx);
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0) << strerror(errno);
        EXPECT_EQ(int(opts.retval), -1);  // TC_ACT_UNSPEC (TCX_NEXT): passed on to the next program
        return {ctx.priority, ctx.tstamp};
    }

    Program* program_ = nullptr;  // fresh_program(): loaded once, emptied for each test
    std::unique_ptr<ShaperMaps> maps_;
};

// A priority-7 packet stamped to leave later leaves sch_fq's unpaced queue: priority 6, the
// rest of the value kept. Classified by its original priority (the rule took it to class 2).
TEST_F(FqPriority, APacketStampedLaterLosesTheControlPriority)
{
    const uint64_t tat = backlog(2, kAhead);
    const Out out = run(kPrioControl);
    EXPECT_EQ(out.tstamp, tat);
    EXPECT_EQ(out.priority, 6u);
    EXPECT_EQ(maps_->counters(2).packets, 1u) << "the rule on priority 7 must see the original priority";
    EXPECT_EQ(maps_->counters(1).packets, 0u);

    // Only the low four bits are sch_fq's band (TC_PRIO_MAX): a classid-style 1:7 becomes 1:6.
    add_rule(*maps_, parse_rule({.pref = "20", .class_id = "2", .priority = "1:7"}));
    backlog(2, kAhead);
    EXPECT_EQ(run(0x10007).priority, 0x10006u);
    EXPECT_EQ(maps_->counters(2).packets, 2u);
    backlog(1, kAhead);
    EXPECT_EQ(run(0x17).priority, 0x16u);  // no rule: the default class, backlogged too
    EXPECT_EQ(maps_->counters(1).packets, 1u);
}

// Nothing else is touched: other priorities, and priority 7 when the packet leaves now (an idle
// class: sch_fq's unpaced queue is then right) or in police mode (no sch_fq, no stamp).
TEST_F(FqPriority, OnlyWhenTheDepartureLiesAhead)
{
    for (uint32_t priority : {0u, 6u, 8u, 15u, 0x10006u}) {
        const uint64_t tat = backlog(1, kAhead);
        const Out out = run(priority);
        EXPECT_EQ(out.tstamp, tat);
        EXPECT_EQ(out.priority, priority);
    }

    const uint64_t before = now_ns();
    const Out idle = run(kPrioControl);  // class 2's clock is idle: it leaves now
    EXPECT_GE(idle.tstamp, before);
    EXPECT_LE(idle.tstamp, now_ns());
    EXPECT_EQ(idle.priority, kPrioControl);

    set_mode(SHAPER_MODE_POLICE);
    backlog(2, 1'000'000);  // within the horizon: passes, unstamped
    const Out police = run(kPrioControl);
    EXPECT_EQ(police.tstamp, 0u);
    EXPECT_EQ(police.priority, kPrioControl);
}

// --- class horizons against fq's ---------------------------------------------------------

const FqHorizon kFq10s{10 * kSec, " on eth0 (attach --fq-horizon raises it)"};

std::string refusal(const ClassSpec& spec, const FqHorizon& fq)
{
    try {
        make_class_config(spec, 100, 2 * kSec, fq);
    } catch (const Error& e) {
        return e.what();
    }
    return "(accepted)";
}

TEST(FqHorizonCheck, AClassHorizonBeyondFqsIsRefusedInOneLine)
{
    EXPECT_EQ(refusal({.id = 10, .rate_bps = 1'000'000, .horizon_ns = 30 * kSec}, kFq10s),
              "class 10: horizon 30s exceeds sch_fq's horizon 10s on eth0 (attach --fq-horizon raises it)");
    // The default horizon (2s here) is checked like a given one.
    EXPECT_EQ(refusal({.id = 3, .rate_bps = 1'000'000}, {kSec, ""}),
              "class 3: horizon 2s exceeds sch_fq's horizon 1s");
    // fq keeps its horizon in whole microseconds: 10s + 500ns is 10s to the kernel.
    EXPECT_EQ(refusal({.id = 1, .rate_bps = 1'000'000, .horizon_ns = 10 * kSec + 500}, {10 * kSec + 500, ""}),
              "class 1: horizon 10000000.5us exceeds sch_fq's horizon 10s");
}

TEST(FqHorizonCheck, UpToFqsHorizonAndWithoutFqIsAccepted)
{
    EXPECT_EQ(refusal({.id = 10, .rate_bps = 1'000'000, .horizon_ns = 10 * kSec}, kFq10s), "(accepted)");
    EXPECT_EQ(refusal({.id = 10, .rate_bps = 1'000'000}, kFq10s), "(accepted)");
    // Police mode: no sch_fq, nothing to fit (the range check still applies).
    EXPECT_EQ(refusal({.id = 10, .rate_bps = 1'000'000, .horizon_ns = 60 * kSec}, {}), "(accepted)");
    EXPECT_NO_THROW(check_fits_fq_horizon(10, 60 * kSec, {}));
}

// apply -f checks a file's classes against the file's own fq horizon (the one apply installs),
// before anything changes, with the JSON path in front.
TEST(FqHorizonCheck, AFileIsCheckedAgainstItsOwnFqHorizon)
{
    auto error = [](const std::string& text) {
        try {
            parse_config(text, host_cgroups());
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    EXPECT_EQ(error(R"({"devices": [{"device": "eth0", "classes": [{"id": 10, "rate": "5mbit", "horizon": "30s"}]}]})"),
              "devices[0].classes[0]: class 10: horizon 30s exceeds sch_fq's horizon 10s "
              "(devices[0].fq.horizon raises it)");
    EXPECT_EQ(error(R"({"devices": [{"device": "eth0", "fq": {"horizon": "1s"},
                                     "classes": [{"id": 1, "rate": "5mbit", "horizon": "1s"},
                                                 {"id": 2, "rate": "5mbit"}]}]})"),
              "devices[0].classes[1]: class 2: horizon 2s exceeds sch_fq's horizon 1s "
              "(devices[0].fq.horizon raises it)");
    EXPECT_EQ(error(R"({"devices": [{"device": "eth0", "fq": {"horizon": "30s"},
                                     "classes": [{"id": 10, "rate": "5mbit", "horizon": "30s"}]}]})"),
              "(accepted)");
    EXPECT_EQ(error(R"({"devices": [{"device": "eth0", "mode": "police",
                                     "classes": [{"id": 10, "rate": "5mbit", "horizon": "30s"}]}]})"),
              "(accepted)");
}

}  // namespace
