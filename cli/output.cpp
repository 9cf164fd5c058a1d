#include "output.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "columns.h"
#include "core/mode.h"

namespace shaperctl {

namespace {

template <typename Writer>
void write_status(const Shaper& shaper, std::chrono::nanoseconds sample, TextSink& out)
{
    Writer writer(out);
    shaper.status(sample, [&](const DeviceStatus& head) { writer.head(head); },
                  [&](const ClassStatus& c) { writer.add(c); });
    writer.end();
}

}  // namespace

void print_status(const Shaper& shaper, std::chrono::nanoseconds sample, bool json, std::ostream& out)
{
    TextSink text(out);
    if (json) {
        write_status<StatusJsonWriter>(shaper, sample, text);
        text << "\n";
    } else {
        write_status<StatusTableWriter>(shaper, sample, text);
    }
    text.flush();
    out.flush();
}

namespace {

// The container whose host-side device this is, "" for none.
std::string container_of(const ManagedDevice& d, const std::vector<ContainerRecord>& containers)
{
    for (const ContainerRecord& r : containers)
        if (r.device == d.name && r.ifindex == d.ifindex && (r.netns == 0 || r.netns == d.netns))
            return r.container_id;
    return "";
}

}  // namespace

nlohmann::ordered_json list_json(const std::vector<ManagedDevice>& devices, const std::vector<ContainerRecord>& containers)
{
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ManagedDevice& d : devices) {
        const std::string container = container_of(d, containers);
        list.push_back({{"device", d.name}, {"ifindex", d.ifindex}, {"netns", d.netns},
                        {"direction", direction_name(d.direction)}, {"mode", mode_name(d.mode)},
                        {"present", d.present}, {"gone", d.gone}, {"for_ack_pacing", d.for_ack_pacing},
                        {"container", container.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(container)}});
    }
    return list;
}

std::string list_table(const std::vector<ManagedDevice>& devices, const std::vector<ContainerRecord>& containers)
{
    Columns rows;
    rows.row({"device", "ifindex", "netns", "side", "mode", "container", "state"});
    const uint64_t here = current_netns();
    for (const ManagedDevice& d : devices) {
        const std::string container = container_of(d, containers);
        rows.row({d.name, std::to_string(d.ifindex), std::to_string(d.netns), direction_name(d.direction),
                  mode_name(d.mode), container.empty() ? "-" : container.substr(0, 12),
                  d.present && d.for_ack_pacing ? "attached for ingress's ACK pacing"
                  : d.present ? "attached"
                  : d.gone   ? "gone (detach --gone)"
                  : d.netns == here ? "moved out of this netns"
                                    : "other netns"});
    }
    return rows.text();
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
