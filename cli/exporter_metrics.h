// The exporter's Prometheus text exposition (format 0.0.4) of devices' status, written as the
// classes are read: each metric family's samples go to a buffer of their own, so no status of a
// device is held whole, and the families print in the order declared, samples grouped under
// them.
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

class MetricsWriter {
public:
    MetricsWriter();
    void down(const DownDevice& device);
    // A device's own samples and its rules'; the classes add() takes next are this device's.
    void device(const DeviceStatus& status);
    void add(const ClassStatus& c);
    // What a device wrote so far can be taken back (it failed while being read), to show it down.
    std::vector<size_t> mark() const;
    void take_back(const std::vector<size_t>& mark);
    std::string text() const;

private:
    std::string down_;  // shaperctl_device_up's samples of sides down, listed first
    std::vector<std::string> samples_;  // by family
    std::string labels_;  // the current device's: device="eth0"[,direction="ingress"]
};

// An ingress side's series carry direction="ingress" beside the device; egress series have no
// direction label, as before ingress existed, so they stay the same series.
std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down);

}  // namespace shaperctl
