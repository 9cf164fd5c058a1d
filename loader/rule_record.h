// What each generation of a side's rule maps was last written with, kept in the side's run
// directory beside its attach record, so that a publish writes only what differs in the inactive
// generation (a rule's few index entries and port segments) instead of all of it (131,072 port
// segments and every rule's entries: ~90 ms at 10,000 rules).
//
// A record names the publication that wrote it (the serial every publish renews in
// shaper_settings.rules_gen). It is trusted only when that is the publication before the active
// one, which wrote the inactive generation: a publish by anything else in between (an older
// build, a test writing the maps directly) renews the serial and is seen. A record is removed
// before its generation's maps are written and saved after the switch, so a failure or a kill in
// between leaves none, and the next publish into that generation writes it whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/rule_compiler.h"

namespace shaperctl {

// The set generation `gen` of the maps holds, if the record in `dir` says so and was made by
// publication `serial`; nullopt otherwise (none, another serial, torn, another layout).
std::optional<CompiledRules> load_generation_record(const std::string& dir, uint32_t gen, uint32_t serial);
void remove_generation_record(const std::string& dir, uint32_t gen);
// Written whole (a temporary file renamed over it); a failure leaves no record, never a wrong one.
void save_generation_record(const std::string& dir, uint32_t gen, uint32_t serial, const CompiledRules& set);

}  // namespace shaperctl
