// The safety net of the model: a rich state (a class tree, every class option, rules of every
// match kind, a default class, both modes) whose `dump`, `status --json` keys and `apply` diff
// lines are kept as files under tests/golden/. They must stay byte-identical whatever the code
// behind them becomes. SHAPERCTL_UPDATE_GOLDEN=1 rewrites them (then review the diff).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/config_file.h"
#include "loader/cgroup.h"
#include "core/plan.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

const std::string kGoldenDir = SHAPERCTL_SOURCE_DIR "/tests/golden/";

// Compares `text` with the golden file `name`, or writes it there when asked to.
void expect_golden(const std::string& name, const std::string& text)
{
    const std::string path = kGoldenDir + name;
    if (const char* update = std::getenv("SHAPERCTL_UPDATE_GOLDEN"); update && *update == '1') {
        write_file(path, text);
        return;
    }
    ASSERT_EQ(access(path.c_str(), R_OK), 0) << "no golden file " << path;
    EXPECT_EQ(text, read_file(path)) << "differs from " << path;
}

// "classes[].aqm" for every key of a JSON value, one per line, sorted.
void key_paths(const json& v, const std::string& at, std::set<std::string>& out)
{
    if (v.is_object()) {
        for (const auto& [k, child] : v.items()) {
            const std::string p = at.empty() ? k : at + "." + k;
            out.insert(p);
            key_paths(child, p, out);
        }
    } else if (v.is_array()) {
        for (const auto& child : v)
            key_paths(child, at + "[]", out);
    }
}

std::string lines(const std::set<std::string>& keys)
{
    std::string out;
    for (const auto& k : keys)
        out += k + "\n";
    return out;
}

class Golden : public DeviceTest {
protected:
    void TearDown() override
    {
        DeviceTest::TearDown();
        if (!cgroup_.empty())
            rmdir(cgroup_.c_str());
        std::remove(file_.c_str());
    }
    std::string cgroup_, file_ = "/tmp/shaperctl-golden-" + std::to_string(getpid()) + ".json";
};

// Police mode through the CLI (the host has no sch_fq; edt's file form is below).
TEST_F(Golden, DumpStatusAndDiffOfARichStateBuiltThroughTheCli)
{
    if (access(kGoldenDir.c_str(), R_OK) != 0)
        GTEST_SKIP() << "no source tree here (the stock-kernel VM has the binaries only)";
    const std::string root = shaperctl::cgroup2_root();
    if (root.empty())
        GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
    cgroup_ = root + "/shaperctl-golden";
    rmdir(cgroup_.c_str());
    ASSERT_EQ(mkdir(cgroup_.c_str(), 0755), 0) << cgroup_;

    ok("attach --dev sh0 --mode police --max-classes 1024");
    ok("add-class --dev sh0 --id 1 --rate 1gbit --burst 64kb --overhead 24 --mpu 64 --horizon 10ms");
    ok("add-class --dev sh0 --id 2 --rate 100mbit --parent 1 --aqm codel --target 2ms --interval 50ms");
    ok("add-class --dev sh0 --id 3 --rate 7mbps --parent 2 --ecn off --sparse off --fair off --overhead -4");
    ok("add-class --dev sh0 --id 4 --rate 1234.567kbit --parent 2 --burst 1500 --mpu 1kb --aqm codel");
    ok("add-class --dev sh0 --id 9 --rate 8kbit");
    ok("add-rule --dev sh0 --pref 10 --class 2 --dst 10.1.0.0/16 --proto tcp --dport 80-90");
    ok("add-rule --dev sh0 --pref 20 --class 3 --src 2001:db8::/32 --dst 2001:db8:1::1/128 --sport 53 --proto udp");
    ok("add-rule --dev sh0 --pref 30 --class 1 --mark 0x10/0xff --priority 1:10 --dscp 46 --vlan 7");
    ok("add-rule --dev sh0 --pref 40 --class 3 --proto 99");
    ok("add-rule --dev sh0 --pref 50 --class 4 --cgroup " + cgroup_);
    ok("add-rule --dev sh0 --pref 60 --class 4 --src 192.168.0.0/24 --sport 1024-65535 --proto sctp");
    ok("add-rule --dev sh0 --pref 70 --class 9 --proto icmp");
    ok("add-rule --dev sh0 --pref 80 --class 9 --proto icmpv6 --priority 7");
    ok("add-rule --dev sh0 --pref 90 --class 9 --proto gre --mark 5");
    ok("set-default --dev sh0 --class 9");

    Outcome dump = sh("dump");
    ASSERT_EQ(dump.status, 0) << dump.err;
    expect_golden("police-dump.json", dump.out);

    Outcome status = sh("status --dev sh0 --json --sample 0");
    ASSERT_EQ(status.status, 0) << status.err;
    std::set<std::string> keys;
    key_paths(json::parse(status.out), "", keys);
    expect_golden("status-keys.txt", lines(keys));
    Outcome table = sh("status --dev sh0 --sample 0");
    ASSERT_EQ(table.status, 0) << table.err;
    // The class table's column names (their widths follow the values, which traffic moves).
    std::istringstream header(table.out.substr(table.out.find("\n\n") + 2));
    std::string line, word, columns;
    std::getline(header, line);
    for (std::istringstream words(line); words >> word;)
        columns += word + "\n";
    expect_golden("status-table-header.txt", columns);

    // Every field changed, a class added and one removed, rules changed: the diff lines.
    json changed = json::parse(dump.out);
    json& d = changed["devices"][0];
    d["classes"][0] = json::parse(R"({"id": 1, "rate": "2gbit", "burst": "128kb", "overhead": 0,
        "mpu": 0, "horizon": "20ms", "aqm": "codel", "target": "1ms", "interval": "10ms",
        "ecn": "off", "sparse": "off", "fair": "off"})");
    d["classes"][4] = json::parse(R"({"id": 5, "rate": "3mbit", "parent": 1, "overhead": 8,
        "mpu": 60, "horizon": "50ms", "aqm": "codel", "target": "3ms", "interval": "30ms",
        "ecn": "off", "sparse": "off", "fair": "off", "burst": "2kb"})");
    d["classes"][2]["parent"] = 1;
    d["default_class"] = 5;
    d["rules"][0]["dport"] = "443";
    d["rules"][8]["class"] = 5;
    d["rules"][7] = json::parse(R"({"pref": 85, "class": 5, "vlan": 100})");
    d["rules"][6]["dscp"] = 8;
    d["rules"][6]["class"] = 5;
    write_file(file_, changed.dump(2));
    Outcome diff = sh("apply --dry-run -f " + file_);
    ASSERT_EQ(diff.status, 0) << diff.err;
    expect_golden("police-apply-diff.txt", diff.out);
    Outcome applied = sh("apply -f " + file_);
    ASSERT_EQ(applied.status, 0) << applied.err;
    EXPECT_EQ(applied.out + "dry run: nothing changed\n", diff.out);
    Outcome again = sh("dump");
    expect_golden("police-dump-after-apply.json", again.out);
}

// Edt mode's file form (fq options, the mode's default horizon), without a kernel: the file is
// parsed and printed as dump prints it, and the diff from nothing is described.
TEST(GoldenFile, EdtFileParsesAndDumpsAsBefore)
{
    if (access(kGoldenDir.c_str(), R_OK) != 0)
        GTEST_SKIP() << "no source tree here (the stock-kernel VM has the binaries only)";
    struct Names : shaperctl::CgroupNames {
        shaperctl::CgroupRef resolve(const std::string& path) const override
        {
            return {path == "/a/b" ? 4242u : 77u, 2};
        }
        std::string path_of(uint64_t id, uint32_t) const override { return id == 4242 ? "/a/b" : ""; }
    } names;
    const std::string text = R"({"version": 1, "devices": [{"device": "eth0", "mode": "edt",
      "fq": {"horizon": "2s", "flow_limit": 1000, "limit": 20000}, "max_classes": 64,
      "default_class": 3,
      "classes": [
        {"id": 1, "rate": "10gbit", "burst": "1mb", "overhead": 24, "mpu": "84b"},
        {"id": 2, "rate": "2.5gbit", "parent": 1, "horizon": "500ms", "aqm": "codel", "target": "1ms",
         "interval": "20ms", "ecn": false, "sparse": "off", "fair": true},
        {"id": 3, "rate": "999999bit", "parent": 2, "burst": 1500, "mpu": 0, "aqm": "off", "ecn": "on",
         "sparse": true, "fair": "off", "overhead": -64},
        {"id": 7, "rate": "64kbps", "parent": null}],
      "rules": [
        {"pref": 1, "class": 2, "src": "10.0.0.0/8", "dst": "10.2.3.4/32", "proto": "tcp", "sport": 22},
        {"pref": 2, "class": 3, "dst": "fd00::/8", "proto": 17, "dport": "5000-6000"},
        {"pref": 3, "class": 3, "cgroup": "/a/b"},
        {"pref": 4, "class": 7, "cgroup": {"id": 99, "level": 3}},
        {"pref": 5, "class": 7, "mark": 16, "priority": "0x10001", "dscp": 0, "vlan": 4094},
        {"pref": 6, "class": 1, "proto": "132", "dport": 9}]}]})";
    const auto file = shaperctl::parse_config(text, names);
    ASSERT_EQ(file.devices.size(), 1u);
    const auto& c = file.devices[0].config;
    expect_golden("edt-dump.json", shaperctl::config_json({{"eth0", c}}, names).dump(2) + "\n");
    std::string diff;
    for (const auto& step : shaperctl::plan_config({}, c))
        if (auto line = shaperctl::describe_step(step, c); !line.empty())
            diff += line + "\n";
    expect_golden("edt-diff-from-nothing.txt", diff);
}

}  // namespace
