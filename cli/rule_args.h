// add-rule's options as typed, into a rule (core/rule_spec.h).
#pragma once

#include <string>
#include <string_view>

#include "core/rule_spec.h"

namespace shaperctl {

// The text of each option, "" when not given (named so that tests can write them out).
struct RuleArgs {
    std::string pref, class_id, src, dst, proto, sport, dport, mark, cgroup, priority, dscp, vlan;

    // The text of the match field of that name (rule_fields()).
    std::string& match(std::string_view name);
    const std::string& match(std::string_view name) const { return const_cast<RuleArgs*>(this)->match(name); }
};

// Parses and checks every given field; one-line Error naming the bad token. The cgroup path is
// resolved against the cgroup2 hierarchy.
RuleSpec parse_rule(const RuleArgs& args);

}  // namespace shaperctl
