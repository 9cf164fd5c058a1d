#include "loader/direction.h"

#include "loader/error.h"
#include "loader/mode.h"

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

ClassSpec class_defaults(Direction direction)
{
    ClassSpec spec;
    if (direction == Direction::Ingress) {
        spec.aqm = true;
        spec.aqm_target_ns = kIngressDefaultTargetNs;
        spec.aqm_interval_ns = kIngressDefaultIntervalNs;
    }
    return spec;
}

ClassSpec class_defaults(Direction direction, uint32_t mode)
{
    ClassSpec spec = class_defaults(direction);
    spec.horizon_ns = direction == Direction::Ingress ? kIngressDefaultHorizonNs : mode_horizon(mode);
    return spec;
}

Direction direction_from_name(const std::string& name)
{
    for (Direction d : {Direction::Egress, Direction::Ingress})
        if (name == direction_name(d))
            return d;
    throw Error("bad direction \"" + name + "\" (use egress or ingress)");
}

}  // namespace shaperctl
