#include "loader/shaper.h"

#include <bpf/bpf.h>

#include <thread>

#include "loader/hook.h"
#include "loader/fd.h"
#include "loader/program.h"

// Shaper's status: what runs on the device and every class's and rule's counters.
namespace shaperctl {
namespace {

// The gate of the table both sides share: the send side writes when it last held an ACK.
bool acks_paced_now(const Device& device)
{
    const Fd map(bpf_obj_get(device.ack_pace_pin().c_str()));
    const uint32_t gate = 0;
    shaper_ack_pace value{};
    if (!map || bpf_map_lookup_elem(map.get(), &gate, &value))
        return false;
    return value.until_ns + SHAPER_ACK_PACE_FRESH_NS > monotonic_ns();
}

}  // namespace

void Shaper::status(std::chrono::nanoseconds sample, const std::function<void(const DeviceStatus&)>& head,
                    const std::function<void(const ClassStatus&)>& each_class) const
{
    DeviceStatus st;
    st.device = device_;
    st.present = device_.current_name() == device_.name;
    st.mode = record_.mode;
    st.hook = record_.attachment.hook;
    const shaper_settings settings = maps_.settings();
    st.default_class = settings.default_class;
    st.max_classes = maps_.max_classes();
    if (st.present) {
        st.program_id = hook_prog_id(device_, record_.attachment);
        if (st.program_id)
            st.program_tag = prog_tag_hex(st.program_id);
        st.pacing = inspect_pacing(device_.ifindex);
        st.acks_paced = device_.direction == Direction::Ingress && acks_paced_now(device_);
    }
    st.send_side_paces = device_.direction == Direction::Ingress && paces_acks(device_);

    // The rate estimate's first reading, by id: bytes and when they were read (16 bytes a slot;
    // nothing to compare without one). A class added while we sleep started from zero. Each
    // class's rate is over the time between its own two readings: a chunk read late (after the
    // rules, or after printing the classes before it) must not count its extra bytes over the
    // nominal sample.
    std::vector<std::pair<uint64_t, uint64_t>> first_reading;
    if (sample.count() > 0) {
        first_reading.resize(st.max_classes);
        maps_.for_each_class_state([&](const ClassState& c) { first_reading[c.id] = {c.counters.bytes, c.read_ns}; });
    }
    const uint64_t t0 = monotonic_ns();
    if (sample.count() > 0)
        std::this_thread::sleep_for(sample);
    st.unclassified = maps_.unclassified();
    st.sample_ns = sample.count() > 0 ? monotonic_ns() - t0 : 0;
    st.rules = rules();
    head(st);

    ClassStatus cs;
    maps_.for_each_class_state([&](const ClassState& c) {
        cs.spec = class_spec_from_config(c.id, c.config);
        cs.counters = c.counters;
        cs.backlog_ns = c.tat_ns > c.read_ns ? int64_t(c.tat_ns - c.read_ns) : 0;
        cs.spare_bps.reset();
        if (c.lend_epoch_ns && c.read_ns < c.lend_epoch_ns + 1'000'000'000ull) {
            const uint64_t taken = std::min<uint64_t>(c.lend_taken_fp, 1u << 16);
            cs.spare_bps = uint64_t((unsigned __int128)c.config.rate_bps * ((1u << 16) - taken) >> 16);
        }
        cs.rate_estimate_bps = 0;
        if (st.sample_ns) {
            const auto [first, since] = first_reading[c.id];
            // A class deleted and added again while we slept counts from zero: no rate, not a wrap.
            const uint64_t charged = c.counters.bytes >= first ? c.counters.bytes - first : 0;
            const uint64_t elapsed = since && c.read_ns > since ? c.read_ns - since : st.sample_ns;
            cs.rate_estimate_bps = uint64_t((unsigned __int128)charged * 8 * 1'000'000'000ull / elapsed);
        }
        each_class(cs);
    });
}

DeviceStatus Shaper::status(std::chrono::nanoseconds sample) const
{
    DeviceStatus st;
    status(sample, [&](const DeviceStatus& head) { st = head; },
           [&](const ClassStatus& c) { st.classes.push_back(c); });
    return st;
}

}  // namespace shaperctl
