// shaperctl's filter on one of the device's tc clsact hooks, egress or ingress (through libbpf's
// tc API).
#pragma once

#include <cstdint>

#include "core/direction.h"

namespace shaperctl {

// Our filter's priority on the hook. tc runs filters in ascending priority and a program
// attached at 1 (Cilium's default, and shaperctl's before) leaves nothing room to run before it:
// the middle of 1..65535 leaves room on both sides for filters that must run before us
// (classifiers whose marks our rules match) or after us (we end no chain).
constexpr uint32_t kTcFilterPriority = 0x8000;
// Where builds before that one put it: upgrades find and remove it there.
constexpr uint32_t kLegacyTcFilterPriority = 1;

// Attaches (or atomically replaces) the program as our filter at `priority`; returns whether
// it created the clsact qdisc (and may remove it).
bool attach_filter(int ifindex, int prog_fd, uint32_t priority,
                          Direction side = Direction::Egress);

// Removes our filter; removes clsact too when remove_clsact and it holds nothing else. Returns
// whether it removed clsact.
bool detach_filter(int ifindex, uint32_t priority, bool remove_clsact,
                          Direction side = Direction::Egress);

// The program id our filter runs, 0 when there is none.
uint32_t filter_prog_id(int ifindex, uint32_t priority, Direction side = Direction::Egress);

}  // namespace shaperctl
