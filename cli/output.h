// What shaperctl prints: the status JSON schema (documented in README.md; keep it stable) and
// the aligned tables people read.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loader/doctor.h"
#include "loader/shaper.h"

namespace shaperctl {

nlohmann::ordered_json status_json(const DeviceStatus& status);
// status_json(status).dump(2), without building a JSON value per class (100,000 classes).
std::string status_json_text(const DeviceStatus& status);
std::string status_table(const DeviceStatus& status);

nlohmann::ordered_json list_json(const std::vector<ManagedDevice>& devices);
std::string list_table(const std::vector<ManagedDevice>& devices);

// doctor: {"ok": bool, "summary": {"ok": n, "warn": n, "fail": n}, "findings": [{"check",
// "status", "detail", "hint"}]}, and the same as aligned lines with a "fix:" line under each
// finding that has a hint.
nlohmann::ordered_json doctor_json(const std::vector<Finding>& findings);
std::string doctor_table(const std::vector<Finding>& findings);

}  // namespace shaperctl
