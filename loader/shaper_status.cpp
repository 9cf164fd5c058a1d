#include "loader/shaper.h"

#include <thread>

#include "loader/egress_hook.h"
#include "loader/program.h"

// Shaper's status: what runs on the device and every class's and rule's counters.
namespace shaperctl {

DeviceStatus Shaper::status(std::chrono::nanoseconds sample) const
{
    DeviceStatus st;
    st.device = device_;
    st.present = device_.current_name() == device_.name;
    st.mode = record_.mode;
    st.hook = record_.egress.hook;
    const shaper_settings settings = maps_.settings();
    st.default_class = settings.default_class;
    st.max_classes = maps_.max_classes();
    if (st.present) {
        st.program_id = egress_prog_id(device_, record_.egress);
        if (st.program_id)
            st.program_tag = prog_tag_hex(st.program_id);
        st.pacing = inspect_pacing(device_.ifindex);
    }

    const auto configs = maps_.class_configs();
    std::vector<ClassCounters> first;
    if (sample.count() > 0) {  // the rate estimate's first reading; nothing to compare without one
        first.reserve(configs.size());
        for (const auto& [id, config] : configs)
            first.push_back(maps_.counters(id));
    }
    const uint64_t t0 = monotonic_ns();
    if (sample.count() > 0)
        std::this_thread::sleep_for(sample);
    st.unclassified = maps_.counters(0);
    const uint64_t now = monotonic_ns();
    st.sample_ns = sample.count() > 0 ? now - t0 : 0;
    for (size_t i = 0; i < configs.size(); i++) {
        const uint32_t id = configs[i].first;
        ClassStatus cs;
        cs.spec = class_spec_from_config(id, configs[i].second);
        cs.counters = maps_.counters(id);
        const uint64_t tat = maps_.clock(id).tat_ns;
        cs.backlog_ns = tat > now ? int64_t(tat - now) : 0;
        if (st.sample_ns)
            cs.rate_estimate_bps = uint64_t((unsigned __int128)(cs.counters.bytes - first[i].bytes) *
                                            8 * 1'000'000'000ull / st.sample_ns);
        st.classes.push_back(cs);
    }
    st.rules = rules();
    return st;
}

}  // namespace shaperctl
