// `shaperctl exporter`: the counters of every managed device as Prometheus metrics, served over
// HTTP (cpp-httplib) at /metrics.
#pragma once

#include <string>
#include <vector>

#include "loader/shaper.h"

namespace shaperctl {

// Prometheus text exposition (format 0.0.4) of the devices' status; `down` names managed
// devices that are gone or could not be read (shaperctl_device_up 0).
std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<std::string>& down);

// "127.0.0.1:9464", "[::1]:9464", ":9464" (every address) into host and port; Error otherwise.
std::pair<std::string, int> parse_listen(const std::string& listen);

// Binds `listen` (in the namespace shaperctl started in), then enters `netns` if given, and
// serves the devices of that namespace until SIGTERM or SIGINT. Error: one line (e.g. the port
// is in use).
void run_exporter(const std::string& listen, const std::string& netns);

}  // namespace shaperctl
