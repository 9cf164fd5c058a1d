// The exporter's Prometheus text exposition (format 0.0.4) of devices' status: every family
// once, its samples under it. A scrape keeps each class's numbers (120 bytes, not its text) and
// writes the text a piece at a time as the socket takes it, each line in place into the piece
// (100,000 classes make 1.6 million samples, 91 MB: never held whole).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/shaper.h"

namespace shaperctl {

// A managed side that is gone or could not be read (shaperctl_device_up 0).
struct DownDevice {
    std::string name;
    Direction direction = Direction::Egress;
};

// What the text says of one class.
struct ClassSample {
    uint32_t id = 0, parent = 0;
    uint64_t rate_milli_bytes = 0, ceil_milli_bytes = 0, spare_milli_bytes = 0;  // per second
    uint64_t burst_bytes = 0, horizon_ns = 0, backlog_ns = 0;
    ClassCounters counters;

    static ClassSample of(const ClassStatus& c);
};

// One device side read for a scrape: its status (classes left out) and its classes' numbers.
struct DeviceSamples {
    DeviceStatus status;
    std::vector<ClassSample> classes;
};

// The text of a scrape, written a piece at a time.
class MetricsWriter {
public:
    MetricsWriter(std::vector<DeviceSamples> devices, std::vector<DownDevice> down);
    ~MetricsWriter();
    MetricsWriter(const MetricsWriter&) = delete;
    MetricsWriter& operator=(const MetricsWriter&) = delete;

    // Appends the next whole lines, about `size` bytes, to `out`; false once the text is complete.
    bool next(std::string& out, size_t size);

private:
    struct Position;
    std::unique_ptr<Position> at_;
};

// An ingress side's series carry direction="ingress" beside the device; egress series have no
// direction label, as before ingress existed, so they stay the same series.
std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down);

}  // namespace shaperctl
