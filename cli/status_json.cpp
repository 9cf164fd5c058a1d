#include "status_json.h"

#include "core/class_counters.h"
#include "core/class_spec.h"
#include "core/delay_histogram.h"
#include "loader/hook.h"
#include "core/mode.h"
#include "core/rule_spec.h"

namespace shaperctl {
namespace {

using DelayBuckets = decltype(DelayHistogram::buckets);

nlohmann::ordered_json id_or_null(uint32_t id)
{
    return id ? nlohmann::ordered_json(id) : nlohmann::ordered_json(nullptr);
}

// One class's status fields, in schema order: the single list both the JSON value and the
// streamed text are made from. Values are numbers, booleans, null, or strings needing no escape.
struct Scalar {
    enum Kind { Unsigned, Signed, Bool, Null, Text, Counts } kind;
    uint64_t u = 0;
    int64_t i = 0;
    const char* text = nullptr;
    const DelayBuckets* counts = nullptr;
};
Scalar num(uint64_t v) { return {Scalar::Unsigned, v}; }
Scalar snum(int64_t v) { return {Scalar::Signed, 0, v}; }
Scalar flag(bool v) { return {Scalar::Bool, v}; }
Scalar text(const char* v) { return {Scalar::Text, 0, 0, v}; }
Scalar maybe(std::optional<uint64_t> v) { return v ? num(*v) : Scalar{Scalar::Null}; }

// A configured value as status shows it: a number, null for no parent, a boolean for an on/off
// switch, else the switch's word.
Scalar spec_scalar(const ClassField& f, int64_t v)
{
    switch (f.kind) {
    case FieldKind::ClassId: return v ? num(uint64_t(v)) : Scalar{Scalar::Null};
    case FieldKind::Int: return snum(v);
    case FieldKind::Rate: return v || f.min ? num(uint64_t(v)) : Scalar{Scalar::Null};
    case FieldKind::Switch: return std::string_view(f.on) == "on" ? flag(v != 0) : text(v ? f.on : f.off);
    default: return num(uint64_t(v));
    }
}

// Calls each(key, value) for every status field of a class, in schema order: the class's
// identity (id, parent), its configuration (the class table's order), its counters.
template <class Each>
void for_each_status_field(const ClassStatus& c, Each&& each)
{
    const ClassField& id = class_fields()[0];
    const ClassField& parent = *find_class_field("parent");
    each(id.status_key, spec_scalar(id, id.get(c.spec)));
    each(parent.status_key, spec_scalar(parent, parent.get(c.spec)));
    for (const ClassField& f : class_fields())
        if (&f != &id && &f != &parent)
            each(f.status_key, spec_scalar(f, f.get(c.spec)));
    // The counters' table, with the drops of every cause summed before the first of them.
    bool dropped = false;
    for (const CounterField& f : counter_fields()) {
        if (f.kind == CounterKind::Drop && !dropped) {
            each("drops", num(counter_total(c.counters, CounterKind::Drop)));
            dropped = true;
        }
        each(f.status_key, num(c.counters.*f.member));
    }
    each("backlog_ns", snum(c.backlog_ns));
    each("spare_bps", c.spare_bps ? num(*c.spare_bps) : Scalar{Scalar::Null});
    each("rate_estimate_bps", num(c.rate_estimate_bps));
    // How long the class held its packets (edt): estimates from its histogram, then the histogram.
    const DelayHistogram& delay = c.counters.delay;
    each("delay_p50_ns", maybe(delay_quantile_ns(delay, 0.5)));
    each("delay_p99_ns", maybe(delay_quantile_ns(delay, 0.99)));
    each("delay_sum_ns", num(delay.sum_ns));
    each("delay_buckets", Scalar{Scalar::Counts, 0, 0, nullptr, &delay.buckets});
}

nlohmann::ordered_json to_json(const Scalar& v)
{
    switch (v.kind) {
    case Scalar::Unsigned: return v.u;
    case Scalar::Signed: return v.i;
    case Scalar::Bool: return v.u != 0;
    case Scalar::Null: return nullptr;
    case Scalar::Text: return v.text;
    case Scalar::Counts: return *v.counts;
    }
    return nullptr;
}

// A value as dump() writes it; an array in a class object as dump(2) does when `pretty`.
void append(TextSink& out, const Scalar& v, bool pretty)
{
    switch (v.kind) {
    case Scalar::Counts: {
        const char* separator = pretty ? "[\n        " : "[";
        for (uint64_t n : *v.counts) {
            out << separator << n;
            separator = pretty ? ",\n        " : ",";
        }
        out << (pretty ? "\n      ]" : "]");
        break;
    }
    case Scalar::Unsigned: out << v.u; break;
    case Scalar::Signed: out << v.i; break;
    case Scalar::Bool: out << (v.u ? "true" : "false"); break;
    case Scalar::Null: out << "null"; break;
    case Scalar::Text: out << '"' << v.text << '"'; break;
    }
}

nlohmann::ordered_json status_json_without_classes(const DeviceStatus& st)
{
    nlohmann::ordered_json rules = nlohmann::ordered_json::array();
    for (const RuleStatus& r : st.rules)
        rules.push_back({{"pref", r.rule.pref},
                         {"class", r.rule.class_id},
                         {"match", format_rule_match(r.rule)},
                         {"packets", r.counters.packets},
                         {"bytes", r.counters.bytes}});
    nlohmann::ordered_json j = {
        {"device", st.device.name},
        {"ifindex", st.device.ifindex},
        {"netns", st.device.netns},
        {"present", st.present},
        {"direction", direction_name(st.device.direction)},
        {"mode", mode_name(st.mode)},
        {"attach_point", attach_point_name(st.hook, st.device.direction)},
        {"program_id", st.program_id},
        {"program_tag", st.program_tag.empty() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(st.program_tag)},
        {"qdisc",
         {{"root", st.pacing.root_kind},
          {"queues", st.pacing.queues},
          {"fq_queues", st.pacing.fq_queues},
          {"fq_everywhere", st.pacing.fq_everywhere},
          {"fq_horizon_ns", st.pacing.fq_horizon_ns ? nlohmann::ordered_json(st.pacing.fq_horizon_ns)
                                                    : nlohmann::ordered_json(nullptr)}}},
    };
    if (st.device.direction == Direction::Ingress)
        j["acks_paced"] = st.acks_paced;
    j["default_class"] = id_or_null(st.default_class);
    j["max_classes"] = st.max_classes;
    j["sample_ns"] = st.sample_ns;
    nlohmann::ordered_json bounds = nlohmann::ordered_json::array();
    for (size_t b = 0; b < SHAPER_DELAY_BUCKETS; b++)
        bounds.push_back(delay_bound_ns(b) ? nlohmann::ordered_json(*delay_bound_ns(b)) : nlohmann::ordered_json(nullptr));
    j["delay_bucket_le_ns"] = bounds;
    j["unclassified"] = {{"packets", st.unclassified.packets},
                         {"segments", st.unclassified.segments},
                         {"bytes", st.unclassified.bytes}};
    j["classes"] = nlohmann::ordered_json::array();
    j["rules"] = rules;
    return j;
}

}  // namespace

nlohmann::ordered_json status_json(const DeviceStatus& st)
{
    nlohmann::ordered_json j = status_json_without_classes(st);
    nlohmann::ordered_json& classes = j["classes"];
    for (const ClassStatus& c : st.classes) {
        nlohmann::ordered_json k = nlohmann::ordered_json::object();
        for_each_status_field(c, [&](const char* key, const Scalar& value) { k[key] = to_json(value); });
        classes.push_back(std::move(k));
    }
    return j;
}

void StatusJsonWriter::head(const DeviceStatus& st)
{
    // The head as dump(2) prints it, cut where the classes go: the rules and the closing brace
    // wait for end().
    if (compact_) {
        // Cut by keys, not by searching the text: a device name may hold any characters.
        nlohmann::ordered_json head = status_json_without_classes(st);
        const nlohmann::ordered_json rules = std::move(head["rules"]);
        head.erase("classes");
        head.erase("rules");
        const std::string text = head.dump();
        out_ << std::string_view(text).substr(0, text.size() - 1) << ",\"classes\":";
        rest_ = ",\"rules\":" + rules.dump() + "}";
        return;
    }
    const std::string text = status_json_without_classes(st).dump(2);
    const std::string slot = "\n  \"classes\": []";
    const size_t at = text.find(slot) + slot.size() - 2;
    out_ << std::string_view(text).substr(0, at);
    rest_ = text.substr(at + 2);
}

// Each class as dump(2) prints an object two levels deep, written straight from its fields: with
// 100,000 classes, a JSON value per field costs most of a second in allocations.
void StatusJsonWriter::add(const ClassStatus& c)
{
    if (compact_) {
        out_ << (classes_++ ? ",{" : "[{");
        const char* separator = "\"";
        for_each_status_field(c, [&](const char* key, const Scalar& value) {
            out_ << separator << key << "\":";
            append(out_, value, false);
            separator = ",\"";
        });
        out_ << "}";
        return;
    }
    out_ << (classes_++ ? ",\n    {" : "[\n    {");
    const char* separator = "\n";
    for_each_status_field(c, [&](const char* key, const Scalar& value) {
        out_ << separator << "      \"" << key << "\": ";
        append(out_, value, true);
        separator = ",\n";
    });
    out_ << "\n    }";
}

void StatusJsonWriter::end()
{
    out_ << (classes_ ? (compact_ ? "]" : "\n  ]") : "[]") << rest_;
}

std::string status_json_text(const DeviceStatus& st)
{
    return whole_text<StatusJsonWriter>(st);
}

}  // namespace shaperctl
