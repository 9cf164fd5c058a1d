#include "loader/shaper.h"

#include <algorithm>
#include <map>

#include "loader/attach_record.h"
#include "loader/bpffs.h"
#include "core/error.h"
#include "loader/rules.h"

// Shaper's changes to classes, rules and the default class: a plan's steps, run with their undo
// (one command's one-item plans: shaper_items.cpp).
namespace shaperctl {
namespace {

void set_default_class(const ShaperMaps& maps, uint32_t id)
{
    shaper_settings settings = maps.settings();
    settings.default_class = id;
    maps.set_settings(settings);
}

}  // namespace

ShaperConfig Shaper::config() const
{
    ShaperConfig config;
    config.side = device_.direction;
    config.mode = record_.mode;
    config.acks_paced = device_.direction == Direction::Ingress && paces_acks(device_);
    config.fq = record_.fq;
    config.max_classes = maps_.max_classes();
    config.default_class = maps_.settings().default_class;
    const auto stored_classes = maps_.class_configs();
    config.classes.reserve(stored_classes.size() + 1);  // room for add-class's one more
    for (const auto& [id, stored] : stored_classes)
        config.classes.push_back(class_spec_from_config(id, stored));
    for (const auto& [slot, rule] : maps_.rules())
        config.rules.push_back(rule_spec_of(rule));
    std::sort(config.rules.begin(), config.rules.end(),
              [](const RuleSpec& a, const RuleSpec& b) { return a.pref < b.pref; });
    return config;
}

ConfigLimits Shaper::limits() const
{
    ConfigLimits limits;
    limits.max_classes = maps_.max_classes();
    limits.side = device_.direction;
    if (record_.mode == SHAPER_MODE_EDT)
        limits.fq = {record_.fq.horizon_ns, " on " + device_.name + " (attach --fq-horizon raises it)"};
    return limits;
}

void Shaper::apply(const std::vector<ConfigStep>& steps, const CheckedRules& rules,
                   const std::function<void(size_t)>& before_step) const
{
    using Kind = ConfigStep::Kind;
    // Rule slots as stored: a changed rule keeps its slot, a new one takes the lowest free.
    using Slots = std::vector<std::pair<uint32_t, shaper_rule>>;
    std::map<uint32_t, uint32_t> slot_of;  // pref -> slot
    Slots read;
    const Slots* stored = nullptr;  // (slot, rule) in slot order, before this call: the check's, where it read them
    std::vector<bool> used(SHAPER_MAX_RULES);
    auto read_rules = [&] {
        if (stored)
            return;
        stored = rules.slots ? &*rules.slots : &(read = maps_.rules());
        for (const auto& [slot, rule] : *stored) {
            slot_of[rule.pref] = slot;
            used[slot] = true;
        }
    };
    // The inverse of every step begun, pushed before the step runs (a step may fail half-way,
    // and each inverse is harmless where its step did nothing), and each slot as it was before
    // its first write: slots are invisible to the datapath until a publish, so undoing a
    // publish is the slots put back and published again.
    std::vector<std::function<void()>> undo;
    std::map<uint32_t, shaper_rule> slots_before;
    auto restore_slots = [&] {
        for (const auto& [slot, rule] : slots_before)
            maps_.write_rule(slot, rule);
    };
    auto write_slot = [&](uint32_t slot, const shaper_rule& rule) {
        const auto was = std::lower_bound(stored->begin(), stored->end(), slot,
                                          [](const auto& entry, uint32_t s) { return entry.first < s; });
        slots_before.emplace(slot, was != stored->end() && was->first == slot ? was->second : shaper_rule{});
        undo.push_back([this, slot, &slots_before] { maps_.write_rule(slot, slots_before.at(slot)); });
        maps_.write_rule(slot, rule);
    };
    std::vector<std::pair<uint32_t, shaper_class_config>> new_classes;
    try {
        for (size_t i = 0; i < steps.size(); i++) {
            if (before_step)
                before_step(i);
            const ConfigStep& step = steps[i];
            switch (step.kind) {
            case Kind::SetDefault:
                undo.push_back([this, old = step.old_default] { set_default_class(maps_, old); });
                set_default_class(maps_, step.new_default);
                break;
            case Kind::AddClass:
                // A new class starts idle, with full credit. Steps in a row are written together.
                new_classes.push_back({step.after.id, class_config_of(step.after)});
                if (i + 1 == steps.size() || steps[i + 1].kind != Kind::AddClass) {
                    std::vector<uint32_t> ids;
                    ids.reserve(new_classes.size());
                    for (const auto& added : new_classes)
                        ids.push_back(added.first);
                    undo.push_back([this, ids = std::move(ids)] {
                        for (uint32_t id : ids)
                            maps_.erase_class(id);
                    });
                    maps_.add_classes(new_classes);
                    new_classes.clear();
                }
                break;
            case Kind::ChangeClass:
                // The clock stays (a higher rate rescales its backlog): no free burst, no stall.
                undo.push_back([this, &step] { maps_.change_class(step.before.id, class_config_of(step.before)); });
                maps_.change_class(step.after.id, class_config_of(step.after));
                break;
            case Kind::DeleteClass:
                undo.push_back([this, &step] { maps_.add_classes({{step.before.id, class_config_of(step.before)}}); });
                maps_.erase_class(step.before.id);
                break;
            case Kind::PutRule: {
                read_rules();
                auto [it, fresh] = slot_of.emplace(step.new_rule.pref, 0);
                if (fresh)
                    it->second = take_free_rule_slot(used);
                write_slot(it->second, rules.by_pref.at(step.new_rule.pref));
                break;
            }
            case Kind::RemoveRule: {
                read_rules();
                auto it = slot_of.find(step.old_rule.pref);
                if (it == slot_of.end())
                    throw Error(dev_prefix(device_) + "no rule with pref " + std::to_string(step.old_rule.pref));
                write_slot(it->second, shaper_rule{});
                used[it->second] = false;
                slot_of.erase(it);
                break;
            }
            case Kind::PublishRules:
                read_rules();
                undo.push_back([&] {
                    restore_slots();
                    publish_rules(maps_, device_.run_dir());
                });
                publish_rules(maps_, rules.set, slot_of, device_.run_dir());
                break;
            }
        }
    } catch (const std::exception& e) {
        std::string failed;
        for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
            try {
                (*it)();
            } catch (const std::exception& again) {
                if (failed.empty())
                    failed = again.what();
            }
        }
        if (failed.empty())
            throw;
        throw Error(std::string(e.what()) + "; undoing what was done failed too (" + failed +
                    "): apply the configuration again");
    }
}

// A fault in the terms of the command that made the one change.
std::string Shaper::fault_text(const ConfigFault& fault) const
{
    const std::string dev = dev_prefix(device_);
    const std::string id = std::to_string(fault.id);
    if (fault.tree.kind == TreeFault::MissingParent)
        return dev + "unknown parent class " + std::to_string(fault.missing_class);
    if (fault.tree.kind == TreeFault::Cycle)
        return dev + "parent " + std::to_string(fault.tree.chain.at(1)) + " of class " + id +
               " would make a cycle";
    if (fault.tree.kind == TreeFault::TooDeep)
        return dev + "class " + id + " under parent " + std::to_string(fault.tree.chain.at(1)) +
               " would be more than " + std::to_string(SHAPER_MAX_DEPTH) + " levels deep";
    if (fault.missing_class)
        return dev + (fault.item == ConfigFault::Item::Rule ? "rule " + id + ": " : "") +
               no_class(fault.missing_class);
    if (fault.item == ConfigFault::Item::Class)
        return fault.what();  // names the class, and the device where it matters
    return dev + fault.what();
}

ClassSpec Shaper::class_spec(uint32_t id) const
{
    auto config = maps_.class_config(id);
    if (!config)
        throw Error(dev_prefix(device_) + no_class(id));
    ClassSpec spec = class_spec_from_config(id, *config);
    if (horizon_is_default(spec, device_.direction, record_.mode))
        spec.horizon_ns = 0;  // the default, which follows a new rate
    return spec;
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

}  // namespace shaperctl
