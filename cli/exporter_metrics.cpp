#include "exporter_metrics.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "loader/mode.h"

namespace shaperctl {
namespace {

std::string escape_label(std::string_view value)
{
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"')
            out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

// `n / 10^digits` as an exact decimal: "0.0015", "12".
std::string decimal(uint64_t n, unsigned digits)
{
    uint64_t scale = 1;
    for (unsigned i = 0; i < digits; i++)
        scale *= 10;
    std::string out = std::to_string(n / scale);
    if (uint64_t frac = n % scale) {
        std::string f = std::to_string(frac);
        f = std::string(digits - f.size(), '0') + f;
        f.erase(f.find_last_not_of('0') + 1);
        out += "." + f;
    }
    return out;
}

std::string side_labels(const std::string& device, Direction direction)
{
    std::string labels = "device=\"" + escape_label(device) + "\"";
    if (direction == Direction::Ingress)
        labels += std::string(",direction=\"") + direction_name(direction) + "\"";
    return labels;
}

// The samples of one family: NAME{DEVICE LABELS[,MORE]} VALUE, appended to `out`.
struct Samples {
    std::string& out;
    std::string_view name;
    std::string labels;  // the device's

    void put(std::string_view more, std::string_view value)
    {
        out.append(name).append("{").append(labels).append(more).append("} ").append(value).append("\n");
    }
    void put(std::string_view more, uint64_t value)
    {
        char digits[24];
        put(more, std::string_view(digits, size_t(std::to_chars(digits, digits + sizeof digits, value).ptr - digits)));
    }
    // Each class's sample: ,class="ID"[EXTRA] and value(class).
    template <typename Value>
    void per_class(const DeviceStatus& st, Value value, std::string_view extra = "")
    {
        std::string more;
        for (const ClassStatus& c : st.classes) {
            more.assign(",class=\"").append(std::to_string(c.spec.id)).append("\"").append(extra);
            put(more, value(c));
        }
    }
};

struct Family {
    const char* name;
    const char* type;
    const char* help;
    void (*samples)(Samples&, const DeviceStatus&);  // one device's
};

const Family kFamilies[] = {
    {"shaperctl_device_up", "gauge", "1 when the managed device is present and its maps were read, else 0.",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.present ? 1 : 0); }},
    {"shaperctl_device_info", "gauge", "Managed device: ifindex and mode (edt or police) as labels.",
     [](Samples& s, const DeviceStatus& st) {
         s.put(",ifindex=\"" + std::to_string(st.device.ifindex) + "\",mode=\"" + escape_label(mode_name(st.mode)) + "\"", 1);
     }},
    {"shaperctl_device_filter_attached", "gauge",
     "1 when shaperctl's program is on the device's egress hook (tcx or tc clsact).",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.program_id ? 1 : 0); }},
    {"shaperctl_device_tx_queues", "gauge", "TX queues of the device.",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.pacing.queues); }},
    {"shaperctl_device_fq_queues", "gauge", "TX queues whose qdisc is fq (edt mode paces on them).",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.pacing.fq_queues); }},
    {"shaperctl_device_default_class", "gauge", "Class of packets no rule matches (0: none).",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.default_class); }},
    {"shaperctl_unclassified_packets_total", "counter", "Packets that matched no rule and no default class (unshaped).",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.unclassified.packets); }},
    {"shaperctl_unclassified_segments_total", "counter", "Segments of unclassified packets.",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.unclassified.segments); }},
    {"shaperctl_unclassified_bytes_total", "counter", "Bytes of unclassified packets.",
     [](Samples& s, const DeviceStatus& st) { s.put("", st.unclassified.bytes); }},
    {"shaperctl_class_info", "gauge", "Configured class, with its parent (0: top level) as a label.",
     [](Samples& s, const DeviceStatus& st) {
         for (const ClassStatus& c : st.classes)
             s.put(",class=\"" + std::to_string(c.spec.id) + "\",parent=\"" + std::to_string(c.spec.parent) + "\"", 1);
     }},
    {"shaperctl_class_rate_limit_bytes_per_second", "gauge", "Configured shaping rate of the class.",
     [](Samples& s, const DeviceStatus& st) {
         s.per_class(st, [](const ClassStatus& c) { return decimal(c.spec.rate_bps * 125, 3); });
     }},
    {"shaperctl_class_burst_bytes", "gauge", "Configured burst of the class.",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.spec.burst_bytes; }); }},
    {"shaperctl_class_horizon_seconds", "gauge", "Largest queueing delay the class accepts before dropping.",
     [](Samples& s, const DeviceStatus& st) {
         s.per_class(st, [](const ClassStatus& c) { return decimal(c.spec.horizon_ns, 9); });
     }},
    {"shaperctl_class_packets_total", "counter", "Packets charged to the class (descendants included).",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.counters.packets; }); }},
    {"shaperctl_class_segments_total", "counter", "GSO segments charged to the class (descendants included).",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.counters.segments; }); }},
    {"shaperctl_class_bytes_total", "counter",
     "Bytes charged to the class: wire length plus overhead, after mpu (descendants included).",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.counters.bytes; }); }},
    {"shaperctl_class_drops_total", "counter",
     "Packets dropped by the class, by cause: horizon (departure too far ahead), aqm (CoDel) "
     "or fair (a flow above its fair share).",
     [](Samples& s, const DeviceStatus& st) {
         for (const ClassStatus& c : st.classes) {
             const std::string id = ",class=\"" + std::to_string(c.spec.id) + "\",cause=";
             s.put(id + "\"horizon\"", c.counters.drops_horizon);
             s.put(id + "\"aqm\"", c.counters.drops_aqm);
             s.put(id + "\"fair\"", c.counters.drops_fair);
         }
     }},
    {"shaperctl_class_ecn_marks_total", "counter", "Packets CoDel marked CE instead of dropping.",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.counters.ecn_marks; }); }},
    {"shaperctl_class_fair_marks_total", "counter", "Packets marked CE instead of dropped for a flow above its fair share.",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.counters.fair_marks; }); }},
    {"shaperctl_class_sparse_packets_total", "counter", "Packets of sparse flows sent ahead of the class backlog (still charged).",
     [](Samples& s, const DeviceStatus& st) { s.per_class(st, [](const ClassStatus& c) { return c.counters.sparse; }); }},
    {"shaperctl_class_backlog_seconds", "gauge", "How far the class clock runs ahead of now (0 when idle).",
     [](Samples& s, const DeviceStatus& st) {
         s.per_class(st, [](const ClassStatus& c) { return decimal(uint64_t(std::max<int64_t>(c.backlog_ns, 0)), 9); });
     }},
    {"shaperctl_rule_hits_total", "counter", "Packets the rule classified.",
     [](Samples& s, const DeviceStatus& st) {
         for (const RuleStatus& r : st.rules)
             s.put(",pref=\"" + std::to_string(r.rule.pref) + "\",class=\"" + std::to_string(r.rule.class_id) + "\"",
                   r.counters.packets);
     }},
    {"shaperctl_rule_bytes_total", "counter", "Bytes of the packets the rule classified.",
     [](Samples& s, const DeviceStatus& st) {
         for (const RuleStatus& r : st.rules)
             s.put(",pref=\"" + std::to_string(r.rule.pref) + "\",class=\"" + std::to_string(r.rule.class_id) + "\"",
                   r.counters.bytes);
     }},
};

}  // namespace

std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down)
{
    size_t classes = 0, rules = 0;
    for (const DeviceStatus& st : devices)
        classes += st.classes.size(), rules += st.rules.size();
    std::string out;
    out.reserve(8192 + 1024 * (devices.size() + down.size()) + 1100 * classes + 200 * rules);  // about the size
    for (const Family& f : kFamilies) {
        out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n# TYPE ").append(f.name)
            .append(" ").append(f.type).append("\n");
        if (&f == &kFamilies[0])
            for (const DownDevice& d : down)
                Samples{out, f.name, side_labels(d.name, d.direction)}.put("", 0);
        for (const DeviceStatus& st : devices) {
            Samples samples{out, f.name, side_labels(st.device.name, st.device.direction)};
            f.samples(samples, st);
        }
    }
    return out;
}

}  // namespace shaperctl
