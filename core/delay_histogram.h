// How long the shaper held a class's packets, as the datapath counts them (bpf/delay.h): one
// count per bucket and the delays' sum, summed over CPUs. Status, its table and the exporter's
// histogram read the buckets' bounds and the quantile estimate from here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "shaper_abi.h"

namespace shaperctl {

struct DelayHistogram {
    std::array<uint64_t, SHAPER_DELAY_BUCKETS> buckets{};  // packets per bucket, not cumulative
    uint64_t sum_ns = 0;

    uint64_t count() const;
    DelayHistogram& operator+=(const DelayHistogram& other);
};

// Bucket b's upper bound in ns, inclusive (a Prometheus `le`); nullopt for the last one, which
// holds everything longer than the one before.
std::optional<uint64_t> delay_bound_ns(size_t bucket);

// The bucket the datapath counts a delay in.
size_t delay_bucket_of(uint64_t delay_ns);

// The q-quantile (0 < q <= 1), estimated: the delay at which the cumulative count reaches
// q x count, linear within its bucket (which bounds the error: a factor of 2 below 33.6 ms, 4
// above); the last bucket gives its lower bound. nullopt when nothing was counted.
std::optional<uint64_t> delay_quantile_ns(const DelayHistogram& histogram, double q);

}  // namespace shaperctl
