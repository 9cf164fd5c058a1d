#include "apply.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include "core/config_check.h"
#include "core/config_file.h"
#include "core/error.h"
#include "loader/cgroup.h"
#include "loader/reconcile.h"
#include "loader/shaper.h"

namespace shaperctl {
namespace {

// How a line names a device's side: nothing for egress, " ingress".
std::string side_suffix(Direction side)
{
    return side == Direction::Ingress ? " ingress" : "";
}

void print_diff(const std::vector<SidePlan>& targets, std::ostream& out)
{
    bool changes = false;
    for (const SidePlan& t : targets) {
        if (t.lines.empty())
            continue;
        changes = true;
        out << "dev " << t.want->name << side_suffix(t.want->config.side) << ":\n";
        for (const std::string& line : t.lines)
            out << line << "\n";
    }
    if (!changes)
        out << "no changes\n";
    out.flush();
}

}  // namespace

nlohmann::ordered_json dump_config(const std::string& dev)
{
    std::vector<std::pair<std::string, ShaperConfig>> devices;
    const auto side_of = [](const std::string& name, Direction side) {
        return std::pair{name, Shaper::open_unlocked(name, side).config()};
    };
    // A send side that its receive side's attach brought for ACK pacing, still bare, is implied
    // by the receive side's entry: applying that entry brings it again.
    const std::vector<ManagedDevice> managed = Shaper::list();
    const auto listed = [&](const std::string& name, Direction side) {
        return std::any_of(devices.begin(), devices.end(),
                           [&](const auto& d) { return d.first == name && d.second.side == side; });
    };
    const auto implied = [&](const std::pair<std::string, ShaperConfig>& side) {
        const ShaperConfig& c = side.second;
        return c.side == Direction::Egress && c.classes.empty() && c.rules.empty() && !c.default_class &&
               listed(side.first, Direction::Ingress) &&
               std::any_of(managed.begin(), managed.end(), [&](const ManagedDevice& m) {
                   return m.present && m.name == side.first && m.direction == Direction::Egress &&
                          m.for_ack_pacing;
               });
    };
    if (!dev.empty()) {
        // Each side attached; the egress side's refusal when neither is (or the device is gone).
        bool ingress = false;
        try {
            ingress = Shaper::is_attached(dev, Direction::Ingress);
        } catch (const Error&) {
        }
        if (!ingress || Shaper::is_attached(dev, Direction::Egress))
            devices.push_back(side_of(dev, Direction::Egress));
        if (ingress)
            devices.push_back(side_of(dev, Direction::Ingress));
    } else {
        for (const ManagedDevice& m : managed)
            if (m.present)
                devices.push_back(side_of(m.name, m.direction));
    }
    decltype(devices) stated;
    for (const auto& d : devices)
        if (!implied(d))
            stated.push_back(d);
    return config_json(stated, host_cgroups());
}

void warn_of_guarantees(const std::string& dev, const std::vector<ClassSpec>& classes)
{
    for (const std::string& w : guarantee_warnings(classes))
        std::fprintf(stderr, "shaperctl: warning: %s: %s\n", dev.c_str(), w.c_str());
}

void apply_file(const std::string& path, bool dry_run, std::ostream& out)
{
    // A receive side's ACKs are paced where its device's send side is attached in edt mode, or
    // where nothing of the device is attached yet: attach --ingress then attaches that side.
    const auto acks_paced = [](const std::string& dev) {
        try {
            const bool attached = Shaper::is_attached(dev, Direction::Egress) || Shaper::is_attached(dev, Direction::Ingress);
            return !attached || Shaper::paces_acks(dev);
        } catch (const Error&) {
            return true;  // an unknown device: apply names it
        }
    };
    const ConfigFile file = load_config(path, host_cgroups(), acks_paced);
    for (const ConfigDevice& d : file.devices)
        warn_of_guarantees(d.name, d.config.classes);
    std::optional<Reconcile> plan;
    try {
        plan.emplace(file);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    if (dry_run) {
        print_diff(plan->sides(), out);
        if (plan->changes())
            out << "dry run: nothing changed\n";
        out.flush();
        return;
    }
    // The diff once the devices are attached: nothing left to refuse but a kernel failure.
    plan->run([&] { print_diff(plan->sides(), out); });
}

void detach_file(const std::string& path, std::ostream& out)
{
    const ConfigFile file = load_config(path, host_cgroups());
    std::string first_error;
    for (const ConfigDevice& d : file.devices) {
        try {
            const Direction side = d.config.side;
            if (!Shaper::is_attached(d.name, side)) {
                out << "dev " << d.name << side_suffix(side) << ": not attached\n";
                continue;
            }
            Shaper::detach(d.name, side);
            out << "detached from " << d.name << side_suffix(side) << "\n";
        } catch (const Error& e) {
            const std::string what = e.what();
            if (what.starts_with("unknown device")) {
                out << "dev " << d.name << ": no such device; nothing to detach\n";
                continue;
            }
            if (first_error.empty())
                first_error = what;
        }
    }
    out.flush();
    if (!first_error.empty())
        throw Error(first_error);
}

}  // namespace shaperctl
