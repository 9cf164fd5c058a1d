// A device's two sides. Each is an instance of the same datapath with its own pinned maps:
// classes, rules, default class and counters apart, attached and detached apart.
#pragma once

#include <string>

#include "core/class_config.h"

namespace shaperctl {

enum class Direction { Egress, Ingress };

const char* direction_name(Direction direction);  // "egress" or "ingress"

inline Direction opposite(Direction direction)
{
    return direction == Direction::Ingress ? Direction::Egress : Direction::Ingress;
}

// A new class's settings before the operator's options. Ingress has no queue: CoDel on the
// virtual backlog is what tells senders to slow down, so it is on, with a target and interval
// near a LAN's round trip (kIngressDefault*), or where the side's ACKs are paced (acks_paced:
// its send side attached in edt mode, as attach --ingress does where it can) the longer paced
// ones (kIngressPaced*); a horizon of tens of ms bounds what passes beyond the rate.
ClassSpec class_defaults(Direction direction, bool acks_paced = false);
// The horizon a class given none stores: the mode's on egress. On ingress 150 ms, or the time
// 100 full frames take at the class's rate where that is longer (2 Mbit/s: 606 ms): a slow
// class's senders start with four initial windows, and a horizon they overrun on their first
// round trip is a drop, not a mark (bench/README.md, ingress).
uint64_t default_horizon(Direction direction, uint32_t mode, uint64_t rate_bps);
// class_defaults(direction, acks_paced) with the horizon a class of that rate given none stores.
ClassSpec class_defaults(Direction direction, uint32_t mode, uint64_t rate_bps, bool acks_paced = false);
// A horizon of 0 means the default for the class's rate on its side in its mode: resolved here
// alone, and found here where a stored one is that default (then left unsaid, so that a new rate
// brings its own).
void resolve_horizon(ClassSpec& spec, Direction direction, uint32_t mode);
bool horizon_is_default(const ClassSpec& spec, Direction direction, uint32_t mode);
// "egress" or "ingress" to a side; Error naming the bad text otherwise.
Direction direction_from_name(const std::string& name);

extern const uint64_t kIngressDefaultHorizonNs;  // the shortest default; see default_horizon()
extern const uint64_t kIngressDefaultTargetNs;
extern const uint64_t kIngressDefaultIntervalNs;
// CoDel's target and interval for a receive side whose ACKs are paced (the send side attached in
// edt mode, bpf/ack_pace.h): its senders feel the virtual backlog as a queue's, and the unpaced
// defaults mark them down to an idle class with ECN (−10 % at 200 Mbit/s; unpaced senders, which
// feel no backlog, retransmit less with the short ones: bench/README.md, ingress).
extern const uint64_t kIngressPacedTargetNs;
extern const uint64_t kIngressPacedIntervalNs;

}  // namespace shaperctl
