// `shaperctl exporter`: the counters of every managed device as Prometheus metrics, served at
// /metrics over HTTP or HTTPS (exporter_http.h, exporter_web_config.h).
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

// Prometheus text exposition (format 0.0.4) of the devices' status. An ingress side's series
// carry direction="ingress" beside the device; egress series have no direction label, as
// before ingress existed, so they stay the same series.
std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down);

// "127.0.0.1:9464", "[::1]:9464", ":9464" (every address) into host and port; Error otherwise.
std::pair<std::string, int> parse_listen(const std::string& listen);

// Reads `web_config` (if given), binds `listen` (in the namespace shaperctl started in), enters
// `netns` if given, drops every capability but those reading the maps takes, and serves the
// devices of that namespace until SIGTERM or SIGINT. Error: one line (e.g. the port is in use,
// a field of the web configuration is wrong).
void run_exporter(const std::string& listen, const std::string& netns, const std::string& web_config);

}  // namespace shaperctl
