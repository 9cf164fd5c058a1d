// What shaperctl prints: the status JSON schema (documented in README.md; keep it stable) and
// the aligned tables people read.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "loader/containers.h"
#include "loader/doctor.h"
#include "loader/shaper.h"
#include "status_json.h"
#include "status_table.h"

namespace shaperctl {

// `status`: a device's status as JSON (--json) or tables, written to `out` as the classes are read.
void print_status(const Shaper& shaper, std::chrono::nanoseconds sample, bool json, std::ostream& out);

// `list`: each side attached, with the container (shaperctl-cni's records) whose host-side
// device it is, if any.
nlohmann::ordered_json list_json(const std::vector<ManagedDevice>& devices,
                                 const std::vector<ContainerRecord>& containers = {});
std::string list_table(const std::vector<ManagedDevice>& devices, const std::vector<ContainerRecord>& containers = {});

// doctor: {"ok": bool, "summary": {"ok": n, "warn": n, "fail": n}, "findings": [{"check",
// "status", "detail", "hint"}]}, and the same as aligned lines with a "fix:" line under each
// finding that has a hint.
nlohmann::ordered_json doctor_json(const std::vector<Finding>& findings);
std::string doctor_table(const std::vector<Finding>& findings);

}  // namespace shaperctl
