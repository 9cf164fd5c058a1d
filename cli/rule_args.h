// The matchers of add-rule as typed, into the datapath's rule form, and back to text.
#pragma once

#include <optional>
#include <string>

#include "shaper_abi.h"

namespace shaperctl {

struct RuleArgs {
    std::string pref, class_id, src, dst, proto, sport, dport, mark, cgroup, priority, dscp, vlan;
};

// Parses and checks every given field; one-line Error naming the bad token. The cgroup path is
// resolved against the cgroup2 hierarchy.
shaper_rule parse_rule(const RuleArgs& args);

// "dst 10.0.0.0/24 proto tcp dport 80-90", as status shows a rule.
std::string format_rule_match(const shaper_rule& rule);

// Parsers for single fields (also used by the config file).
struct Cidr {
    uint8_t family = 0;  // 4 or 6
    uint8_t addr[16] = {};
    uint8_t plen = 0;
};
Cidr parse_cidr(const std::string& text, const char* what);
std::pair<uint16_t, uint16_t> parse_port_range(const std::string& text, const char* what);
uint8_t parse_proto(const std::string& text);
std::pair<uint32_t, uint32_t> parse_mark(const std::string& text);  // value, mask
uint32_t parse_priority(const std::string& text);

}  // namespace shaperctl
