// Classification rules compiled into the datapath's tuple-space search (bpf/classify.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "shaper_abi.h"

namespace shaperctl {

// A rule set as the datapath reads it, for one generation.
struct CompiledRules {
    std::vector<shaper_tuple> tuples;  // sorted by min_pref; at most SHAPER_MAX_TUPLES
    std::vector<std::pair<shaper_rule_key, shaper_rule_match>> entries;
    std::vector<uint16_t> sport_segs, dport_segs;  // 65536 each: port -> segment id
};

// Checks one rule on its own (fields present and canonical); Error names the problem.
void validate_rule(const shaper_rule& rule);

// Compiles rules (pref != 0; `slots` gives each one's slot) for generation `gen`. Error when the
// set needs more than SHAPER_MAX_TUPLES shapes or more index entries than the map holds.
CompiledRules compile_rules(const std::vector<shaper_rule>& rules,
                            const std::vector<uint32_t>& slots, uint32_t gen);

class ShaperMaps;

// Stores a rule in a free slot and publishes the new set; Error (and nothing changed) for a
// duplicate pref, a full table, or a set the datapath cannot hold. The class is not checked.
void add_rule(const ShaperMaps& maps, const shaper_rule& rule);
void del_rule(const ShaperMaps& maps, uint32_t pref);

// Compiles the stored rules into the inactive generation, then switches the datapath to it.
void publish_rules(const ShaperMaps& maps);

// The mask of a prefix length over a 16-byte address.
std::array<uint8_t, 16> prefix_mask(unsigned plen);

}  // namespace shaperctl
