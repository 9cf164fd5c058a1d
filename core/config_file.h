// The configuration file of `apply` and the output of `dump`: JSON in the CLI's vocabulary
// ("rate": "20mbit"), one entry per device. Schema: packaging/shaperctl-config.schema.json.
//
// Parsing checks the whole file before anything is done with it: unknown or repeated keys,
// types, every value as the CLI would parse it, prefs and class ids unique, and each device's
// configuration as a whole by check_config(), as every command's change is checked (class
// horizons within its fq horizon in edt mode, parents exist and form a tree at most
// SHAPER_MAX_DEPTH deep, rules name classes of the file, the default class exists, the rule set
// fits the datapath). A device entry is one side of the device ("direction", egress when
// absent). Errors are one line that starts with the JSON path:
// `devices[0].classes[3].rate: bad rate "10mbt": ...`.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/cgroup_names.h"
#include "core/config.h"
#include "core/config_check.h"

namespace shaperctl {

struct ConfigDevice {
    std::string name;
    std::string path;  // "devices[0]"
    ShaperConfig config;
    std::map<uint32_t, size_t> class_index;  // class id -> its index in "classes"
    std::map<uint32_t, size_t> rule_index;   // pref -> its index in "rules"
    CheckedRules rules;                      // compiled once, by check_config()
};

struct ConfigFile {
    std::vector<ConfigDevice> devices;
};

// Keys each object of the file accepts (the schema lists the same).
const std::vector<std::string>& config_keys(const std::string& object);  // "file" "device" "fq" "class" "rule" "cgroup"

// Whether a device's receive side has (or, once apply attaches it, will have) its ACKs paced:
// its classes' CoDel defaults follow (class_defaults()). Not given: paced, as attach tries.
using AcksPaced = std::function<bool(const std::string& device)>;

// `cgroups` names the cgroups of rules (loader/cgroup.h: host_cgroups(), this machine's).
ConfigFile parse_config(const std::string& text, const CgroupNames& cgroups, const AcksPaced& acks_paced = {});
// Reads and parses a file; errors are prefixed with its name.
ConfigFile load_config(const std::string& path, const CgroupNames& cgroups, const AcksPaced& acks_paced = {});

// The file form of devices' configurations (what dump prints; apply of it changes nothing).
nlohmann::ordered_json config_json(const std::vector<std::pair<std::string, ShaperConfig>>& devices,
                                   const CgroupNames& cgroups);

}  // namespace shaperctl
