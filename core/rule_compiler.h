// Classification rules checked and compiled into the datapath's tuple-space search
// (bpf/classify.h). Pure computation: no libbpf, no kernel, so the config-file parser that uses
// it can be fuzzed (fuzz/). Writing a compiled set to the maps is loader/rules.h.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <utility>
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

// A set compiled for generation 0 with placeholder slots, made ready for generation `gen` with
// each rule in the slot `slot_of` gives its pref: no second compilation.
CompiledRules place_rules(CompiledRules set, uint32_t gen, const std::map<uint32_t, uint32_t>& slot_of);

// The mask of a prefix length over a 16-byte address.
std::array<uint8_t, 16> prefix_mask(unsigned plen);

}  // namespace shaperctl
