#include "output.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "loader/tc_filter.h"
#include "rule_args.h"
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
    return out.str();
}

}  // namespace

nlohmann::ordered_json status_json(const DeviceStatus& st)
{
    nlohmann::ordered_json classes = nlohmann::ordered_json::array();
    for (const ClassStatus& c : st.classes)
        classes.push_back({
            {"id", c.spec.id},
            {"parent", id_or_null(c.spec.parent)},
            {"rate_bps", c.spec.rate_bps},
            {"burst_bytes", c.spec.burst_bytes},
            {"overhead", c.spec.overhead},
            {"mpu", c.spec.mpu},
            {"horizon_ns", c.spec.horizon_ns},
            {"aqm", c.spec.aqm ? "codel" : "off"},
            {"aqm_target_ns", c.spec.aqm_target_ns},
            {"aqm_interval_ns", c.spec.aqm_interval_ns},
            {"ecn", c.spec.ecn},
            {"sparse_flows", c.spec.sparse},
            {"fair_shares", c.spec.fair},
            {"packets", c.counters.packets},
            {"segments", c.counters.segments},
            {"bytes", c.counters.bytes},
            {"drops", c.counters.drops_horizon + c.counters.drops_aqm + c.counters.drops_fair},
            {"drops_horizon", c.counters.drops_horizon},
            {"drops_aqm", c.counters.drops_aqm},
            {"drops_fair", c.counters.drops_fair},
            {"ecn_marks", c.counters.ecn_marks},
            {"fair_marks", c.counters.fair_marks},
            {"sparse", c.counters.sparse},
            {"backlog_ns", c.backlog_ns},
            {"rate_estimate_bps", c.rate_estimate_bps},
        });
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
        {"mode", mode_name(st.mode)},
        {"attach_point", kAttachPoint},
        {"program_id", st.program_id},
        {"qdisc",
         {{"root", st.pacing.root_kind},
          {"queues", st.pacing.queues},
          {"fq_queues", st.pacing.fq_queues},
          {"fq_everywhere", st.pacing.fq_everywhere}}},
        {"default_class", id_or_null(st.default_class)},
        {"max_classes", st.max_classes},
        {"sample_ns", st.sample_ns},
        {"unclassified",
         {{"packets", st.unclassified.packets},
          {"segments", st.unclassified.segments},
          {"bytes", st.unclassified.bytes}}},
        {"classes", classes},
        {"rules", rules},
    };
}

std::string status_table(const DeviceStatus& st)
{
    std::ostringstream out;
    out << "dev " << st.device.name << " (ifindex " << st.device.ifindex << ")  mode "
        << mode_name(st.mode) << "  " << kAttachPoint << " prog " << st.program_id << "  "
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
                        {"mode", mode_name(d.mode)}, {"present", d.present}});
    return list;
}

std::string list_table(const std::vector<ManagedDevice>& devices)
{
    std::vector<std::vector<std::string>> rows = {{"device", "ifindex", "netns", "mode", "state"}};
    for (const ManagedDevice& d : devices)
        rows.push_back({d.name, std::to_string(d.ifindex), std::to_string(d.netns),
                        mode_name(d.mode), d.present ? "attached" : "gone or other netns"});
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
