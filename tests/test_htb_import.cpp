// import-htb: tc's JSON of a real HTB tree (tests/htb/, recorded by capture.sh) into a
// configuration file, as the operator runs it; the cases tc's output may hold beyond that tree,
// through core/htb_import.h; and the file applied to a device and dumped again (police mode:
// this kernel has no sch_fq).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/htb_import.h"
#include "core/rule_spec.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

const std::string kDir = SHAPERCTL_SOURCE_DIR "/tests/htb/";

std::string fixture_args(const std::string& suffix = "")
{
    return "--classes " + kDir + "classes" + suffix + ".json --qdiscs " + kDir + "qdiscs" + suffix +
           ".json --filters " + kDir + "filters" + suffix + ".json";
}

// What tc's tree of tests/htb/README.md leaves out, in order.
const std::string kNotes =
    "import-htb: not carried: cburst (1:20 1600b): a shaperctl class has one burst, and takes HTB's burst\n"
    "import-htb: not carried: qdisc netem 40: on class 1:40 (the class keeps shaperctl's fair shares and sparse flows)\n"
    "import-htb: rule prefs are the filters' prefs times 10 plus their place within the pref: rule prefs are "
    "unique, and filter pref 10 holds 2 filters\n"
    "import-htb: not carried: filter pref 12 flower (handle 1): no rule matches on ip_ttl\n"
    "import-htb: not carried: filter pref 13 flower (handle 1): its class 1:20 has children: HTB goes on through "
    "that class's own filters\n"
    "import-htb: not carried: filter pref 20 u32 (handle 800::800): u32's raw offsets and masks are not "
    "translated: add its rule by hand (src, dst, proto, ports)\n"
    "import-htb: not carried: HTB's classification by skb->priority (SO_PRIORITY, iptables CLASSIFY) set to a "
    "classid: where used, add rules such as \"priority\": \"1:10\"\n";

// A class's fields that the translation decides (the others keep their defaults).
json decided(const json& c)
{
    json out;
    for (const char* key : {"id", "rate", "ceil", "burst", "parent", "prio", "aqm", "target", "interval", "ecn"})
        if (c.contains(key))
            out[key] = c[key];
    return out;
}

TEST(HtbImport, TheRecordedTreeBecomesTheSameClassesRulesAndDefault)
{
    const Outcome o = shaperctl_run("import-htb --dev eth0 " + fixture_args());
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.err, kNotes);
    const json file = json::parse(o.out);
    ASSERT_EQ(file["devices"].size(), 1u);
    const json& d = file["devices"][0];
    EXPECT_EQ(d["device"], "eth0");
    EXPECT_EQ(d["mode"], "edt");
    EXPECT_EQ(d["default_class"], 30);  // htb default 30
    json classes = json::array();
    for (const json& c : d["classes"])
        classes.push_back(decided(c));
    // 1:1 at the top: no ceil. A child's ceil is kept even at its rate (1:22): it makes the rate a
    // guarantee. 1:20's prio is its borrowing leaf's (tc shows none for a class with children).
    // fq_codel: CoDel with its target, interval and ecn; sfq, pfifo and netem: none.
    EXPECT_EQ(classes, json::parse(R"([
      {"id": 1, "rate": "100mbit", "burst": "1600b", "parent": null, "aqm": "off", "target": "5ms",
       "interval": "100ms", "ecn": "on"},
      {"id": 10, "rate": "30mbit", "ceil": "100mbit", "burst": "1600b", "parent": 1, "aqm": "codel",
       "target": "2ms", "interval": "50ms", "ecn": "off"},
      {"id": 20, "rate": "50mbit", "ceil": "80mbit", "burst": "32kb", "parent": 1, "prio": 1, "aqm": "off",
       "target": "5ms", "interval": "100ms", "ecn": "on"},
      {"id": 21, "rate": "30mbit", "ceil": "80mbit", "burst": "1600b", "parent": 20, "prio": 1, "aqm": "off",
       "target": "5ms", "interval": "100ms", "ecn": "on"},
      {"id": 22, "rate": "20mbit", "ceil": "20mbit", "burst": "1600b", "parent": 20, "prio": 2, "aqm": "codel",
       "target": "5ms", "interval": "100ms", "ecn": "on"},
      {"id": 30, "rate": "15mbit", "ceil": "100mbit", "burst": "1600b", "parent": 1, "prio": 3, "aqm": "off",
       "target": "5ms", "interval": "100ms", "ecn": "on"},
      {"id": 40, "rate": "5mbit", "ceil": "10mbit", "burst": "1600b", "parent": 1, "prio": 7, "aqm": "off",
       "target": "5ms", "interval": "100ms", "ecn": "on"}])"));
    // Two flower filters share pref 10: every pref times 10, plus the place within it.
    EXPECT_EQ(d["rules"], json::parse(R"([
      {"pref": 10, "class": 21, "mark": "0x10/0xff"},
      {"pref": 20, "class": 22, "mark": "0x7/0xffffffff"},
      {"pref": 100, "class": 10, "dst": "10.1.0.0/16", "proto": "tcp", "dport": "80"},
      {"pref": 101, "class": 22, "src": "192.168.1.5/32", "proto": "udp", "sport": "1000-2000"},
      {"pref": 110, "class": 21, "dst": "2001:db8::/32"}])"));
}

TEST(HtbImport, DetailsAndStatisticsChangeNothingButNameTheQuanta)
{
    const Outcome plain = shaperctl_run("import-htb --dev eth0 " + fixture_args());
    const Outcome details = shaperctl_run("import-htb --dev eth0 " + fixture_args("-details"));
    ASSERT_EQ(details.status, 0) << details.err;
    EXPECT_EQ(details.out, plain.out);
    // -d shows the quanta: 1:10's own, and 1:21's and 1:22's clamped to 200000 below rate / 10.
    std::string notes = kNotes;
    const std::string quanta =
        "import-htb: not carried: quantum (1:10 3000, 1:21 200000, 1:22 200000): shaperctl splits a parent's "
        "spare in proportion to the borrowers' rates, as HTB does with its default quantum, rate / r2q\n";
    notes.insert(notes.find("import-htb: not carried: qdisc netem"), quanta);
    EXPECT_EQ(details.err, notes);
}

// iproute2 6.1.0 (Debian 12's) writes the classes as text, and fw's options as text in the JSON:
// the same tree makes the same file. It truncates a burst to whole microseconds at the class's
// rate where it sets it and where it writes it (exact from 6.15 on): 1593b for 1:10's and 1:21's
// 1600b at 30mbit, 1597b for 1:30's at 15mbit, taken as written; their cbursts of 1600b are not
// noted.
TEST(HtbImport, Iproute2_6_1sTextMakesTheSameFile)
{
    const std::string old = kDir + "iproute2-6.1/";
    const Outcome newer = shaperctl_run("import-htb --dev eth0 " + fixture_args());
    const Outcome plain = shaperctl_run("import-htb --dev eth0 --classes " + old + "classes.json --qdiscs " + old +
                                        "qdiscs.json --filters " + old + "filters.json");
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_EQ(plain.err, kNotes);
    json file = json::parse(plain.out);
    for (auto& c : file["devices"][0]["classes"]) {
        const std::map<int, std::string> short_bursts = {{10, "1593b"}, {21, "1593b"}, {30, "1597b"}};
        const auto b = short_bursts.find(c["id"].get<int>());
        EXPECT_EQ(c["burst"], b == short_bursts.end() ? c["burst"] : json(b->second)) << c;
        if (b != short_bursts.end())
            c["burst"] = "1600b";
    }
    EXPECT_EQ(file, json::parse(newer.out));
    // tc -s -d -j class show: statistics under each line, and the quanta (the same note as the
    // JSON's); through stdin, as an operator pipes it.
    const Outcome details = shaperctl_run("import-htb --dev eth0 --classes - --qdiscs " + old +
                                          "qdiscs-details.json --filters " + old + "filters-details.json < " + old +
                                          "classes-details.json");
    ASSERT_EQ(details.status, 0) << details.err;
    EXPECT_EQ(details.out, plain.out);
    EXPECT_EQ(details.err, shaperctl_run("import-htb --dev eth0 " + fixture_args("-details")).err);
}

TEST(HtbImport, OneOutputFromStdinAndTheModeGiven)
{
    const Outcome file = shaperctl_run("import-htb --dev eth0 --classes " + kDir + "classes.json");
    const Outcome in = shaperctl_run("import-htb --dev eth0 --classes - < " + kDir + "classes.json");
    ASSERT_EQ(in.status, 0) << in.err;
    EXPECT_EQ(in.out, file.out);
    EXPECT_NE(in.err.find("import-htb: not carried: the default class and leaf qdiscs (no --qdiscs)\n"),
              std::string::npos) << in.err;
    EXPECT_NE(in.err.find("import-htb: not carried: filters (no --filters): the file has no rules\n"),
              std::string::npos) << in.err;
    const Outcome police = shaperctl_run("import-htb --dev eth0 --mode police " + fixture_args());
    ASSERT_EQ(police.status, 0) << police.err;
    const json d = json::parse(police.out)["devices"][0];
    EXPECT_EQ(d["mode"], "police");
    EXPECT_FALSE(d.contains("fq"));
    EXPECT_EQ(d["classes"][0]["horizon"], "5ms");
}

TEST(HtbImport, BadInputIsRefusedInOneLine)
{
    const std::string c = " --classes " + kDir + "classes.json";
    // A class line without its ceil; fw's text followed by police's members and more text.
    const std::string text = "/tmp/shaperctl-test-htb-text-" + std::to_string(getpid());
    const std::string fw = "/tmp/shaperctl-test-htb-fw-" + std::to_string(getpid());
    write_file(text, "class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b \n"
                     " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n"
                     "class htb 1:22 parent 1:1 leaf 22: prio 2 rate 20Mbit burst 1600b cburst 1600b \n");
    write_file(fw, R"([{"parent":"1:","protocol":"all","pref":1,"kind":"fw","chain":0,"options":{handle 0x1 )"
                   R"(classid 1:22 "kind":"police","index":1,"ref":1,"bind":1input dev eth1 }}])");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--dev eth0 --classes " + text,
         "--classes " + text + ": line 3: no ceil: \"class htb 1:22 parent 1:1 leaf 22: prio 2 rate 20Mbit burst "
         "1600b cburst 1600b\""},
        {"--dev eth0" + c + " --filters " + fw, "not JSON: at line 1, column 76: "},
        {"--dev eth0" + c + " --filters " + fw,
         "(iproute2 before 6.8 writes fw filters' options as text in the JSON, read where it holds a handle, a "
         "classid and an input dev"},
        {"--dev eth0" + c + " --qdiscs " + kDir + "iproute2-6.1/classes.json",
         "tc's text, not its JSON (expected the JSON of tc -j qdisc show dev DEV)"},
        {"--dev eth0 --classes /nonexistent.json", "--classes: cannot read /nonexistent.json: No such file"},
        {"--dev eth0 --classes " + kDir + "qdiscs.json", "no HTB class (expected the output of tc -j class show"},
        {"--dev eth0 --classes - --filters - < /dev/null", "only one of --classes, --qdiscs and --filters"},
        {"--dev eth0 --classes - < /dev/null", "--classes -: empty (expected the JSON of tc -j class show"},
        {"--dev eth0" + c + " --qdiscs " + kDir + "filters.json",
         "--qdiscs " + kDir + "filters.json: no HTB qdisc (are the outputs of one device?)"},
        {"--dev eth0" + c + " --mode fast", "bad mode \"fast\""},
        {"--dev a/b" + c, "bad device name \"a/b\""},
        {c.substr(1), "--dev is required"},
    };
    for (const auto& [args, needle] : cases) {
        const Outcome o = shaperctl_run("import-htb " + args);
        EXPECT_NE(o.status, 0) << args;
        EXPECT_EQ(o.out, "") << args;
        EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\nsaid: " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << "\nsaid: " << o.err;
    }
    std::remove(text.c_str());
    std::remove(fw.c_str());
}

// The recorded outputs, edited as other setups would show them, through the library.
struct Recorded {
    json classes = json::parse(read_file(kDir + "classes.json"));
    json qdiscs = json::parse(read_file(kDir + "qdiscs.json"));
    json filters = json::parse(read_file(kDir + "filters.json"));

    json& cls(const std::string& handle)
    {
        for (json& c : classes)
            if (c["handle"] == handle)
                return c;
        throw std::runtime_error("no class " + handle);
    }
    shaperctl::HtbImport run() const
    {
        return shaperctl::import_htb({"classes", classes.dump()}, shaperctl::TcOutput{"qdiscs", qdiscs.dump()},
                                     shaperctl::TcOutput{"filters", filters.dump()}, SHAPER_MODE_EDT);
    }
    std::string refusal() const
    {
        try {
            run();
        } catch (const shaperctl::Error& e) {
            return e.what();
        }
        return "";
    }
};

bool noted(const shaperctl::HtbImport& r, const std::string& text)
{
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n == text; });
}

const shaperctl::ClassSpec& spec(const shaperctl::HtbImport& r, uint32_t id)
{
    for (const auto& c : r.config.classes)
        if (c.id == id)
            return c;
    throw std::runtime_error("no class " + std::to_string(id));
}

TEST(HtbImport, CeilsAtTheTopAndBelowTheRate)
{
    Recorded t;
    t.cls("1:1")["ceil"] = 25'000'000;  // 200mbit: HTB lends a class at the top nothing
    t.cls("1:30")["ceil"] = 1'250'000;  // 10mbit, under its rate of 15mbit
    const auto r = t.run();
    EXPECT_EQ(spec(r, 1).rate_bps, 100'000'000u);
    EXPECT_EQ(spec(r, 1).ceil_bps, 0u);
    EXPECT_TRUE(noted(r, "not carried: class 1:1's ceil 200mbit: a class at the top cannot borrow, in HTB as in "
                         "shaperctl; its rate 100mbit is its cap")) << r.notes[0];
    EXPECT_EQ(spec(r, 30).rate_bps, 10'000'000u);
    EXPECT_EQ(spec(r, 30).ceil_bps, 10'000'000u);
    EXPECT_TRUE(noted(r, "class 1:30: its ceil 10mbit is below its rate 15mbit, which HTB caps at the ceil: rate 10mbit"));
}

TEST(HtbImport, MinorsWithHexDigitsAreTheirValuesAndLargeIdsSizeTheDevice)
{
    Recorded t;
    t.cls("1:40")["handle"] = "1:ffff";
    t.qdiscs[4]["parent"] = "1:ffff";  // netem's
    const auto r = t.run();
    EXPECT_TRUE(noted(r, "class ids are the HTB minors' values (1:1a is class 26): some minors are not decimal digits"));
    EXPECT_EQ(spec(r, 0x21).parent, 0x20u);
    EXPECT_EQ(spec(r, 0xffff).rate_bps, 5'000'000u);
    EXPECT_EQ(r.config.default_class, 0x30u);
    EXPECT_EQ(r.config.max_classes, 0x10000u);
    EXPECT_TRUE(noted(r, "not carried: qdisc netem 40: on class 1:ffff (the class keeps shaperctl's fair shares and sparse flows)"));
}

TEST(HtbImport, ADefaultThatIsNoLeafLeavesUnclassifiedPacketsUnshaped)
{
    Recorded t;
    t.qdiscs[0]["options"]["default"] = "0x20";
    auto r = t.run();
    EXPECT_EQ(r.config.default_class, 0u);
    EXPECT_TRUE(noted(r, "not carried: the default 1:20, a class with children: HTB sends unclassified packets "
                         "unshaped, as shaperctl without a default class"));
    t.qdiscs[0]["options"]["default"] = "0";
    r = t.run();
    EXPECT_EQ(r.config.default_class, 0u);
    EXPECT_FALSE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("default") != std::string::npos; }));
}

TEST(HtbImport, FiltersCarriedAndNot)
{
    Recorded t;
    // Prefs apart, so that they are kept as they are; a flower of tc's protocol ip without an
    // address, a number for a protocol, another filter's place, and a filter with actions.
    json filters = json::array();
    const auto flower = [](int pref, const std::string& protocol, const json& options) {
        return json{{"parent", "1:"}, {"protocol", protocol}, {"pref", pref}, {"kind", "flower"}, {"chain", 0},
                    {"options", options}};
    };
    filters.push_back(flower(3, "ip", {{"handle", 1}, {"classid", "1:21"}, {"keys", {{"ip_proto", "udp"}, {"dst_port", 53}}}}));
    filters.push_back(flower(4, "ipv6", {{"handle", 1}, {"classid", "1:22"}, {"keys", {{"ip_proto", "2f"}}}}));
    filters.push_back(flower(5, "all", {{"handle", 1}, {"classid", "1:10"}, {"keys", {{"ip_proto", "tcp"}}},
                                        {"actions", json::array({{{"kind", "gact"}}})}}));
    json elsewhere = flower(6, "ip", {{"handle", 1}, {"classid", "1:21"}, {"keys", {{"ip_proto", "tcp"}}}});
    elsewhere["parent"] = "1:20";
    filters.push_back(elsewhere);
    filters.push_back(flower(7, "arp", {{"handle", 1}, {"classid", "1:21"}}));
    filters.push_back(flower(8, "ip", {{"handle", 1}, {"classid", "1:99"}, {"keys", {{"ip_proto", "tcp"}}}}));
    filters.push_back(flower(9, "ip", {{"handle", 1}, {"classid", "1:"}, {"keys", {{"ip_proto", "tcp"}}}}));
    json chained = flower(11, "ip", {{"handle", 1}, {"classid", "1:21"}, {"keys", {{"ip_proto", "tcp"}}}});
    chained["chain"] = 1;
    filters.push_back(chained);
    filters.push_back(
        flower(12, "ip", {{"handle", 1}, {"classid", "1:21"}, {"indev", "eth1"}, {"keys", {{"ip_proto", "tcp"}}}}));
    // fw writes police's members among its options.
    filters.push_back({{"parent", "1:"}, {"protocol", "all"}, {"pref", 14}, {"kind", "fw"}, {"chain", 0},
                       {"options", {{"fw", {{"mark", "0x3"}, {"mask", "0xffffffff"}}}, {"classid", "1:22"},
                                    {"kind", "police"}, {"index", 1}}}});
    t.filters = filters;
    const auto r = t.run();
    ASSERT_EQ(r.config.rules.size(), 4u);
    EXPECT_EQ(shaperctl::format_rule_match(r.config.rules[3]), "mark 0x3/0xffffffff");
    EXPECT_TRUE(noted(r, "not carried: the police of filter pref 14 fw (its rule 14 only classifies)"));
    EXPECT_EQ(shaperctl::format_rule_match(r.config.rules[0]), "src 0.0.0.0/0 proto udp dport 53");
    EXPECT_EQ(r.config.rules[0].pref, 3u);
    EXPECT_EQ(shaperctl::format_rule_match(r.config.rules[1]), "src ::/0 proto gre");
    EXPECT_EQ(shaperctl::format_rule_match(r.config.rules[2]), "proto tcp");
    EXPECT_TRUE(noted(r, "not carried: the actions of filter pref 5 flower (handle 1) (its rule 5 only classifies)"));
    for (const char* why : {"filter pref 6 flower (handle 1): it is attached to 1:20, not to the HTB qdisc 1:",
                            "filter pref 7 flower (handle 1): protocol arp",
                            "filter pref 8 flower (handle 1): its class 1:99 does not exist (HTB sends those "
                            "packets to the default class)",
                            "filter pref 9 flower (handle 1): it sends to 1:, HTB's direct queue (unshaped)",
                            "filter pref 11 flower (handle 1): chain 1 (reached by goto actions)",
                            "filter pref 12 flower (handle 1): input dev eth1: a rule does not match on the device "
                            "packets came in on"})
        EXPECT_TRUE(noted(r, std::string("not carried: ") + why)) << why;
    EXPECT_FALSE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.starts_with("rule prefs"); }));
}

TEST(HtbImport, TreesThatCannotBeMappedAreRefused)
{
    Recorded slow;
    slow.cls("1:30")["rate"] = 500;  // 4kbit
    EXPECT_EQ(slow.refusal(), "classes: class 1:30: rate 4kbit is beyond shaperctl's 8kbit to 400gbit");
    Recorded orphan;
    orphan.classes.erase(3);  // 1:20
    EXPECT_EQ(orphan.refusal(), "classes: class 1:21's parent 1:20 is not listed");
    Recorded loop;
    loop.cls("1:20")["parent"] = "1:21";
    EXPECT_EQ(loop.refusal(), "classes: class 1:20's parents form a loop");
    Recorded no_rate;
    no_rate.cls("1:22").erase("rate");
    EXPECT_EQ(no_rate.refusal(), "classes: class 1:22: no \"rate\"");
    Recorded two;
    two.classes.push_back({{"class", "htb"}, {"handle", "2:1"}, {"root", true}, {"rate", 1000}, {"ceil", 1000}});
    two.qdiscs = json::array();
    EXPECT_EQ(two.refusal(), "qdiscs: no HTB qdisc (are the outputs of one device?)");
    // Without the qdiscs, which HTB qdisc is meant cannot be told.
    try {
        shaperctl::import_htb({"classes", two.classes.dump()}, std::nullopt, std::nullopt, SHAPER_MODE_EDT);
        ADD_FAILURE() << "two HTB qdiscs' classes were taken";
    } catch (const shaperctl::Error& e) {
        EXPECT_STREQ(e.what(), "classes: classes of 2 HTB qdiscs; import-htb maps one tree (give --qdiscs, whose "
                               "root HTB qdisc is then taken)");
    }
}

// tc's text of classes beyond the recorded tree: tc class show without dev (each line names it),
// -r's raw ticks, -i's binary rates, atm, overhead and mpu; fq_codel's and sfq's classes (their
// flows) and -s's statistics under a line are passed over.
TEST(HtbImport, ClassLinesAsTcWritesThem)
{
    const std::string text =
        "class htb 1:1 dev h0 root rate 1Gbit ceil 1Gbit linklayer atm burst 1Mb/1 mpu 64b cburst 1Mb/1 mpu 0b "
        "level 7 buffer [0000c350] cbuffer [00000c80] \n"
        " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n"
        "class htb 1:2 dev h0 parent 1:1 leaf 8001: prio 3 quantum 163840 rate 12800Kibit overhead 24 ceil 1Gbit "
        "burst 15Kb cburst 15Kb \n"
        "class fq_codel 8001:2c7 dev h0 parent 8001: \n"
        "  deficit 1234 count 0 lastcount 0 ldelay 2us\n"
        "class sfq 8002:1 dev h0 parent 8002: \n";
    const auto r = shaperctl::import_htb({"classes", text}, std::nullopt, std::nullopt, SHAPER_MODE_EDT);
    ASSERT_EQ(r.config.classes.size(), 2u);
    EXPECT_EQ(spec(r, 1).rate_bps, 1'000'000'000u);
    EXPECT_EQ(spec(r, 1).burst_bytes, 1u << 20);
    EXPECT_EQ(spec(r, 1).mpu, 64u);
    EXPECT_TRUE(noted(r, "not carried: class 1:1's linklayer atm (cells are not counted; overhead is)"));
    EXPECT_EQ(spec(r, 2).parent, 1u);
    EXPECT_EQ(spec(r, 2).rate_bps, 12800u * 1024);
    EXPECT_EQ(spec(r, 2).ceil_bps, 1'000'000'000u);
    EXPECT_EQ(spec(r, 2).burst_bytes, 15u * 1024);
    EXPECT_EQ(spec(r, 2).overhead, 24);
    EXPECT_EQ(spec(r, 2).prio, 3u);
    EXPECT_FALSE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
        return n.find("cburst") != std::string::npos || n.find("quantum") != std::string::npos;
    })) << r.notes[0];
}

TEST(HtbImport, AMalformedClassLineIsRefusedQuoted)
{
    const std::string root = "class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"class htb 1:22 parent 1:1 prio 2 rate 20Mbps ceil 20Mbit", "bad rate \"20Mbps\" (tc writes e.g. 30Mbit)"},
        {"class htb 1:22 parent 1:1 rate 20Mbit", "no ceil"},
        {"class htb 1:22 rate 20Mbit ceil 20Mbit", "neither root nor a parent"},
        {"class htb 1:22 root parent 1:1 rate 20Mbit ceil 20Mbit", "parent twice, or with root"},
        {"class htb 1:22 parent 1:1 prio two rate 20Mbit ceil 20Mbit", "bad prio \"two\""},
        {"class htb 1:22 parent 1:1 rate 20Mbit ceil 20Mbit colour blue", "unknown \"colour\""},
        {"class htb 1:22 parent 1:1 rate 20Mbit ceil", "no value after ceil"},
        {"class htb 1:zz parent 1:1 rate 20Mbit ceil 20Mbit", "bad class handle \"1:zz\""},
        {"class htb 1:22 parent 1:1 rate 20Mbit ceil 20Mbit burst 1600q",
         "bad size \"1600q\": unknown unit \"q\" (use b, k, kb, kib, m, mb, mib, g, gb, gib, kbit, mbit, gbit)"},
        {"qdisc htb 1: root refcnt 2 r2q 10 default 0x30", "not a class as tc class show writes it"},
    };
    for (const auto& [line, why] : cases) {
        try {
            shaperctl::import_htb({"classes", root + line + " \n"}, std::nullopt, std::nullopt, SHAPER_MODE_EDT);
            ADD_FAILURE() << "taken: " << line;
        } catch (const shaperctl::Error& e) {
            EXPECT_EQ(std::string(e.what()), "classes: line 2: " + why + ": \"" + line + "\"");
        }
    }
}

// fw's options as iproute2 before 6.8 writes them: text, then the JSON of actions or police.
TEST(HtbImport, FwOptionsInText)
{
    const std::string old = kDir + "iproute2-6.1/";
    const auto fw = [](int pref, const std::string& options) {
        return R"({"parent":"1:","protocol":"all","pref":)" + std::to_string(pref) +
               R"(,"kind":"fw","chain":0,"options":{)" + options + "}}";
    };
    const std::string filters =
        "[" + fw(1, "handle 0x5 classid 1:21 input dev eth1 ") + "," +
        fw(2, "handle 0x6/0xf classid 1:22 \n\"actions\":[{\"order\":1,\"kind\":\"gact\"}]") + "," +
        fw(3, R"(handle 0x8 classid 1:10 "kind":"police","index":1,"control_action":{"type":"drop"},"bind":1)") + "," +
        fw(4, "handle 0x9 classid 1:30 odd words ") + "," + fw(5, "classid 1:40 ") + "]";
    const auto r = shaperctl::import_htb({"classes", read_file(old + "classes.json")},
                                         shaperctl::TcOutput{"qdiscs", read_file(old + "qdiscs.json")},
                                         shaperctl::TcOutput{"filters", filters}, SHAPER_MODE_EDT);
    ASSERT_EQ(r.config.rules.size(), 2u);
    EXPECT_EQ(shaperctl::format_rule_match(r.config.rules[0]), "mark 0x6/0xf");
    EXPECT_EQ(r.config.rules[0].class_id, 22u);
    EXPECT_EQ(shaperctl::format_rule_match(r.config.rules[1]), "mark 0x8/0xffffffff");
    EXPECT_EQ(r.config.rules[1].class_id, 10u);
    for (const char* note :
         {"filter pref 1 fw: input dev eth1: a rule does not match on the device packets came in on",
          "the actions of filter pref 2 fw (its rule 2 only classifies)",
          "the police of filter pref 3 fw (its rule 3 only classifies)",
          "filter pref 4 fw: its options as tc wrote them in text hold \"odd words\": add its rule by hand",
          "filter pref 5 fw: fw without a mark"})
        EXPECT_TRUE(noted(r, std::string("not carried: ") + note)) << note;
}

class HtbImportApply : public DeviceTest {};

TEST_F(HtbImportApply, TheFileAppliesAndDumpsAsImported)
{
    const Outcome o = shaperctl_run("import-htb --dev sh0 --mode police " + fixture_args());
    ASSERT_EQ(o.status, 0) << o.err;
    const std::string path = "/tmp/shaperctl-test-htb-" + std::to_string(getpid()) + ".json";
    write_file(path, o.out);
    const Outcome applied = sh("apply -f " + path);
    ASSERT_EQ(applied.status, 0) << applied.err;
    EXPECT_NE(applied.out.find("+ class 22 rate 20mbit ceil 20mbit"), std::string::npos) << applied.out;
    const Outcome dumped = sh("dump --dev sh0");
    ASSERT_EQ(dumped.status, 0) << dumped.err;
    const json imported = json::parse(o.out)["devices"][0], live = json::parse(dumped.out)["devices"][0];
    EXPECT_EQ(live["classes"], imported["classes"]);
    EXPECT_EQ(live["rules"], imported["rules"]);
    EXPECT_EQ(live["default_class"], 30);
    EXPECT_EQ(sh("apply -f " + path).out, "no changes\n");
    std::remove(path.c_str());
}

}  // namespace
