// An HTB setup, as tc's JSON shows it, translated into a device's configuration (`import-htb`):
// classes from `tc -j class show` (or the text lines iproute2 before 6.2 writes), the default
// class and leaf qdiscs from `tc -j qdisc show`, rules from `tc -j filter show`. What has no
// equivalent is left out and named in a note, one line each; what cannot be read or mapped at
// all is an Error of one line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace shaperctl {

// One of tc's outputs and how errors name it ("--classes tree.json").
struct TcOutput {
    std::string name;
    std::string text;
};

struct HtbImport {
    ShaperConfig config;             // egress, in the given mode; horizons resolved
    std::vector<std::string> notes;  // what was not carried or was changed, one line each
};

// The HTB qdisc's tree (its classes must all be in `classes`) in `mode` (SHAPER_MODE_*).
HtbImport import_htb(const TcOutput& classes, const std::optional<TcOutput>& qdiscs,
                     const std::optional<TcOutput>& filters, uint32_t mode);

// The configuration file of one device, as dump writes it; checked as apply checks a file, so
// that what is printed is what apply takes (Error otherwise).
nlohmann::ordered_json htb_config_file(const std::string& device, const ShaperConfig& config);

}  // namespace shaperctl
