#include "loader/shaper.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "core/error.h"

// Each command's one change (add-class, change-class, del-class, set-default, add-rule,
// del-rule) as a one-item plan: checked by the checks a whole configuration passes
// (core/config_check.h), against what the device holds, reading only what the item touches (its
// class, its chain of parents a lookup per level, the rule slots once when rules change), then
// run by apply() with its undo. Only del-class and a change of parent read the whole tree, from
// the mapping (their children): a few ms at 100,000 classes. And converge(): a small side made
// to match a whole configuration (a container's class and default) by the same runner.
namespace shaperctl {
namespace {

using Kind = ConfigStep::Kind;

std::string ids_text(const std::vector<uint32_t>& ids)
{
    std::string out;
    for (uint32_t id : ids)
        out += (out.empty() ? "" : ", ") + std::to_string(id);
    return out;
}

// The class tree as the device's entries hold it, with class `id` under `parent` instead.
struct HeldTree {
    const ShaperMaps& maps;
    uint32_t id, parent;
    bool has(uint32_t c) const { return c == id || maps.has_class(c); }
    uint32_t parent_of(uint32_t c) const { return c == id ? parent : maps.class_parent(c); }
};

// What check_class_tree would find in the device's tree with class `id` moved under `parent`.
// Only the chains through `id` change, those of the class and of its descendants (the rest of
// the tree was sound): they are found level by level, one pass over the parents per level
// (at most SHAPER_MAX_DEPTH), and checked in ascending id, as the whole-tree check does.
TreeFault moved_subtree_fault(const ShaperMaps& maps, uint32_t id, uint32_t parent)
{
    const std::vector<std::pair<uint32_t, uint32_t>> pairs = maps.class_parents();
    std::vector<bool> moved(maps.max_classes());
    std::vector<uint32_t> members{id};
    moved[id] = true;
    for (size_t level = 0, found = 1; found && level < SHAPER_MAX_DEPTH; level++) {
        found = 0;
        for (const auto& [child, up] : pairs)
            if (!moved[child] && up < moved.size() && moved[up]) {
                moved[child] = true;
                members.push_back(child);
                found++;
            }
    }
    std::sort(members.begin(), members.end());
    const HeldTree tree{maps, id, parent};
    for (uint32_t m : members)
        if (TreeFault fault = check_chain(m, tree.parent_of(m), tree))
            return fault;
    return {};
}

// The device's rules by pref, from its slots as read.
std::map<uint32_t, shaper_rule> rules_by_pref(const std::vector<std::pair<uint32_t, shaper_rule>>& slots)
{
    std::map<uint32_t, shaper_rule> by_pref;
    for (const auto& [slot, rule] : slots)
        by_pref.emplace(rule.pref, rule);
    return by_pref;
}

}  // namespace

void Shaper::change(const std::function<std::vector<ConfigStep>(CheckedRules&)>& plan) const
{
    CheckedRules rules;
    std::vector<ConfigStep> steps;
    try {
        steps = plan(rules);
    } catch (const ConfigFault& fault) {
        throw Error(fault_text(fault));
    }
    apply(steps, rules);
}

std::vector<ConfigStep> Shaper::converge(ShaperConfig desired) const
{
    const ShaperConfig current = config();
    desired.side = current.side;
    desired.mode = current.mode;
    desired.fq = current.fq;
    desired.max_classes = current.max_classes;
    for (ClassSpec& c : desired.classes)
        resolve_horizon(c, device_.direction, record_.mode);
    std::sort(desired.classes.begin(), desired.classes.end(),
              [](const ClassSpec& a, const ClassSpec& b) { return a.id < b.id; });
    std::sort(desired.rules.begin(), desired.rules.end(), [](const RuleSpec& a, const RuleSpec& b) { return a.pref < b.pref; });
    std::vector<ConfigStep> steps;
    change([&](CheckedRules& rules) {
        rules = check_config(desired, limits(), &current.rules);
        steps = plan_config(current, desired);
        return steps;
    });
    return steps;
}

void Shaper::add_class(const ClassSpec& given) const
{
    if (maps_.has_class(given.id))
        throw Error(dev_prefix(device_) + "class " + std::to_string(given.id) +
                    " already exists (use change-class)");
    ClassSpec spec = given;
    resolve_horizon(spec, device_.direction, record_.mode);
    change([&](CheckedRules&) {
        check_class(spec, limits());
        if (const TreeFault tree = check_chain(spec.id, spec.parent, HeldTree{maps_, spec.id, spec.parent}))
            throw tree_fault(tree);
        ConfigStep step;
        step.kind = Kind::AddClass;
        step.after = spec;
        return std::vector<ConfigStep>{step};
    });
}

void Shaper::change_class(const ClassSpec& given) const
{
    const std::optional<shaper_class_config> stored = maps_.class_config(given.id);
    if (!stored)
        throw Error(dev_prefix(device_) + no_class(given.id));
    ConfigStep step;
    step.kind = Kind::ChangeClass;
    step.before = class_spec_from_config(given.id, *stored);
    step.after = given;
    resolve_horizon(step.after, device_.direction, record_.mode);
    change([&](CheckedRules&) {
        check_class(step.after, limits());
        if (step.after.parent != step.before.parent)
            if (const TreeFault tree = moved_subtree_fault(maps_, step.after.id, step.after.parent))
                throw tree_fault(tree);
        return step.after == step.before ? std::vector<ConfigStep>{} : std::vector<ConfigStep>{step};
    });
}

void Shaper::del_class(uint32_t id) const
{
    const std::optional<shaper_class_config> stored = maps_.class_config(id);
    if (!stored)
        throw Error(dev_prefix(device_) + no_class(id));
    const std::string name = dev_prefix(device_) + "class " + std::to_string(id);
    std::vector<uint32_t> children, prefs;
    for (const auto& [child, parent] : maps_.class_parents())
        if (parent == id)
            children.push_back(child);
    if (!children.empty())
        throw Error(name + " has children (" + ids_text(children) + "): delete them first");
    if (maps_.settings().default_class == id)
        throw Error(name + " is the default class (set-default --none or another class first)");
    for (const auto& [slot, rule] : maps_.rules())
        if (rule.class_id == id)
            prefs.push_back(rule.pref);
    std::sort(prefs.begin(), prefs.end());
    if (!prefs.empty())
        throw Error(name + " has rules (pref " + ids_text(prefs) + "): delete them first");
    change([&](CheckedRules&) {
        ConfigStep step;
        step.kind = Kind::DeleteClass;
        step.before = class_spec_from_config(id, *stored);
        return std::vector<ConfigStep>{step};
    });
}

void Shaper::set_default(uint32_t id) const
{
    if (id && !maps_.has_class(id))
        throw Error(dev_prefix(device_) + no_class(id));
    ConfigStep step;
    step.kind = Kind::SetDefault;
    step.old_default = maps_.settings().default_class;
    step.new_default = id;
    change([&](CheckedRules&) {
        return step.old_default == id ? std::vector<ConfigStep>{} : std::vector<ConfigStep>{step};
    });
}

// A rule change reads the slots once, checks the one rule, and compiles the set with it (the
// held rules were checked when they were put, and their classes cannot go while they stand).
void Shaper::add_rule(const RuleSpec& rule) const
{
    std::vector<std::pair<uint32_t, shaper_rule>> slots = maps_.rules();
    std::map<uint32_t, shaper_rule> by_pref = rules_by_pref(slots);
    if (by_pref.count(rule.pref))
        throw Error(dev_prefix(device_) + "a rule with pref " + std::to_string(rule.pref) +
                    " exists already (prefs must differ)");
    change([&](CheckedRules& checked) {
        check_rule(rule, [&](uint32_t id) { return maps_.has_class(id); }, device_.direction);
        by_pref[rule.pref] = compile_checked_rule(rule);
        checked = check_rule_set(std::move(by_pref));
        checked.slots = std::move(slots);
        ConfigStep put, publish;
        put.kind = Kind::PutRule;
        put.new_rule = rule;
        publish.kind = Kind::PublishRules;
        publish.shown = false;
        return std::vector<ConfigStep>{put, publish};
    });
}

void Shaper::del_rule(uint32_t pref) const
{
    std::vector<std::pair<uint32_t, shaper_rule>> slots = maps_.rules();
    std::map<uint32_t, shaper_rule> by_pref = rules_by_pref(slots);
    const auto gone = by_pref.find(pref);
    if (gone == by_pref.end())
        throw Error(dev_prefix(device_) + "no rule with pref " + std::to_string(pref));
    ConfigStep remove, publish;
    remove.kind = Kind::RemoveRule;
    remove.old_rule = rule_spec_of(gone->second);
    publish.kind = Kind::PublishRules;
    publish.shown = false;
    by_pref.erase(gone);
    change([&](CheckedRules& checked) {
        checked = check_rule_set(std::move(by_pref));
        checked.slots = std::move(slots);
        return std::vector<ConfigStep>{remove, publish};
    });
}

}  // namespace shaperctl
