#include "output.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <sstream>

#include "loader/class_spec.h"
#include "loader/egress_hook.h"
#include "loader/mode.h"
#include "loader/rule_spec.h"
#include "units.h"

namespace shaperctl {
namespace {

nlohmann::ordered_json id_or_null(uint32_t id)
{
    return id ? nlohmann::ordered_json(id) : nlohmann::ordered_json(nullptr);
}

// Columns padded to their widest cell; the first row is the header.
std::string align(const std::vector<std::vector<std::string>>& rows)
{
    std::vector<size_t> width;
    for (const auto& row : rows)
        for (size_t i = 0; i < row.size(); i++) {
            width.resize(std::max(width.size(), row.size()));
            width[i] = std::max(width[i], row[i].size());
        }
    std::ostringstream out;
    for (const auto& row : rows) {
        std::string line;
        for (size_t i = 0; i < row.size(); i++)
            line += row[i] + (i + 1 < row.size() ? std::string(width[i] - row[i].size() + 2, ' ') : "");
        out << line << "\n";
    }
    return out.str();
}

std::string qdisc_summary(const DeviceStatus& st)
{
    if (!st.present)
        return "device gone";
    std::ostringstream out;
    out << "root " << (st.pacing.root_kind.empty() ? "none" : st.pacing.root_kind) << ", fq on "
        << st.pacing.fq_queues << "/" << st.pacing.queues << " tx queues";
    if (st.pacing.fq_horizon_ns)  // beside the class horizons, which must not exceed it
        out << ", fq horizon " << format_time(st.pacing.fq_horizon_ns);
    return out.str();
}

}  // namespace

namespace {

// One class's status fields, in schema order: the single list both the JSON value and the
// streamed text are made from. Values are numbers, booleans, null, or strings needing no escape.
struct Scalar {
    enum Kind { Unsigned, Signed, Bool, Null, Text } kind;
    uint64_t u = 0;
    int64_t i = 0;
    const char* text = nullptr;
};
Scalar num(uint64_t v) { return {Scalar::Unsigned, v}; }
Scalar snum(int64_t v) { return {Scalar::Signed, 0, v}; }
Scalar flag(bool v) { return {Scalar::Bool, v}; }
Scalar text(const char* v) { return {Scalar::Text, 0, 0, v}; }

// A configured value as status shows it: a number, null for no parent, a boolean for an on/off
// switch, else the switch's word.
Scalar spec_scalar(const ClassField& f, int64_t v)
{
    switch (f.kind) {
    case FieldKind::ClassId: return v ? num(uint64_t(v)) : Scalar{Scalar::Null};
    case FieldKind::Int: return snum(v);
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
    const ClassCounters& n = c.counters;
    each("packets", num(n.packets));
    each("segments", num(n.segments));
    each("bytes", num(n.bytes));
    each("drops", num(n.drops_horizon + n.drops_aqm + n.drops_fair));
    each("drops_horizon", num(n.drops_horizon));
    each("drops_aqm", num(n.drops_aqm));
    each("drops_fair", num(n.drops_fair));
    each("ecn_marks", num(n.ecn_marks));
    each("fair_marks", num(n.fair_marks));
    each("sparse", num(n.sparse));
    each("backlog_ns", snum(c.backlog_ns));
    each("rate_estimate_bps", num(c.rate_estimate_bps));
}

nlohmann::ordered_json to_json(const Scalar& v)
{
    switch (v.kind) {
    case Scalar::Unsigned: return v.u;
    case Scalar::Signed: return v.i;
    case Scalar::Bool: return v.u != 0;
    case Scalar::Null: return nullptr;
    case Scalar::Text: return v.text;
    }
    return nullptr;
}

void append(std::string& out, const Scalar& v)
{
    char buf[24];
    switch (v.kind) {
    case Scalar::Unsigned: out.append(buf, size_t(std::to_chars(buf, buf + sizeof buf, v.u).ptr - buf)); break;
    case Scalar::Signed: out.append(buf, size_t(std::to_chars(buf, buf + sizeof buf, v.i).ptr - buf)); break;
    case Scalar::Bool: out += v.u ? "true" : "false"; break;
    case Scalar::Null: out += "null"; break;
    case Scalar::Text: out += '"'; out += v.text; out += '"'; break;
    }
}

// The classes array as dump(2) prints it one level deep, written straight from the fields:
// with 100,000 classes, a JSON value per field costs most of a second in allocations.
std::string classes_text(const std::vector<ClassStatus>& classes)
{
    if (classes.empty())
        return "[]";
    std::string out = "[\n";
    out.reserve(classes.size() * 700);
    for (size_t i = 0; i < classes.size(); i++) {
        out += "    {";
        const char* separator = "\n";
        for_each_status_field(classes[i], [&](const char* key, const Scalar& value) {
            out += separator;
            out += "      \"";
            out += key;
            out += "\": ";
            append(out, value);
            separator = ",\n";
        });
        out += i + 1 < classes.size() ? "\n    },\n" : "\n    }\n";
    }
    out += "  ]";
    return out;
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
    return {
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
        {"default_class", id_or_null(st.default_class)},
        {"max_classes", st.max_classes},
        {"sample_ns", st.sample_ns},
        {"unclassified",
         {{"packets", st.unclassified.packets},
          {"segments", st.unclassified.segments},
          {"bytes", st.unclassified.bytes}}},
        {"classes", nlohmann::ordered_json::array()},
        {"rules", rules},
    };
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

std::string status_json_text(const DeviceStatus& st)
{
    std::string head = status_json_without_classes(st).dump(2);
    const std::string slot = "\n  \"classes\": []";
    return head.replace(head.find(slot) + slot.size() - 2, 2, classes_text(st.classes));
}

std::string status_table(const DeviceStatus& st)
{
    std::ostringstream out;
    out << "dev " << st.device.name << " (ifindex " << st.device.ifindex << ")  "
        << direction_name(st.device.direction) << "  mode " << mode_name(st.mode) << "  "
        << attach_point_name(st.hook, st.device.direction) << " prog " << st.program_id
        << (st.program_tag.empty() ? "" : " tag " + st.program_tag) << "  "
        << qdisc_summary(st) << "\n";
    out << "default class "
        << (st.default_class ? std::to_string(st.default_class) : std::string("none"))
        << "  unclassified " << st.unclassified.packets << " pkts "
        << format_size(st.unclassified.bytes) << "\n\n";
    std::vector<std::vector<std::string>> rows = {{"class", "parent", "rate", "burst", "overhead",
                                                   "mpu", "horizon", "aqm", "packets", "bytes",
                                                   "drops", "marks", "backlog", "rate now"}};
    for (const ClassStatus& c : st.classes)
        rows.push_back({std::to_string(c.spec.id),
                        c.spec.parent ? std::to_string(c.spec.parent) : "-",
                        format_rate(c.spec.rate_bps), format_size(c.spec.burst_bytes),
                        std::to_string(c.spec.overhead), format_size(c.spec.mpu),
                        format_time(c.spec.horizon_ns),
                        c.spec.aqm ? "codel " + format_time(c.spec.aqm_target_ns) + (c.spec.ecn ? " ecn" : "") : "off",
                        std::to_string(c.counters.packets), format_size(c.counters.bytes),
                        std::to_string(c.counters.drops_horizon + c.counters.drops_aqm + c.counters.drops_fair),
                        std::to_string(c.counters.ecn_marks + c.counters.fair_marks),
                        format_time(uint64_t(c.backlog_ns)),
                        c.rate_estimate_bps ? format_rate(c.rate_estimate_bps) : "0"});
    out << align(rows);
    if (!st.rules.empty()) {
        std::vector<std::vector<std::string>> rule_rows = {{"pref", "class", "match", "packets", "bytes"}};
        for (const RuleStatus& r : st.rules)
            rule_rows.push_back({std::to_string(r.rule.pref), std::to_string(r.rule.class_id),
                                 format_rule_match(r.rule), std::to_string(r.counters.packets),
                                 format_size(r.counters.bytes)});
        out << "\n" << align(rule_rows);
    }
    return out.str();
}

nlohmann::ordered_json list_json(const std::vector<ManagedDevice>& devices)
{
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ManagedDevice& d : devices)
        list.push_back({{"device", d.name}, {"ifindex", d.ifindex}, {"netns", d.netns},
                        {"direction", direction_name(d.direction)}, {"mode", mode_name(d.mode)},
                        {"present", d.present}});
    return list;
}

std::string list_table(const std::vector<ManagedDevice>& devices)
{
    std::vector<std::vector<std::string>> rows = {{"device", "ifindex", "netns", "side", "mode", "state"}};
    for (const ManagedDevice& d : devices)
        rows.push_back({d.name, std::to_string(d.ifindex), std::to_string(d.netns),
                        direction_name(d.direction), mode_name(d.mode),
                        d.present ? "attached" : "gone or other netns"});
    return align(rows);
}

nlohmann::ordered_json doctor_json(const std::vector<Finding>& findings)
{
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    std::map<std::string, unsigned> count = {{"ok", 0}, {"warn", 0}, {"fail", 0}};
    for (const Finding& f : findings) {
        count[f.status]++;
        list.push_back({{"check", f.check}, {"status", f.status}, {"detail", f.detail}, {"hint", f.hint}});
    }
    return {{"ok", count["fail"] == 0},
            {"summary", {{"ok", count["ok"]}, {"warn", count["warn"]}, {"fail", count["fail"]}}},
            {"findings", list}};
}

std::string doctor_table(const std::vector<Finding>& findings)
{
    size_t width = 0;
    for (const Finding& f : findings)
        width = std::max(width, f.check.size());
    std::ostringstream out;
    unsigned warn = 0, fail = 0;
    for (const Finding& f : findings) {
        warn += f.status == "warn";
        fail += f.status == "fail";
        out << f.status << std::string(6 - std::min<size_t>(f.status.size(), 5), ' ') << f.check
            << std::string(width - f.check.size() + 2, ' ') << f.detail << "\n";
        if (!f.hint.empty())
            out << std::string(6 + width + 2, ' ') << "fix: " << f.hint << "\n";
    }
    out << "\n" << findings.size() << " checks: " << fail << " failed, " << warn << " warnings\n";
    return out.str();
}

}  // namespace shaperctl
