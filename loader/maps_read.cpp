// ShaperMaps' reads for status, a chunk of ids at a time: the configs by batched lookups (a few
// dozen system calls for 100,000 classes), the entries and every CPU's counters through a
// mapping of just that chunk (a copy per entry costs the kernel more than reading it), so the
// reader's memory stays a chunk's worth whatever the number of classes and CPUs.
#include <algorithm>
#include <vector>

#include "loader/map_batch.h"
#include "loader/maps.h"

namespace shaperctl {

void ShaperMaps::for_each_class_state(const std::function<void(const ClassState&)>& each) const
{
    std::vector<shaper_class_config> configs(kMapChunk);
    std::vector<ClassCounters> sums(kMapChunk);
    const auto present = [&](uint32_t id, uint32_t i) { return id != 0 && (configs[i].flags & SHAPER_CLASS_PRESENT); };
    for (uint32_t first = 0; first < max_classes_; first += kMapChunk) {
        const uint32_t n = read_map_range(config_.get(), first, std::min(kMapChunk, max_classes_ - first),
                                          sizeof(shaper_class_config), configs.data(), "the class map");
        bool any = false;
        for (uint32_t i = 0; i < n; i++)
            any = any || present(first + i, i);
        if (!any)
            continue;
        // Read after the configs: a class added in between shows its first counts, one deleted
        // shows zeros, never another class's.
        std::fill(sums.begin(), sums.begin() + n, ClassCounters{});
        for (uint32_t cpu = 0; cpu < cpus_; cpu++) {
            const uint64_t base = uint64_t(cpu) * max_classes_ + first;
            const MappedArray<shaper_class_stats> counters(stats_.get(), base, n, "the class counters");
            for (uint32_t i = 0; i < n; i++)
                if (present(first + i, i))
                    add_counters(sums[i], counters[base + i]);
        }
        const MappedArray<shaper_class> entries(classes_.get(), first, n, "the class entries");
        const uint64_t read_ns = monotonic_ns();
        for (uint32_t i = 0; i < n; i++)
            if (present(first + i, i)) {
                const shaper_class& e = entries[first + i];
                each({first + i, configs[i], sums[i], mapped_load(e.tat_ns), read_ns, mapped_load(e.lend_epoch_ns),
                      mapped_load(e.lend_taken_fp)});
            }
    }
}

ClassCounters ShaperMaps::unclassified() const
{
    ClassCounters sum;
    for (uint32_t cpu = 0; cpu < cpus_; cpu++) {
        shaper_class_stats one{};
        if (read_map_range(stats_.get(), cpu * max_classes_, 1, sizeof one, &one, "the unclassified counters"))
            add_counters(sum, one);
    }
    return sum;
}

}  // namespace shaperctl
