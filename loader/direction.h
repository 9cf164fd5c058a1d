// A device's two sides. Each is an instance of the same datapath with its own pinned maps:
// classes, rules, default class and counters apart, attached and detached apart.
#pragma once

#include <string>

#include "loader/class_config.h"

namespace shaperctl {

enum class Direction { Egress, Ingress };

const char* direction_name(Direction direction);  // "egress" or "ingress"

inline Direction opposite(Direction direction)
{
    return direction == Direction::Ingress ? Direction::Egress : Direction::Ingress;
}

// A new class's settings before the operator's options. Ingress has no queue: CoDel on the
// virtual backlog is what tells senders to slow down, so it is on, with a target and interval
// near a LAN's round trip, and a horizon of tens of ms bounds what passes beyond the rate.
ClassSpec class_defaults(Direction direction);
// The same with the horizon the side stores for a class given none (the mode's, on egress).
ClassSpec class_defaults(Direction direction, uint32_t mode);
// "egress" or "ingress" to a side; Error naming the bad text otherwise.
Direction direction_from_name(const std::string& name);

extern const uint64_t kIngressDefaultHorizonNs;
extern const uint64_t kIngressDefaultTargetNs;
extern const uint64_t kIngressDefaultIntervalNs;
// CoDel's target and interval for a receive side whose ACKs are paced (the send side attached in
// edt mode, bpf/ack_pace.h): its senders feel the virtual backlog as a queue's, and the unpaced
// defaults mark them down to an idle class (bench/README.md, ingress).
extern const uint64_t kIngressPacedTargetNs;
extern const uint64_t kIngressPacedIntervalNs;

}  // namespace shaperctl
