// The ordered steps that turn one device configuration into another (what apply runs), and
// their diff lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace shaperctl {

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
// classes deleted last, children first. Rules are published once, after the last class added:
// what is published is then exactly `desired.rules`.
std::vector<ConfigStep> plan_config(const ShaperConfig& current, const ShaperConfig& desired);

// The diff line of a step ("+ class 3 rate 5mbit", "~ class 1 rate 20mbit -> 30mbit",
// "- rule 20"); "" for internal steps. New classes' lines leave out what equals the defaults of
// the device's side, mode and pacing (class_defaults(), the horizon for the class's rate).
std::string describe_step(const ConfigStep& step, const ShaperConfig& side);

// "src 10.0.0.0/8 proto tcp": a rule's class and matches, as a diff names them.
std::string describe_rule(const RuleSpec& rule);

}  // namespace shaperctl
