#include "loader/direction.h"

namespace shaperctl {

const uint64_t kIngressDefaultHorizonNs = 150'000'000;  // 150 ms
const uint64_t kIngressDefaultTargetNs = 2'000'000;     // 2 ms
const uint64_t kIngressDefaultIntervalNs = 5'000'000;   // 5 ms

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
