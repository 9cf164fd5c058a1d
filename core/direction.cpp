#include "core/direction.h"

#include <algorithm>

#include "core/error.h"
#include "core/mode.h"

namespace shaperctl {

const uint64_t kIngressDefaultHorizonNs = 150'000'000;  // 150 ms
const uint64_t kIngressDefaultTargetNs = 2'000'000;     // 2 ms
const uint64_t kIngressDefaultIntervalNs = 5'000'000;   // 5 ms
const uint64_t kIngressPacedTargetNs = 5'000'000;       // 5 ms
const uint64_t kIngressPacedIntervalNs = 50'000'000;    // 50 ms

const char* direction_name(Direction direction)
{
    return direction == Direction::Ingress ? "ingress" : "egress";
}

ClassSpec class_defaults(Direction direction, bool acks_paced)
{
    ClassSpec spec;
    if (direction == Direction::Ingress) {
        spec.aqm = true;
        spec.aqm_target_ns = acks_paced ? kIngressPacedTargetNs : kIngressDefaultTargetNs;
        spec.aqm_interval_ns = acks_paced ? kIngressPacedIntervalNs : kIngressDefaultIntervalNs;
    }
    return spec;
}

uint64_t default_horizon(Direction direction, uint32_t mode, uint64_t rate_bps)
{
    if (direction == Direction::Egress)
        return mode_horizon(mode);
    // 100 full frames (1514 B) at the rate, rounded up to a whole ms, where that is longer.
    constexpr uint64_t kFrames = 100;
    const uint64_t frames_ms = rate_bps ? (kFrames * 1514 * 8 * 1000 + rate_bps - 1) / rate_bps : 0;
    const uint64_t frames_ns = frames_ms * 1'000'000;
    return std::clamp<uint64_t>(frames_ns, kIngressDefaultHorizonNs, SHAPER_HORIZON_MAX_NS);
}

ClassSpec class_defaults(Direction direction, uint32_t mode, uint64_t rate_bps, bool acks_paced)
{
    ClassSpec spec = class_defaults(direction, acks_paced);
    spec.horizon_ns = default_horizon(direction, mode, rate_bps);
    return spec;
}

void resolve_horizon(ClassSpec& spec, Direction direction, uint32_t mode)
{
    if (!spec.horizon_ns)
        spec.horizon_ns = default_horizon(direction, mode, spec.rate_bps);
}

bool horizon_is_default(const ClassSpec& spec, Direction direction, uint32_t mode)
{
    return spec.horizon_ns == default_horizon(direction, mode, spec.rate_bps);
}

Direction direction_from_name(const std::string& name)
{
    for (Direction d : {Direction::Egress, Direction::Ingress})
        if (name == direction_name(d))
            return d;
    throw Error("bad direction \"" + name + "\" (use egress or ingress)");
}

}  // namespace shaperctl
