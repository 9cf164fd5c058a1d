// sch_fq's settings as a configuration states them (edt mode): attach's --fq-* options, a
// file's "fq", what apply compares. loader/qdisc.h installs them.
#pragma once

#include <cstdint>

namespace shaperctl {

struct FqOptions {
    uint64_t horizon_ns = 10'000'000'000;  // departure times further ahead are...
    bool horizon_drop = true;              // ...dropped (true) or capped to the horizon (false)
    // sch_fq must hold everything the classes admit within their horizons: a packet it drops has
    // already been charged, and its slot in the class schedule is lost. The kernel's defaults
    // (100 per flow, 10000 in all) overflow at once under a small-packet flow, so ours are high;
    // what actually queues is bounded by rate x horizon per class.
    uint32_t flow_limit = 100'000;         // packets per flow; 0: kernel default (100)
    uint32_t limit = 1'000'000;            // packets in all; 0: kernel default (10000)

    friend bool operator==(const FqOptions&, const FqOptions&) = default;
};

}  // namespace shaperctl
