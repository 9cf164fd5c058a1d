// A class as operators describe it, and its validated map form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "shaper_abi.h"

namespace shaperctl {

struct ClassSpec {
    uint32_t id = 0;
    uint64_t rate_bps = 0;
    uint64_t burst_bytes = 0;  // 0: pure pacing, one packet at a time
    uint32_t parent = 0;       // 0: top level
    int32_t overhead = 0;      // bytes per segment; 24 is Ethernet's preamble, FCS and gap
    uint32_t mpu = 0;
    uint64_t horizon_ns = 0;   // 0: the mode's default
    bool aqm = false;          // CoDel on the class's virtual backlog (edt mode): opt in
    bool ecn = true;           // mark ECN-capable packets instead of dropping them
    bool sparse = true;        // sparse flows leave ahead of the class backlog (edt mode)
    bool fair = true;          // bulk flows above their fair share are marked or dropped (edt)
    uint64_t aqm_target_ns = SHAPER_DEFAULT_AQM_TARGET_NS;
    uint64_t aqm_interval_ns = SHAPER_DEFAULT_AQM_INTERVAL_NS;

    bool operator==(const ClassSpec&) const = default;
};

// sch_fq's horizon, which bounds every class's in edt mode: fq drops a packet stamped further
// ahead after the class has charged it, and no class counter sees that drop.
struct FqHorizon {
    uint64_t ns = 0;   // fq's horizon on the device; 0: no sch_fq (police mode), no bound
    std::string hint;  // ends the error: " on eth0 (attach --fq-horizon raises it)"
};

// Error when a class's horizon lies beyond fq's (which the kernel keeps in whole microseconds).
void check_fits_fq_horizon(uint32_t id, uint64_t horizon_ns, const FqHorizon& fq);

// Range-checks every field (one-line Error naming the field and its bounds), the horizon against
// fq's, and derives the datapath's fixed-point values. max_classes bounds the id.
shaper_class_config make_class_config(const ClassSpec& spec, uint32_t max_classes,
                                      uint64_t default_horizon_ns, const FqHorizon& fq = {});

// The spec a stored config was made from.
ClassSpec class_spec_from_config(uint32_t id, const shaper_class_config& config);

// Clock advance per wire byte at a rate, in 2^-32 ns, rounded up (never faster than rate).
uint64_t ns_per_byte_fp(uint64_t rate_bps);

}  // namespace shaperctl
