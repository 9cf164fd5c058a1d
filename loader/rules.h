// Classification rules in the maps: stored one per slot, published as a compiled generation.
// Checking and compiling them is core/rule_compiler.h (no libbpf).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rule_compiler.h"
#include "core/rule_spec.h"
#include "shaper_abi.h"

namespace shaperctl {

class ShaperMaps;

// Stores a rule in a free slot and publishes the new set; Error (and nothing changed) for a
// duplicate pref, a full table, or a set the datapath cannot hold. The class is not checked.
void add_rule(const ShaperMaps& maps, const RuleSpec& spec);
void del_rule(const ShaperMaps& maps, uint32_t pref);

// The lowest slot not `used` (SHAPER_MAX_RULES of them), marked used now; Error when all are.
uint32_t take_free_rule_slot(std::vector<bool>& used);

// Compiles the stored rules into the inactive generation, then switches the datapath to it.
// `record_dir` (a side's run directory): each generation's record is kept there, and a publish
// writes only what differs from it (loader/rule_record.h); "": the generation is written whole.
void publish_rules(const ShaperMaps& maps, const std::string& record_dir = "");
// The same with a set compiled already (check_config()), its rules stored in the slots `slot_of`
// gives their prefs.
void publish_rules(const ShaperMaps& maps, const CompiledRules& set, const std::map<uint32_t, uint32_t>& slot_of,
                   const std::string& record_dir = "");

}  // namespace shaperctl
