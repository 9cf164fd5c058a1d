#include "loader/class_config.h"

#include <algorithm>
#include <string>

#include "cli/units.h"
#include "loader/error.h"

namespace shaperctl {
namespace {

void check_range(const char* field, uint32_t id, uint64_t value, uint64_t min, uint64_t max,
                 const char* unit)
{
    if (value < min || value > max)
        throw Error("class " + std::to_string(id) + ": " + field + " " + std::to_string(value) +
                    unit + " is out of range (" + std::to_string(min) + unit + " to " +
                    std::to_string(max) + unit + ")");
}

}  // namespace

uint64_t ns_per_byte_fp(uint64_t rate_bps)
{
    const unsigned __int128 numerator = (unsigned __int128)8'000'000'000ull << SHAPER_NS_FRAC_BITS;
    return (uint64_t)((numerator + rate_bps - 1) / rate_bps);
}

void check_fits_fq_horizon(uint32_t id, uint64_t horizon_ns, const FqHorizon& fq)
{
    const uint64_t fq_ns = fq.ns / 1000 * 1000;
    if (fq.ns && horizon_ns > fq_ns)
        throw Error("class " + std::to_string(id) + ": horizon " + format_time(horizon_ns) +
                    " exceeds sch_fq's horizon " + format_time(fq_ns) + fq.hint);
}

shaper_class_config make_class_config(const ClassSpec& spec, uint32_t max_classes,
                                      uint64_t default_horizon_ns, const FqHorizon& fq)
{
    if (spec.id == 0 || spec.id >= max_classes)
        throw Error("class id " + std::to_string(spec.id) + " is out of range (1 to " +
                    std::to_string(max_classes - 1) + ")");
    if (spec.parent >= max_classes)
        throw Error("class " + std::to_string(spec.id) + ": parent id " +
                    std::to_string(spec.parent) + " is out of range (1 to " +
                    std::to_string(max_classes - 1) + ")");
    if (spec.parent == spec.id)
        throw Error("class " + std::to_string(spec.id) + " cannot be its own parent");
    check_range("rate", spec.id, spec.rate_bps, SHAPER_RATE_MIN_BPS, SHAPER_RATE_MAX_BPS, "bit");
    check_range("burst", spec.id, spec.burst_bytes, 0, SHAPER_BURST_MAX_BYTES, "b");
    check_range("mpu", spec.id, spec.mpu, 0, SHAPER_MPU_MAX, "b");
    if (spec.overhead < SHAPER_OVERHEAD_MIN || spec.overhead > SHAPER_OVERHEAD_MAX)
        throw Error("class " + std::to_string(spec.id) + ": overhead " +
                    std::to_string(spec.overhead) + " is out of range (" +
                    std::to_string(SHAPER_OVERHEAD_MIN) + " to " +
                    std::to_string(SHAPER_OVERHEAD_MAX) + ")");
    uint64_t horizon = spec.horizon_ns ? spec.horizon_ns : default_horizon_ns;
    check_range("horizon", spec.id, horizon, SHAPER_HORIZON_MIN_NS, SHAPER_HORIZON_MAX_NS, "ns");
    check_fits_fq_horizon(spec.id, horizon, fq);

    shaper_class_config config{};
    config.rate_bps = spec.rate_bps;
    config.ns_per_byte_fp = ns_per_byte_fp(spec.rate_bps);
    config.burst_ns = (uint64_t)(((unsigned __int128)spec.burst_bytes * config.ns_per_byte_fp) >>
                                 SHAPER_NS_FRAC_BITS);
    if (config.burst_ns > SHAPER_BURST_MAX_NS)
        throw Error("class " + std::to_string(spec.id) + ": burst " +
                    std::to_string(spec.burst_bytes) +
                    "b is more than an hour of credit at this rate");
    config.horizon_ns = horizon;
    config.burst_bytes = (uint32_t)spec.burst_bytes;
    config.overhead = spec.overhead;
    config.mpu = spec.mpu;
    config.parent_id = spec.parent;
    check_range("aqm target", spec.id, spec.aqm_target_ns, 1000, 1'000'000'000, "ns");
    check_range("aqm interval", spec.id, spec.aqm_interval_ns, 1000, 10'000'000'000ull, "ns");
    config.flags = SHAPER_CLASS_PRESENT | (spec.aqm ? SHAPER_CLASS_AQM : 0) |
                   (spec.ecn ? SHAPER_CLASS_ECN : 0) | (spec.sparse ? SHAPER_CLASS_SPARSE : 0) |
                   (spec.fair ? SHAPER_CLASS_FAIR : 0);
    config.aqm_target_ns = spec.aqm_target_ns;
    config.aqm_interval_ns = spec.aqm_interval_ns;
    config.aqm_floor_ns = (uint64_t)(((unsigned __int128)SHAPER_AQM_FLOOR_BYTES * config.ns_per_byte_fp) >>
                                     SHAPER_NS_FRAC_BITS);
    const uint64_t two_frames = (uint64_t)(((unsigned __int128)SHAPER_SPARSE_ALLOWANCE_BYTES *
                                            config.ns_per_byte_fp) >> SHAPER_NS_FRAC_BITS);
    config.sparse_allowance_ns = two_frames;  // on top of the burst: the price of sparse flows
    return config;
}

ClassSpec class_spec_from_config(uint32_t id, const shaper_class_config& config)
{
    ClassSpec spec;
    spec.id = id;
    spec.rate_bps = config.rate_bps;
    spec.burst_bytes = config.burst_bytes;
    spec.parent = config.parent_id;
    spec.overhead = config.overhead;
    spec.mpu = config.mpu;
    spec.horizon_ns = config.horizon_ns;
    spec.aqm = config.flags & SHAPER_CLASS_AQM;
    spec.ecn = config.flags & SHAPER_CLASS_ECN;
    spec.sparse = config.flags & SHAPER_CLASS_SPARSE;
    spec.fair = config.flags & SHAPER_CLASS_FAIR;
    spec.aqm_target_ns = config.aqm_target_ns;
    spec.aqm_interval_ns = config.aqm_interval_ns;
    return spec;
}

}  // namespace shaperctl
