#include "core/class_counters.h"

namespace shaperctl {

const std::vector<CounterField>& counter_fields()
{
    using K = CounterKind;
    static const std::vector<CounterField> fields = {
        {"packets", &ClassCounters::packets, K::Traffic, "shaperctl_class_packets_total", nullptr,
         "Packets charged to the class (descendants included)."},
        {"segments", &ClassCounters::segments, K::Traffic, "shaperctl_class_segments_total", nullptr,
         "GSO segments charged to the class (descendants included)."},
        {"bytes", &ClassCounters::bytes, K::Traffic, "shaperctl_class_bytes_total", nullptr,
         "Bytes charged to the class: wire length plus overhead, after mpu (descendants included)."},
        {"drops_horizon", &ClassCounters::drops_horizon, K::Drop, "shaperctl_class_drops_total", "horizon",
         "Packets dropped by the class, by cause: horizon (departure too far ahead), aqm (CoDel) "
         "or fair (a flow above its fair share)."},
        {"drops_aqm", &ClassCounters::drops_aqm, K::Drop, "shaperctl_class_drops_total", "aqm", nullptr},
        {"drops_fair", &ClassCounters::drops_fair, K::Drop, "shaperctl_class_drops_total", "fair", nullptr},
        {"ecn_marks", &ClassCounters::ecn_marks, K::Mark, "shaperctl_class_ecn_marks_total", nullptr,
         "Packets CoDel marked CE instead of dropping."},
        {"fair_marks", &ClassCounters::fair_marks, K::Mark, "shaperctl_class_fair_marks_total", nullptr,
         "Packets marked CE instead of dropped for a flow above its fair share."},
        {"fair_holds", &ClassCounters::fair_holds, K::Traffic, "shaperctl_class_fair_holds_total", nullptr,
         "Packets of a local socket's flow through a bridge above its fair share, sent later to "
         "hold it to its share instead of marked or dropped."},
        {"borrowed_bytes", &ClassCounters::borrowed_bytes, K::Traffic, "shaperctl_class_borrowed_bytes_total",
         nullptr, "Bytes the class sent above its guaranteed rate, from its parent's spare (a class with a ceil)."},
        {"ceil_held", &ClassCounters::ceil_held, K::Traffic, "shaperctl_class_ceil_held_total", nullptr,
         "Packets that borrowed and waited for the class's ceil: the class was at its ceiling."},
        {"sparse", &ClassCounters::sparse, K::Traffic, "shaperctl_class_sparse_packets_total", nullptr,
         "Packets of sparse flows sent ahead of the class backlog (still charged)."},
    };
    return fields;
}

uint64_t counter_total(const ClassCounters& counters, CounterKind kind)
{
    uint64_t sum = 0;
    for (const CounterField& f : counter_fields())
        if (f.kind == kind)
            sum += counters.*f.member;
    return sum;
}

}  // namespace shaperctl
