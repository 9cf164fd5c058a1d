// `status --watch INTERVAL`: the status table redrawn every INTERVAL with per-class rates over
// the last interval, until Ctrl-C (exit 0). With --json: one JSON object per line instead.
#pragma once

#include <cstdint>
#include <string>

#include "core/direction.h"

namespace shaperctl {

void watch_status(const std::string& dev, uint64_t interval_ns, bool json,
                  Direction side = Direction::Egress);

}  // namespace shaperctl
