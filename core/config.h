// A device's whole configuration (attach options, classes, rules, default class), as `dump`
// prints it and `apply` makes the kernel match it (the steps from one to another: plan.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/class_config.h"
#include "core/direction.h"
#include "core/fq_options.h"
#include "core/rule_spec.h"
#include "shaper_abi.h"

namespace shaperctl {

struct ShaperConfig {
    Direction side = Direction::Egress;  // ingress: police mode, no fq, the side's class defaults
    uint32_t mode = SHAPER_MODE_EDT;
    // Receive side: its ACKs are paced (the send side attached in edt mode), which sets its new
    // classes' CoDel defaults (class_defaults()). A file leaves it to apply's attach, which paces
    // where it can.
    bool acks_paced = true;
    FqOptions fq;                   // edt mode only
    uint32_t max_classes = 0;       // 0: not stated (a file may leave it to the device)
    uint32_t default_class = 0;     // 0: none
    std::vector<ClassSpec> classes;  // ascending id; horizons resolved (never 0)
    std::vector<RuleSpec> rules;     // ascending pref
};

}  // namespace shaperctl
