// The exporter's Prometheus text exposition (format 0.0.4) of devices' status: every family
// once, its samples under it, written in one pass per family into one string sized up front (no
// value or label list per sample: 100,000 classes make 1.6 million samples).
#pragma once

#include <string>
#include <vector>

#include "loader/shaper.h"

namespace shaperctl {

// A managed side that is gone or could not be read (shaperctl_device_up 0).
struct DownDevice {
    std::string name;
    Direction direction = Direction::Egress;
};

// An ingress side's series carry direction="ingress" beside the device; egress series have no
// direction label, as before ingress existed, so they stay the same series.
std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down);

}  // namespace shaperctl
