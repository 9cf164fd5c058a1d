// The one check of a device's whole configuration, whoever made it (a file for apply, or one
// command's change to what the device holds): every class's ranges, the class tree, the default
// class, and the rules, each compiled for the datapath and then as a set. Faults say which item
// they concern, so that a file names its JSON path and a command its class or rule.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/class_config.h"
#include "core/class_tree.h"
#include "core/config.h"
#include "core/direction.h"
#include "core/error.h"
#include "core/rule_compiler.h"

namespace shaperctl {

// What the configuration must fit beside itself.
struct ConfigLimits {
    uint32_t max_classes = SHAPER_LIMIT_MAX_CLASSES;  // class ids below it
    FqHorizon fq;                                     // bounds class horizons (edt mode)
    Direction side = Direction::Egress;               // no cgroup rule on the receive side
};

// A fault of one item: a class (id) or one of its fields, a rule (pref) or one of its fields,
// the default class, or the rule set as a whole.
class ConfigFault : public Error {
public:
    enum class Item { Class, Rule, DefaultClass, Rules };
    ConfigFault(Item item, uint32_t id, std::string field, const std::string& message)
        : Error(message), item(item), id(id), field(std::move(field)) {}
    Item item;
    uint32_t id;
    std::string field;           // "" for the item as a whole
    uint32_t missing_class = 0;  // the fault is a reference to this class, which is not there
    TreeFault tree;              // the fault is the class tree's
};

// The rules in the datapath's form, compiled once: each rule, and the set as publish installs it
// (generation 0, rule n of `by_pref`'s order in slot n; place_rules() sets both for real).
struct CheckedRules {
    bool compiled = false;  // false: the rules were those already published, left as they are
    std::map<uint32_t, shaper_rule> by_pref;
    CompiledRules set;
    // The device's rule slots (slot, rule) as read for a one-item check, which apply then takes
    // instead of reading the 16,384 slots again; none when the check read no slots.
    std::optional<std::vector<std::pair<uint32_t, shaper_rule>>> slots;
};

// Checks `config` (class horizons resolved) whole; ConfigFault at the first fault, in the order
// of the file: classes by id, the tree, the default class, the rules by pref, the set. Rules equal
// to `published` (what the device runs, valid already) are not compiled again.
CheckedRules check_config(const ShaperConfig& config, const ConfigLimits& limits,
                          const std::vector<RuleSpec>* published = nullptr);

// What a configuration promises but cannot keep, for a warning (the configuration is valid): a
// parent whose children with a ceil have rates summing above its own. Each such child is still
// served at its rate, waiting on no parent, so the parent may then send that sum.
std::vector<std::string> guarantee_warnings(const std::vector<ClassSpec>& classes);

// The parts of that check, for a change of one item checked against what the device holds
// (loader/shaper_items.cpp) with the same faults: one class on its own (id range, fields,
// horizon against fq's), the fault of a class tree, and the rules (ascending pref) given which
// classes exist.
void check_class(const ClassSpec& c, const ConfigLimits& limits);
ConfigFault tree_fault(const TreeFault& tree);
CheckedRules check_rules(const std::vector<RuleSpec>& rules, const std::function<bool(uint32_t)>& has_class,
                         Direction side, const std::vector<RuleSpec>* published = nullptr);
// The steps of check_rules, for a change of one rule: the rule against the device (its class
// exists; no cgroup on the receive side), its compiled form (fields valid), and a set of rules
// each already checked, whole (how many, their shapes, their index entries).
void check_rule(const RuleSpec& rule, const std::function<bool(uint32_t)>& has_class, Direction side);
shaper_rule compile_checked_rule(const RuleSpec& rule);
CheckedRules check_rule_set(std::map<uint32_t, shaper_rule> by_pref);

}  // namespace shaperctl
