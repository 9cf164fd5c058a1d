#include "apply.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "core/config_file.h"
#include "core/plan.h"
#include "loader/cgroup.h"
#include "loader/device.h"
#include "core/error.h"
#include "loader/shaper.h"
#include "core/units.h"

namespace shaperctl {
namespace {

struct Target {
    const ConfigDevice* want = nullptr;
    Device device;
    bool attached = false;
    std::optional<Shaper> shaper;  // holds the device's lock from planning to the last change
    bool fq_change = false;
    bool fq_horizon_lowered = false;  // then changed after the classes, whose horizons it bounds
    std::vector<ConfigStep> steps;
    std::vector<std::string> lines;
};

// How a line names a device's side: nothing for egress, " ingress".
std::string side_suffix(Direction side)
{
    return side == Direction::Ingress ? " ingress" : "";
}

std::string limit_text(uint32_t limit)
{
    return limit ? std::to_string(limit) : std::string("kernel-default");
}

std::string fq_changes(const FqOptions& a, const FqOptions& b)
{
    std::string out;
    auto change = [&](const char* name, const std::string& from, const std::string& to) {
        if (from != to)
            out += (out.empty() ? "" : ", ") + std::string(name) + " " + from + " -> " + to;
    };
    change("horizon", format_time(a.horizon_ns), format_time(b.horizon_ns));
    change("flow_limit", limit_text(a.flow_limit), limit_text(b.flow_limit));
    change("limit", limit_text(a.limit), limit_text(b.limit));
    return out;
}

// The options that differ from attach's defaults: "horizon 5s flow_limit 50".
std::string fq_fields(const FqOptions& fq)
{
    const FqOptions defaults;
    std::string out;
    auto field = [&](const std::string& text) { out += (out.empty() ? "" : " ") + text; };
    if (fq.horizon_ns != defaults.horizon_ns)
        field("horizon " + format_time(fq.horizon_ns));
    if (fq.flow_limit != defaults.flow_limit)
        field("flow_limit " + std::to_string(fq.flow_limit));
    if (fq.limit != defaults.limit)
        field("limit " + std::to_string(fq.limit));
    return out;
}

void check_class_ids(const ConfigDevice& want, uint32_t max_classes)
{
    for (const ClassSpec& c : want.config.classes)
        if (c.id >= max_classes)
            throw Error(want.path + ".classes[" + std::to_string(want.class_index.at(c.id)) +
                        "].id: class id " + std::to_string(c.id) + " is out of range (1 to " +
                        std::to_string(max_classes - 1) + " with max_classes " +
                        std::to_string(max_classes) + ")");
}

// Everything that can be known before a change: the device, its state, the steps.
void plan(Target& t)
{
    const ConfigDevice& want = *t.want;
    const ShaperConfig& w = want.config;
    const char* mode = mode_name(w.mode);
    ShaperConfig current;
    if (t.attached) {
        t.shaper.emplace(Shaper::open(want.name, w.side));
        current = t.shaper->config();
        if (current.mode != w.mode)
            throw Error(want.path + ".mode: dev " + want.name + " is attached in " + mode_name(current.mode) +
                        " mode; detach it first to change the mode");
        if (w.max_classes && w.max_classes != current.max_classes)
            throw Error(want.path + ".max_classes: dev " + want.name + " was attached with max_classes " +
                        std::to_string(current.max_classes) + ", fixed until it is detached");
        check_class_ids(want, current.max_classes);
        if (w.mode == SHAPER_MODE_EDT && !same_fq(current.fq, w.fq)) {
            t.fq_change = true;
            t.fq_horizon_lowered = w.fq.horizon_ns < current.fq.horizon_ns;
            t.lines.push_back("~ fq " + fq_changes(current.fq, w.fq));
        }
    } else {
        const uint32_t max = w.max_classes ? w.max_classes : SHAPER_DEFAULT_MAX_CLASSES;
        check_class_ids(want, max);
        current.mode = w.mode;
        std::string line = std::string("+ attach mode ") + mode;
        if (w.mode == SHAPER_MODE_EDT && !same_fq(w.fq, FqOptions{}))
            line += ", fq " + fq_fields(w.fq);
        if (w.max_classes)
            line += ", max_classes " + std::to_string(w.max_classes);
        t.lines.push_back(line);
    }
    t.steps = plan_config(current, w);
    for (const ConfigStep& step : t.steps) {
        std::string line = describe_step(step, w.side, w.mode);
        if (!line.empty())
            t.lines.push_back(line);
    }
}

void print_diff(const std::vector<Target>& targets, std::ostream& out)
{
    bool changes = false;
    for (const Target& t : targets) {
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

void apply_file(const std::string& path, bool dry_run, std::ostream& out)
{
    const ConfigFile file = load_config(path, host_cgroups());
    std::vector<Target> targets(file.devices.size());
    try {
        std::map<std::pair<int, Direction>, std::string> seen;  // -> path: two names of one device's side
        for (size_t i = 0; i < targets.size(); i++) {
            Target& t = targets[i];
            t.want = &file.devices[i];
            try {
                t.device = Device::resolve(t.want->name);
            } catch (const Error& e) {
                throw Error(t.want->path + ".device: " + e.what());
            }
            const Direction side = t.want->config.side;
            if (auto [it, fresh] = seen.emplace(std::pair{t.device.ifindex, side}, t.want->path); !fresh)
                throw Error(t.want->path + ".device: \"" + t.want->name + "\" is the device of " +
                            it->second + " under another name");
            t.attached = Shaper::is_attached(t.want->name, side);
        }
        for (Target& t : targets)
            plan(t);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }

    if (dry_run) {
        print_diff(targets, out);
        if (std::any_of(targets.begin(), targets.end(), [](const Target& t) { return !t.lines.empty(); }))
            out << "dry run: nothing changed\n";
        out.flush();
        return;
    }

    // Attach first, every device or none: the other changes cannot fail on bad input.
    std::vector<const Target*> attached_now;
    try {
        for (Target& t : targets) {
            if (t.attached)
                continue;
            AttachOptions options;
            options.direction = t.want->config.side;
            options.mode = t.want->config.mode;
            options.fq = t.want->config.fq;
            options.max_classes = t.want->config.max_classes;
            Shaper::attach(t.want->name, options);
            attached_now.push_back(&t);
        }
    } catch (const Error& e) {
        for (const Target* t : attached_now) {
            try {
                Shaper::detach(t->want->name, t->want->config.side);
            } catch (const Error&) {
                // The attach error is the one to report.
            }
        }
        throw Error(std::string(e.what()) + (attached_now.empty() ? "" : " (devices attached before it detached again)"));
    }
    // The diff once the devices are attached: nothing left to refuse but a kernel failure.
    print_diff(targets, out);
    for (Target& t : targets) {
        if (!t.shaper)
            t.shaper.emplace(Shaper::open(t.want->name, t.want->config.side));
        // fq's horizon bounds the classes': raised before they change, lowered after.
        if (t.fq_change && !t.fq_horizon_lowered)
            t.shaper->set_fq_options(t.want->config.fq);
        t.shaper->apply(t.steps, t.want->rules);
        if (t.fq_change && t.fq_horizon_lowered)
            t.shaper->set_fq_options(t.want->config.fq);
    }
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
