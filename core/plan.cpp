#include "core/plan.h"

#include <algorithm>
#include <map>

#include "core/class_tree.h"

namespace shaperctl {
namespace {

// A configuration's classes by id (ascending; of a repeated id the last) and their tree: one
// change of 100,000 classes reads them all.
class ClassIndex {
public:
    explicit ClassIndex(const std::vector<ClassSpec>& classes) : tree_(pairs_of(classes))
    {
        // In the tree's order: ascending id, the last of a repeated id.
        specs_.assign(tree_.size(), nullptr);
        for (const ClassSpec& c : classes)
            specs_[tree_.index_of(c.id)] = &c;
    }
    const ClassSpec* find(uint32_t id) const
    {
        const size_t i = tree_.index_of(id);
        return i < specs_.size() ? specs_[i] : nullptr;
    }
    // (depth, class) of every class, in ascending id.
    std::vector<std::pair<unsigned, const ClassSpec*>> by_depth() const
    {
        const std::vector<unsigned> depth = class_depths(tree_);
        std::vector<std::pair<unsigned, const ClassSpec*>> out;
        out.reserve(specs_.size());
        for (size_t i = 0; i < specs_.size(); i++)
            out.push_back({depth[i], specs_[i]});
        return out;
    }

private:
    static std::vector<std::pair<uint32_t, uint32_t>> pairs_of(const std::vector<ClassSpec>& classes)
    {
        std::vector<std::pair<uint32_t, uint32_t>> pairs;
        pairs.reserve(classes.size());
        for (const ClassSpec& c : classes)
            pairs.push_back({c.id, c.parent});
        return pairs;
    }

    ClassParents tree_;
    std::vector<const ClassSpec*> specs_;
};

}  // namespace

std::vector<ConfigStep> plan_config(const ShaperConfig& current, const ShaperConfig& desired)
{
    using Kind = ConfigStep::Kind;
    std::vector<ConfigStep> steps;
    const ClassIndex cur(current.classes), want(desired.classes);
    auto exists_now = [&](uint32_t id) { return cur.find(id) != nullptr; };

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
        } else if (current.default_class && !want.find(current.default_class)) {
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
    // Only the classes to add or change are sorted (by depth, then id), each with what it was.
    struct Change {
        unsigned depth;
        const ClassSpec* after;
        const ClassSpec* before;  // null: added
    };
    std::vector<Change> order;
    for (const auto& [depth, spec] : want.by_depth()) {
        const ClassSpec* before = cur.find(spec->id);
        if (!before || !(*before == *spec))
            order.push_back({depth, spec, before});
    }
    std::stable_sort(order.begin(), order.end(), [](const Change& a, const Change& b) { return a.depth < b.depth; });
    for (const Change& c : order) {
        ConfigStep step;
        step.kind = c.before ? Kind::ChangeClass : Kind::AddClass;
        step.after = *c.after;
        if (c.before)
            step.before = *c.before;
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
    std::vector<std::pair<unsigned, const ClassSpec*>> gone;
    for (const auto& [depth, spec] : cur.by_depth())
        if (!want.find(spec->id))
            gone.push_back({depth, spec});
    std::stable_sort(gone.begin(), gone.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [depth, spec] : gone) {
        ConfigStep step;
        step.kind = Kind::DeleteClass;
        step.before = *spec;
        steps.push_back(step);
    }
    return steps;
}


std::string describe_rule(const RuleSpec& rule)
{
    return "class " + std::to_string(rule.class_id) + " " + format_rule_match(rule);
}

std::string describe_step(const ConfigStep& step, const ShaperConfig& side)
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
               class_summary(step.after, class_defaults(side.side, side.mode, step.after.rate_bps, side.acks_paced));
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
