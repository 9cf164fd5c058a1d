// dump, apply -f and detach -f: whole configurations of devices (core/config_file.h).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/class_spec.h"

namespace shaperctl {

// Prints on stderr what the classes of `dev` promise but cannot keep (core/config_check.h).
void warn_of_guarantees(const std::string& dev, const std::vector<ClassSpec>& classes);

// The configuration of one attached device, or of every attached device of this namespace
// (dev ""), in the file format of apply.
nlohmann::ordered_json dump_config(const std::string& dev);

// Makes the devices of the file match it: attaches where needed, then classes, rules and the
// default class with the fewest map updates, in a safe order. The whole file, and its fit with
// the devices' state (mode, max_classes), is checked before anything changes; the diff is
// printed on `out` first, one line per change ("no changes" when there are none). Dry run:
// prints only. Error: one line, prefixed with the file name and the JSON path.
void apply_file(const std::string& path, bool dry_run, std::ostream& out);

// Detaches every device of the file that is attached (a file checked as apply checks it);
// devices not attached or absent are skipped. Error after trying them all if one failed.
void detach_file(const std::string& path, std::ostream& out);

}  // namespace shaperctl
