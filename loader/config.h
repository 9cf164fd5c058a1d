// A device's whole configuration (attach options, classes, rules, default class), as `dump`
// prints it and `apply` makes the kernel match it, and the ordered steps from one to another.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/class_config.h"
#include "loader/qdisc.h"
#include "loader/rule_spec.h"
#include "shaper_abi.h"

namespace shaperctl {

struct ShaperConfig {
    uint32_t mode = SHAPER_MODE_EDT;
    FqOptions fq;                   // edt mode only
    uint32_t max_classes = 0;       // 0: not stated (a file may leave it to the device)
    uint32_t default_class = 0;     // 0: none
    std::vector<ClassSpec> classes;  // ascending id; horizons resolved (never 0)
    std::vector<RuleSpec> rules;     // ascending pref
};

// One change to a device's maps. Steps not `shown` are internal (a publish of the rule set, a
// default class cleared for a while); the others are what a diff prints.
struct ConfigStep {
    enum class Kind {
        SetDefault,    // old_default -> new_default
        AddClass,      // after
        ChangeClass,   // before -> after (the clock carries on)
        DeleteClass,   // before
        PutRule,       // old_rule (pref 0 when new) -> new_rule, into the rule's slot
        RemoveRule,    // old_rule
        PublishRules,  // compiles the stored rules and switches the datapath to them
    };
    Kind kind = Kind::PublishRules;
    bool shown = true;
    ClassSpec before, after;
    RuleSpec old_rule, new_rule;
    uint32_t old_default = 0, new_default = 0;
};

// The steps that turn `current` into `desired`; nothing when they are equal. `desired` must be
// valid as a whole (parents exist, no cycles, rules name existing classes, default exists):
// the steps are ordered so that every intermediate state is valid too — the default class
// cleared before its class goes, rules removed before their classes, classes added and changed
// parents first (in the desired tree's order) before the rules and the default that use them,
// classes deleted last, children first. Rules are published at most twice.
std::vector<ConfigStep> plan_config(const ShaperConfig& current, const ShaperConfig& desired);

}  // namespace shaperctl
