// dump, apply -f and detach -f end to end: each a process of its own, in a throw-away network
// namespace with a veth pair (police mode: this kernel has no sch_fq).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "core/config_file.h"
#include "core/config_schema.h"
#include "loader/cgroup.h"
#include "core/plan.h"
#include "core/config_check.h"
#include "core/rule_compiler.h"
#include "core/rule_spec.h"
#include "loader/device.h"
#include "core/error.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

class Apply : public DeviceTest {
protected:
    void SetUp() override
    {
        DeviceTest::SetUp();
        file_ = "/tmp/shaperctl-test-config-" + std::to_string(getpid()) + ".json";
    }
    void TearDown() override
    {
        if (ns_)
            sh("detach --dev sh0 --ingress");
        DeviceTest::TearDown();
        std::remove(file_.c_str());
        if (!cgroup_.empty())
            rmdir(cgroup_.c_str());
    }

    // apply -f of `config`; its stdout (the diff) when it succeeds.
    std::string apply(const json& config, const std::string& flags = "")
    {
        write_file(file_, config.dump(2));
        Outcome o = sh("apply -f " + file_ + flags);
        EXPECT_EQ(o.status, 0) << o.err;
        EXPECT_EQ(o.err, "");
        return o.out;
    }

    json dump()
    {
        Outcome o = sh("dump");
        EXPECT_EQ(o.status, 0) << o.err;
        return json::parse(o.out);
    }

    // A refused file: non-zero exit, one line on stderr with the file name and `needle`.
    void refused(const std::string& text, const std::string& needle)
    {
        write_file(file_, text);
        Outcome o = sh("apply -f " + file_);
        EXPECT_NE(o.status, 0) << text;
        EXPECT_NE(o.err.find(file_ + ": " + needle), std::string::npos) << text << "\nsaid: " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_EQ(o.out, "") << "a refused file printed a diff: " << o.out;
    }

    bool attached(const std::string& dev)
    {
        return access(shaperctl::Device::resolve(dev).pin_dir().c_str(), F_OK) == 0;
    }

    std::string file_, cgroup_;
};

json device(const json& classes, const json& rules, const json& default_class)
{
    return {{"devices", {{{"device", "sh0"}, {"mode", "police"}, {"classes", classes}, {"rules", rules},
                          {"default_class", default_class}}}}};
}

TEST_F(Apply, DumpThenApplyIsANoOpAndRebuildsTheSameState)
{
    const std::string root = shaperctl::cgroup2_root();
    if (!root.empty()) {
        cgroup_ = root + "/shaperctl-apply-test-" + std::to_string(getpid());
        ASSERT_EQ(mkdir(cgroup_.c_str(), 0755), 0) << cgroup_;
    }
    ok("attach --dev sh0 --mode police --max-classes 1024");
    ok("add-class --dev sh0 --id 1 --rate 20mbit --burst 64kb --overhead 24 --mpu 64 --horizon 10ms --aqm codel");
    ok("add-class --dev sh0 --id 2 --rate 1.5mbit --parent 1 --aqm off");
    ok("add-class --dev sh0 --id 3 --rate 7mbps --parent 2 --target 2ms --interval 50ms --ecn off --sparse off --fair off");
    ok("add-rule --dev sh0 --pref 10 --class 2 --dst 10.1.0.0/16 --proto tcp --dport 80-90");
    ok("add-rule --dev sh0 --pref 20 --class 3 --src 2001:db8::/32 --sport 53 --proto udp");
    ok("add-rule --dev sh0 --pref 30 --class 1 --mark 0x10/0xff --priority 1:10 --dscp 46 --vlan 7");
    ok("add-rule --dev sh0 --pref 40 --class 3 --proto 99");
    if (!cgroup_.empty())
        ok("add-rule --dev sh0 --pref 50 --class 3 --cgroup " + cgroup_);
    ok("set-default --dev sh0 --class 3");

    const json before = dump();
    ASSERT_EQ(before["devices"].size(), 1u);
    const json& d = before["devices"][0];
    EXPECT_EQ(d["device"], "sh0");
    EXPECT_EQ(d["mode"], "police");
    EXPECT_EQ(d["max_classes"], 1024);
    EXPECT_EQ(d["default_class"], 3);
    EXPECT_EQ(d["classes"][0], json::parse(R"({"id": 1, "rate": "20mbit", "burst": "64kb", "parent": null,
        "overhead": 24, "mpu": "64b", "horizon": "10ms", "aqm": "codel", "target": "5ms",
        "interval": "100ms", "ecn": "on", "sparse": "on", "fair": "on", "fair_tolerance": 125})"));
    EXPECT_EQ(d["classes"][2]["rate"], "56mbit");
    EXPECT_EQ(d["classes"][2]["ecn"], "off");
    EXPECT_EQ(d["classes"][2]["sparse"], "off");
    EXPECT_EQ(d["classes"][2]["fair"], "off");
    EXPECT_EQ(d["classes"][2]["target"], "2ms");
    EXPECT_EQ(d["rules"][0], json::parse(R"({"pref": 10, "class": 2, "dst": "10.1.0.0/16",
        "proto": "tcp", "dport": "80-90"})"));
    EXPECT_EQ(d["rules"][2], json::parse(R"({"pref": 30, "class": 1, "mark": "0x10/0xff",
        "priority": "1:10", "dscp": 46, "vlan": 7})"));
    EXPECT_EQ(d["rules"][3]["proto"], 99);
    if (!cgroup_.empty()) {
        EXPECT_EQ(d["rules"][4]["cgroup"], cgroup_.substr(root.size()));
    }

    EXPECT_EQ(apply(before), "no changes\n");
    EXPECT_EQ(apply(before, " --dry-run"), "no changes\n");
    EXPECT_EQ(dump(), before);

    // From nothing: attach and everything else, in one process.
    ok("detach --dev sh0");
    const std::string diff = apply(before);
    EXPECT_TRUE(diff.starts_with("dev sh0:\n+ attach mode police, max_classes 1024\n+ class 1 ")) << diff;
    EXPECT_NE(diff.find("~ default class none -> 3\n"), std::string::npos) << diff;
    EXPECT_EQ(dump(), before);
    EXPECT_EQ(apply(before), "no changes\n");
}

TEST_F(Apply, DryRunChangesNothing)
{
    const json config = device(json::parse(R"([{"id": 1, "rate": "10mbit"}, {"id": 2, "rate": "1mbit", "parent": 1}])"),
                               json::parse(R"([{"pref": 5, "class": 2, "dport": 443}])"), 2);
    write_file(file_, config.dump());
    Outcome o = sh("apply --dry-run -f " + file_);
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "dev sh0:\n+ attach mode police\n+ class 1 rate 10mbit\n+ class 2 rate 1mbit parent 1\n"
                     "+ rule 5 class 2 dport 443\n~ default class none -> 2\ndry run: nothing changed\n");
    EXPECT_FALSE(attached("sh0")) << "a dry run attached the device";

    apply(config);
    const json before = dump();
    json changed = config;
    changed["devices"][0]["classes"][0]["rate"] = "99mbit";
    changed["devices"][0]["rules"] = json::array();
    changed["devices"][0]["default_class"] = nullptr;
    EXPECT_EQ(apply(changed, " --dry-run"),
              "dev sh0:\n~ default class 2 -> none\n- rule 5\n~ class 1 rate 10mbit -> 99mbit\n"
              "dry run: nothing changed\n");
    EXPECT_EQ(dump(), before);
}

// A horizon of 0 is the mode's default, as on the command line, and a second apply changes nothing.
TEST_F(Apply, ZeroHorizonIsTheModeDefault)
{
    const json config = device(json::parse(R"([{"id": 1, "rate": "10mbit", "horizon": "0ns"}])"), json::array(), nullptr);
    EXPECT_EQ(apply(config), "dev sh0:\n+ attach mode police\n+ class 1 rate 10mbit\n");
    EXPECT_EQ(apply(config), "no changes\n");
    EXPECT_EQ(dump()["devices"][0]["classes"][0]["horizon"], "5ms");
}

TEST_F(Apply, AChangedFileGivesExactlyItsDiff)
{
    apply(device(json::parse(R"([{"id": 1, "rate": "20mbit"}, {"id": 2, "rate": "10mbit", "parent": 1},
                                 {"id": 4, "rate": "1mbit"}])"),
                 json::parse(R"([{"pref": 10, "class": 2, "dst": "10.1.0.0/16"},
                                 {"pref": 20, "class": 4, "proto": "udp", "dport": 53}])"),
                 4));
    // Class 1 faster, 3 new under it, 4 gone with its rule, a new rule for 3, the default moved.
    const json next = device(json::parse(R"([{"id": 1, "rate": "30mbit"}, {"id": 2, "rate": "10mbit", "parent": 1},
                                             {"id": 3, "rate": "5mbit", "parent": 1}])"),
                             json::parse(R"([{"pref": 10, "class": 2, "dst": "10.1.0.0/16"},
                                             {"pref": 30, "class": 3, "vlan": 7}])"),
                             3);
    EXPECT_EQ(apply(next), "dev sh0:\n"
                           "- rule 20\n"
                           "~ class 1 rate 20mbit -> 30mbit\n"
                           "+ class 3 rate 5mbit parent 1\n"
                           "+ rule 30 class 3 vlan 7\n"
                           "~ default class 4 -> 3\n"
                           "- class 4\n");
    EXPECT_EQ(apply(next), "no changes\n");
    const json d = dump()["devices"][0];
    EXPECT_EQ(d["default_class"], 3);
    ASSERT_EQ(d["classes"].size(), 3u);
    EXPECT_EQ(d["classes"][0]["rate"], "30mbit");
    EXPECT_EQ(d["classes"][2]["id"], 3);
    ASSERT_EQ(d["rules"].size(), 2u);
    EXPECT_EQ(d["rules"][1]["vlan"], 7);

    // A rule moved to another class, fields of a class changed: one line each.
    json more = next;
    more["devices"][0]["rules"][0]["class"] = 3;
    more["devices"][0]["classes"][1] =
        json::parse(R"({"id": 2, "rate": "10mbit", "parent": 1, "burst": "64kb", "ecn": "off", "sparse": "off",
                        "fair": "off"})");
    EXPECT_EQ(apply(more), "dev sh0:\n"
                           "~ rule 10 class 2 dst 10.1.0.0/16 -> class 3 dst 10.1.0.0/16\n"
                           "~ class 2 burst 0b -> 64kb, ecn on -> off, sparse on -> off, fair on -> off\n");
}

// Parents swap, and a class moves away from a parent that goes: every step stays a valid tree.
TEST_F(Apply, HierarchyChangesAreOrderedSafely)
{
    apply(device(json::parse(R"([{"id": 1, "rate": "20mbit"}, {"id": 2, "rate": "10mbit", "parent": 1},
                                 {"id": 3, "rate": "5mbit", "parent": 2}, {"id": 9, "rate": "1mbit"},
                                 {"id": 8, "rate": "1mbit", "parent": 9}])"),
                 json::array(), 8));
    const json swapped = device(json::parse(R"([{"id": 2, "rate": "10mbit"}, {"id": 1, "rate": "20mbit", "parent": 2},
                                                {"id": 3, "rate": "5mbit", "parent": 1},
                                                {"id": 8, "rate": "1mbit", "parent": 3}])"),
                                json::array(), 8);
    EXPECT_EQ(apply(swapped), "dev sh0:\n"
                              "~ class 2 parent 1 -> none\n"
                              "~ class 1 parent none -> 2\n"
                              "~ class 3 parent 2 -> 1\n"
                              "~ class 8 parent 9 -> 3\n"
                              "- class 9\n");
    const json d = dump()["devices"][0];
    EXPECT_EQ(d["classes"][0]["parent"], 2);
    EXPECT_EQ(d["classes"][1]["parent"], nullptr);
    EXPECT_EQ(apply(swapped), "no changes\n");
}

TEST_F(Apply, BadFilesAreRefusedInOneLineAndChangeNothing)
{
    ok("attach --dev sh0 --mode police");
    apply(device(json::parse(R"([{"id": 1, "rate": "20mbit"}, {"id": 2, "rate": "10mbit", "parent": 1}])"),
                 json::parse(R"([{"pref": 10, "class": 2, "dport": 80}])"), 2));
    const json before = dump();
    const auto dev = [](const std::string& rest) {
        return R"({"devices": [{"device": "sh0", "mode": "police", )" + rest + "}]}";
    };
    const std::vector<std::pair<std::string, std::string>> cases = {
        {dev(R"("classes": [{"id": 1, "rate": "20mbit"}, {"id": 2, "rate": "20mbit"}, {"id": 3, "rate": "10mbt"}, {"id": 4, "rate": "1mbit"}])"),
         R"(devices[0].classes[2].rate: bad rate "10mbt": unknown unit "mbt" (use bit, kbit)"},
        {dev(R"("classes": [{"id": 1, "rate": "10"}])"), "devices[0].classes[0].rate: bad rate \"10\": missing unit"},
        {dev(R"("classes": [{"id": 1, "rate": 10000000}])"), "devices[0].classes[0].rate: expected a string such as \"20mbit\""},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "rat": "2mbit"}])"), "devices[0].classes[0].rat: unknown key"},
        {dev(R"("clases": [])"), "devices[0].clases: unknown key"},
        {dev(R"("rules": [{"pref": 1, "class": 1, "dport": 80, "sprot": 1}], "classes": [{"id": 1, "rate": "1mbit"}])"),
         "devices[0].rules[0].sprot: unknown key"},
        {R"({"devices": [], "extra": 1})", "extra: unknown key"},
        {dev(R"("a.b": 1)"), R"(devices[0]["a.b"]: unknown key)"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "rate": "2mbit"}])"), "devices[0].classes[0].rate: key given twice"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "parent": 9}])"), "devices[0].classes[0].parent: no class 9"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "parent": 2}, {"id": 2, "rate": "1mbit", "parent": 1}])"),
         "devices[0].classes[0].parent: parents form a cycle (1 -> 2 -> 1)"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "parent": 2}, {"id": 2, "rate": "1mbit", "parent": 3}])"),
         "devices[0].classes[1].parent: no class 3"},  // a missing grandparent (found by fuzz/)
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}, {"id": 1, "rate": "2mbit"}])"), "devices[0].classes[1].id: class 1 is given twice"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "burst": "2gb"}])"), "devices[0].classes[0].burst: bad size \"2gb\""},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "horizon": "61s"}])"), "devices[0].classes[0]: class 1: horizon"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit", "aqm": "red"}])"), "devices[0].classes[0].aqm: bad value \"red\" (use codel or off)"},
        {dev(R"("classes": [{"id": 20000, "rate": "1mbit"}])"), "devices[0].classes[0].id: class id 20000 is out of range"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "default_class": 5)"), "devices[0].default_class: no class 5"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 7, "vlan": 3}])"), "devices[0].rules[0].class: no class 7"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1}])"), "devices[0].rules[0]: a rule needs at least one match"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1, "vlan": 3}, {"pref": 1, "class": 1, "vlan": 4}])"),
         "devices[0].rules[1].pref: pref 1 is given twice"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1, "dst": "10.0.0.1/8"}])"),
         "devices[0].rules[0].dst: bad destination CIDR \"10.0.0.1/8\": host bits set (did you mean 10.0.0.0/8?)"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1, "src": "10.0.0.0/8", "dst": "::1"}])"),
         "devices[0].rules[0].dst: src and dst must both be IPv4 or both IPv6"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1, "proto": "icmp", "dport": 1}])"),
         "devices[0].rules[0]: ports only exist for tcp, udp and sctp"},
        {dev(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1, "cgroup": "/no-such-cgroup-x"}])"),
         "devices[0].rules[0].cgroup: cgroup \"/no-such-cgroup-x\" does not exist"},
        {dev(R"("fq": {"horizon": "1s"})"), "devices[0].fq: fq options apply to edt mode only"},
        {dev(R"("max_classes": 64)"), "devices[0].max_classes: dev sh0 was attached with max_classes 16384"},
        {R"({"devices": [{"device": "sh0"}]})", "devices[0].mode: dev sh0 is attached in police mode"},
        {R"({"devices": [{"device": "sh1", "mode": "police"}, {"device": "nosuch0", "mode": "police"}]})",
         "devices[1].device: unknown device \"nosuch0\""},
        {R"({"devices": [{"device": "sh1", "mode": "police"}, {"device": "sh1", "mode": "police"}]})",
         "devices[1].device: device \"sh1\" is given twice"},
        {R"({"devices": [{"device": "sh0", "mode": "police",)", "not valid JSON: parse error at line 1"},
        {R"([])", "(top level): expected an object"},
        {dev(R"("max_classes": 1e400)"), "not valid JSON: number overflow parsing '1e400'"},
        {R"({"version": 2, "devices": []})", "version: unsupported format version 2"},
    };
    for (const auto& [text, needle] : cases) {
        refused(text, needle);
        EXPECT_EQ(dump(), before) << text << " changed the configuration";
        EXPECT_FALSE(attached("sh1")) << text << " attached sh1";
    }
    Outcome missing = sh("apply -f /nonexistent/config.json");
    EXPECT_NE(missing.status, 0);
    EXPECT_NE(missing.err.find("cannot read /nonexistent/config.json"), std::string::npos) << missing.err;
}

// An attach that fails (edt without sch_fq) takes back the devices attached before it.
TEST_F(Apply, AFailedAttachDetachesTheOthersAgain)
{
    if (access("/sys/module/sch_fq", F_OK) == 0)
        GTEST_SKIP() << "this kernel has sch_fq";
    const std::string qdisc_before = ns_->tc("qdisc show dev sh1");
    write_file(file_, R"({"devices": [{"device": "sh0", "mode": "police", "classes": [{"id": 1, "rate": "1mbit"}]},
                                       {"device": "sh1", "mode": "edt"}]})");
    Outcome o = sh("apply -f " + file_);
    EXPECT_NE(o.status, 0);
    EXPECT_NE(o.err.find("sch_fq"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_FALSE(attached("sh0"));
    EXPECT_FALSE(attached("sh1"));
    EXPECT_EQ(ns_->tc("qdisc show dev sh1"), qdisc_before);
}

// Runs where the kernel has sch_fq (the stock-kernel VM): fq options applied in place.
TEST_F(Apply, EdtFqOptionsAreAppliedInPlace)
{
    if (access("/sys/module/sch_fq", F_OK) != 0)
        GTEST_SKIP() << "this kernel has no sch_fq";
    json config = json::parse(R"({"devices": [{"device": "sh0", "mode": "edt",
        "fq": {"horizon": "5s", "flow_limit": 50}, "classes": [{"id": 1, "rate": "10mbit"}]}]})");
    EXPECT_EQ(apply(config), "dev sh0:\n+ attach mode edt, fq horizon 5s flow_limit 50\n+ class 1 rate 10mbit\n");
    const shaperctl::FqOptions defaults;
    const json d = dump()["devices"][0];
    EXPECT_EQ(d["fq"], (json{{"horizon", "5s"}, {"flow_limit", 50}, {"limit", defaults.limit}}));
    EXPECT_EQ(d["classes"][0]["horizon"], "2s");
    std::string qdisc = ns_->tc("qdisc show dev sh0");
    EXPECT_NE(qdisc.find("flow_limit 50p"), std::string::npos) << qdisc;
    EXPECT_NE(qdisc.find("horizon 5s"), std::string::npos) << qdisc;

    config["devices"][0]["fq"] = json::parse(R"({"horizon": "2s"})");
    EXPECT_EQ(apply(config), "dev sh0:\n~ fq horizon 5s -> 2s, flow_limit 50 -> " +
                                 std::to_string(defaults.flow_limit) + "\n");
    qdisc = ns_->tc("qdisc show dev sh0");
    EXPECT_NE(qdisc.find("horizon 2s"), std::string::npos) << qdisc;
    EXPECT_NE(qdisc.find("flow_limit " + std::to_string(defaults.flow_limit) + "p"), std::string::npos) << qdisc;
    EXPECT_EQ(apply(config), "no changes\n");
    EXPECT_EQ(dump()["devices"][0]["fq"],
              (json{{"horizon", "2s"}, {"flow_limit", defaults.flow_limit}, {"limit", defaults.limit}}));
}

// Runs where the kernel has sch_fq. A file whose class horizon lies beyond the file's fq horizon
// is refused before anything changes; a file lowering both changes the classes first, then fq.
TEST_F(Apply, AClassHorizonBeyondTheFilesFqHorizonIsRefused)
{
    if (access("/sys/module/sch_fq", F_OK) != 0)
        GTEST_SKIP() << "this kernel has no sch_fq";
    refused(R"({"devices": [{"device": "sh0", "classes": [{"id": 10, "rate": "5mbit", "horizon": "30s"}]}]})",
            "devices[0].classes[0]: class 10: horizon 30s exceeds sch_fq's horizon 10s "
            "(devices[0].fq.horizon raises it)");
    EXPECT_FALSE(attached("sh0"));

    json config = json::parse(R"({"devices": [{"device": "sh0", "fq": {"horizon": "30s"},
        "classes": [{"id": 10, "rate": "5mbit", "horizon": "30s"}]}]})");
    apply(config);
    const json before = dump();
    config["devices"][0]["fq"]["horizon"] = "5s";
    refused(config.dump(), "devices[0].classes[0]: class 10: horizon 30s exceeds sch_fq's horizon 5s");
    EXPECT_EQ(dump(), before);

    config["devices"][0]["classes"][0]["horizon"] = "5s";
    EXPECT_EQ(apply(config), "dev sh0:\n~ fq horizon 30s -> 5s\n~ class 10 horizon 30s -> 5s\n");
    EXPECT_EQ(dump()["devices"][0]["fq"]["horizon"], "5s");
    const std::string qdisc = ns_->tc("qdisc show dev sh0");
    EXPECT_NE(qdisc.find("horizon 5s"), std::string::npos) << qdisc;
}

TEST_F(Apply, TwoDevicesAreAppliedAndDetachedFromTheFile)
{
    write_file(file_, R"({"devices": [
        {"device": "sh0", "mode": "police", "classes": [{"id": 1, "rate": "1mbit"}], "default_class": 1},
        {"device": "sh1", "mode": "police", "max_classes": 64, "classes": [{"id": 63, "rate": "2mbit"}]}]})");
    Outcome o = sh("apply -f " + file_);
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "dev sh0:\n+ attach mode police\n+ class 1 rate 1mbit\n~ default class none -> 1\n"
                     "dev sh1:\n+ attach mode police, max_classes 64\n+ class 63 rate 2mbit\n");
    EXPECT_TRUE(attached("sh0"));
    EXPECT_TRUE(attached("sh1"));
    EXPECT_EQ(dump()["devices"].size(), 2u);
    EXPECT_EQ(sh("apply -f " + file_).out, "no changes\n");

    o = sh("detach -f " + file_);
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "detached from sh0\ndetached from sh1\n");
    EXPECT_FALSE(attached("sh0"));
    EXPECT_FALSE(attached("sh1"));
    o = sh("detach -f " + file_);  // again: nothing to do is no failure (systemd's ExecStop)
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "dev sh0: not attached\ndev sh1: not attached\n");
    Outcome neither = sh("detach");
    EXPECT_NE(neither.status, 0);
    EXPECT_NE(neither.err.find("--dev DEV, -f FILE or --gone"), std::string::npos) << neither.err;
}

// A device entry is one side: the receive side is an entry of its own ("direction": "ingress"),
// with its own classes, rules and default class, in police mode, with the ingress class
// defaults; dump prints it, apply of the dump changes nothing, detach -f detaches it.
TEST_F(Apply, TheIngressSideIsAnEntryOfItsOwn)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 20mbit");
    const json egress = dump()["devices"][0];
    write_file(file_, R"({"devices": [
        {"device": "sh0", "mode": "police", "classes": [{"id": 1, "rate": "20mbit"}]},
        {"device": "sh0", "direction": "ingress", "default_class": 1,
         "classes": [{"id": 1, "rate": "10mbit"}, {"id": 2, "rate": "5mbit", "parent": 1, "aqm": "off"}],
         "rules": [{"pref": 10, "class": 2, "dport": 80, "proto": "tcp"}]}]})");
    Outcome o = sh("apply -f " + file_);
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "dev sh0 ingress:\n+ attach mode police\n+ class 1 rate 10mbit\n"
                     "+ class 2 rate 5mbit parent 1 aqm off\n+ rule 10 class 2 proto tcp dport 80\n"
                     "~ default class none -> 1\n");

    Outcome st = sh("status --dev sh0 --ingress --json --sample 0");
    ASSERT_EQ(st.status, 0) << st.err;
    const json side = json::parse(st.out);
    ASSERT_EQ(side["classes"].size(), 2u);
    EXPECT_EQ(side["classes"][0]["aqm"], "codel");  // the ingress defaults for absent fields
    EXPECT_EQ(side["classes"][0]["horizon_ns"], 150'000'000);
    EXPECT_EQ(side["classes"][1]["aqm"], "off");
    EXPECT_EQ(side["default_class"], 1);
    EXPECT_EQ(side["rules"][0]["match"], "proto tcp dport 80");

    const json both = dump();
    ASSERT_EQ(both["devices"].size(), 2u);
    EXPECT_EQ(both["devices"][0], egress);  // the egress entry is as it was, with no "direction"
    const json& in = both["devices"][1];
    EXPECT_EQ(in["direction"], "ingress");
    EXPECT_EQ(in["mode"], "police");
    EXPECT_EQ(in["classes"][0]["target"], "2ms");
    // The horizon at its rate's default goes unsaid, so that a rate edited in the file brings
    // its own default, as change-class does.
    EXPECT_FALSE(in["classes"][0].contains("horizon")) << in;
    EXPECT_EQ(apply(both), "no changes\n");
    EXPECT_EQ(sh("dump --dev sh0").out, sh("dump").out);

    json slower = both;
    slower["devices"][1]["classes"][0]["rate"] = "8mbit";
    EXPECT_EQ(apply(slower), "dev sh0 ingress:\n~ class 1 rate 10mbit -> 8mbit, horizon 150ms -> 152ms\n");
    const auto horizon_of_1 = [&] {
        return json::parse(sh("status --dev sh0 --ingress --json --sample 0").out)["classes"][0]["horizon_ns"];
    };
    EXPECT_EQ(horizon_of_1(), 152'000'000u);  // 100 full frames at 8 Mbit/s
    slower["devices"][1]["classes"][0]["horizon"] = "150ms";  // given: said, and kept
    EXPECT_EQ(apply(slower), "dev sh0 ingress:\n~ class 1 horizon 152ms -> 150ms\n");
    EXPECT_EQ(horizon_of_1(), 150'000'000u);
    EXPECT_EQ(dump()["devices"][1]["classes"][0]["horizon"], "150ms");

    const auto side_entry = [](const std::string& rest) {
        return R"({"devices": [{"device": "sh0", "direction": "ingress", )" + rest + "}]}";
    };
    const json before = dump();
    for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
             {side_entry(R"("mode": "edt")"), "devices[0].mode: ingress is police mode"},
             {side_entry(R"("fq": {"horizon": "1s"})"), "devices[0].fq: fq options apply to egress only"},
             {side_entry(R"("classes": [{"id": 1, "rate": "1mbit"}], "rules": [{"pref": 1, "class": 1, "cgroup": "/"}])"),
              "devices[0].rules[0].cgroup: rule 1: cgroup rules match local sockets"},
             {R"({"devices": [{"device": "sh0", "direction": "sideways"}]})",
              "devices[0].direction: bad direction \"sideways\" (use egress or ingress)"},
             {R"({"devices": [{"device": "sh0", "direction": "ingress"}, {"device": "sh0", "direction": "ingress"}]})",
              "devices[1].device: device \"sh0\" is given twice"}}) {
        refused(text, needle);
        EXPECT_EQ(dump(), before) << text;
    }

    write_file(file_, both.dump());
    o = sh("detach -f " + file_);
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "detached from sh0\ndetached from sh0 ingress\n");
    EXPECT_FALSE(attached("sh0"));
}

// `parents` top classes of 1 Gbit with 99 children each (ids P00..P98), and `rule_count` rules
// spread over the first parent's children.
json many_classes(int parents, int rule_count)
{
    json classes = json::array(), rules = json::array();
    for (int p = 1; p <= parents; p++) {
        classes.push_back({{"id", p}, {"rate", "1gbit"}});
        for (int c = 0; c < 99; c++)
            classes.push_back({{"id", p * 100 + c}, {"rate", std::to_string(c + 1) + "mbit"}, {"parent", p}});
    }
    for (int r = 0; r < rule_count; r++)
        rules.push_back({{"pref", r + 1}, {"class", 100 + (r % 99)}, {"dport", 1000 + r}, {"proto", "tcp"}});
    return device(classes, rules, 1);
}

// Thousands of classes and rules in one process (its time is printed, not bounded: tests assert
// behaviour, never speed).
TEST_F(Apply, ManyClassesTakeOneProcess)
{
    const json config = many_classes(20, 1000);
    const auto start = std::chrono::steady_clock::now();
    const std::string diff = apply(config);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(std::count(diff.begin(), diff.end(), '\n'), 1 + 1 + 2000 + 1000 + 1);
    std::printf("apply of 2000 classes and 1000 rules: %.2f s\n", seconds);
    EXPECT_EQ(dump()["devices"][0]["classes"].size(), 2000u);
    EXPECT_EQ(apply(config), "no changes\n");

    json faster = config;
    for (auto& c : faster["devices"][0]["classes"])
        if (c["id"].get<int>() >= 100)
            c["rate"] = "200mbit";
    const std::string changes = apply(faster);
    EXPECT_EQ(std::count(changes.begin(), changes.end(), '\n'), 1 + 1980);
}

// A class option end to end: add-class, change-class, dump, apply's diff, status --json and the
// schema all know the fair tolerance from its one entry in the class table.
TEST_F(Apply, FairToleranceRoundTripsThroughEveryLayer)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 1 --rate 10mbit --fair-tolerance 250");
    json d = dump();
    EXPECT_EQ(d["devices"][0]["classes"][0]["fair_tolerance"], 250);
    d["devices"][0]["classes"][0]["fair_tolerance"] = 400;
    d["devices"][0]["classes"][1] = {{"id", 2}, {"rate", "1mbit"}, {"fair_tolerance", 300}};
    EXPECT_EQ(apply(d), "dev sh0:\n~ class 1 fair_tolerance 250 -> 400\n+ class 2 rate 1mbit fair_tolerance 300\n");
    EXPECT_EQ(apply(d), "no changes\n");
    Outcome st = sh("status --dev sh0 --json --sample 0");
    ASSERT_EQ(st.status, 0) << st.err;
    EXPECT_EQ(json::parse(st.out)["classes"][0]["fair_tolerance_permille"], 400);
    ok("change-class --dev sh0 --id 1 --fair-tolerance 125");
    EXPECT_EQ(dump()["devices"][0]["classes"][0]["fair_tolerance"], 125);
    Outcome bad = sh("add-class --dev sh0 --id 3 --rate 1mbit --fair-tolerance 0");
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.err.find("bad fair tolerance \"0\""), std::string::npos) << bad.err;
    d["devices"][0]["classes"][1]["fair_tolerance"] = 1001;
    write_file(file_, d.dump());
    Outcome refused = sh("apply -f " + file_);
    EXPECT_NE(refused.err.find("devices[0].classes[1].fair_tolerance: 1001 is out of range (1 to 1000)"),
              std::string::npos) << refused.err;
    const auto schema = shaperctl::config_schema()["$defs"]["class"]["properties"]["fair_tolerance"];
    EXPECT_EQ(schema["default"], 125);
    EXPECT_EQ(schema["maximum"], 1000);
}

// The schema ships with the keys the parser takes, and what dump prints validates against it.
TEST(ConfigSchema, MatchesTheParserAndValidatesDumps)
{
    if (access(SHAPERCTL_SOURCE_DIR "/packaging/shaperctl-config.schema.json", R_OK) != 0)
        GTEST_SKIP() << "no source tree here (the stock-kernel VM has the binaries only)";
    const std::string shipped = read_file(SHAPERCTL_SOURCE_DIR "/packaging/shaperctl-config.schema.json");
    EXPECT_EQ(shipped, shaperctl::config_schema_text())
        << "the shipped schema is not what the class table makes: shaperctl schema > packaging/shaperctl-config.schema.json";
    const json schema = json::parse(shipped);
    auto keys = [&](const json& object) {
        std::set<std::string> out;
        for (const auto& [k, v] : object["properties"].items())
            out.insert(k);
        return out;
    };
    auto parser_keys = [](const char* kind) {
        const auto& k = shaperctl::config_keys(kind);
        return std::set<std::string>(k.begin(), k.end());
    };
    EXPECT_EQ(keys(schema), parser_keys("file"));
    EXPECT_EQ(keys(schema["$defs"]["device"]), parser_keys("device"));
    EXPECT_EQ(keys(schema["$defs"]["device"]["properties"]["fq"]), parser_keys("fq"));
    EXPECT_EQ(keys(schema["$defs"]["class"]), parser_keys("class"));
    EXPECT_EQ(keys(schema["$defs"]["rule"]), parser_keys("rule"));
    EXPECT_EQ(keys(schema["$defs"]["rule"]["properties"]["cgroup"]["oneOf"][1]), parser_keys("cgroup"));

    // The shipped example parses.
    const auto example = shaperctl::parse_config(read_file(SHAPERCTL_SOURCE_DIR "/packaging/config.example.json"), shaperctl::host_cgroups());
    EXPECT_EQ(example.devices.size(), 1u);

    if (run("python3 -c 'import jsonschema'").status != 0)
        GTEST_SKIP() << "python3-jsonschema is not installed: the schema itself is not checked";
    shaperctl::ShaperConfig c;
    c.mode = SHAPER_MODE_EDT;
    c.max_classes = 1024;
    c.default_class = 2;
    shaperctl::ClassSpec a, b;
    a.id = 1;
    a.rate_bps = 1'000'000'000;
    a.horizon_ns = 2'000'000'000;
    b = a;
    b.id = 2;
    b.parent = 1;
    b.burst_bytes = 1500;
    c.classes = {a, b};
    shaperctl::RuleSpec r;
    r.pref = 3;
    r.class_id = 2;
    r.cgroup = shaperctl::CgroupMatch{123456789, 2};  // no such cgroup: dumped as id and level
    r.dscp = 10;
    c.rules = {r};
    const std::string dumped = "/tmp/shaperctl-test-schema-" + std::to_string(getpid()) + ".json";
    write_file(dumped, shaperctl::config_json({{"eth0", c}}, shaperctl::host_cgroups()).dump());
    const std::string check =
        "python3 -c 'import json, sys, jsonschema; s = json.load(open(sys.argv[1])); "
        "jsonschema.Draft202012Validator.check_schema(s); "
        "[jsonschema.validate(json.load(open(f)), s) for f in sys.argv[2:]]' " SHAPERCTL_SOURCE_DIR
        "/packaging/shaperctl-config.schema.json " + dumped + " " SHAPERCTL_SOURCE_DIR "/packaging/config.example.json";
    CommandResult result = run(check);
    std::remove(dumped.c_str());
    EXPECT_EQ(result.status, 0) << result.output;
}

// The one check names the item at fault, for a file's path or a command's words.
TEST(ConfigCheck, FaultsNameTheirItem)
{
    using Item = shaperctl::ConfigFault::Item;
    shaperctl::ShaperConfig c;
    c.classes = {{.id = 1, .rate_bps = 1'000'000, .parent = 2, .horizon_ns = 5'000'000},
                 {.id = 2, .rate_bps = 1'000'000, .parent = 1, .horizon_ns = 5'000'000}};
    const auto fault = [](const shaperctl::ShaperConfig& config) {
        try {
            shaperctl::check_config(config, {});
        } catch (const shaperctl::ConfigFault& f) {
            return std::tuple{f.item, f.id, f.field, std::string(f.what()), f.missing_class};
        }
        return std::tuple{Item::Rules, 0u, std::string(), std::string("none"), 0u};
    };
    EXPECT_EQ(fault(c), std::tuple(Item::Class, 1u, std::string("parent"),
                                   std::string("parents form a cycle (1 -> 2 -> 1)"), 0u));
    c.classes[1].parent = 0;
    c.classes[1].rate_bps = 1;
    EXPECT_EQ(std::get<0>(fault(c)), Item::Class);
    EXPECT_EQ(std::get<1>(fault(c)), 2u);
    c.classes[1].rate_bps = 1'000'000;
    c.default_class = 7;
    EXPECT_EQ(fault(c), std::tuple(Item::DefaultClass, 0u, std::string(), std::string("no class 7"), 7u));
    c.default_class = 2;
    shaperctl::RuleSpec rule;
    rule.pref = 5;
    rule.class_id = 3;
    rule.vlan = 9;
    c.rules = {rule};
    EXPECT_EQ(fault(c), std::tuple(Item::Rule, 5u, std::string("class"), std::string("no class 3"), 3u));
    c.rules[0].class_id = 1;
    EXPECT_EQ(std::get<3>(fault(c)), "none");
    // Rules the device publishes already are not compiled again.
    EXPECT_TRUE(shaperctl::check_config(c, {}).compiled);
    EXPECT_FALSE(shaperctl::check_config(c, {}, &c.rules).compiled);
}

// The set the check compiled once, placed into a generation and slots, is what compiling it
// there would give.
TEST(ConfigCheck, PlacingACompiledSetEqualsCompilingItInPlace)
{
    std::vector<shaper_rule> rules;
    std::map<uint32_t, uint32_t> slot_of;
    std::vector<uint32_t> placeholder, slots;
    for (uint32_t i = 0; i < 40; i++) {
        shaperctl::RuleSpec r;
        r.pref = 100 - 2 * i;
        r.class_id = 1 + i % 3;
        r.dport = shaperctl::PortRange{uint16_t(1000 + i), uint16_t(1000 + 3 * i)};
        r.proto = 6;
        if (i % 4 == 0)
            r.dst = shaperctl::parse_cidr("10." + std::to_string(i) + ".0.0/16", "dst");
        rules.push_back(shaperctl::compile_rule(r));
        placeholder.push_back(i);
        slots.push_back(7 * i + 3);
        slot_of[r.pref] = 7 * i + 3;
    }
    const auto once = shaperctl::compile_rules(rules, placeholder, 0);
    for (uint32_t gen : {0u, 1u}) {
        const auto in_place = shaperctl::compile_rules(rules, slots, gen);
        const auto placed = shaperctl::place_rules(once, gen, slot_of);
        ASSERT_EQ(placed.entries.size(), in_place.entries.size());
        for (size_t i = 0; i < placed.entries.size(); i++) {
            EXPECT_EQ(std::memcmp(&placed.entries[i].first, &in_place.entries[i].first, sizeof(shaper_rule_key)), 0) << i;
            EXPECT_EQ(std::memcmp(&placed.entries[i].second, &in_place.entries[i].second, sizeof(shaper_rule_match)), 0) << i;
        }
        EXPECT_EQ(placed.sport_segs, in_place.sport_segs);
        EXPECT_EQ(placed.dport_segs, in_place.dport_segs);
        ASSERT_EQ(placed.tuples.size(), in_place.tuples.size());
        for (size_t t = 0; t < placed.tuples.size(); t++)
            EXPECT_EQ(std::memcmp(&placed.tuples[t], &in_place.tuples[t], sizeof(shaper_tuple)), 0) << t;
    }
}

// plan_config on its own: the order of steps for a default class whose class is new.
TEST(ConfigPlan, DefaultClassFollowsItsClass)
{
    using Kind = shaperctl::ConfigStep::Kind;
    shaperctl::ShaperConfig current, desired;
    shaperctl::ClassSpec old_class, new_class;
    old_class.id = 4;
    old_class.rate_bps = 1'000'000;
    new_class = old_class;
    new_class.id = 5;
    current.classes = {old_class};
    current.default_class = 4;
    desired.classes = {new_class};
    desired.default_class = 5;
    const auto steps = shaperctl::plan_config(current, desired);
    ASSERT_EQ(steps.size(), 4u);
    EXPECT_EQ(steps[0].kind, Kind::SetDefault);  // out of class 4's way, not shown
    EXPECT_FALSE(steps[0].shown);
    EXPECT_EQ(steps[0].new_default, 0u);
    EXPECT_EQ(steps[1].kind, Kind::AddClass);
    EXPECT_EQ(steps[2].kind, Kind::SetDefault);
    EXPECT_EQ(steps[2].new_default, 5u);
    EXPECT_EQ(steps[3].kind, Kind::DeleteClass);
    EXPECT_TRUE(shaperctl::plan_config(desired, desired).empty());
}

}  // namespace

namespace {

// kill -9 anywhere in apply: running apply again converges to the file, and the device's lock
// (an flock) dies with the process, so nothing waits on it.
TEST_F(Apply, KillNineAnywhereThenApplyAgainConverges)
{
    const json config = many_classes(5, 300);
    write_file(file_, config.dump(2));
    for (int delay_ms : {0, 5, 15, 30, 60, 120}) {
        sh("detach --dev sh0");  // from scratch each time (not attached the first time)
        {
            Background killed("-n " + ns_->name() + " apply -f " + file_);
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
            killed.stop(SIGKILL);
        }
        Outcome again = sh("apply -f " + file_);
        ASSERT_EQ(again.status, 0) << "after kill -9 at " << delay_ms << " ms: " << again.err;
        EXPECT_EQ(apply(config), "no changes\n") << "after kill -9 at " << delay_ms << " ms";
        EXPECT_EQ(dump()["devices"][0]["classes"].size(), 500u);
        EXPECT_EQ(dump()["devices"][0]["rules"].size(), 300u);
    }
}

}  // namespace
