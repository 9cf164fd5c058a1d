#include "core/delay_histogram.h"

#include <cmath>

namespace shaperctl {

uint64_t DelayHistogram::count() const
{
    uint64_t n = 0;
    for (uint64_t b : buckets)
        n += b;
    return n;
}

DelayHistogram& DelayHistogram::operator+=(const DelayHistogram& other)
{
    for (size_t b = 0; b < buckets.size(); b++)
        buckets[b] += other.buckets[b];
    sum_ns += other.sum_ns;
    return *this;
}

std::optional<uint64_t> delay_bound_ns(size_t bucket)
{
    if (bucket + 1 >= SHAPER_DELAY_BUCKETS)
        return std::nullopt;
    // Doubling through SHAPER_DELAY_DOUBLINGS, then quadrupling.
    const size_t doubled = bucket <= SHAPER_DELAY_DOUBLINGS ? bucket : SHAPER_DELAY_DOUBLINGS;
    const size_t quadrupled = bucket - doubled;
    return uint64_t(1) << (SHAPER_DELAY_FIRST_SHIFT + doubled + 2 * quadrupled);
}

size_t delay_bucket_of(uint64_t delay_ns)
{
    for (size_t b = 0; b + 1 < SHAPER_DELAY_BUCKETS; b++)
        if (delay_ns <= *delay_bound_ns(b))
            return b;
    return SHAPER_DELAY_BUCKETS - 1;
}

std::optional<uint64_t> delay_quantile_ns(const DelayHistogram& histogram, double q)
{
    const uint64_t total = histogram.count();
    if (!total)
        return std::nullopt;
    const double rank = std::max(1.0, std::ceil(q * double(total)));
    uint64_t below = 0;
    for (size_t b = 0; b < histogram.buckets.size(); b++) {
        const uint64_t n = histogram.buckets[b];
        const uint64_t lower = b ? *delay_bound_ns(b - 1) : 0;
        if (n && double(below + n) >= rank) {
            const std::optional<uint64_t> upper = delay_bound_ns(b);
            if (!upper)
                return lower;
            return lower + uint64_t(double(*upper - lower) * (rank - double(below)) / double(n));
        }
        below += n;
    }
    return *delay_bound_ns(SHAPER_DELAY_BUCKETS - 2);
}

}  // namespace shaperctl
