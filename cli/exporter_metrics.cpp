#include "exporter_metrics.h"

#include <algorithm>
#include <string_view>

#include "loader/mode.h"

namespace shaperctl {
namespace {

struct Family {
    const char* name;
    const char* type;
    const char* help;
};

// Every family, in the order scrapes list them; the enum indexes this table.
enum Metric {
    DeviceUp, DeviceInfo, DeviceFilterAttached, DeviceTxQueues, DeviceFqQueues, DeviceDefaultClass,
    UnclassifiedPackets, UnclassifiedSegments, UnclassifiedBytes, ClassInfo, ClassRate, ClassBurst,
    ClassHorizon, ClassPackets, ClassSegments, ClassBytes, ClassDrops, ClassEcnMarks, ClassFairMarks,
    ClassSparse, ClassBacklog, RuleHits, RuleBytes, kMetrics
};

constexpr Family kFamilies[kMetrics] = {
    {"shaperctl_device_up", "gauge", "1 when the managed device is present and its maps were read, else 0."},
    {"shaperctl_device_info", "gauge", "Managed device: ifindex and mode (edt or police) as labels."},
    {"shaperctl_device_filter_attached", "gauge",
     "1 when shaperctl's program is on the device's egress hook (tcx or tc clsact)."},
    {"shaperctl_device_tx_queues", "gauge", "TX queues of the device."},
    {"shaperctl_device_fq_queues", "gauge", "TX queues whose qdisc is fq (edt mode paces on them)."},
    {"shaperctl_device_default_class", "gauge", "Class of packets no rule matches (0: none)."},
    {"shaperctl_unclassified_packets_total", "counter", "Packets that matched no rule and no default class (unshaped)."},
    {"shaperctl_unclassified_segments_total", "counter", "Segments of unclassified packets."},
    {"shaperctl_unclassified_bytes_total", "counter", "Bytes of unclassified packets."},
    {"shaperctl_class_info", "gauge", "Configured class, with its parent (0: top level) as a label."},
    {"shaperctl_class_rate_limit_bytes_per_second", "gauge", "Configured shaping rate of the class."},
    {"shaperctl_class_burst_bytes", "gauge", "Configured burst of the class."},
    {"shaperctl_class_horizon_seconds", "gauge", "Largest queueing delay the class accepts before dropping."},
    {"shaperctl_class_packets_total", "counter", "Packets charged to the class (descendants included)."},
    {"shaperctl_class_segments_total", "counter", "GSO segments charged to the class (descendants included)."},
    {"shaperctl_class_bytes_total", "counter",
     "Bytes charged to the class: wire length plus overhead, after mpu (descendants included)."},
    {"shaperctl_class_drops_total", "counter",
     "Packets dropped by the class, by cause: horizon (departure too far ahead), aqm (CoDel) "
     "or fair (a flow above its fair share)."},
    {"shaperctl_class_ecn_marks_total", "counter", "Packets CoDel marked CE instead of dropping."},
    {"shaperctl_class_fair_marks_total", "counter",
     "Packets marked CE instead of dropped for a flow above its fair share."},
    {"shaperctl_class_sparse_packets_total", "counter",
     "Packets of sparse flows sent ahead of the class backlog (still charged)."},
    {"shaperctl_class_backlog_seconds", "gauge", "How far the class clock runs ahead of now (0 when idle)."},
    {"shaperctl_rule_hits_total", "counter", "Packets the rule classified."},
    {"shaperctl_rule_bytes_total", "counter", "Bytes of the packets the rule classified."},
};

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

// One sample: NAME{LABELS[,MORE]} VALUE
void sample(std::string& out, Metric m, const std::string& labels, std::string_view more, std::string_view value)
{
    out.append(kFamilies[m].name).append("{").append(labels).append(more).append("} ").append(value).append("\n");
}

void sample(std::string& out, Metric m, const std::string& labels, std::string_view more, uint64_t value)
{
    sample(out, m, labels, more, std::to_string(value));
}

}  // namespace

MetricsWriter::MetricsWriter() : samples_(kMetrics) {}

void MetricsWriter::down(const DownDevice& device)
{
    sample(down_, DeviceUp, side_labels(device.name, device.direction), "", 0);
}

std::vector<size_t> MetricsWriter::mark() const
{
    std::vector<size_t> sizes;
    for (const std::string& s : samples_)
        sizes.push_back(s.size());
    return sizes;
}

void MetricsWriter::take_back(const std::vector<size_t>& mark)
{
    for (size_t m = 0; m < samples_.size(); m++)
        samples_[m].resize(mark[m]);
}

void MetricsWriter::device(const DeviceStatus& st)
{
    labels_ = side_labels(st.device.name, st.device.direction);
    const auto put = [&](Metric m, std::string_view more, uint64_t value) { sample(samples_[m], m, labels_, more, value); };
    put(DeviceUp, "", st.present ? 1 : 0);
    put(DeviceInfo,
        ",ifindex=\"" + std::to_string(st.device.ifindex) + "\",mode=\"" + escape_label(mode_name(st.mode)) + "\"", 1);
    put(DeviceFilterAttached, "", st.program_id ? 1 : 0);
    put(DeviceTxQueues, "", st.pacing.queues);
    put(DeviceFqQueues, "", st.pacing.fq_queues);
    put(DeviceDefaultClass, "", st.default_class);
    put(UnclassifiedPackets, "", st.unclassified.packets);
    put(UnclassifiedSegments, "", st.unclassified.segments);
    put(UnclassifiedBytes, "", st.unclassified.bytes);
    for (const RuleStatus& r : st.rules) {
        const std::string more =
            ",pref=\"" + std::to_string(r.rule.pref) + "\",class=\"" + std::to_string(r.rule.class_id) + "\"";
        put(RuleHits, more, r.counters.packets);
        put(RuleBytes, more, r.counters.bytes);
    }
}

void MetricsWriter::add(const ClassStatus& c)
{
    const ClassCounters& n = c.counters;
    const std::string more = ",class=\"" + std::to_string(c.spec.id) + "\"";
    const auto put = [&](Metric m, std::string_view value, std::string_view extra = "") {
        sample(samples_[m], m, labels_, extra.empty() ? std::string_view(more) : extra, value);
    };
    const auto count = [&](Metric m, uint64_t value) { put(m, std::to_string(value)); };
    put(ClassInfo, "1", more + ",parent=\"" + std::to_string(c.spec.parent) + "\"");
    put(ClassRate, decimal(c.spec.rate_bps * 125, 3));
    count(ClassBurst, c.spec.burst_bytes);
    put(ClassHorizon, decimal(c.spec.horizon_ns, 9));
    count(ClassPackets, n.packets);
    count(ClassSegments, n.segments);
    count(ClassBytes, n.bytes);
    put(ClassDrops, std::to_string(n.drops_horizon), more + ",cause=\"horizon\"");
    put(ClassDrops, std::to_string(n.drops_aqm), more + ",cause=\"aqm\"");
    put(ClassDrops, std::to_string(n.drops_fair), more + ",cause=\"fair\"");
    count(ClassEcnMarks, n.ecn_marks);
    count(ClassFairMarks, n.fair_marks);
    count(ClassSparse, n.sparse);
    put(ClassBacklog, decimal(uint64_t(std::max<int64_t>(c.backlog_ns, 0)), 9));
}

std::string MetricsWriter::text() const
{
    size_t bytes = down_.size();
    for (const std::string& s : samples_)
        bytes += s.size() + 256;
    std::string out;
    out.reserve(bytes);
    for (int m = 0; m < kMetrics; m++)
        out.append("# HELP ").append(kFamilies[m].name).append(" ").append(kFamilies[m].help)
            .append("\n# TYPE ").append(kFamilies[m].name).append(" ").append(kFamilies[m].type).append("\n")
            .append(m == DeviceUp ? down_ : "").append(samples_[m]);
    return out;
}

std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down)
{
    MetricsWriter metrics;
    for (const DownDevice& d : down)
        metrics.down(d);
    for (const DeviceStatus& st : devices) {
        metrics.device(st);
        for (const ClassStatus& c : st.classes)
            metrics.add(c);
    }
    return metrics.text();
}

}  // namespace shaperctl
