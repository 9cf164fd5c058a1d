#include "loader/direction.h"

namespace shaperctl {

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

}  // namespace shaperctl
