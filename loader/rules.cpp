#include "loader/rules.h"

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/maps.h"
#include "loader/rule_record.h"

namespace shaperctl {

namespace {

constexpr uint32_t kSerialMask = ~0u >> SHAPER_RULES_SERIAL_SHIFT;

// Installs a set compiled for generation `gen` (the one the datapath does not read), then
// switches to it. With a record directory, only what differs from what the generation holds
// is written, where its record says (loader/rule_record.h).
void switch_rules(const ShaperMaps& maps, shaper_settings settings, uint32_t gen, const CompiledRules& compiled,
                  const std::string& record_dir)
{
    const uint32_t active_serial = settings.rules_gen >> SHAPER_RULES_SERIAL_SHIFT;
    std::optional<CompiledRules> held;
    if (!record_dir.empty()) {
        // The publication before the active one wrote this generation.
        held = load_generation_record(record_dir, gen, (active_serial - 1) & kSerialMask);
        remove_generation_record(record_dir, gen);
    }
    maps.install_rules(compiled, gen, held ? &*held : nullptr);
    bool cgroups = false;
    for (const shaper_tuple& t : compiled.tuples)
        cgroups |= (t.fields & SHAPER_RULE_F_CGROUP) != 0;
    // One aligned word tells the datapath which generation to read: the switch is atomic. Its
    // serial part makes every publication's word new, so no classification the datapath cached
    // under an earlier rule set is ever taken for one of this set.
    const uint32_t serial = (active_serial + 1) & kSerialMask;
    settings.rules_gen = gen | (compiled.tuples.empty() ? 0 : SHAPER_RULES_PRESENT) |
                         (cgroups ? SHAPER_RULES_CGROUP : 0) | (serial << SHAPER_RULES_SERIAL_SHIFT);
    maps.set_settings(settings);
    if (!record_dir.empty())
        save_generation_record(record_dir, gen, serial, compiled);
}

uint32_t next_generation(const shaper_settings& settings)
{
    return (settings.rules_gen & SHAPER_RULES_GEN_MASK) ^ 1;
}

}  // namespace

void publish_rules(const ShaperMaps& maps, const std::string& record_dir)
{
    std::vector<shaper_rule> rules;
    std::vector<uint32_t> slots;
    for (const auto& [slot, rule] : maps.rules()) {
        rules.push_back(rule);
        slots.push_back(slot);
    }
    const shaper_settings settings = maps.settings();
    const uint32_t gen = next_generation(settings);
    switch_rules(maps, settings, gen, compile_rules(rules, slots, gen), record_dir);
}

void publish_rules(const ShaperMaps& maps, const CompiledRules& set, const std::map<uint32_t, uint32_t>& slot_of,
                   const std::string& record_dir)
{
    const shaper_settings settings = maps.settings();
    const uint32_t gen = next_generation(settings);
    switch_rules(maps, settings, gen, place_rules(set, gen, slot_of), record_dir);
}

uint32_t take_free_rule_slot(std::vector<bool>& used)
{
    uint32_t slot = 0;
    while (slot < used.size() && used[slot])
        slot++;
    if (slot == used.size())
        throw Error("all " + std::to_string(used.size()) + " rule slots are in use");
    used[slot] = true;
    return slot;
}

void add_rule(const ShaperMaps& maps, const RuleSpec& spec)
{
    const shaper_rule rule = compile_rule(spec);
    std::vector<shaper_rule> rules;
    std::vector<uint32_t> slots;
    std::vector<bool> used(SHAPER_MAX_RULES);
    for (const auto& [slot, existing] : maps.rules()) {
        if (existing.pref == rule.pref)
            throw Error("a rule with pref " + std::to_string(rule.pref) +
                        " exists already (prefs must differ)");
        used[slot] = true;
        rules.push_back(existing);
        slots.push_back(slot);
    }
    const uint32_t slot = take_free_rule_slot(used);
    rules.push_back(rule);
    slots.push_back(slot);
    compile_rules(rules, slots, 0);  // refuses a set the datapath cannot hold, before any write
    maps.write_rule(slot, rule);
    try {
        publish_rules(maps);
    } catch (...) {
        maps.write_rule(slot, shaper_rule{});
        throw;
    }
}

void del_rule(const ShaperMaps& maps, uint32_t pref)
{
    for (const auto& [slot, rule] : maps.rules()) {
        if (rule.pref == pref) {
            maps.write_rule(slot, shaper_rule{});
            publish_rules(maps);
            return;
        }
    }
    throw Error("no rule with pref " + std::to_string(pref));
}

}  // namespace shaperctl
