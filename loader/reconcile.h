// "Make the kernel match this configuration": the one orchestration of whole configurations.
// Every side of a file is planned before anything changes (each side's state read and locked,
// its fit checked: mode, max_classes, class ids, and the steps of plan_config() with their diff
// lines); then the sides not attached are attached, all or none; then each side's steps run
// (Shaper::apply: a step the kernel refuses leaves that side as it was), with fq's horizon raised
// before the classes change and lowered after, since it bounds their horizons.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config_file.h"
#include "core/plan.h"
#include "loader/device.h"
#include "loader/shaper.h"

namespace shaperctl {

// One side of a device as a plan has it.
struct SidePlan {
    const ConfigDevice* want = nullptr;
    Device device;
    bool attached = false;         // before the plan runs
    std::optional<Shaper> shaper;  // holds the side's lock from planning to the last change
    bool fq_change = false;
    bool fq_horizon_lowered = false;
    std::vector<ConfigStep> steps;
    std::vector<std::string> lines;  // the diff: "+ attach mode edt", "~ class 1 rate ...", ...
};

class Reconcile {
public:
    // Plans every side of the file; one-line Error naming the JSON path of what does not fit.
    explicit Reconcile(const ConfigFile& file);
    const std::vector<SidePlan>& sides() const { return sides_; }
    bool changes() const;
    // Attaches (all or none), calls `attached` (nothing is left to refuse but a kernel failure:
    // apply prints its diff there), then applies every side's steps.
    void run(const std::function<void()>& attached = {});

private:
    std::vector<SidePlan> sides_;
};

}  // namespace shaperctl
