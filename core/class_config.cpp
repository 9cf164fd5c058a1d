#include "core/class_config.h"

#include <algorithm>
#include <string>

#include "core/units.h"
#include "core/error.h"

namespace shaperctl {
namespace {

// Clock time of `bytes` at a rate's ns_per_byte_fp.
uint64_t bytes_ns(uint64_t bytes, uint64_t per_byte_fp)
{
    return (uint64_t)(((unsigned __int128)bytes * per_byte_fp) >> SHAPER_NS_FRAC_BITS);
}

const char* unit_of(FieldKind kind)
{
    switch (kind) {
    case FieldKind::Rate: return "bit";
    case FieldKind::Size: return "b";
    case FieldKind::Time: return "ns";
    default: return "";
    }
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

void validate_class(const ClassSpec& spec, uint32_t max_classes, const FqHorizon& fq)
{
    const std::string name = "class " + std::to_string(spec.id);
    if (spec.id == 0 || spec.id >= max_classes)
        throw Error("class id " + std::to_string(spec.id) + " is out of range (1 to " +
                    std::to_string(max_classes - 1) + ")");
    if (spec.parent >= max_classes)
        throw Error(name + ": parent id " + std::to_string(spec.parent) + " is out of range (1 to " +
                    std::to_string(max_classes - 1) + ")");
    if (spec.parent == spec.id)
        throw Error(name + " cannot be its own parent");
    for (const ClassField& f : class_fields()) {
        if (f.kind == FieldKind::ClassId || f.kind == FieldKind::Switch)
            continue;
        const int64_t v = f.get(spec);
        const char* unit = unit_of(f.kind);
        if (v < f.min || v > f.max)
            throw Error(name + ": " + f.noun + " " + std::to_string(v) + unit + " is out of range (" +
                        std::to_string(f.min) + unit + " to " + std::to_string(f.max) + unit + ")");
    }
    if (spec.ceil_bps && spec.ceil_bps < spec.rate_bps)
        throw Error(name + ": ceil " + format_rate(spec.ceil_bps) + " is below its rate " +
                    format_rate(spec.rate_bps) + " (the ceil is the most it may send)");
    if (spec.ceil_bps && !spec.parent)
        throw Error(name + ": ceil needs a parent to borrow from (a top-level class's rate is its cap)");
    check_fits_fq_horizon(spec.id, spec.horizon_ns, fq);
    if (bytes_ns(spec.burst_bytes, ns_per_byte_fp(spec.rate_bps)) > SHAPER_BURST_MAX_NS)
        throw Error(name + ": burst " + std::to_string(spec.burst_bytes) +
                    "b is more than an hour of credit at this rate");
}

shaper_class_config make_class_config(ClassSpec spec, uint32_t max_classes,
                                      uint64_t default_horizon_ns, const FqHorizon& fq)
{
    if (!spec.horizon_ns)
        spec.horizon_ns = default_horizon_ns;
    validate_class(spec, max_classes, fq);
    return class_config_of(spec);
}

shaper_class_config class_config_of(const ClassSpec& spec)
{
    shaper_class_config config{};
    config.rate_bps = spec.rate_bps;
    config.ns_per_byte_fp = ns_per_byte_fp(spec.rate_bps);
    config.ceil_bps = spec.ceil_bps;
    config.ceil_ns_per_byte_fp = spec.ceil_bps ? ns_per_byte_fp(spec.ceil_bps) : 0;
    config.prio = spec.prio;
    config.burst_ns = bytes_ns(spec.burst_bytes, config.ns_per_byte_fp);
    config.horizon_ns = spec.horizon_ns;
    config.burst_bytes = (uint32_t)spec.burst_bytes;
    config.overhead = spec.overhead;
    config.mpu = spec.mpu;
    config.parent_id = spec.parent;
    config.flags = SHAPER_CLASS_PRESENT | (spec.aqm ? SHAPER_CLASS_AQM : 0) |
                   (spec.ecn ? SHAPER_CLASS_ECN : 0) | (spec.sparse ? SHAPER_CLASS_SPARSE : 0) |
                   (spec.fair ? SHAPER_CLASS_FAIR : 0) | (spec.ceil_bps ? SHAPER_CLASS_CEIL : 0);
    config.aqm_target_ns = spec.aqm_target_ns;
    config.aqm_interval_ns = spec.aqm_interval_ns;
    config.fair_tolerance_pm = spec.fair_tolerance;
    config.aqm_floor_ns = bytes_ns(SHAPER_AQM_FLOOR_BYTES, config.ns_per_byte_fp);
    // On top of the burst, two frames: the price of sparse flows.
    config.sparse_allowance_ns = bytes_ns(SHAPER_SPARSE_ALLOWANCE_BYTES, config.ns_per_byte_fp);
    return config;
}

ClassSpec class_spec_from_config(uint32_t id, const shaper_class_config& config)
{
    ClassSpec spec;
    spec.id = id;
    spec.rate_bps = config.rate_bps;
    spec.ceil_bps = config.ceil_bps;
    spec.prio = config.prio;
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
    // 0: written by a control plane that knew no tolerance, so the datapath's default.
    spec.fair_tolerance = config.fair_tolerance_pm ? config.fair_tolerance_pm : SHAPER_FAIR_TOLERANCE_DEFAULT_PM;
    return spec;
}

}  // namespace shaperctl
