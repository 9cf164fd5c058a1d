// status reads the classes a chunk of ids at a time and writes each one out as it is read (the
// exporter reads the same way): the values must be those in the maps (counters summed over every CPU's slot, across the
// class map's batch boundaries), the same as the whole-status path prints, and a class added,
// deleted or added again while status reads must never make it crash or print garbage.

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/exporter_metrics.h"
#include "cli/output.h"
#include "loader/device.h"
#include "loader/fd.h"
#include "loader/shaper.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

constexpr uint32_t kMaxClasses = 8192;

class StatusStream : public DeviceTest {
protected:
    // Outputs read moments apart are compared whole: no router solicitation may pass between.
    void prepare_namespace() override { ns_->disable_ipv6(); }

    // `classes` at rate (id % 50 + 1) mbit, and a /32 rule for each of the first `rules`.
    void apply(const std::vector<uint32_t>& classes, size_t rules)
    {
        json cls = json::array(), rls = json::array();
        for (uint32_t id : classes)
            cls.push_back({{"id", id}, {"rate", std::to_string(id % 50 + 1) + "mbit"}});
        for (size_t i = 0; i < rules; i++)
            rls.push_back({{"pref", i + 1}, {"class", classes[i]},
                           {"dst", "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256) + "/32"}});
        const json file = {{"version", 1},
                           {"devices", {{{"device", "sh0"}, {"mode", "police"}, {"max_classes", kMaxClasses},
                                         {"classes", cls}, {"rules", rls}}}}};
        apply_text(file.dump());
    }
    // CPU slots of the class counters: entry cpu * max_classes + id.
    uint32_t counter_cpus(int stats) const
    {
        bpf_map_info info{};
        uint32_t len = sizeof info;
        EXPECT_EQ(bpf_obj_get_info_by_fd(stats, &info, &len), 0);
        return info.max_entries / kMaxClasses;
    }
    void write_counters(int stats, uint32_t cpu, uint32_t id, const shaper_class_stats& value) const
    {
        const uint32_t key = cpu * kMaxClasses + id;
        ASSERT_EQ(bpf_map_update_elem(stats, &key, &value, BPF_ANY), 0);
    }
};

TEST_F(StatusStream, ManyClassesAcrossBatchesWithEveryCpusCounters)
{
    // Every third id up to 7,498: the class map is read 4,096 ids at a time.
    std::vector<uint32_t> ids;
    for (uint32_t id = 1; id < 7500; id += 3)
        ids.push_back(id);
    apply(ids, 300);
    const shaperctl::Fd stats = pinned("shaper_class_stats");
    const uint32_t cpus = counter_cpus(stats.get());
    ASSERT_GE(cpus, 1u);
    std::map<uint32_t, shaper_class_stats> sums;
    for (uint32_t id : ids)
        for (uint32_t cpu = 0; cpu < cpus; cpu++) {
            shaper_class_stats s{};
            s.packets = id + cpu * 1'000'000ull;
            s.segments = 2 * id + cpu;
            s.bytes = (1ull << 40) + id * 1500ull + cpu;
            s.drops_horizon = cpu + 1;
            s.drops_aqm = id % 7;
            s.ecn_marks = cpu;
            write_counters(stats.get(), cpu, id, s);
            shaper_class_stats& sum = sums[id];
            sum.packets += s.packets, sum.segments += s.segments, sum.bytes += s.bytes;
            sum.drops_horizon += s.drops_horizon, sum.drops_aqm += s.drops_aqm, sum.ecn_marks += s.ecn_marks;
        }
    // Rule hits on every possible CPU: slot s has s + 1 + 1000 * cpu packets there.
    const shaperctl::Fd rule_stats = pinned("shaper_rule_stats");
    const int possible = libbpf_num_possible_cpus();
    for (uint32_t slot = 0; slot < 300; slot++) {
        std::vector<shaper_rule_stats> per_cpu(static_cast<size_t>(possible));
        for (int cpu = 0; cpu < possible; cpu++)
            per_cpu[size_t(cpu)] = {slot + 1 + 1000ull * uint64_t(cpu), 64ull * (slot + 1)};
        ASSERT_EQ(bpf_map_update_elem(rule_stats.get(), &slot, per_cpu.data(), BPF_ANY), 0);
    }

    const Outcome out = sh("status --dev sh0 --json --sample 0");
    ASSERT_EQ(out.status, 0) << out.err;
    const json st = json::parse(out.out);
    ASSERT_EQ(st["classes"].size(), ids.size());
    for (size_t i = 0; i < ids.size(); i++) {
        const json& c = st["classes"][i];
        const shaper_class_stats& sum = sums[ids[i]];
        ASSERT_EQ(c["id"], ids[i]);
        EXPECT_EQ(c["rate_bps"], (ids[i] % 50 + 1) * 1'000'000ull);
        EXPECT_EQ(c["packets"], sum.packets) << ids[i];
        EXPECT_EQ(c["segments"], sum.segments);
        EXPECT_EQ(c["bytes"], sum.bytes);
        EXPECT_EQ(c["drops_horizon"], sum.drops_horizon);
        EXPECT_EQ(c["drops"], sum.drops_horizon + sum.drops_aqm);
        EXPECT_EQ(c["ecn_marks"], sum.ecn_marks);
    }
    const shaperctl::Shaper shaper = shaperctl::Shaper::open_unlocked("sh0");
    const shaperctl::DeviceStatus whole = shaper.status(std::chrono::nanoseconds(0));
    ASSERT_EQ(st["rules"].size(), 300u);
    for (const shaperctl::RuleStatus& r : whole.rules) {
        uint64_t packets = 0;
        for (int cpu = 0; cpu < possible; cpu++)
            packets += r.slot + 1 + 1000ull * uint64_t(cpu);
        EXPECT_EQ(r.counters.packets, packets) << "slot " << r.slot;
        EXPECT_EQ(r.counters.bytes, 64ull * (r.slot + 1) * uint64_t(possible));
        EXPECT_EQ(st["rules"][r.rule.pref - 1]["packets"], packets);
    }

    // What the CLI streamed is what the whole status prints, as JSON and as tables.
    EXPECT_EQ(out.out, shaperctl::status_json_text(whole) + "\n");
    const Outcome table = sh("status --dev sh0 --sample 0");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_EQ(table.out, shaperctl::status_table(whole));
    // The exporter's text carries the same sums.
    const std::string metrics = shaperctl::metrics_text({whole}, {});
    const uint32_t id = ids.back();
    EXPECT_NE(metrics.find("shaperctl_class_packets_total{device=\"sh0\",class=\"" + std::to_string(id) + "\"} " +
                           std::to_string(sums[id].packets) + "\n"),
              std::string::npos);
}

// A class deleted and added again while status samples counts from zero: its rate is 0, never
// the wrap of "now minus the first reading".
TEST_F(StatusStream, ClassAddedAgainDuringTheSampleHasNoRateNotAWrap)
{
    apply({1, 2}, 0);
    const shaperctl::Fd stats = pinned("shaper_class_stats");
    shaper_class_stats busy{};
    busy.packets = 1000;
    busy.bytes = 1'000'000'000;
    write_counters(stats.get(), 0, 1, busy);
    write_counters(stats.get(), 0, 2, busy);
    // In this process, not through two shaperctl runs: in a guest on a busy host those took
    // longer than the sample, and status read the class list between them.
    const uint64_t sample_end = shaperctl::monotonic_ns() + 1'500'000'000ull;
    uint64_t added = 0;
    std::thread churn([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const shaperctl::Shaper shaper = shaperctl::Shaper::open("sh0");
        shaper.del_class(1);
        shaperctl::ClassSpec spec;
        spec.id = 1;
        spec.rate_bps = 5'000'000;
        shaper.add_class(spec);
        added = shaperctl::monotonic_ns();
    });
    const shaperctl::DeviceStatus st =
        shaperctl::Shaper::open_unlocked("sh0").status(std::chrono::milliseconds(1500));
    churn.join();
    if (added > sample_end)
        GTEST_SKIP() << "the class came back after the sample ended: the machine was too slow to tell";
    ASSERT_EQ(st.classes.size(), 2u);
    EXPECT_EQ(st.classes[0].spec.id, 1u);
    EXPECT_EQ(st.classes[0].spec.rate_bps, 5'000'000u);
    EXPECT_EQ(st.classes[0].counters.bytes, 0u);
    EXPECT_EQ(st.classes[0].rate_estimate_bps, 0u);
    EXPECT_EQ(st.classes[1].rate_estimate_bps, 0u);  // counters that did not move
}

// Classes come and go, a batch at a time, while status reads: every output parses, ids ascend,
// the classes nobody touches are all there with their values, and the others show what was
// configured or are absent.
TEST_F(StatusStream, ClassesAddedAndDeletedDuringAReadNeverGiveGarbage)
{
    std::vector<uint32_t> steady;
    for (uint32_t id = 2; id < 8000; id += 2)
        steady.push_back(id);
    apply(steady, 0);
    std::atomic<bool> stop{false};
    std::thread churn([&] {
        const shaperctl::Shaper shaper = shaperctl::Shaper::open("sh0");
        for (uint32_t round = 0; !stop; round++) {
            for (uint32_t id = 1 + round % 2 * 4000; id < 4000 + round % 2 * 4000; id += 202) {
                shaperctl::ClassSpec spec;
                spec.id = id;
                spec.rate_bps = 7'000'000;
                shaper.add_class(spec);
            }
            for (uint32_t id = 1 + round % 2 * 4000; id < 4000 + round % 2 * 4000; id += 202)
                shaper.del_class(id);
        }
    });
    const shaperctl::Shaper reader = shaperctl::Shaper::open_unlocked("sh0");
    for (int i = 0; i < 30; i++) {
        const json st = json::parse(i % 3 ? shaperctl::status_json_text(reader.status(std::chrono::nanoseconds(0)))
                                          : sh("status --dev sh0 --json --sample 0").out);
        size_t steady_seen = 0;
        uint64_t last = 0;
        for (const json& c : st["classes"]) {
            const uint64_t id = c["id"];
            ASSERT_GT(id, last);
            last = id;
            if (id % 2 == 0) {
                steady_seen++;
                EXPECT_EQ(c["rate_bps"], (id % 50 + 1) * 1'000'000ull);
            } else {
                EXPECT_EQ(c["rate_bps"], 7'000'000u) << c.dump();
                EXPECT_EQ(c["packets"], 0u);
            }
        }
        EXPECT_EQ(steady_seen, steady.size());
    }
    stop = true;
    churn.join();
}

}  // namespace
