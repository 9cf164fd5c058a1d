// A step the kernel refuses leaves the device as it was before the command: Shaper::apply undoes
// the steps it made, in reverse order. A failure is injected before every step of a plan that
// has every kind of step, in turn, and the device is compared, configuration and the rule set
// the datapath reads, with what it was.
#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/config_check.h"
#include "core/config_file.h"
#include "core/error.h"
#include "core/plan.h"
#include "loader/cgroup.h"
#include "loader/device.h"
#include "loader/fd.h"
#include "loader/shaper.h"
#include "rule_generation.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;
using shaperctl::ConfigStep;

namespace {

class Rollback : public DeviceTest {
protected:
    // What the device is: its configuration as dump prints it, and the rule set the datapath
    // reads (the active generation's tuples, index entries and port segments, and the flags
    // beside it).
    std::string state(const shaperctl::Shaper& shaper) const
    {
        std::string out = shaperctl::config_json({{"sh0", shaper.config()}}, shaperctl::host_cgroups()).dump();
        const shaper_settings settings = shaper.maps().settings();
        const uint32_t gen = settings.rules_gen & SHAPER_RULES_GEN_MASK;
        out += "\nrules_gen flags " + std::to_string(settings.rules_gen & (SHAPER_RULES_PRESENT | SHAPER_RULES_CGROUP));
        // After an undo the set may be in the other generation: the text leaves it out.
        const shaperctl::Fd tuples = pinned("shaper_tuples"), index = pinned("shaper_rule_index"),
                            segs = pinned("shaper_port_segs");
        return out + "\n" + rule_generation_text(tuples.get(), index.get(), segs.get(), gen);
    }
};

shaperctl::ClassSpec& class_of(shaperctl::ShaperConfig& c, uint32_t id)
{
    return *std::find_if(c.classes.begin(), c.classes.end(), [&](const auto& k) { return k.id == id; });
}

shaperctl::RuleSpec& rule_of(shaperctl::ShaperConfig& c, uint32_t pref)
{
    return *std::find_if(c.rules.begin(), c.rules.end(), [&](const auto& r) { return r.pref == pref; });
}

TEST_F(Rollback, AFailureBeforeAnyStepLeavesTheDeviceAsItWas)
{
    apply_text(json{{"version", 1}, {"devices", {{{"device", "sh0"}, {"mode", "police"},
                 {"classes", {{{"id", 1}, {"rate", "10mbit"}},
                              {{"id", 2}, {"rate", "5mbit"}, {"parent", 1}},
                              {{"id", 3}, {"rate", "2mbit"}, {"parent", 1}}}},
                 {"rules", {{{"pref", 10}, {"class", 2}, {"dst", "10.9.0.1/32"}},
                            {{"pref", 20}, {"class", 3}, {"dst", "10.9.0.2/32"}},
                            {{"pref", 30}, {"class", 2}, {"proto", "udp"}}}},
                 {"default_class", 3}}}}}.dump());
    const shaperctl::Shaper shaper = shaperctl::Shaper::open("sh0");
    const shaperctl::ShaperConfig before = shaper.config();

    // Every kind of step: class 2 changed, 3 deleted, 4 added; rule 10 pointed at class 4, 20
    // removed, 40 new; the default moved from 3 to 4; the rules published.
    shaperctl::ShaperConfig after = before;
    class_of(after, 2).rate_bps = 6'000'000;
    shaperctl::ClassSpec four = class_of(after, 3);
    four.id = 4;
    four.rate_bps = 1'000'000;
    std::erase_if(after.classes, [](const auto& c) { return c.id == 3; });
    after.classes.push_back(four);
    rule_of(after, 10).class_id = 4;
    shaperctl::RuleSpec forty = rule_of(after, 20);
    forty.pref = 40;
    forty.class_id = 4;
    std::erase_if(after.rules, [](const auto& r) { return r.pref == 20; });
    after.rules.push_back(forty);
    after.default_class = 4;

    const shaperctl::CheckedRules rules = shaperctl::check_config(after, shaper.limits(), &before.rules);
    const std::vector<ConfigStep> steps = shaperctl::plan_config(before, after);
    std::set<ConfigStep::Kind> kinds;
    for (const ConfigStep& s : steps)
        kinds.insert(s.kind);
    ASSERT_EQ(kinds.size(), 7u) << "the plan lacks a kind of step";

    const std::string was = state(shaper);
    for (size_t k = 0; k < steps.size(); k++) {
        EXPECT_THROW(shaper.apply(steps, rules,
                                  [k](size_t i) {
                                      if (i == k)
                                          throw shaperctl::Error("refused");
                                  }),
                     shaperctl::Error);
        EXPECT_EQ(state(shaper), was) << "a failure before step " << k << " of " << steps.size()
                                      << " (kind " << int(steps[k].kind) << ") left the device changed";
    }
    // And without a failure the plan gets there.
    shaper.apply(steps, rules);
    EXPECT_EQ(shaperctl::config_json({{"sh0", shaper.config()}}, shaperctl::host_cgroups()).dump(),
              shaperctl::config_json({{"sh0", after}}, shaperctl::host_cgroups()).dump());
}

}  // namespace
