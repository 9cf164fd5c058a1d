// A class's counters as the control plane sums them over CPUs, and the one table of them from
// which status (its JSON keys, the table's drops and marks) and the exporter's metric families
// are made. A new counter is a member here, an entry in counter_fields(), and the datapath's
// field of the same name in struct shaper_class_stats (loader/maps.cpp sums them by name).
#pragma once

#include <cstdint>
#include <vector>

#include "core/delay_histogram.h"

namespace shaperctl {

struct ClassCounters {
    uint64_t packets = 0, segments = 0, bytes = 0, drops_horizon = 0, drops_aqm = 0, ecn_marks = 0, sparse = 0;
    uint64_t fair_marks = 0, drops_fair = 0, fair_holds = 0, borrowed_bytes = 0, ceil_held = 0;
    uint64_t clock_carry = 0;  // 2^-32 ns the clock is ahead of the exact charge (< 2^32 per CPU)
    DelayHistogram delay;      // the class's own packets (not its descendants'), EDT only
};

// Drops and marks are also shown summed ("drops", "marks"): what a glance at status wants.
enum class CounterKind { Traffic, Drop, Mark };

struct CounterField {
    const char* status_key;          // its key in status --json
    uint64_t ClassCounters::*member;
    CounterKind kind;
    const char* metric;              // the exporter's family; counters of one family follow each
    const char* cause;               // other and tell themselves apart by a cause label (or none)
    const char* help;                // the family's help (its first counter's)
};

// Every counter, in the order status and the exporter list them.
const std::vector<CounterField>& counter_fields();

// The drops or marks of every cause, summed.
uint64_t counter_total(const ClassCounters& counters, CounterKind kind);

}  // namespace shaperctl
