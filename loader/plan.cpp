#include "loader/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "loader/class_tree.h"

namespace shaperctl {
std::vector<ConfigStep> plan_config(const ShaperConfig& current, const ShaperConfig& desired)
{
    using Kind = ConfigStep::Kind;
    std::vector<ConfigStep> steps;
    std::map<uint32_t, ClassSpec> cur, want;
    ClassParents cur_parents, want_parents;
    for (const ClassSpec& c : current.classes) {
        cur[c.id] = c;
        cur_parents[c.id] = c.parent;
    }
    for (const ClassSpec& c : desired.classes) {
        want[c.id] = c;
        want_parents[c.id] = c.parent;
    }
    auto exists_now = [&](uint32_t id) { return cur.count(id) > 0; };

    // 1. The default class: at once when its class is there already; else, if the current one
    //    is about to go, cleared until the new class exists.
    bool default_done = current.default_class == desired.default_class;
    if (!default_done) {
        ConfigStep step;
        step.kind = Kind::SetDefault;
        step.old_default = current.default_class;
        if (desired.default_class == 0 || exists_now(desired.default_class)) {
            step.new_default = desired.default_class;
            default_done = true;
            steps.push_back(step);
        } else if (current.default_class && !want.count(current.default_class)) {
            step.new_default = 0;
            step.shown = false;
            steps.push_back(step);
        }
    }

    // 2. Rules that go, and rules whose class exists now (published with the rest, below).
    std::map<uint32_t, RuleSpec> cur_rules, want_rules;
    for (const auto& r : current.rules)
        cur_rules[r.pref] = r;
    for (const auto& r : desired.rules)
        want_rules[r.pref] = r;
    std::vector<ConfigStep> later;  // rules whose class is added below
    bool publish = false;
    for (const auto& [pref, r] : cur_rules) {
        if (want_rules.count(pref))
            continue;
        ConfigStep step;
        step.kind = Kind::RemoveRule;
        step.old_rule = r;
        steps.push_back(step);
        publish = true;
    }
    for (const auto& [pref, r] : want_rules) {
        auto it = cur_rules.find(pref);
        const bool changed = it != cur_rules.end() && !(it->second == r);
        if (it != cur_rules.end() && !changed)
            continue;
        ConfigStep put;
        put.kind = Kind::PutRule;
        put.new_rule = r;
        if (changed)
            put.old_rule = it->second;
        if (exists_now(r.class_id)) {
            steps.push_back(put);
            publish = true;
            continue;
        }
        if (changed) {  // its old class may be the one deleted: out of the way until then
            ConfigStep remove;
            remove.kind = Kind::RemoveRule;
            remove.shown = false;
            remove.old_rule = it->second;
            steps.push_back(remove);
            publish = true;
        }
        later.push_back(put);
    }

    // 3. Classes added or changed, in the desired tree's order: each one's parent (and all its
    //    ancestors) are then final, so no intermediate state has a cycle.
    const auto want_depth = class_depths(want_parents);
    // (depth, id) pairs: a comparator looking depths up in the map cost most of a no-op apply
    // of 100,000 classes.
    std::vector<std::pair<unsigned, uint32_t>> order;
    for (const auto& [id, depth] : want_depth)
        order.push_back({depth, id});
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [depth, id] : order) {
        ConfigStep step;
        step.after = want[id];
        auto it = cur.find(id);
        if (it == cur.end()) {
            step.kind = Kind::AddClass;
        } else if (!(it->second == want[id])) {
            step.kind = Kind::ChangeClass;
            step.before = it->second;
        } else {
            continue;
        }
        steps.push_back(step);
    }

    // 4. Rules of the new classes, then the one publish of the whole desired rule set: the
    //    datapath reads only what is published, so the slots written before are not seen yet.
    steps.insert(steps.end(), later.begin(), later.end());
    if (publish || !later.empty()) {
        ConfigStep step;
        step.kind = Kind::PublishRules;
        step.shown = false;
        steps.push_back(step);
    }

    // 5. The default class, now that it exists.
    if (!default_done) {
        ConfigStep step;
        step.kind = Kind::SetDefault;
        step.old_default = current.default_class;
        step.new_default = desired.default_class;
        steps.push_back(step);
    }

    // 6. Classes that go, children first: no rule, default or kept child refers to them now.
    const auto cur_depth = class_depths(cur_parents);
    std::vector<std::pair<unsigned, uint32_t>> gone;
    for (const auto& [id, depth] : cur_depth)
        if (!want.count(id))
            gone.push_back({depth, id});
    std::stable_sort(gone.begin(), gone.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [depth, id] : gone) {
        ConfigStep step;
        step.kind = Kind::DeleteClass;
        step.before = cur[id];
        steps.push_back(step);
    }
    return steps;
}


std::string describe_rule(const RuleSpec& rule)
{
    return "class " + std::to_string(rule.class_id) + " " + format_rule_match(rule);
}

std::string describe_step(const ConfigStep& step, Direction side, uint32_t mode)
{
    using Kind = ConfigStep::Kind;
    if (!step.shown)
        return "";
    auto id = [](uint32_t v) { return v ? std::to_string(v) : std::string("none"); };
    switch (step.kind) {
    case Kind::SetDefault:
        return "~ default class " + id(step.old_default) + " -> " + id(step.new_default);
    case Kind::AddClass:
        return "+ class " + std::to_string(step.after.id) + " " +
               class_summary(step.after, class_defaults(side, mode, step.after.rate_bps));
    case Kind::ChangeClass:
        return "~ class " + std::to_string(step.after.id) + " " + class_changes(step.before, step.after);
    case Kind::DeleteClass:
        return "- class " + std::to_string(step.before.id);
    case Kind::PutRule:
        if (step.old_rule.pref)
            return "~ rule " + std::to_string(step.new_rule.pref) + " " + describe_rule(step.old_rule) +
                   " -> " + describe_rule(step.new_rule);
        return "+ rule " + std::to_string(step.new_rule.pref) + " " + describe_rule(step.new_rule);
    case Kind::RemoveRule:
        return "- rule " + std::to_string(step.old_rule.pref);
    case Kind::PublishRules:
        return "";
    }
    return "";
}

}  // namespace shaperctl
