#include "loader/shaper.h"

#include <algorithm>

#include "core/error.h"

// Each command's one change (add-class, change-class, del-class, set-default, add-rule,
// del-rule) as a one-item plan: checked by the checks a whole configuration passes
// (core/config_check.h), against what the device holds, reading only what the item touches (its
// class, its chain of parents through the entries' mapping, the rules when rules change), then
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

std::vector<RuleSpec> held_rules(const ShaperMaps& maps)
{
    std::vector<RuleSpec> rules;
    for (const auto& [slot, rule] : maps.rules())
        rules.push_back(rule_spec_of(rule));
    std::sort(rules.begin(), rules.end(), [](const RuleSpec& a, const RuleSpec& b) { return a.pref < b.pref; });
    return rules;
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
        if (step.after.parent != step.before.parent) {
            // Its children move with it: the whole tree is checked, as apply checks it.
            std::vector<std::pair<uint32_t, uint32_t>> pairs = maps_.class_parents();
            for (auto& [id, parent] : pairs)
                if (id == step.after.id)
                    parent = step.after.parent;
            if (const TreeFault tree = check_class_tree(ClassParents(std::move(pairs))))
                throw tree_fault(tree);
        }
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
    for (const RuleSpec& r : held_rules(maps_))
        if (r.class_id == id)
            prefs.push_back(r.pref);
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

void Shaper::add_rule(const RuleSpec& rule) const
{
    const std::vector<RuleSpec> held = held_rules(maps_);
    auto at = std::lower_bound(held.begin(), held.end(), rule.pref,
                               [](const RuleSpec& r, uint32_t pref) { return r.pref < pref; });
    if (at != held.end() && at->pref == rule.pref)
        throw Error(dev_prefix(device_) + "a rule with pref " + std::to_string(rule.pref) +
                    " exists already (prefs must differ)");
    std::vector<RuleSpec> rules = held;
    rules.insert(rules.begin() + (at - held.begin()), rule);
    change([&](CheckedRules& checked) {
        checked = check_rules(rules, [&](uint32_t id) { return maps_.has_class(id); }, device_.direction, &held);
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
    const std::vector<RuleSpec> held = held_rules(maps_);
    std::vector<RuleSpec> rules = held;
    auto gone = std::find_if(rules.begin(), rules.end(), [&](const RuleSpec& r) { return r.pref == pref; });
    if (gone == rules.end())
        throw Error(dev_prefix(device_) + "no rule with pref " + std::to_string(pref));
    ConfigStep remove, publish;
    remove.kind = Kind::RemoveRule;
    remove.old_rule = *gone;
    publish.kind = Kind::PublishRules;
    publish.shown = false;
    rules.erase(gone);
    change([&](CheckedRules& checked) {
        checked = check_rules(rules, [&](uint32_t id) { return maps_.has_class(id); }, device_.direction, &held);
        return std::vector<ConfigStep>{remove, publish};
    });
}

}  // namespace shaperctl
