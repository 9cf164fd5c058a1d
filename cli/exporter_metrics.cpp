#include "exporter_metrics.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>

#include "core/class_counters.h"
#include "core/delay_histogram.h"
#include "core/mode.h"

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

std::string side_labels(const std::string& device, Direction direction)
{
    std::string labels = "device=\"" + escape_label(device) + "\"";
    if (direction == Direction::Ingress)
        labels += std::string(",direction=\"") + direction_name(direction) + "\"";
    return labels;
}

// Lines are written in place: each helper copies its part at `at` and returns where it ends.
// The caller leaves room for a whole line (MetricsWriter's slack).
char* put(char* at, std::string_view s)
{
    std::memcpy(at, s.data(), s.size());
    return at + s.size();
}

char* number(char* at, uint64_t n)
{
    return std::to_chars(at, at + 20, n).ptr;
}

// `n / 10^digits` as an exact decimal: "0.0015", "12".
char* decimal(char* at, uint64_t n, unsigned digits)
{
    uint64_t scale = 1;
    for (unsigned i = 0; i < digits; i++)
        scale *= 10;
    at = number(at, n / scale);
    uint64_t frac = n % scale;
    if (!frac)
        return at;
    *at++ = '.';
    for (unsigned i = digits; i-- > 0; frac /= 10)
        at[i] = char('0' + frac % 10);
    unsigned len = digits;
    while (at[len - 1] == '0')
        len--;
    return at + len;
}

// The end of a sample after its labels: "} VALUE\n".
char* value(char* at, uint64_t n)
{
    at = put(at, "} ");
    at = number(at, n);
    *at++ = '\n';
    return at;
}

char* decimal_value(char* at, uint64_t n, unsigned digits)
{
    at = put(at, "} ");
    at = decimal(at, n, digits);
    *at++ = '\n';
    return at;
}

char* class_label(char* at, uint32_t id)
{
    at = put(at, ",class=\"");
    at = number(at, id);
    *at++ = '"';
    return at;
}

// A family: its rows for one device (the samples after NAME{DEVICE LABELS) and how row `i` ends.
// The class counters' families are made from their table (core/class_counters.h): `counters`
// holds a family's counters, one row per class and counter.
struct Family {
    const char* name;
    const char* type;
    const char* help;
    size_t (*rows)(const Family&, const DeviceSamples&);
    char* (*row)(char* at, const Family&, const DeviceSamples&, size_t i);
    std::vector<const CounterField*> counters = {};
    const char* (*suffix)(size_t row) = nullptr;  // of a sample's name, after the family's
};

size_t one(const Family&, const DeviceSamples&)
{
    return 1;
}
size_t per_class(const Family&, const DeviceSamples& d)
{
    return d.classes.size();
}
size_t per_rule(const Family&, const DeviceSamples& d)
{
    return d.status.rules.size();
}
size_t per_counter(const Family& f, const DeviceSamples& d)
{
    return d.classes.size() * f.counters.size();
}

// A counter of a class, with its cause as a label where its family has several.
char* counter_row(char* at, const Family& f, const DeviceSamples& d, size_t i)
{
    const ClassSample& c = d.classes[i / f.counters.size()];
    const CounterField& counter = *f.counters[i % f.counters.size()];
    at = class_label(at, c.id);
    if (counter.cause) {
        at = put(put(at, ",cause=\""), counter.cause);
        *at++ = '"';
    }
    return value(at, c.counters.*counter.member);
}

template <uint64_t ClassSample::*field>
char* class_count(char* at, const Family&, const DeviceSamples& d, size_t i)
{
    const ClassSample& c = d.classes[i];
    return value(class_label(at, c.id), c.*field);
}

template <uint64_t ClassSample::*field, unsigned digits>
char* class_decimal(char* at, const Family&, const DeviceSamples& d, size_t i)
{
    const ClassSample& c = d.classes[i];
    return decimal_value(class_label(at, c.id), c.*field, digits);
}

char* rule_labels(char* at, const RuleStatus& r)
{
    at = put(at, ",pref=\"");
    at = number(at, r.rule.pref);
    at = put(at, "\",class=\"");
    at = number(at, r.rule.class_id);
    *at++ = '"';
    return at;
}

// The delay histogram (core/delay_histogram.h) of each class of a side that holds packets
// (edt egress; police and the receive side record nothing): its buckets, cumulative, with their
// bound in seconds as `le`, then _sum and _count.
constexpr size_t kDelayRows = SHAPER_DELAY_BUCKETS + 2;

size_t per_delay_row(const Family&, const DeviceSamples& d)
{
    const bool holds = d.status.mode == SHAPER_MODE_EDT && d.status.device.direction == Direction::Egress;
    return holds ? d.classes.size() * kDelayRows : 0;
}

const char* delay_suffix(size_t row)
{
    const size_t k = row % kDelayRows;
    return k < SHAPER_DELAY_BUCKETS ? "_bucket" : k == SHAPER_DELAY_BUCKETS ? "_sum" : "_count";
}

char* delay_row(char* at, const Family&, const DeviceSamples& d, size_t i)
{
    const ClassSample& c = d.classes[i / kDelayRows];
    const DelayHistogram& h = c.counters.delay;
    const size_t k = i % kDelayRows;
    at = class_label(at, c.id);
    if (k == SHAPER_DELAY_BUCKETS)
        return decimal_value(at, h.sum_ns, 9);
    if (k > SHAPER_DELAY_BUCKETS)
        return value(at, h.count());
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= k; b++)
        cumulative += h.buckets[b];
    at = put(at, ",le=\"");
    const std::optional<uint64_t> bound = delay_bound_ns(k);
    at = bound ? decimal(at, *bound, 9) : put(at, "+Inf");
    *at++ = '"';
    return value(at, cumulative);
}

// The families before the class counters' and after them.
const Family kBeforeCounters[] = {
    {"shaperctl_device_up", "gauge", "1 when the managed device is present and its maps were read, else 0.", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.present ? 1 : 0); }},
    {"shaperctl_device_info", "gauge", "Managed device: ifindex and mode (edt or police) as labels.", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) {
         at = put(at, ",ifindex=\"");
         at = number(at, uint64_t(d.status.device.ifindex));
         at = put(at, "\",mode=\"");
         at = put(at, escape_label(mode_name(d.status.mode)));
         *at++ = '"';
         return value(at, 1);
     }},
    {"shaperctl_device_filter_attached", "gauge",
     "1 when shaperctl's program is on the device's egress hook (tcx or tc clsact).", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.program_id ? 1 : 0); }},
    {"shaperctl_device_tx_queues", "gauge", "TX queues of the device.", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.pacing.queues); }},
    {"shaperctl_device_fq_queues", "gauge", "TX queues whose qdisc is fq (edt mode paces on them).", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.pacing.fq_queues); }},
    {"shaperctl_device_acks_paced", "gauge",
     "Receive side: 1 when the send side held an ACK of its flows in the last second (ACK pacing).",
     [](const Family&, const DeviceSamples& d) { return size_t(d.status.device.direction == Direction::Ingress); },
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.acks_paced ? 1 : 0); }},
    {"shaperctl_device_default_class", "gauge", "Class of packets no rule matches (0: none).", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.default_class); }},
    {"shaperctl_unclassified_packets_total", "counter", "Packets that matched no rule and no default class (unshaped).",
     one, [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.unclassified.packets); }},
    {"shaperctl_unclassified_segments_total", "counter", "Segments of unclassified packets.", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.unclassified.segments); }},
    {"shaperctl_unclassified_bytes_total", "counter", "Bytes of unclassified packets.", one,
     [](char* at, const Family&, const DeviceSamples& d, size_t) { return value(at, d.status.unclassified.bytes); }},
    {"shaperctl_class_info", "gauge", "Configured class, with its parent (0: top level) as a label.", per_class,
     [](char* at, const Family&, const DeviceSamples& d, size_t i) {
         at = class_label(at, d.classes[i].id);
         at = put(at, ",parent=\"");
         at = number(at, d.classes[i].parent);
         *at++ = '"';
         return value(at, 1);
     }},
    {"shaperctl_class_rate_limit_bytes_per_second", "gauge", "Configured shaping rate of the class.", per_class,
     class_decimal<&ClassSample::rate_milli_bytes, 3>},
    {"shaperctl_class_ceil_bytes_per_second", "gauge", "Configured ceil of the class (0: none, its rate is its cap).",
     per_class, class_decimal<&ClassSample::ceil_milli_bytes, 3>},
    {"shaperctl_class_burst_bytes", "gauge", "Configured burst of the class.", per_class,
     class_count<&ClassSample::burst_bytes>},
    {"shaperctl_class_horizon_seconds", "gauge", "Largest queueing delay the class accepts before dropping.", per_class,
     class_decimal<&ClassSample::horizon_ns, 9>},
};
const Family kAfterCounters[] = {
    {"shaperctl_class_backlog_seconds", "gauge", "How far the class clock runs ahead of now (0 when idle).", per_class,
     class_decimal<&ClassSample::backlog_ns, 9>},
    {"shaperctl_class_spare_bytes_per_second", "gauge", "What a lending parent left its borrowing children (0: none).",
     per_class, class_decimal<&ClassSample::spare_milli_bytes, 3>},
    {"shaperctl_class_delay_seconds", "histogram",
     "How long the class held each of its own packets (edt): departure stamped less the time it was stamped.",
     per_delay_row, delay_row, {}, delay_suffix},
    {"shaperctl_rule_hits_total", "counter", "Packets the rule classified.", per_rule,
     [](char* at, const Family&, const DeviceSamples& d, size_t i) {
         const RuleStatus& r = d.status.rules[i];
         return value(rule_labels(at, r), r.counters.packets);
     }},
    {"shaperctl_rule_bytes_total", "counter", "Bytes of the packets the rule classified.", per_rule,
     [](char* at, const Family&, const DeviceSamples& d, size_t i) {
         const RuleStatus& r = d.status.rules[i];
         return value(rule_labels(at, r), r.counters.bytes);
     }},
};
// Every family, in the order of the text: the class counters' in their table's order, the
// counters of one metric (drops by cause) in one family.
const std::vector<Family>& families()
{
    static const std::vector<Family> all = [] {
        std::vector<Family> v(std::begin(kBeforeCounters), std::end(kBeforeCounters));
        for (const CounterField& c : counter_fields()) {
            if (v.back().counters.empty() || std::string_view(v.back().name) != c.metric)
                v.push_back({c.metric, "counter", c.help, per_counter, counter_row});
            v.back().counters.push_back(&c);
        }
        v.insert(v.end(), std::begin(kAfterCounters), std::end(kAfterCounters));
        return v;
    }();
    return all;
}

}  // namespace

ClassSample ClassSample::of(const ClassStatus& c)
{
    ClassSample s;
    s.id = c.spec.id;
    s.parent = c.spec.parent;
    s.rate_milli_bytes = c.spec.rate_bps * 125;  // bytes per second, to three decimals
    s.ceil_milli_bytes = c.spec.ceil_bps * 125;
    s.spare_milli_bytes = c.spare_bps.value_or(0) * 125;
    s.burst_bytes = c.spec.burst_bytes;
    s.horizon_ns = c.spec.horizon_ns;
    s.backlog_ns = uint64_t(std::max<int64_t>(c.backlog_ns, 0));
    s.counters = c.counters;
    return s;
}

// Where the text stands: family, side (down devices first, in the first family only), row.
struct MetricsWriter::Position {
    std::vector<DeviceSamples> devices;
    std::vector<DownDevice> down;
    std::vector<std::string> labels;  // each side's, down devices first
    size_t slack = 0;                 // room for the longest line
    size_t family = 0, side = 0, row = 0;
    bool headed = false;   // the family's HELP and TYPE are written
    std::string prefix;    // {LABELS of the side, after a sample's name
};

MetricsWriter::MetricsWriter(std::vector<DeviceSamples> devices, std::vector<DownDevice> down)
    : at_(std::make_unique<Position>())
{
    Position& p = *at_;
    p.devices = std::move(devices);
    p.down = std::move(down);
    for (const DownDevice& d : p.down)
        p.labels.push_back(side_labels(d.name, d.direction));
    for (const DeviceSamples& d : p.devices)
        p.labels.push_back(side_labels(d.status.device.name, d.status.device.direction));
    size_t longest = 0;
    for (const std::string& l : p.labels)
        longest = std::max(longest, l.size());
    p.slack = 1024 + longest;  // a family's name and help, a mode's name, a sample's other labels and value: < 1 kB
}

MetricsWriter::~MetricsWriter() = default;

bool MetricsWriter::next(std::string& out, size_t size)
{
    Position& p = *at_;
    const size_t start = out.size();
    out.resize(start + size + p.slack);
    char* const base = out.data();
    char* at = base + start;
    char* const stop = at + size;
    const size_t sides = p.down.size() + p.devices.size();
    const std::vector<Family>& all = families();
    while (at < stop && p.family < all.size()) {
        const Family& f = all[p.family];
        if (!p.headed) {
            at = put(put(put(put(at, "# HELP "), f.name), " "), f.help);
            at = put(put(put(put(at, "\n# TYPE "), f.name), " "), f.type);
            *at++ = '\n';
            p.headed = true;
            p.side = p.family == 0 ? 0 : p.down.size();
            p.row = 0;
            if (p.side < sides)
                p.prefix = "{" + p.labels[p.side];
            continue;
        }
        if (p.side == sides) {
            p.family++;
            p.headed = false;
            continue;
        }
        if (p.side < p.down.size()) {  // only its shaperctl_device_up, 0
            at = value(put(put(at, f.name), p.prefix), 0);
        } else {
            const DeviceSamples& d = p.devices[p.side - p.down.size()];
            const size_t rows = f.rows(f, d);
            for (; p.row < rows && at < stop; p.row++) {
                at = put(at, f.name);
                if (f.suffix)
                    at = put(at, f.suffix(p.row));
                at = f.row(put(at, p.prefix), f, d, p.row);
            }
            if (p.row < rows)
                break;
        }
        p.side++;
        p.row = 0;
        if (p.side < sides)
            p.prefix = "{" + p.labels[p.side];
    }
    out.resize(size_t(at - base));
    return p.family < all.size();
}

std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down)
{
    std::vector<DeviceSamples> sides;
    for (const DeviceStatus& st : devices) {
        DeviceSamples& d = sides.emplace_back();
        d.status = st;
        d.status.classes.clear();
        for (const ClassStatus& c : st.classes)
            d.classes.push_back(ClassSample::of(c));
    }
    MetricsWriter writer(std::move(sides), down);
    std::string text;
    while (writer.next(text, 64 * 1024)) {
    }
    return text;
}

}  // namespace shaperctl
