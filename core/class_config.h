// A class as operators describe it, and its validated map form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/class_spec.h"
#include "shaper_abi.h"

namespace shaperctl {

// sch_fq's horizon, which bounds every class's in edt mode: fq drops a packet stamped further
// ahead after the class has charged it, and no class counter sees that drop.
struct FqHorizon {
    uint64_t ns = 0;   // fq's horizon on the device; 0: no sch_fq (police mode), no bound
    std::string hint;  // ends the error: " on eth0 (attach --fq-horizon raises it)"
};

// Error when a class's horizon lies beyond fq's (which the kernel keeps in whole microseconds).
void check_fits_fq_horizon(uint32_t id, uint64_t horizon_ns, const FqHorizon& fq);

// Range-checks every field of a spec whose horizon is resolved (one-line Error naming the field
// and its bounds), the id and parent against max_classes, the horizon against fq's, and the
// burst's credit. The datapath's values are then make_class_config()'s to derive.
void validate_class(const ClassSpec& spec, uint32_t max_classes, const FqHorizon& fq = {});

// The map form of a class: validate_class() (a horizon of 0 being `default_horizon_ns`), then
// the datapath's fixed-point values.
shaper_class_config make_class_config(ClassSpec spec, uint32_t max_classes,
                                      uint64_t default_horizon_ns, const FqHorizon& fq = {});

// The datapath's fixed-point values of a spec validate_class() accepted (horizon resolved).
shaper_class_config class_config_of(const ClassSpec& spec);

// The spec a stored config was made from.
ClassSpec class_spec_from_config(uint32_t id, const shaper_class_config& config);

// Clock advance per wire byte at a rate, in 2^-32 ns, rounded up (never faster than rate).
uint64_t ns_per_byte_fp(uint64_t rate_bps);

}  // namespace shaperctl
