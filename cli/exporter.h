// `shaperctl exporter`: the counters of every managed device as Prometheus metrics, served at
// /metrics over HTTP or HTTPS (exporter_http.h, exporter_web_config.h).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "exporter_metrics.h"
#include "loader/shaper.h"

namespace shaperctl {

// "127.0.0.1:9464", "[::1]:9464", ":9464" (every address) into host and port; Error otherwise.
std::pair<std::string, int> parse_listen(const std::string& listen);

// Reads `web_config` (if given), binds `listen` (in the namespace shaperctl started in), enters
// `netns` if given, drops every capability but those reading the maps takes, and serves the
// devices of that namespace until SIGTERM or SIGINT. Error: one line (e.g. the port is in use,
// a field of the web configuration is wrong). A client has `head_timeout` from its connection
// to send a request's head.
void run_exporter(const std::string& listen, const std::string& netns, const std::string& web_config,
                  std::chrono::nanoseconds head_timeout);

}  // namespace shaperctl
