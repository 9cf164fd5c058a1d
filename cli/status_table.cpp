#include "status_table.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "core/class_spec.h"
#include "core/delay_histogram.h"
#include "core/direction.h"
#include "loader/hook.h"
#include "core/mode.h"
#include "core/rule_spec.h"
#include "core/units.h"

namespace shaperctl {
namespace {

std::string qdisc_summary(const DeviceStatus& st)
{
    if (!st.present)
        return "device gone";
    std::string out = "root " + (st.pacing.root_kind.empty() ? "none" : st.pacing.root_kind) + ", fq on " +
                      std::to_string(st.pacing.fq_queues) + "/" + std::to_string(st.pacing.queues) + " tx queues";
    if (st.pacing.fq_horizon_ns)  // beside the class horizons, which must not exceed it
        out += ", fq horizon " + format_time(st.pacing.fq_horizon_ns);
    return out;
}

// The class's other settings where they differ from its side's defaults, from the one table of
// class fields (a new field shows up here by itself): "overhead 24 fair off", "-" for none.
std::string class_options(const ClassSpec& c, const ClassSpec& defaults)
{
    static const std::string_view shown[] = {"id", "parent", "rate", "ceil", "burst", "horizon"};
    std::string out;
    for (const ClassField& f : class_fields()) {
        if (std::find(std::begin(shown), std::end(shown), f.name) != std::end(shown) || f.get(c) == f.get(defaults))
            continue;
        out += (out.empty() ? "" : " ") + std::string(f.name) + " " + field_text(f, f.get(c));
    }
    return out.empty() ? "-" : out;
}

// The delay estimates from the class's histogram, "p50/p99" to two significant digits (the
// histogram is good to its bucket's width), "-" when it held no packet (police mode holds none).
std::string delay_summary(const DelayHistogram& delay)
{
    const auto rounded = [](uint64_t ns) {
        uint64_t scale = 1;
        while (ns >= 100 * scale)
            scale *= 10;
        return format_time((ns + scale / 2) / scale * scale);
    };
    const std::optional<uint64_t> p50 = delay_quantile_ns(delay, 0.5), p99 = delay_quantile_ns(delay, 0.99);
    return p50 ? rounded(*p50) + "/" + rounded(*p99) : "-";
}

}  // namespace

void StatusTableWriter::head(const DeviceStatus& st)
{
    out_ << "dev " << st.device.name << " (ifindex " << st.device.ifindex << ")  "
         << direction_name(st.device.direction) << "  mode " << mode_name(st.mode) << "  "
         << attach_point_name(st.hook, st.device.direction) << " prog " << st.program_id
         << (st.program_tag.empty() ? "" : " tag " + st.program_tag) << "  " << qdisc_summary(st) << "\n";
    if (st.device.direction == Direction::Ingress)
        out_ << (st.acks_paced ? "ACKs paced: the send side held one in the last second\n"
                               : "ACKs not paced: no ACK held by the send side in the last second\n");
    out_ << "default class " << (st.default_class ? std::to_string(st.default_class) : std::string("none"))
         << "  unclassified " << st.unclassified.packets << " pkts " << format_size(st.unclassified.bytes)
         << "\n\n";
    defaults_ = class_defaults(st.device.direction, st.send_side_paces);
    classes_.row({"class", "parent", "rate", "ceil", "burst", "horizon", "packets", "bytes", "drops", "marks", "backlog",
                  "delay p50/p99", "rate now", "options"});
    if (!st.rules.empty())
        rules_.row({"pref", "class", "match", "packets", "bytes"});
    for (const RuleStatus& r : st.rules)
        rules_.row({std::to_string(r.rule.pref), std::to_string(r.rule.class_id), format_rule_match(r.rule),
                    std::to_string(r.counters.packets), format_size(r.counters.bytes)});
}

// The class's options, and as a lender what it left its borrowers.
std::string StatusTableWriter::options(const ClassStatus& c) const
{
    const std::string set = class_options(c.spec, defaults_);
    if (!c.spare_bps)
        return set;
    return (set == "-" ? "" : set + " ") + "spare " + format_rate(*c.spare_bps);
}

void StatusTableWriter::add(const ClassStatus& c)
{
    const ClassCounters& n = c.counters;
    classes_.row({std::to_string(c.spec.id), c.spec.parent ? std::to_string(c.spec.parent) : "-",
                  format_rate(c.spec.rate_bps), c.spec.ceil_bps ? format_rate(c.spec.ceil_bps) : "-",
                  format_size(c.spec.burst_bytes), format_time(c.spec.horizon_ns),
                  std::to_string(n.packets), format_size(n.bytes),
                  std::to_string(counter_total(n, CounterKind::Drop)),
                  std::to_string(counter_total(n, CounterKind::Mark)), format_time(uint64_t(c.backlog_ns)),
                  delay_summary(n.delay), c.rate_estimate_bps ? format_rate(c.rate_estimate_bps) : "0", options(c)});
}

void StatusTableWriter::end()
{
    classes_.write(out_);
    if (!rules_.empty()) {
        out_ << "\n";
        rules_.write(out_);
    }
}

std::string status_table(const DeviceStatus& st)
{
    return whole_text<StatusTableWriter>(st);
}

}  // namespace shaperctl
