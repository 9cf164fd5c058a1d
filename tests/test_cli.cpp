// shaperctl end to end on the host kernel: each command its own process, in a throw-away
// network namespace with a veth pair. This kernel has no sch_fq, so attach runs in police mode;
// pacing with fq is tested in the stock-kernel VM (vm/).
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/cgroup.h"
#include "loader/device.h"
#include "loader/maps.h"
#include "loader/tcx_link.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

class Cli : public DeviceTest {
protected:

    json status()
    {
        Outcome o = sh("status --dev sh0 --json --sample 0");
        EXPECT_EQ(o.status, 0) << o.err;
        return json::parse(o.out);
    }

    // The configuration part of status: what a refused command must leave unchanged.
    json config()
    {
        json st = status();
        json classes = json::array();
        for (auto& c : st["classes"])
            classes.push_back({c["id"], c["parent"], c["rate_bps"], c["burst_bytes"], c["overhead"],
                               c["mpu"], c["horizon_ns"]});
        return {st["default_class"], st["mode"], st["program_id"], classes};
    }

    // A refused command: non-zero exit, one line on stderr that contains `needle`.
    void refused(const std::string& args, const std::string& needle)
    {
        Outcome o = sh(args);
        EXPECT_NE(o.status, 0) << args;
        EXPECT_NE(o.err.find(needle), std::string::npos) << args << " said: " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << " said: " << o.err;
    }

    std::string pin_dir() { return shaperctl::Device::resolve("sh0").pin_dir(); }

    // The sides `list` shows in the test's namespace: it lists every namespace's, and the machine
    // may shape devices of its own, or run another test beside this one.
    json listed_here()
    {
        json here = json::array();
        for (const json& d : json::parse(sh("list --json").out))
            if (d["netns"] == shaperctl::current_netns())
                here.push_back(d);
        return here;
    }
};

TEST_F(Cli, AttachIsIdempotentAndDetachLeavesNothing)
{
    const std::string qdisc_before = ns_->tc("qdisc show dev sh0");
    ok("attach --dev sh0 --mode police");
    json st = status();
    EXPECT_EQ(st["mode"], "police");
    EXPECT_EQ(st["attach_point"], shaperctl::kernel_has_tcx() ? "tcx egress" : "tc clsact egress");
    EXPECT_GT(st["program_id"].get<uint32_t>(), 0u);
    EXPECT_EQ(st["qdisc"]["fq_everywhere"], false);
    if (!shaperctl::kernel_has_tcx()) {
        EXPECT_NE(ns_->tc("filter show dev sh0 egress").find(" shaper:["), std::string::npos);
    }

    Outcome again = sh("attach --dev sh0 --mode police");
    EXPECT_EQ(again.status, 0);
    EXPECT_NE(again.out.find("nothing changed"), std::string::npos) << again.out;
    EXPECT_EQ(status()["program_id"], st["program_id"]);

    ok("detach --dev sh0");
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), qdisc_before);
    EXPECT_EQ(ns_->tc("filter show dev sh0 egress"), "");
    EXPECT_NE(access(pin_dir().c_str(), F_OK), 0) << "pins left in " << pin_dir();
    refused("status --dev sh0", "not attached");
}

TEST_F(Cli, EdtAttachWithoutSchFqIsRefusedAndChangesNothing)
{
    if (access("/sys/module/sch_fq", F_OK) == 0)
        GTEST_SKIP() << "this kernel has sch_fq";
    const std::string qdisc_before = ns_->tc("qdisc show dev sh0");
    refused("attach --dev sh0", "sch_fq");
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), qdisc_before);
    EXPECT_EQ(ns_->tc("filter show dev sh0 egress"), "");
    EXPECT_NE(access(pin_dir().c_str(), F_OK), 0);
    refused("status --dev sh0", "not attached");
}

// Runs where the kernel has sch_fq: in the stock-kernel VM (tests/gtest-in-vm.sh).
TEST_F(Cli, EdtAttachPutsFqOnEveryQueueAndDetachRestoresThePriorRoot)
{
    if (access("/sys/module/sch_fq", F_OK) != 0)
        GTEST_SKIP() << "this kernel has no sch_fq";
    ns_->add_veth("mq0", "mq1", 4);
    ns_->tc("qdisc add dev mq0 root handle 1: pfifo limit 77");
    const std::string multi_before = ns_->tc("qdisc show dev mq0");
    const std::string single_before = ns_->tc("qdisc show dev sh0");
    for (const char* dev : {"mq0", "sh0"}) {
        ok(std::string("attach --dev ") + dev + " --fq-horizon 2s");
        Outcome o = sh(std::string("status --dev ") + dev + " --json --sample 0");
        ASSERT_EQ(o.status, 0) << o.err;
        json st = json::parse(o.out);
        EXPECT_EQ(st["mode"], "edt");
        EXPECT_EQ(st["qdisc"]["fq_everywhere"], true) << o.out;
        EXPECT_EQ(st["qdisc"]["fq_queues"], st["qdisc"]["queues"]);
        EXPECT_EQ(st["qdisc"]["root"], std::string(dev) == "mq0" ? "mq" : "fq");
        EXPECT_NE(sh(std::string("attach --dev ") + dev).out.find("nothing changed"), std::string::npos);
    }
    EXPECT_EQ(json::parse(sh("status --dev mq0 --json --sample 0").out)["qdisc"]["queues"], 4);
    ok("detach --dev mq0");
    ok("detach --dev sh0");
    EXPECT_EQ(ns_->tc("qdisc show dev mq0"), multi_before);
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), single_before);
}

// Runs where the kernel has sch_fq. Attaching again changes the fq options given, in place, and
// keeps the others.
TEST_F(Cli, AttachingAgainChangesOnlyTheFqOptionsGiven)
{
    if (access("/sys/module/sch_fq", F_OK) != 0)
        GTEST_SKIP() << "this kernel has no sch_fq";
    ok("attach --dev sh0 --fq-horizon 2s --fq-limit 5000");
    ok("add-class --dev sh0 --id 1 --rate 10mbit");
    const uint32_t program_id = status()["program_id"];
    Outcome o = sh("attach --dev sh0 --fq-flow-limit 300");
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_NE(o.out.find("fq options changed"), std::string::npos) << o.out;
    json fq = json::parse(sh("dump --dev sh0").out)["devices"][0]["fq"];
    EXPECT_EQ(fq["horizon"], "2s") << fq;
    EXPECT_EQ(fq["limit"], 5000) << fq;
    EXPECT_EQ(fq["flow_limit"], 300) << fq;
    const std::string qdisc = ns_->tc("qdisc show dev sh0");
    EXPECT_NE(qdisc.find("limit 5000p flow_limit 300p"), std::string::npos) << qdisc;
    EXPECT_EQ(status()["program_id"], program_id);
    EXPECT_EQ(status()["classes"].size(), 1u);
    EXPECT_NE(sh("attach --dev sh0 --fq-flow-limit 300").out.find("nothing changed"), std::string::npos);
    ok("detach --dev sh0");
}

// Runs where the kernel has sch_fq. sch_fq drops a packet stamped beyond its own horizon after
// the class has charged it, and no counter shows it: a class horizon beyond fq's is refused, by
// add-class and change-class, and so is an fq horizon lowered below a class's. status shows both.
TEST_F(Cli, AClassHorizonBeyondFqsIsRefused)
{
    if (access("/sys/module/sch_fq", F_OK) != 0)
        GTEST_SKIP() << "this kernel has no sch_fq";
    ok("attach --dev sh0");
    EXPECT_EQ(status()["qdisc"]["fq_horizon_ns"], 10'000'000'000ull);
    refused("add-class --dev sh0 --id 10 --rate 5mbit --horizon 30s",
            "class 10: horizon 30s exceeds sch_fq's horizon 10s on sh0 (attach --fq-horizon raises it)");
    EXPECT_EQ(status()["classes"].size(), 0u);
    ok("add-class --dev sh0 --id 10 --rate 5mbit --horizon 10s");
    const json before = config();
    refused("change-class --dev sh0 --id 10 --horizon 10001ms",
            "class 10: horizon 10.001s exceeds sch_fq's horizon 10s on sh0 (attach --fq-horizon raises it)");
    refused("attach --dev sh0 --fq-horizon 5s",
            "class 10: horizon 10s exceeds sch_fq's horizon 5s on sh0 (lower the class's horizon first)");
    EXPECT_EQ(config(), before);
    EXPECT_NE(ns_->tc("qdisc show dev sh0").find("horizon 10s"), std::string::npos) << ns_->tc("qdisc show dev sh0");

    ok("attach --dev sh0 --fq-horizon 30s");
    ok("change-class --dev sh0 --id 10 --horizon 30s");
    const json st = status();
    EXPECT_EQ(st["qdisc"]["fq_horizon_ns"], 30'000'000'000ull);
    EXPECT_EQ(st["classes"][0]["horizon_ns"], 30'000'000'000ull);
    const Outcome text = sh("status --dev sh0 --sample 0");
    EXPECT_NE(text.out.find("fq horizon 30s"), std::string::npos) << text.out;
    ok("change-class --dev sh0 --id 10 --horizon 1s");
    ok("attach --dev sh0 --fq-horizon 1s");  // down to the largest class horizon
    EXPECT_EQ(status()["qdisc"]["fq_horizon_ns"], 1'000'000'000ull);
    ok("detach --dev sh0");
}

// Police mode has no sch_fq: class horizons up to the range's 60s, and status says no fq.
TEST_F(Cli, PoliceModeHasNoFqHorizon)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 10 --rate 5mbit --horizon 30s");
    const json st = status();
    EXPECT_EQ(st["qdisc"]["fq_horizon_ns"], nullptr);
    EXPECT_EQ(st["classes"][0]["horizon_ns"], 30'000'000'000ull);
    ok("detach --dev sh0");
}

TEST_F(Cli, AttachingAgainRefusesWhatOnlyDetachCanChange)
{
    refused("attach --dev sh0 --mode police --fq-limit 5000", "fq options apply to edt mode only");
    EXPECT_EQ(ns_->tc("filter show dev sh0 egress"), "");
    EXPECT_NE(access(pin_dir().c_str(), F_OK), 0);

    ok("attach --dev sh0 --mode police --max-classes 1000");
    ok("add-class --dev sh0 --id 7 --rate 10mbit");
    refused("attach --dev sh0 --mode police --max-classes 2000",
            "attached with max classes 1000, fixed at first attach; detach first to change it");
    refused("attach --dev sh0 --mode police --fq-horizon 1s", "fq options apply to edt mode only");
    refused("attach --dev sh0", "already attached in police mode");
    EXPECT_NE(sh("attach --dev sh0 --mode police --max-classes 1000").out.find("nothing changed"),
              std::string::npos);
    json st = status();
    EXPECT_EQ(st["max_classes"], 1000);
    EXPECT_EQ(st["classes"].size(), 1u);
    ok("detach --dev sh0");
}

TEST_F(Cli, ClassesAreAddedChangedAndDeleted)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 20mbit --burst 64kb --overhead 24 --mpu 64 --horizon 10ms --aqm codel");
    ok("add-class --dev sh0 --id 2 --rate 1.5mbit --parent 1");
    ok("set-default --dev sh0 --class 2");
    json st = status();
    ASSERT_EQ(st["classes"].size(), 2u);
    json c1 = st["classes"][0], c2 = st["classes"][1];
    EXPECT_EQ(c1["id"], 1);
    EXPECT_EQ(c1["parent"], nullptr);
    EXPECT_EQ(c1["rate_bps"], 20'000'000);
    EXPECT_EQ(c1["burst_bytes"], 65536);
    EXPECT_EQ(c1["overhead"], 24);
    EXPECT_EQ(c1["mpu"], 64);
    EXPECT_EQ(c1["horizon_ns"], 10'000'000);
    EXPECT_EQ(c2["parent"], 1);
    EXPECT_EQ(c2["rate_bps"], 1'500'000);
    EXPECT_EQ(c2["horizon_ns"], 5'000'000);  // police mode's default tolerance
    EXPECT_EQ(c1["aqm"], "codel");
    EXPECT_EQ(c1["aqm_target_ns"], 5'000'000);
    EXPECT_EQ(c1["aqm_interval_ns"], 100'000'000);
    EXPECT_EQ(c1["ecn"], true);
    EXPECT_EQ(c2["aqm"], "off");  // CoDel is opt-in
    EXPECT_EQ(st["default_class"], 2);
    for (const char* field : {"packets", "segments", "bytes", "drops", "backlog_ns", "rate_estimate_bps"})
        EXPECT_TRUE(c1.contains(field)) << field;

    ok("change-class --dev sh0 --id 1 --rate 5mbit --target 2ms --ecn off");
    c1 = status()["classes"][0];
    EXPECT_EQ(c1["rate_bps"], 5'000'000);
    EXPECT_EQ(c1["burst_bytes"], 65536);  // untouched fields keep their values
    EXPECT_EQ(c1["overhead"], 24);
    EXPECT_EQ(c1["aqm_target_ns"], 2'000'000);
    EXPECT_EQ(c1["ecn"], false);
    for (const char* field : {"drops_horizon", "drops_aqm", "ecn_marks"})
        EXPECT_TRUE(c1.contains(field)) << field;

    ok("set-default --dev sh0 --none");
    ok("del-class --dev sh0 --id 2");
    ok("del-class --dev sh0 --id 1");
    st = status();
    EXPECT_EQ(st["classes"].size(), 0u);
    EXPECT_EQ(st["default_class"], nullptr);

    Outcome table = sh("status --dev sh0 --sample 0");
    EXPECT_EQ(table.status, 0);
    EXPECT_NE(table.out.find("mode police"), std::string::npos) << table.out;
}

TEST_F(Cli, BadInputIsRefusedInOneLineAndChangesNothing)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 20mbit");
    ok("add-class --dev sh0 --id 2 --rate 10mbit --parent 1");
    ok("set-default --dev sh0 --class 2");
    const json before = config();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"add-class --dev nosuch0 --id 3 --rate 1mbit", "unknown device \"nosuch0\""},
        {"add-class --dev sh1 --id 3 --rate 1mbit", "not attached"},
        {"add-class --dev sh0 --id 1 --rate 1mbit", "class 1 already exists"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --parent 9", "unknown parent class 9"},
        {"change-class --dev sh0 --id 1 --parent 2", "cycle"},
        {"add-class --dev sh0 --id 0 --rate 1mbit", "bad class id \"0\""},
        {"add-class --dev sh0 --id 16384 --rate 1mbit", "class id 16384 is out of range"},
        {"add-class --dev sh0 --id abc --rate 1mbit", "bad class id \"abc\""},
        {"add-class --dev sh0 --id -3 --rate 1mbit", "class id"},
        {"add-class --dev sh0 --id 3 --rate 0mbit", "bad rate \"0mbit\""},
        {"add-class --dev sh0 --id 3 --rate 500gbit", "out of range"},
        {"add-class --dev sh0 --id 3 --rate 99999999999999999999gbit", "bad rate"},
        {"add-class --dev sh0 --id 3 --rate 10mbt", "unknown unit \"mbt\""},
        {"add-class --dev sh0 --id 3 --rate 10", "missing unit"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --burst 2gb", "2gb"},
        {"add-class --dev sh0 --id 3 --rate 8kbit --burst 1gb", "more than an hour"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --overhead 300", "overhead"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --overhead -65", "overhead"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --mpu 70000", "70000"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --horizon 61s", "horizon"},
        {"add-class --dev sh0 --id 3 --rate 1mbit --horizon 10", "missing unit"},
        {"change-class --dev sh0 --id 9 --rate 1mbit", "no class 9"},
        {"change-class --dev sh0 --id 1 --aqm fq", "bad aqm \"fq\" (use codel or off)"},
        {"change-class --dev sh0 --id 1 --ecn maybe", "bad ecn \"maybe\""},
        {"change-class --dev sh0 --id 1 --target 0ns", "aqm target"},
        {"change-class --dev sh0 --id 1 --interval 20s", "aqm interval"},
        {"del-class --dev sh0 --id 1", "has children (2)"},
        {"del-class --dev sh0 --id 2", "default class"},
        {"del-class --dev sh0 --id 9", "no class 9"},
        {"set-default --dev sh0 --class 9", "no class 9"},
        {"set-default --dev sh0", "--class N or --none"},
        {"attach --dev sh0 --mode bogus", "bad mode \"bogus\""},
        {"status --dev \"$(printf 'sh0\\nx')\"", "sh0\\x0ax"},
        {"attach --dev sh0", "already attached in police mode"},
        {"add-class --dev sh0 --id 3", "--rate"},
        {"frobnicate --dev sh0", "unknown command \"frobnicate\""},
        {"add-class --dev sh0 --id 3 --rate 5mbit --ceil 1mbit --parent 1", "ceil 1mbit is below its rate 5mbit"},
        {"add-class --dev sh0 --id 3 --rate 5mbit --ceil 10mbit", "ceil needs a parent to borrow from"},
        {"add-class --dev sh0 --id 3 --rate 5mbit --ceil 10 --parent 1", "missing unit"},
        {"add-class --dev sh0 --id 3 --rate 5mbit --prio 8 --parent 1", "prio"},
        {"change-class --dev sh0 --id 1 --ceil 30mbit", "ceil needs a parent"},
    };
    for (const auto& [args, needle] : cases) {
        refused(args, needle);
        EXPECT_EQ(config(), before) << args << " changed the configuration";
    }
}

// A guaranteed rate that borrows up to a ceil, with a prio: set, shown, dumped, taken away; a
// parent whose children's guarantees exceed it is allowed, with a warning saying what it means.
TEST_F(Cli, GuaranteesBorrowUpToACeilWithAPrio)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 20mbit");
    Outcome o = sh("add-class --dev sh0 --id 2 --rate 5mbit --ceil 20mbit --prio 2 --parent 1");
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.err, "");
    json c2 = status()["classes"][1];
    EXPECT_EQ(c2["ceil_bps"], 20'000'000);
    EXPECT_EQ(c2["prio"], 2);
    EXPECT_EQ(c2["borrowed_bytes"], 0);
    EXPECT_EQ(status()["classes"][0]["ceil_bps"], nullptr);

    o = sh("add-class --dev sh0 --id 3 --rate 16mbit --ceil 20mbit --parent 1");
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_NE(o.err.find("warning: sh0: class 1: its children with a ceil are guaranteed 21mbit, above its rate "
                         "20mbit"), std::string::npos) << o.err;

    const std::string table = sh("status --dev sh0 --sample 0").out;
    EXPECT_NE(table.find("5mbit   20mbit"), std::string::npos) << "rate and ceil side by side:\n" << table;
    EXPECT_NE(table.find("prio 2"), std::string::npos) << table;

    const json dumped = json::parse(sh("dump --dev sh0").out)["devices"][0]["classes"];
    EXPECT_FALSE(dumped[0].contains("ceil")) << "no ceil: not listed";
    EXPECT_FALSE(dumped[0].contains("prio"));
    EXPECT_EQ(dumped[1]["ceil"], "20mbit");
    EXPECT_EQ(dumped[1]["prio"], 2);

    ok("change-class --dev sh0 --id 3 --ceil none");
    EXPECT_EQ(status()["classes"][2]["ceil_bps"], nullptr);
}

// One-item commands check only what they touch, with the faults a whole file would have: a
// chain of parents as deep as the datapath charges, a parent moved with its children under it,
// a class that rules still name.
TEST_F(Cli, OneItemChangesKeepTheTreeAndTheRulesWhole)
{
    ok("attach --dev sh0 --mode police");
    for (int id = 1; id <= SHAPER_MAX_DEPTH; id++)
        ok("add-class --dev sh0 --id " + std::to_string(id) + " --rate 1mbit" +
           (id > 1 ? " --parent " + std::to_string(id - 1) : ""));
    ok("add-class --dev sh0 --id 20 --rate 1mbit");
    ok("add-class --dev sh0 --id 21 --rate 1mbit --parent 20");
    ok("add-rule --dev sh0 --pref 5 --class 21 --dst 10.3.0.0/16");
    const json before = config();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"add-class --dev sh0 --id 9 --rate 1mbit --parent 8", "class 9 under parent 8 would be more than 8 levels deep"},
        {"change-class --dev sh0 --id 20 --parent 7", "class 21 under parent 20 would be more than 8 levels deep"},
        {"change-class --dev sh0 --id 1 --parent 8", "parent 8 of class 1 would make a cycle"},
        {"del-class --dev sh0 --id 21", "has rules (pref 5)"},
        {"add-rule --dev sh0 --pref 5 --class 20 --dst 10.4.0.0/16", "a rule with pref 5 exists already"},
        {"set-default --dev sh0 --class 22", "no class 22"},
    };
    for (const auto& [args, needle] : cases) {
        refused(args, needle);
        EXPECT_EQ(config(), before) << args << " changed the configuration";
    }
    ok("change-class --dev sh0 --id 20 --parent 6");  // 21 on the 8th level: allowed
    // A moved subtree whose ids fall as it deepens (found level by level): its deepest is named.
    ok("add-class --dev sh0 --id 40 --rate 1mbit");
    ok("add-class --dev sh0 --id 35 --rate 1mbit --parent 40");
    ok("add-class --dev sh0 --id 32 --rate 1mbit --parent 35");
    refused("change-class --dev sh0 --id 40 --parent 6", "class 32 under parent 35 would be more than 8 levels deep");
    ok("change-class --dev sh0 --id 40 --parent 5");  // 32 on the 8th level
    for (const char* id : {"32", "35", "40"})
        ok(std::string("del-class --dev sh0 --id ") + id);
    ok("del-rule --dev sh0 --pref 5");
    ok("del-class --dev sh0 --id 21");
    const json st = status();
    ASSERT_EQ(st["classes"].size(), size_t(SHAPER_MAX_DEPTH) + 1);
    EXPECT_EQ(st["classes"].back()["id"], 20);
    EXPECT_EQ(st["classes"].back()["parent"], 6);
    EXPECT_EQ(st["rules"].size(), 0u);
}

TEST_F(Cli, MissingPrivilegesAreNamed)
{
    if (run("setpriv --version").output.find("util-linux") == std::string::npos)
        GTEST_SKIP() << "needs util-linux setpriv to drop privileges";
    ok("attach --dev sh0 --mode police");
    const json before = config();
    for (const char* args : {"add-class --dev sh0 --id 3 --rate 1mbit", "status --dev sh0",
                             "detach --dev sh0", "attach --dev sh1 --mode police"}) {
        Outcome o = sh(args, "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all ");
        EXPECT_NE(o.status, 0) << args;
        EXPECT_NE(o.err.find("permission denied"), std::string::npos) << args << ": " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
    EXPECT_EQ(config(), before);
}

TEST_F(Cli, AttachedProgramRunThroughItsPinChargesTheClass)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 8mbit --overhead 24");
    // By a mark only this test's packets carry: the device's own traffic (IPv6 neighbour
    // discovery, MLD) would land in a default class while the test runs.
    ok("add-rule --dev sh0 --pref 1 --class 1 --mark 0x77");
    const int prog = bpf_obj_get((pin_dir() + "/shaper").c_str());
    ASSERT_GE(prog, 0);
    std::array<uint8_t, 64> frame{};
    __sk_buff ctx{};
    ctx.mark = 0x77;
    ctx.wire_len = 1000;
    ctx.gso_segs = 1;
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = 64,
                .ctx_in = &ctx, .ctx_size_in = sizeof ctx, .repeat = 3);
    ASSERT_EQ(bpf_prog_test_run_opts(prog, &opts), 0);
    close(prog);
    json c = status()["classes"][0];
    EXPECT_EQ(c["packets"], 3);
    EXPECT_EQ(c["bytes"], 3 * 1024);
}

// Pins an older shaperctl left (another map format) are refused in plain words, and nothing
// running changes.
TEST_F(Cli, PinsOfAnotherMapFormatAreRefusedPlainly)
{
    ok("attach --dev sh0 --mode police");
    const shaperctl::ShaperMaps maps = shaperctl::ShaperMaps::open_pinned(pin_dir());
    shaper_settings settings = maps.settings();
    settings.abi_version = SHAPER_ABI_VERSION - 1;
    maps.set_settings(settings);
    const json before = status();
    refused("attach --dev sh0 --mode police", "map format " + std::to_string(SHAPER_ABI_VERSION - 1));
    EXPECT_EQ(status()["program_id"], before["program_id"]);
    ok("detach --dev sh0");
    ok("attach --dev sh0 --mode police");
}

TEST_F(Cli, RulesAreAddedShownAndDeleted)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 20mbit");
    ok("add-class --dev sh0 --id 2 --rate 10mbit");
    ok("add-rule --dev sh0 --pref 10 --class 1 --dst 10.1.0.0/16 --proto tcp --dport 80-90");
    ok("add-rule --dev sh0 --pref 5 --class 2 --src 2001:db8::/32");
    json rules = status()["rules"];
    ASSERT_EQ(rules.size(), 2u);
    EXPECT_EQ(rules[0]["pref"], 5);
    EXPECT_EQ(rules[0]["class"], 2);
    EXPECT_EQ(rules[0]["match"], "src 2001:db8::/32");
    EXPECT_EQ(rules[1]["match"], "dst 10.1.0.0/16 proto tcp dport 80-90");
    EXPECT_EQ(rules[1]["packets"], 0);

    const json before = status()["rules"];
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"add-rule --dev sh0 --pref 10 --class 1 --dst 10.2.0.0/16", "pref 10 exists"},
        {"add-rule --dev sh0 --pref 11 --class 9 --dst 10.2.0.0/16", "no class 9"},
        {"add-rule --dev sh0 --pref 11 --class 1", "use set-default"},
        {"add-rule --dev sh0 --pref 11 --class 1 --dst 10.2.0.1/16", "did you mean 10.2.0.0/16"},
        {"add-rule --dev sh0 --pref 11 --class 1 --dst 10.2.0.0/40", "prefix length"},
        {"add-rule --dev sh0 --pref 11 --class 1 --dport 0", "ports are 1 to 65535"},
        {"add-rule --dev sh0 --pref 11 --class 1 --dport 70000", "out of range"},
        {"add-rule --dev sh0 --pref 11 --class 1 --dport 9-8", "reversed"},
        {"add-rule --dev sh0 --pref 11 --class 1 --proto xtp", "bad protocol \"xtp\""},
        {"add-rule --dev sh0 --pref 11 --class 1 --cgroup /no-such-cgroup-x", "does not exist"},
        {"add-rule --dev sh0 --pref 11 --class 1 --mark /0xff", "mask without a value"},
        {"del-rule --dev sh0 --pref 77", "no rule with pref 77"},
        {"del-class --dev sh0 --id 1", "has rules (pref 10)"},
    };
    for (const auto& [args, needle] : cases) {
        refused(args, needle);
        EXPECT_EQ(status()["rules"], before) << args;
    }
    ok("del-rule --dev sh0 --pref 10");
    EXPECT_EQ(status()["rules"].size(), 1u);
    ok("del-class --dev sh0 --id 1");
}

// A process in a cgroup is classified by --cgroup; one outside is not.
TEST_F(Cli, CgroupRuleMatchesProcessesInTheCgroupOnly)
{
    const std::string root = shaperctl::cgroup2_root();
    if (root.empty())
        GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
    if (run("nsenter --version").output.find("util-linux") == std::string::npos)
        GTEST_SKIP() << "needs util-linux nsenter";
    const std::string cg = root + "/shaperctl-test-" + std::to_string(getpid());
    ASSERT_EQ(mkdir(cg.c_str(), 0755), 0) << cg;
    ns_->ip("addr add 10.77.0.1/24 dev sh0");
    ns_->ip("neigh add 10.77.0.2 lladdr 02:00:00:00:00:02 dev sh0");
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 20mbit");
    ok("add-rule --dev sh0 --pref 1 --class 1 --cgroup " + cg);
    const std::string ping = "ping -q -c 3 -i 0.05 -W 0.2 10.77.0.2 >/dev/null 2>&1";
    run("nsenter --net=/run/netns/" + ns_->name() + " sh -c 'echo $$ > " + cg +
        "/cgroup.procs && exec " + ping + "'");
    const json inside = status();
    run("nsenter --net=/run/netns/" + ns_->name() + " sh -c '" + ping + "'");
    const json outside = status();
    rmdir(cg.c_str());
    EXPECT_EQ(inside["classes"][0]["packets"], 3) << inside.dump();
    EXPECT_EQ(inside["rules"][0]["packets"], 3);
    EXPECT_EQ(outside["classes"][0]["packets"], 3) << "a process outside the cgroup was matched";
    EXPECT_GE(outside["unclassified"]["packets"].get<int>(), 3);
}

// Eight shaperctl processes change one device at once: every change lands (they serialize on
// the device's lock), and a reader running meanwhile always sees whole classes.
TEST_F(Cli, ConcurrentProcessesLoseNoChange)
{
    ok("attach --dev sh0 --mode police");
    const std::string bin = shaperctl_bin() + " -n " + ns_->name();
    // Each process: 10 classes, a rule for each of the first 5; eight such processes at once.
    std::string script;
    for (int p = 0; p < 8; p++) {
        const std::string id = "$((" + std::to_string(p * 100) + " + i))";
        script += "(for i in $(seq 1 10); do " + bin + " add-class --dev sh0 --id " + id +
                  " --rate " + std::to_string(p + 1) + "mbit || exit 1; [ $i -gt 5 ] || " + bin +
                  " add-rule --dev sh0 --pref " + id + " --class " + id + " --dport $((" +
                  std::to_string(1000 + p * 100) + " + i)) || exit 1; done) & pids=\"$pids $!\"; ";
    }
    CommandResult r = run("fail=0; " + script + "for p in $pids; do wait $p || fail=1; done; exit $fail");
    EXPECT_EQ(r.status, 0) << r.output;
    json st = status();
    ASSERT_EQ(st["classes"].size(), 80u);
    for (auto& c : st["classes"]) {
        const int id = c["id"];
        EXPECT_EQ(c["rate_bps"], (id / 100 + 1) * 1'000'000) << id;
    }
    EXPECT_EQ(st["rules"].size(), 40u);
}

// Two detaches of one device at once: one detaches, the other finds it not attached (never both
// "detached", never a lock file's error), and nothing is left.
TEST_F(Cli, TwoDetachesAtOnceDetachOnce)
{
    for (int round = 0; round < 3; round++) {
        ok("attach --dev sh0 --mode police");
        ok("add-class --dev sh0 --id 1 --rate 1mbit");
        Background a("-n " + ns_->name() + " detach --dev sh0"), b("-n " + ns_->name() + " detach --dev sh0");
        const int sa = a.wait(std::chrono::seconds(60)), sb = b.wait(std::chrono::seconds(60));
        EXPECT_EQ((sa == 0) + (sb == 0), 1) << a.out() << a.err() << b.out() << b.err();
        EXPECT_EQ(a.out() + b.out(), "detached from sh0\n");
        EXPECT_EQ(a.err() + b.err(), "shaperctl: dev sh0: not attached\n");
        EXPECT_NE(access(pin_dir().c_str(), F_OK), 0) << "pins left in " << pin_dir();
    }
}

// A device deleted while attached: status says it is gone, detach cleans its pins, and a new
// device of the same name is a different device.
TEST_F(Cli, DeviceDeletedWhileAttached)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 10mbit");
    const std::string pins = pin_dir();
    ns_->ip("link del sh0");
    json st = status();
    EXPECT_EQ(st["present"], false);
    EXPECT_EQ(st["classes"].size(), 1u);
    json list = listed_here();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["present"], false);

    ns_->add_veth("sh0", "sh1");  // a new device under the old name
    refused("add-class --dev sh0 --id 2 --rate 1mbit", "deleted since attach");
    ok("detach --dev sh0");
    EXPECT_NE(access(pins.c_str(), F_OK), 0) << "pins left in " << pins;
    refused("status --dev sh0", "not attached");  // the new sh0 was never attached
    EXPECT_EQ(listed_here().size(), 0u);
}

TEST_F(Cli, ListShowsManagedDevices)
{
    ok("attach --dev sh0 --mode police");
    Outcome o = sh("list --json");
    ASSERT_EQ(o.status, 0);
    json list = json::parse(o.out);
    bool found = false;
    for (auto& d : list)
        if (d["device"] == "sh0" && d["present"] == true && d["mode"] == "police")
            found = true;
    EXPECT_TRUE(found) << o.out;
}

// A namespace deleted with a shaped device in it: no --dev can name that device again, so
// `detach --gone` removes what it left, beside what a device deleted here left; a live device
// keeps everything. A tc filter's side in another namespace cannot be told gone from here (no
// TCX link to ask): it is left, and listed as in another namespace.
class DetachGone : public Cli, public ::testing::WithParamInterface<std::string> {};

TEST_P(DetachGone, RemovesWhatDeletedDevicesAndNamespacesLeft)
{
    const std::string hook = GetParam(), with_hook = "SHAPERCTL_ATTACH=" + hook + " ";
    if (hook == "tcx" && !shaperctl::kernel_has_tcx())
        GTEST_SKIP() << "no TCX in this kernel";
    const bool tcx = hook == "tcx";
    const std::string gone_ns = "shaperctl-gone-" + std::to_string(getpid());
    ASSERT_EQ(run(ip_tool() + " netns add " + gone_ns).status, 0);
    const std::string inode = std::to_string(std::stoull(must_run("stat -L -c %i /run/netns/" + gone_ns)));
    const std::string gone_pins = std::string(shaperctl::kPinRoot) + "/ns" + inode;
    const std::string gone_run = std::string(shaperctl::kRunRoot) + "/ns" + inode;
    struct Cleanup {
        std::string ns, pins, run_dir;
        ~Cleanup()
        {
            run(ip_tool() + " netns del " + ns + " 2>/dev/null");
            run("rm -rf " + pins + " " + run_dir);  // a tc side's, or what a failed assertion left
        }
    } cleanup{gone_ns, gone_pins, gone_run};
    const std::string in_gone = "-n " + gone_ns + " ";
    must_run(ip_tool() + " -n " + gone_ns + " link add g0 type veth peer name g1");
    must_run(ip_tool() + " -n " + gone_ns + " link set g0 up");
    ASSERT_EQ(shaperctl_run(in_gone + "attach --dev g0 --mode police", with_hook).status, 0);
    ASSERT_EQ(shaperctl_run(in_gone + "attach --dev g0 --ingress", with_hook).status, 0);
    ns_->add_veth("x0", "x1");
    ok("attach --dev x0 --mode police", with_hook);
    ok("attach --dev sh0 --mode police", with_hook);
    ok("add-class --dev sh0 --id 1 --rate 10mbit");

    Outcome none = sh("detach --gone");
    EXPECT_EQ(none.status, 0) << none.err;
    EXPECT_EQ(none.out, "no side's device is gone\n");

    ns_->ip("link del x0");
    must_run(ip_tool() + " netns del " + gone_ns);
    auto states = [&] {  // of this test's two namespaces' sides (list shows every namespace's)
        std::map<std::string, std::string> state;
        for (auto& d : json::parse(sh("list --json").out))
            if (d["netns"] == shaperctl::current_netns() || d["netns"] == std::stoull(inode))
                state[d["device"].get<std::string>() + " " + d["direction"].get<std::string>()] =
                    d["present"] == true ? "present" : d["gone"] == true ? "gone" : "unknown";
        return state;
    };
    const std::map<std::string, std::string> expected = {{"g0 egress", tcx ? "gone" : "unknown"},
                                                         {"g0 ingress", tcx ? "gone" : "unknown"},
                                                         {"sh0 egress", "present"},
                                                         {"x0 egress", "gone"}};
    // The kernel tears a namespace down after the call returns: its links go a moment later.
    for (int i = 0; i < 600 && states() != expected; i++)
        usleep(100 * 1000);
    EXPECT_EQ(states(), expected);
    std::map<std::string, json> finding;
    const json doctor = json::parse(sh("doctor --json").out);
    for (auto& f : doctor["findings"])
        finding[f["check"].get<std::string>()] = f;
    EXPECT_EQ(finding["dev x0"]["hint"], "shaperctl -n " + ns_->name() + " detach --gone") << finding["dev x0"];
    EXPECT_EQ(finding["managed devices"]["status"], tcx ? "warn" : "ok") << finding["managed devices"];
    EXPECT_EQ(finding["managed devices"]["hint"], tcx ? "shaperctl -n " + ns_->name() + " detach --gone" : "");

    // Two at once: each side removed once, by one of them.
    Background first("-n " + ns_->name() + " detach --gone"), second("-n " + ns_->name() + " detach --gone");
    EXPECT_EQ(first.wait(std::chrono::seconds(60)), 0) << first.err();
    EXPECT_EQ(second.wait(std::chrono::seconds(60)), 0) << second.err();
    const Outcome o{0, first.out() + second.out(), ""};
    size_t lines = std::count(o.out.begin(), o.out.end(), '\n');
    EXPECT_EQ(lines - (o.out.find("no side's device is gone") != std::string::npos), tcx ? 3u : 1u) << o.out;
    EXPECT_NE(o.out.find("removed x0 (ifindex"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("removed g0 (ifindex") != std::string::npos, tcx) << o.out;
    EXPECT_EQ(o.out.find("removed g0 ingress (ifindex") != std::string::npos, tcx) << o.out;
    EXPECT_EQ(access(gone_pins.c_str(), F_OK) == 0, !tcx) << gone_pins;
    EXPECT_EQ(access(gone_run.c_str(), F_OK) == 0, !tcx) << gone_run;
    EXPECT_EQ(status()["classes"].size(), 1u);  // the live device kept its state
    EXPECT_EQ(sh("detach --gone").out, "no side's device is gone\n");
    refused("detach --gone --dev sh0", "--gone");
    refused("detach --gone --ingress", "--gone");
}

INSTANTIATE_TEST_SUITE_P(Hooks, DetachGone, ::testing::Values("tc", "tcx"),
                         [](const auto& info) { return info.param; });

}  // namespace

// Loading the datapath without CAP_PERFMON: one line naming the capability, not the verifier's
// bare "Bad address", and nothing attached. On a host-namespace veth: entering a namespace would
// itself need CAP_SYS_ADMIN.
TEST(CliPrivileges, AttachWithoutPerfmonNamesTheCapability)
{
    if (run("setpriv --help 2>&1 | grep -q -- --bounding-set").status != 0)
        GTEST_SKIP() << "no util-linux setpriv (busybox's has no --bounding-set)";
    const std::string dev = "pc" + std::to_string(getpid() % 100000);
    ASSERT_EQ(run("ip link add " + dev + " type veth peer name " + dev + "p").status, 0);
    const std::string caps = "-all,+bpf,+net_admin";
    const Outcome o = shaperctl_run("attach --dev " + dev + " --mode police",
                                    "setpriv --inh-caps=" + caps + " --ambient-caps=" + caps +
                                        " --bounding-set=" + caps + " ");
    const Outcome list = shaperctl_run("list --json");
    run("ip link del " + dev);
    EXPECT_NE(o.status, 0);
    EXPECT_EQ(o.err, "shaperctl: permission denied: loading the datapath needs CAP_PERFMON (or "
                     "CAP_SYS_ADMIN) beside CAP_BPF and CAP_NET_ADMIN\n");
    EXPECT_EQ(list.out.find("\"" + dev + "\""), std::string::npos) << list.out;
}
