// The per-class delay histogram: its buckets (core/delay_histogram.h, bpf/delay.h), what the
// datapath counts in them for packets whose stamps are known, its quantile estimates, and the
// Prometheus text the exporter writes of it.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/exporter_metrics.h"
#include "cli/status_json.h"
#include "core/delay_histogram.h"
#include "datapath_fixture.h"

namespace shaperctl::test {
namespace {

TEST(DelayHistogram, BucketsDoubleFrom16usThenQuadrupleToPastTheDefaultHorizon)
{
    EXPECT_EQ(*delay_bound_ns(0), 16'384u);
    EXPECT_EQ(*delay_bound_ns(11), uint64_t(1) << 25);
    EXPECT_EQ(*delay_bound_ns(12), uint64_t(1) << 27);
    EXPECT_EQ(*delay_bound_ns(14), uint64_t(1) << 31);
    EXPECT_GT(*delay_bound_ns(14), SHAPER_DEFAULT_HORIZON_NS);
    EXPECT_FALSE(delay_bound_ns(SHAPER_DELAY_BUCKETS - 1));
    EXPECT_EQ(delay_bucket_of(0), 0u);
    EXPECT_EQ(delay_bucket_of(16'384), 0u) << "a delay on a bound is in its bucket (le)";
    EXPECT_EQ(delay_bucket_of(16'385), 1u);
    EXPECT_EQ(delay_bucket_of(uint64_t(1) << 26), 12u);
    EXPECT_EQ(delay_bucket_of((uint64_t(1) << 31) + 1), SHAPER_DELAY_BUCKETS - 1);
}

TEST(DelayHistogram, QuantilesInterpolateWithinTheirBucket)
{
    DelayHistogram h;
    EXPECT_FALSE(delay_quantile_ns(h, 0.5)) << "nothing counted, nothing estimated";
    h.buckets[0] = 50;  // 0 .. 16.384 us
    h.buckets[5] = 49;  // 262 .. 524 us
    h.buckets[SHAPER_DELAY_BUCKETS - 1] = 1;
    EXPECT_EQ(*delay_quantile_ns(h, 0.5), 16'384u);
    EXPECT_EQ(*delay_quantile_ns(h, 0.99), *delay_bound_ns(5));
    EXPECT_EQ(*delay_quantile_ns(h, 1.0), *delay_bound_ns(SHAPER_DELAY_BUCKETS - 2)) << "the last: its lower bound";
    EXPECT_EQ(*delay_quantile_ns(h, 0.25), 16'384u / 2);
}

// One packet per bucket, each behind a clock put where its delay falls mid-bucket (0 for the
// first: an idle class). Each run's now is only bounded ([before, after], datapath_fixture.h),
// so each packet may fall in any bucket its bounds span, and the counts are judged against those
// bounds. Where every packet's bounds lie within the bucket it was aimed at (a machine that runs
// a program in well under 100 us and is not stalled between putting the clock and the run), each
// bucket holds exactly its packet; a stall (a busy host under TCG: milliseconds) moves a packet's
// bounds, and the judgement with them.
TEST_F(Datapath, DelayHistogramCountsEachStampedPacketInTheBucketOfItsDelay)
{
    add_class({.id = 1, .rate_bps = 8'000'000'000, .burst_bytes = 1514, .horizon_ns = 10 * kSec});
    std::vector<size_t> lowest(SHAPER_DELAY_BUCKETS), highest(SHAPER_DELAY_BUCKETS);
    uint64_t least_sum = 0, most_sum = 0;
    bool aimed = true;  // from the sixth bucket on, each packet's delay bounds within its own
    for (size_t b = 0; b < SHAPER_DELAY_BUCKETS; b++) {
        const uint64_t lower = b ? *delay_bound_ns(b - 1) : 0;
        const uint64_t upper = delay_bound_ns(b).value_or(4 * lower);
        if (b)
            backlog_class(1, lower + (upper - lower) / 2);
        const Verdict v = run(1000, 1);
        ASSERT_EQ(v.action, -1);
        ASSERT_GE(v.tstamp, v.before);
        const uint64_t most = v.tstamp - v.before, least = v.tstamp > v.after ? v.tstamp - v.after : 0;
        lowest[delay_bucket_of(least)]++;
        highest[delay_bucket_of(most)]++;
        least_sum += least;
        most_sum += most;
        if (b >= 5)
            aimed = aimed && delay_bucket_of(least) == b && delay_bucket_of(most) == b;
    }
    const DelayHistogram h = maps_->counters(1).delay;
    EXPECT_EQ(h.count(), SHAPER_DELAY_BUCKETS);
    EXPECT_GE(h.sum_ns, least_sum);
    EXPECT_LE(h.sum_ns, most_sum);
    // Counted up to bucket b: at least the packets whose longest possible delay is in it or
    // below, at most those whose shortest is.
    size_t at_least = 0, at_most = 0, counted = 0;
    for (size_t b = 0; b < SHAPER_DELAY_BUCKETS; b++) {
        at_least += highest[b];
        at_most += lowest[b];
        counted += h.buckets[b];
        EXPECT_GE(counted, at_least) << "bucket " << b;
        EXPECT_LE(counted, at_most) << "bucket " << b;
        if (b >= 5 && aimed) {
            EXPECT_EQ(h.buckets[b], 1u) << "bucket " << b;
        }
    }
}

TEST_F(Datapath, PoliceModeHoldsNothingAndRecordsNoDelay)
{
    set_default_class(1, SHAPER_MODE_POLICE);
    add_class({.id = 1, .rate_bps = 8'000'000, .horizon_ns = 10 * kSec});
    backlog_class(1, kSec / 2);
    ASSERT_EQ(run(1000, 1).action, -1);
    EXPECT_EQ(maps_->counters(1).packets, 1u);
    EXPECT_EQ(maps_->counters(1).delay.count(), 0u);
}

// An edt side "eth0" with class 3 of the given histogram.
DeviceStatus edt_side_with(const DelayHistogram& delay)
{
    DeviceStatus st;
    st.device.name = "eth0";
    st.mode = SHAPER_MODE_EDT;
    ClassStatus c;
    c.spec.id = 3;
    c.spec.rate_bps = 1'000'000;
    c.counters.delay = delay;
    st.classes.push_back(c);
    return st;
}

// The text of an edt side's class: buckets cumulative with `le` in seconds, +Inf last, then
// _sum in seconds and _count; a police side's classes write no histogram rows.
TEST(DelayHistogram, ExporterWritesAPrometheusHistogramPerClassOfAnEdtSide)
{
    DelayHistogram h;
    h.buckets[0] = 2;
    h.buckets[4] = 3;
    h.buckets[SHAPER_DELAY_BUCKETS - 1] = 1;
    h.sum_ns = 3'000'000'123;
    const DeviceStatus edt = edt_side_with(h);
    DeviceStatus police = edt;
    police.device.name = "eth1";
    police.mode = SHAPER_MODE_POLICE;
    const std::string text = metrics_text({edt, police}, {});

    EXPECT_NE(text.find("# TYPE shaperctl_class_delay_seconds histogram\n"), std::string::npos);
    std::vector<std::string> rows;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("shaperctl_class_delay_seconds"))
            rows.push_back(line);
    ASSERT_EQ(rows.size(), SHAPER_DELAY_BUCKETS + 2u);
    const std::string labels = R"(device="eth0",class="3")";
    EXPECT_EQ(rows[0], "shaperctl_class_delay_seconds_bucket{" + labels + R"(,le="0.000016384"} 2)");
    EXPECT_EQ(rows[3], "shaperctl_class_delay_seconds_bucket{" + labels + R"(,le="0.000131072"} 2)");
    EXPECT_EQ(rows[4], "shaperctl_class_delay_seconds_bucket{" + labels + R"(,le="0.000262144"} 5)");
    EXPECT_EQ(rows[14], "shaperctl_class_delay_seconds_bucket{" + labels + R"(,le="2.147483648"} 5)");
    EXPECT_EQ(rows[15], "shaperctl_class_delay_seconds_bucket{" + labels + R"(,le="+Inf"} 6)");
    EXPECT_EQ(rows[16], "shaperctl_class_delay_seconds_sum{" + labels + "} 3.000000123");
    EXPECT_EQ(rows[17], "shaperctl_class_delay_seconds_count{" + labels + "} 6");
}

TEST(DelayHistogram, StatusShowsTheBucketsTheirBoundsAndTheEstimates)
{
    DelayHistogram h;
    h.buckets[4] = 4;
    h.sum_ns = 800'000;
    const DeviceStatus st = edt_side_with(h);
    const nlohmann::ordered_json j = status_json(st);
    ASSERT_EQ(j["delay_bucket_le_ns"].size(), SHAPER_DELAY_BUCKETS);
    EXPECT_EQ(j["delay_bucket_le_ns"][0], 16'384u);
    EXPECT_TRUE(j["delay_bucket_le_ns"][SHAPER_DELAY_BUCKETS - 1].is_null());
    const auto& k = j["classes"][0];
    EXPECT_EQ(k["delay_buckets"][4], 4u);
    EXPECT_EQ(k["delay_sum_ns"], 800'000u);
    EXPECT_EQ(k["delay_p50_ns"], *delay_quantile_ns(h, 0.5));
    EXPECT_EQ(k["delay_p99_ns"], *delay_quantile_ns(h, 0.99));
    EXPECT_EQ(status_json_text(st), j.dump(2)) << "the streamed text is the value's";
}

}  // namespace
}  // namespace shaperctl::test
