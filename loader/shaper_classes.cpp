#include "loader/shaper.h"

#include <algorithm>
#include <map>

#include "loader/attach_record.h"
#include "loader/bpffs.h"
#include "loader/class_tree.h"
#include "loader/error.h"
#include "loader/rules.h"

// Shaper's changes to classes, rules and the default class: one at a time, or a plan's steps.
namespace shaperctl {
namespace {

// Parent of every configured class, for cycle and depth checks.
ClassParents parents_of(const ShaperMaps& maps)
{
    ClassParents parents;
    for (const auto& [id, config] : maps.class_configs())
        parents[id] = config.parent_id;
    return parents;
}

}  // namespace

ShaperConfig Shaper::config() const
{
    ShaperConfig config;
    config.mode = record_.mode;
    config.fq = record_.fq;
    config.max_classes = maps_.max_classes();
    config.default_class = maps_.settings().default_class;
    for (const auto& [id, stored] : maps_.class_configs())
        config.classes.push_back(class_spec_from_config(id, stored));
    for (const RuleStatus& r : rules())
        config.rules.push_back(r.rule);
    return config;
}

void Shaper::apply(const std::vector<ConfigStep>& steps) const
{
    using Kind = ConfigStep::Kind;
    // Rule slots as stored: a changed rule keeps its slot, a new one takes the lowest free.
    std::map<uint32_t, uint32_t> slot_of;  // pref -> slot
    std::vector<bool> used(SHAPER_MAX_RULES);
    bool rules_read = false;
    auto read_rules = [&] {
        if (rules_read)
            return;
        for (const auto& [slot, rule] : maps_.rules()) {
            slot_of[rule.pref] = slot;
            used[slot] = true;
        }
        rules_read = true;
    };
    std::vector<std::pair<uint32_t, shaper_class_config>> new_classes;
    for (const ConfigStep& step : steps) {
        switch (step.kind) {
        case Kind::SetDefault: {
            shaper_settings settings = maps_.settings();
            settings.default_class = step.new_default;
            maps_.set_settings(settings);
            break;
        }
        case Kind::AddClass:
            // A new class starts idle, with full credit. Steps in a row are written together.
            new_classes.push_back({step.after.id, class_config(step.after)});
            if (&step == &steps.back() || (&step + 1)->kind != Kind::AddClass) {
                maps_.add_classes(new_classes);
                new_classes.clear();
            }
            break;
        case Kind::ChangeClass:
            // The clock stays (a higher rate rescales its backlog): no free burst, no stall.
            maps_.change_class(step.after.id, class_config(step.after));
            break;
        case Kind::DeleteClass:
            maps_.erase_class(step.before.id);
            break;
        case Kind::PutRule: {
            read_rules();
            check_rule_side(step.new_rule);
            const shaper_rule rule = compile_rule(step.new_rule);
            uint32_t slot = 0;
            if (auto it = slot_of.find(step.new_rule.pref); it != slot_of.end()) {
                slot = it->second;
            } else {
                slot = take_free_rule_slot(used);
                slot_of[step.new_rule.pref] = slot;
            }
            maps_.write_rule(slot, rule);
            break;
        }
        case Kind::RemoveRule: {
            read_rules();
            auto it = slot_of.find(step.old_rule.pref);
            if (it == slot_of.end())
                throw Error(dev_prefix(device_) + "no rule with pref " + std::to_string(step.old_rule.pref));
            maps_.write_rule(it->second, shaper_rule{});
            used[it->second] = false;
            slot_of.erase(it);
            break;
        }
        case Kind::PublishRules:
            publish_rules(maps_);
            break;
        }
    }
}

uint64_t Shaper::default_horizon() const
{
    if (device_.direction == Direction::Ingress)
        return kIngressDefaultHorizonNs;
    return mode_horizon(record_.mode);
}

FqHorizon Shaper::fq_horizon() const
{
    if (record_.mode != SHAPER_MODE_EDT)
        return {};
    return {record_.fq.horizon_ns, " on " + device_.name + " (attach --fq-horizon raises it)"};
}

shaper_class_config Shaper::class_config(const ClassSpec& spec) const
{
    return make_class_config(spec, maps_.max_classes(), default_horizon(), fq_horizon());
}

void Shaper::check_parent(uint32_t id, uint32_t parent) const
{
    if (parent == 0)
        return;
    if (!maps_.class_config(parent))
        throw Error(dev_prefix(device_) + "unknown parent class " + std::to_string(parent));
    ClassParents parents = parents_of(maps_);
    parents[id] = parent;
    const TreeFault fault = check_class_tree(parents);
    if (fault.kind == TreeFault::Cycle)
        throw Error(dev_prefix(device_) + "parent " + std::to_string(parent) + " of class " +
                    std::to_string(id) + " would make a cycle");
    if (fault)
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) + " under parent " +
                    std::to_string(parent) + " would be more than " +
                    std::to_string(SHAPER_MAX_DEPTH) + " levels deep");
}

void Shaper::add_class(const ClassSpec& spec) const
{
    const shaper_class_config config = class_config(spec);
    if (maps_.class_config(spec.id))
        throw Error(dev_prefix(device_) + "class " + std::to_string(spec.id) +
                    " already exists (use change-class)");
    check_parent(spec.id, spec.parent);
    maps_.reset_class_state(spec.id);  // a new class starts idle, with full credit
    maps_.write_class_config(spec.id, config);
}

ClassSpec Shaper::class_spec(uint32_t id) const
{
    auto config = maps_.class_config(id);
    if (!config)
        throw Error(dev_prefix(device_) + no_class(id));
    return class_spec_from_config(id, *config);
}

void Shaper::change_class(const ClassSpec& spec) const
{
    class_spec(spec.id);  // must exist
    const shaper_class_config config = class_config(spec);
    check_parent(spec.id, spec.parent);
    maps_.change_class(spec.id, config);  // the clock stays: no free burst, no stall
}

void Shaper::del_class(uint32_t id) const
{
    class_spec(id);
    std::string children;
    for (const auto& [child, parent] : parents_of(maps_))
        if (parent == id)
            children += (children.empty() ? "" : ", ") + std::to_string(child);
    if (!children.empty())
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) + " has children (" +
                    children + "): delete them first");
    if (maps_.settings().default_class == id)
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) +
                    " is the default class (set-default --none or another class first)");
    std::string prefs;
    for (const auto& [slot, rule] : maps_.rules())
        if (rule.class_id == id)
            prefs += (prefs.empty() ? "" : ", ") + std::to_string(rule.pref);
    if (!prefs.empty())
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) + " has rules (pref " +
                    prefs + "): delete them first");
    maps_.erase_class(id);
}

std::string Shaper::no_class(uint32_t id) const
{
    std::string text = "no class " + std::to_string(id);
    const Direction other = opposite(device_.direction);
    const Device other_side = device_.side(other);
    if (path_exists(other_side.run_dir() + "/" + kRecordFile)) {
        try {
            if (ShaperMaps::open_pinned(other_side.pin_dir()).class_config(id))
                text += " (class " + std::to_string(id) + " exists on " + direction_name(other) +
                        " only: each side has its own classes)";
        } catch (const Error&) {
            // The other side's maps are unreadable: the plain message stands.
        }
    }
    return text;
}

// A received packet has no local socket at tc ingress: a cgroup rule could never match there.
void Shaper::check_rule_side(const RuleSpec& rule) const
{
    if (device_.direction == Direction::Ingress && rule.cgroup)
        throw Error(dev_prefix(device_) + "rule " + std::to_string(rule.pref) +
                    ": cgroup rules match local sockets, which received packets do not have at tc "
                    "ingress");
}

void Shaper::add_rule(const RuleSpec& rule) const
{
    check_rule_side(rule);
    if (!maps_.class_config(rule.class_id))
        throw Error(dev_prefix(device_) + "rule " + std::to_string(rule.pref) + ": " +
                    no_class(rule.class_id));
    shaperctl::add_rule(maps_, rule);
}

void Shaper::del_rule(uint32_t pref) const
{
    shaperctl::del_rule(maps_, pref);
}

std::vector<RuleStatus> Shaper::rules() const
{
    std::vector<RuleStatus> out;
    const std::vector<shaper_rule_stats> counters = maps_.all_rule_counters();
    for (const auto& [slot, rule] : maps_.rules())
        out.push_back({slot, rule_spec_of(rule), counters.at(slot)});
    std::sort(out.begin(), out.end(),
              [](const RuleStatus& a, const RuleStatus& b) { return a.rule.pref < b.rule.pref; });
    return out;
}

void Shaper::set_default(uint32_t id) const
{
    if (id)
        class_spec(id);
    shaper_settings settings = maps_.settings();
    settings.default_class = id;
    maps_.set_settings(settings);
}

}  // namespace shaperctl
