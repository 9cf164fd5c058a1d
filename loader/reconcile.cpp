#include "loader/reconcile.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/mode.h"
#include "core/units.h"

namespace shaperctl {
namespace {

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
void plan(SidePlan& t)
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
        std::string line = describe_step(step, w);
        if (!line.empty())
            t.lines.push_back(line);
    }
}

}  // namespace

Reconcile::Reconcile(const ConfigFile& file) : sides_(file.devices.size())
{
    std::map<std::pair<int, Direction>, std::string> seen;  // -> path: two names of one device's side
    for (size_t i = 0; i < sides_.size(); i++) {
        SidePlan& t = sides_[i];
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
    for (SidePlan& t : sides_)
        plan(t);
}

bool Reconcile::changes() const
{
    return std::any_of(sides_.begin(), sides_.end(), [](const SidePlan& t) { return !t.lines.empty(); });
}

void Reconcile::run(const std::function<void()>& attached)
{
    // Attach first, every device or none: the other changes cannot fail on bad input.
    std::vector<const SidePlan*> attached_now;
    try {
        for (SidePlan& t : sides_) {
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
        for (const SidePlan* t : attached_now) {
            try {
                Shaper::detach(t->want->name, t->want->config.side);
            } catch (const Error&) {
                // The attach error is the one to report.
            }
        }
        throw Error(std::string(e.what()) + (attached_now.empty() ? "" : " (devices attached before it detached again)"));
    }
    if (attached)
        attached();
    for (SidePlan& t : sides_) {
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

}  // namespace shaperctl
