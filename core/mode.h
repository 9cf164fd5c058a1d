// The two ways a device is shaped, by name, and what each gives a class with no horizon of its own.
#pragma once

#include <cstdint>
#include <string>

#include "shaper_abi.h"

namespace shaperctl {

// "edt" (pace with sch_fq) or "police" (drop beyond the horizon).
const char* mode_name(uint32_t mode);

// SHAPER_MODE_* of a name; Error naming the bad text otherwise.
uint32_t mode_from_name(const std::string& name);

// The horizon of a class that states none: a pacing class may queue seconds in fq, a policer's
// horizon is the burst of lateness it tolerates.
uint64_t mode_horizon(uint32_t mode);

}  // namespace shaperctl
