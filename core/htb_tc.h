// What the two halves of import-htb share (core/htb_import.cpp: the class tree and qdiscs;
// core/htb_filters.cpp: the rules): tc's handles, its JSON read, and the tree as mapped.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/htb_import.h"
#include "core/rule_spec.h"

namespace shaperctl {

// tc's MAJ:MIN, both hexadecimal ("1:1a"); "1:" is a qdisc's handle (minor 0).
struct TcHandle {
    uint32_t major = 0, minor = 0;
    bool operator==(const TcHandle&) const = default;
};

// nullopt when the text is not a handle.
std::optional<TcHandle> parse_tc_handle(std::string_view text);
std::string tc_handle_text(TcHandle h);  // "1:1a", "1:"

// One of tc's outputs: a JSON array of objects, else an Error naming the output (and, for the
// text older iproute2 writes, why). fw filters' options as text (iproute2 before 6.8) are read.
nlohmann::json read_tc_array(const TcOutput& output, const char* command);

// tc's classes: its JSON, or the text lines iproute2 before 6.2 writes even with -j
// ("class htb 1:10 parent 1:1 leaf 10: prio 0 rate 30Mbit ..."), as the JSON's members: rates
// in bytes per second, sizes in bytes. Error naming the line and quoting it (core/htb_text.cpp).
nlohmann::json read_tc_classes(const TcOutput& output);

// Filters' JSON with fw's options as tc before 6.8 writes them, text inside the JSON
// ({handle 0x10/0xff classid 1:21 }), turned into a newer tc's members; the rest unchanged.
std::string repair_fw_options(const std::string& text);

// A member as text or a number: tc writes some values either way across versions. "" if absent.
std::string tc_text(const nlohmann::json& object, const char* key);
// A member that is true (tc writes flags such as "root" only when they are set).
bool tc_flag(const nlohmann::json& object, const char* key);
// A number as tc writes it in text: decimal, or hexadecimal after 0x; nullopt for anything else.
std::optional<uint64_t> tc_number(std::string_view text);

// The HTB tree once mapped: each class's shaperctl id by its minor, and whether it is a leaf
// (a filter or the default can only send packets to a leaf: HTB goes on through an inner
// class's own filters, which shaperctl's one rule set does not have).
struct HtbTree {
    uint32_t major = 0;
    struct Class {
        uint32_t id;
        bool leaf;
    };
    std::map<uint32_t, Class> classes;  // by minor
};

// The rules of tc's filters on the HTB qdisc, notes for those not carried.
std::vector<RuleSpec> htb_rules(const nlohmann::json& filters, const HtbTree& tree,
                                std::vector<std::string>& notes);

}  // namespace shaperctl
