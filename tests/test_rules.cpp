// Classification rules through BPF_PROG_TEST_RUN with crafted packets: every matcher, precedence,
// fragments, VLAN tags, 10,000 rules, and atomic rule-set switches under traffic.
#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>
#include <thread>

#include "core/class_config.h"
#include "core/error.h"
#include "loader/map_batch.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "loader/rules.h"
#include "packets.h"
#include "rule_args.h"
#include "program_cache.h"
#include "rule_generation.h"

using namespace shaperctl;
using namespace shaperctl::test;

namespace {

constexpr uint32_t kClasses = 8;

class Rules : public ::testing::Test {
protected:
    void SetUp() override
    {
        program_ = &fresh_program({});
        maps_ = std::make_unique<ShaperMaps>(ShaperMaps::of(*program_));
        shaper_settings settings{};
        settings.abi_version = SHAPER_ABI_VERSION;
        maps_->set_settings(settings);
        for (uint32_t id = 1; id <= kClasses; id++)
            maps_->write_class_config(id, make_class_config({.id = id, .rate_bps = 400'000'000'000ull},
                                                            maps_->max_classes(), 2'000'000'000));
    }

    // The rule as a user would type it: "--pref 10 --class 2 --dst 10.1.0.0/16 ...".
    void rule(uint32_t pref, uint32_t class_id, RuleArgs args)
    {
        args.pref = std::to_string(pref);
        args.class_id = std::to_string(class_id);
        add_rule(*maps_, parse_rule(args));
    }

    int run_frame(const std::vector<uint8_t>& frame, uint32_t mark = 0, uint32_t priority = 0,
                  int repeat = 1)
    {
        __sk_buff ctx{};
        ctx.mark = mark;
        ctx.priority = priority;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                    .data_size_in = uint32_t(frame.size()), .ctx_in = &ctx,
                    .ctx_size_in = sizeof ctx, .repeat = repeat);
        EXPECT_EQ(bpf_prog_test_run_opts(program_->prog_fd(), &opts), 0) << strerror(errno);
        return int(opts.duration);
    }

    // The class the packet was charged to; 0 when it went unclassified.
    uint32_t class_of(const PacketSpec& spec, uint32_t mark = 0, uint32_t priority = 0)
    {
        std::vector<uint64_t> before;
        for (uint32_t id = 0; id <= kClasses; id++)
            before.push_back(maps_->counters(id).packets);
        run_frame(build_frame(spec), mark, priority);
        for (uint32_t id = 0; id <= kClasses; id++)
            if (maps_->counters(id).packets != before[id])
                return id;
        ADD_FAILURE() << "no class counted the packet";
        return 99;
    }

    Program* program_ = nullptr;  // fresh_program(): loaded once, emptied for each test
    std::unique_ptr<ShaperMaps> maps_;
};

TEST_F(Rules, Ipv4AndIpv6Prefixes)
{
    rule(10, 2, {.dst = "10.1.0.0/16"});
    rule(20, 3, {.src = "2001:db8:1::/48"});
    rule(30, 4, {.dst = "192.168.7.9"});
    EXPECT_EQ(class_of({.dst = "10.1.200.3"}), 2u);
    EXPECT_EQ(class_of({.dst = "10.2.0.1"}), 0u);
    EXPECT_EQ(class_of({.src = "2001:db8:1:ffff::1", .dst = "2001:db8:9::1"}), 3u);
    EXPECT_EQ(class_of({.src = "2001:db8:2::1", .dst = "2001:db8:9::1"}), 0u);
    EXPECT_EQ(class_of({.dst = "192.168.7.9"}), 4u);
    EXPECT_EQ(class_of({.dst = "192.168.7.8"}), 0u);
}

TEST_F(Rules, ProtocolsAndPortRanges)
{
    rule(10, 2, {.proto = "tcp", .dport = "8000-8100"});
    rule(20, 3, {.proto = "udp", .sport = "53"});
    rule(30, 4, {.proto = "icmp"});
    rule(40, 5, {.proto = "icmpv6"});
    rule(50, 6, {.dport = "8050-9000"});
    EXPECT_EQ(class_of({.proto = 6, .dport = 8000}), 2u);
    EXPECT_EQ(class_of({.proto = 6, .dport = 8100}), 2u);
    EXPECT_EQ(class_of({.proto = 6, .dport = 8101}), 6u);  // the overlapping range, later pref
    EXPECT_EQ(class_of({.proto = 17, .dport = 8050}), 6u);
    EXPECT_EQ(class_of({.proto = 6, .dport = 7999}), 0u);
    EXPECT_EQ(class_of({.proto = 17, .sport = 53, .dport = 1}), 3u);
    EXPECT_EQ(class_of({.proto = 6, .sport = 53, .dport = 1}), 0u);
    EXPECT_EQ(class_of({.proto = 1}), 4u);
    EXPECT_EQ(class_of({.src = "fe80::1", .dst = "ff02::1", .proto = 58}), 5u);
}

TEST_F(Rules, LowestPrefWinsWhateverTheShape)
{
    rule(10, 2, {.dst = "10.0.0.0/8"});
    rule(5, 3, {.proto = "tcp", .dport = "443"});
    EXPECT_EQ(class_of({.dst = "10.9.9.9", .dport = 443}), 3u);
    EXPECT_EQ(class_of({.dst = "10.9.9.9", .dport = 80}), 2u);
    del_rule(*maps_, 5);
    rule(50, 3, {.proto = "tcp", .dport = "443"});
    EXPECT_EQ(class_of({.dst = "10.9.9.9", .dport = 443}), 2u);
    EXPECT_EQ(class_of({.dst = "11.0.0.1", .dport = 443}), 3u);
}

// The datapath caches each flow's classification (bpf/classify.h): a cached answer must never
// outlive the rule set it came from, nor serve a packet that differs in any matched field.
TEST_F(Rules, CachedClassificationsFollowEveryRuleChange)
{
    const PacketSpec flow{.dst = "10.1.2.3", .dport = 80};
    rule(10, 2, {.dst = "10.1.0.0/16"});
    EXPECT_EQ(class_of(flow), 2u);
    EXPECT_EQ(class_of(flow), 2u);  // from the cache
    del_rule(*maps_, 10);
    EXPECT_EQ(class_of(flow), 0u);
    rule(10, 3, {.dst = "10.1.0.0/16"});
    EXPECT_EQ(class_of(flow), 3u);
    rule(5, 4, {.dport = "1-100"});
    EXPECT_EQ(class_of(flow), 4u);
    // A later fragment of the flow has no ports: another key.
    EXPECT_EQ(class_of({.dst = "10.1.2.3", .later_fragment = true}), 3u);
    EXPECT_EQ(class_of(flow), 4u);
    // The mark is part of the key.
    rule(1, 5, {.mark = "7"});
    EXPECT_EQ(class_of(flow, 7), 5u);
    EXPECT_EQ(class_of(flow, 0), 4u);
}

TEST_F(Rules, RulesAreConjunctions)
{
    rule(10, 2, {.src = "10.0.0.0/24", .dst = "10.0.1.0/24", .proto = "udp", .dport = "5000-5010"});
    EXPECT_EQ(class_of({.src = "10.0.0.7", .dst = "10.0.1.7", .proto = 17, .dport = 5005}), 2u);
    EXPECT_EQ(class_of({.src = "10.0.0.7", .dst = "10.0.2.7", .proto = 17, .dport = 5005}), 0u);
    EXPECT_EQ(class_of({.src = "10.0.0.7", .dst = "10.0.1.7", .proto = 6, .dport = 5005}), 0u);
    EXPECT_EQ(class_of({.src = "10.0.0.7", .dst = "10.0.1.7", .proto = 17, .dport = 5011}), 0u);
}

TEST_F(Rules, MarkPriorityDscpAndVlan)
{
    rule(10, 2, {.mark = "0x100/0xff00"});
    rule(20, 3, {.priority = "1:10"});
    rule(30, 4, {.dscp = "46"});
    rule(40, 5, {.vlan = "100"});
    EXPECT_EQ(class_of({}, 0x1ff), 2u);
    EXPECT_EQ(class_of({}, 0x2ff), 0u);
    EXPECT_EQ(class_of({}, 0, 0x10010), 3u);
    EXPECT_EQ(class_of({}, 0, 0x10011), 0u);
    EXPECT_EQ(class_of({.dscp = 46}), 4u);
    EXPECT_EQ(class_of({.src = "2001:db8::1", .dst = "2001:db8::2", .dscp = 46}), 4u);
    EXPECT_EQ(class_of({.dscp = 45}), 0u);
    EXPECT_EQ(class_of({.vlans = {100}}), 5u);
    EXPECT_EQ(class_of({.vlans = {100, 7}}), 5u);  // QinQ: the outer tag counts
    EXPECT_EQ(class_of({.vlans = {7, 100}}), 0u);
    EXPECT_EQ(class_of({.vlans = {101}}), 0u);
}

TEST_F(Rules, Ipv4In8021QAndQinQStillMatchesAddressesAndPorts)
{
    rule(10, 2, {.dst = "10.5.0.0/16", .proto = "tcp", .dport = "22"});
    EXPECT_EQ(class_of({.dst = "10.5.1.1", .dport = 22, .vlans = {42}}), 2u);
    EXPECT_EQ(class_of({.dst = "10.5.1.1", .dport = 22, .vlans = {42, 43}}), 2u);
    EXPECT_EQ(class_of({.dst = "10.5.1.1", .dport = 23, .vlans = {42, 43}}), 0u);
}

// The datapath parses the common shapes inline and the rest out of line: both must read the
// same fields.
TEST_F(Rules, Ipv4OptionsAndIpv6ExtensionHeadersMatchLikePlainHeaders)
{
    rule(10, 2, {.src = "10.1.0.0/16", .dst = "10.5.0.0/16", .proto = "udp", .dport = "53",
                 .dscp = "46"});
    rule(20, 3, {.dst = "2001:db8::/32", .proto = "tcp", .dport = "443", .dscp = "10"});
    const PacketSpec v4{.src = "10.1.2.3", .dst = "10.5.1.1", .proto = 17, .dport = 53, .dscp = 46};
    const PacketSpec v6{.src = "2001:db8::1", .dst = "2001:db8::2", .dport = 443, .dscp = 10};
    for (uint8_t words : {0, 1, 10}) {
        PacketSpec p = v4;
        p.ipv4_option_words = words;
        EXPECT_EQ(class_of(p), 2u) << int(words) << " option words";
        p.dport = 54;
        EXPECT_EQ(class_of(p), 0u) << int(words) << " option words";
    }
    for (bool hop : {false, true}) {
        PacketSpec p = v6;
        p.ipv6_hop_by_hop = hop;
        EXPECT_EQ(class_of(p), 3u) << "hop-by-hop " << hop;
        p.dscp = 11;
        EXPECT_EQ(class_of(p), 0u) << "hop-by-hop " << hop;
        p.dscp = 10;
        p.vlans = {7};
        EXPECT_EQ(class_of(p), 3u) << "hop-by-hop " << hop << " in a VLAN";
    }
}

TEST_F(Rules, FragmentsMatchPortsOnlyOnTheFirst)
{
    rule(10, 2, {.proto = "udp", .dport = "4789"});
    rule(20, 3, {.dst = "10.0.0.2"});
    EXPECT_EQ(class_of({.proto = 17, .dport = 4789, .first_fragment = true}), 2u);
    EXPECT_EQ(class_of({.proto = 17, .dport = 4789, .later_fragment = true}), 3u);
    rule(30, 4, {.dst = "2001:db8::2"});
    EXPECT_EQ(class_of({.src = "2001:db8::1", .dst = "2001:db8::2", .proto = 17, .dport = 4789,
                        .first_fragment = true}), 2u);  // rule 10's ports are there
    EXPECT_EQ(class_of({.src = "2001:db8::1", .dst = "2001:db8::2", .proto = 17, .dport = 4789,
                        .later_fragment = true}), 4u);
}

TEST_F(Rules, NoMatchGoesToTheDefaultClassAndHitsAreCounted)
{
    rule(10, 2, {.dst = "10.9.0.0/16"});
    shaper_settings settings = maps_->settings();
    settings.default_class = 7;
    maps_->set_settings(settings);
    EXPECT_EQ(class_of({.dst = "10.8.0.1"}), 7u);
    EXPECT_EQ(class_of({.dst = "10.9.0.1"}), 2u);
    EXPECT_EQ(class_of({.dst = "10.9.0.2"}), 2u);
    auto rules = maps_->rules();
    ASSERT_EQ(rules.size(), 1u);
    EXPECT_EQ(maps_->rule_counters(rules[0].first).packets, 2u);
    EXPECT_EQ(maps_->rule_counters(rules[0].first).bytes, 128u);
}

TEST_F(Rules, BadRulesAreRefusedAndChangeNothing)
{
    rule(10, 2, {.dst = "10.0.0.0/8"});
    const auto before = maps_->rules();
    const std::vector<std::pair<RuleArgs, std::string>> cases = {
        {{.dst = "10.0.0.1/8"}, "host bits set (did you mean 10.0.0.0/8?)"},
        {{.dst = "10.0.0.0/33"}, "prefix length"},
        {{.dst = "10.0.0"}, "not an IPv4 or IPv6 address"},
        {{.src = "2001:db8::1/32"}, "did you mean 2001:db8::/32"},
        {{.src = "10.0.0.0/8", .dst = "2001:db8::/32"}, "must both be IPv4 or both IPv6"},
        {{.dport = "0"}, "ports are 1 to 65535"},
        {{.dport = "65536"}, "out of range"},
        {{.dport = "90-80"}, "reversed range"},
        {{.proto = "tcpp"}, "bad protocol \"tcpp\""},
        {{.proto = "icmp", .dport = "80"}, "ports only exist"},
        {{.mark = "/0xff"}, "mask without a value"},
        {{.mark = "0x100/0xff"}, "bits outside the mask"},
        {{.cgroup = "/no/such/cgroup-shaperctl"}, "does not exist"},
        {{.dscp = "64"}, "dscp"},
        {{.vlan = "4095"}, "vlan"},
        {{}, "use set-default"},
    };
    for (const auto& [args, needle] : cases) {
        RuleArgs a = args;
        a.pref = "20";
        a.class_id = "3";
        try {
            add_rule(*maps_, parse_rule(a));
            ADD_FAILURE() << "accepted: " << needle;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
        }
    }
    try {
        rule(10, 3, {.dst = "11.0.0.0/8"});
        ADD_FAILURE() << "duplicate pref accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("pref 10 exists"), std::string::npos) << e.what();
    }
    EXPECT_EQ(maps_->rules().size(), before.size());
    EXPECT_EQ(class_of({.dst = "10.1.1.1"}), 2u);
}

TEST_F(Rules, TooManyShapesAreRefused)
{
    for (unsigned plen = 8; plen < 8 + SHAPER_MAX_TUPLES; plen++)
        rule(plen, 2, {.dst = "10.0.0.0/" + std::to_string(plen)});
    EXPECT_THROW(rule(100, 2, {.dst = "10.0.0.0/30"}), Error);
    EXPECT_EQ(maps_->rules().size(), size_t(SHAPER_MAX_TUPLES));
}

// The compiler alone: index entries are the distinct keys, in key order, each kept by the lowest
// pref that reaches it; port ranges whose cross product outgrows the index are refused.
TEST(RuleCompiler, IndexEntriesAreDistinctKeysEachWithItsLowestPref)
{
    auto compiled = [](uint32_t pref, uint32_t class_id, RuleArgs args) {
        args.pref = std::to_string(pref);
        args.class_id = std::to_string(class_id);
        return compile_rule(parse_rule(args));
    };
    auto in_key_order = [](const CompiledRules& set) {
        return std::is_sorted(set.entries.begin(), set.entries.end(), [](const auto& a, const auto& b) {
            return std::memcmp(&a.first, &b.first, sizeof a.first) < 0;
        });
    };
    // 80-90 is cut at 85 and 86 by the other rule: three segments, the middle one reached by both.
    const CompiledRules set = compile_rules({compiled(10, 2, {.dport = "80-90"}), compiled(5, 3, {.dport = "85"})}, {0, 1}, 0);
    ASSERT_EQ(set.entries.size(), 3u);
    EXPECT_TRUE(in_key_order(set));
    std::multiset<std::pair<uint32_t, uint32_t>> matches;  // (pref, class)
    for (const auto& [key, match] : set.entries)
        matches.insert({match.pref, match.class_id});
    EXPECT_EQ(matches, (std::multiset<std::pair<uint32_t, uint32_t>>{{5, 3}, {10, 2}, {10, 2}}));

    // One rule over every source and destination port, cut into ~730 segments each way by
    // single-port rules: half a million keys against the index's 131,072.
    std::vector<shaper_rule> rules{compiled(1, 2, {.sport = "1-65535", .dport = "1-65535"})};
    for (uint32_t i = 0; i < 364; i++) {
        rules.push_back(compiled(10 + i, 2, {.sport = std::to_string(100 + 2 * i)}));
        rules.push_back(compiled(1000 + i, 2, {.dport = std::to_string(100 + 2 * i)}));
    }
    std::vector<uint32_t> slots(rules.size());
    std::iota(slots.begin(), slots.end(), 0u);
    try {
        compile_rules(rules, slots, 0);
        ADD_FAILURE() << "a set of 530,000 index entries was compiled";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "the rules' port ranges expand to more than 131072 index entries");
    }
    rules.resize(1 + 2 * 100);  // 201 segments each way under the first rule
    slots.resize(rules.size());
    const CompiledRules fits = compile_rules(rules, slots, 0);
    EXPECT_EQ(fits.entries.size(), 201u * 201u + 2 * 100u);  // a key per pair of segments, one per single port
    EXPECT_TRUE(in_key_order(fits));
}

TEST_F(Rules, TenThousandRulesMatchCorrectlyAtTheCostOfFew)
{
    // Cost per packet with 10 rules of 3 shapes, then 10,000 of the same shapes.
    auto add_batch = [&](uint32_t first, uint32_t count) {
        for (uint32_t i = first; i < first + count; i++) {
            const std::string addr = "10." + std::to_string(i >> 16 & 255) + "." +
                                     std::to_string(i >> 8 & 255) + "." + std::to_string(i & 255);
            RuleArgs a;
            a.pref = std::to_string(1000 + i);
            a.class_id = std::to_string(1 + i % kClasses);
            if (i % 3 == 0)
                a.dst = addr;
            else if (i % 3 == 1)
                a.src = addr, a.proto = "udp", a.dport = std::to_string(1 + i % 60000);
            else
                a.mark = std::to_string(i);
            maps_->write_rule(i, compile_rule(parse_rule(a)));  // stored directly, compiled once below
        }
        publish_rules(*maps_);
    };
    add_batch(0, 10);
    const auto probe = build_frame({.dst = "10.0.0.9"});
    auto median_ns = [&] {
        std::vector<int> d;
        for (int i = 0; i < 5; i++)
            d.push_back(run_frame(probe, 0, 0, 200'000));
        std::sort(d.begin(), d.end());
        return d[2];
    };
    const int few = median_ns();
    add_batch(10, 9'990);
    const int many = median_ns();
    EXPECT_EQ(maps_->rules().size(), 10'000u);
    for (uint32_t i : {0u, 9u, 3333u, 6000u, 9999u}) {
        const std::string addr = "10." + std::to_string(i >> 16 & 255) + "." +
                                 std::to_string(i >> 8 & 255) + "." + std::to_string(i & 255);
        const uint32_t expected = 1 + i % kClasses;
        if (i % 3 == 0)
            EXPECT_EQ(class_of({.dst = addr}), expected) << i;
        else if (i % 3 == 1)
            EXPECT_EQ(class_of({.src = addr, .proto = 17, .dport = uint16_t(1 + i % 60000)}), expected) << i;
        else
            EXPECT_EQ(class_of({.dst = "172.16.0.1"}, i), expected) << i;
    }
    std::printf("test_run ns/packet: 10 rules %d, 10000 rules %d\n", few, many);
    EXPECT_LT(many, 3 * few + 200) << "cost must not grow with the number of rules";
}

// What the datapath reads of generation `gen`.
std::string generation_text(const Program& program, uint32_t gen)
{
    return rule_generation_text(program.map_fd("shaper_tuples"), program.map_fd("shaper_rule_index"),
                                program.map_fd("shaper_port_segs"), gen);
}

// A publish writes into the inactive generation only what differs from what its record says it
// holds (loader/rule_record.h); the generation then reads exactly as one written whole. A publish
// that keeps no record in between (another writer) is seen, and the next one is written whole.
TEST_F(Rules, APublishOfTheDifferenceLeavesTheGenerationAsAWholeOneWould)
{
    char name[] = "/tmp/shaperctl-rules-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr);
    const std::string dir = name;
    auto put = [&](uint32_t slot, uint32_t pref, uint32_t class_id, RuleArgs args) {
        args.pref = std::to_string(pref);
        args.class_id = std::to_string(class_id);
        maps_->write_rule(slot, compile_rule(parse_rule(args)));
    };
    // Publishes with the record, then the same set whole into the other generation's twin: a
    // second program's maps would do, but recompiling the stored rules says the same.
    auto publish = [&](const std::string& what, const std::string& record_dir) {
        publish_rules(*maps_, record_dir);
        const uint32_t gen = maps_->settings().rules_gen & SHAPER_RULES_GEN_MASK;
        std::vector<shaper_rule> rules;
        std::vector<uint32_t> slots;
        for (const auto& [slot, r] : maps_->rules()) {
            rules.push_back(r);
            slots.push_back(slot);
        }
        const std::string got = generation_text(*program_, gen);
        maps_->install_rules(compile_rules(rules, slots, gen), gen);  // whole
        EXPECT_EQ(got, generation_text(*program_, gen)) << what;
    };
    put(0, 10, 1, {.dst = "10.1.0.0/16", .proto = "tcp", .dport = "80-90"});
    publish("the first: no record yet", dir);
    put(1, 20, 2, {.src = "10.2.0.0/24"});
    publish("a rule added", dir);
    put(2, 30, 3, {.proto = "udp", .sport = "53"});
    publish("a port rule added", dir);
    put(3, 35, 3, {.proto = "udp", .sport = "50-60"});
    publish("an overlapping port rule added", dir);
    maps_->write_rule(0, shaper_rule{});
    publish("a port rule removed", dir);
    publish_rules(*maps_);  // another writer, which keeps no record
    put(0, 40, 4, {.proto = "tcp", .dport = "443"});
    publish("after another writer's publish", dir);
    put(4, 50, 5, {.mark = "7"});
    publish("by difference again", dir);
    maps_->write_rule(2, shaper_rule{});
    maps_->write_rule(3, shaper_rule{});
    publish("two removed", dir);
    std::filesystem::remove_all(dir);
}

TEST_F(Rules, RuleSetSwitchesAreAtomicUnderTraffic)
{
    // Traffic matching rule 10 runs on one thread while another re-publishes the rule set again
    // and again with other rules coming and going: no packet may fall through to unclassified.
    // 60 switches: each rewrites a whole generation, about 0.3 s of the stock-kernel VM's TCG.
    rule(10, 2, {.dst = "10.7.0.0/16", .proto = "tcp", .dport = "80-90"});
    std::atomic<bool> stop = false;
    std::thread traffic([&] {
        const auto frame = build_frame({.dst = "10.7.1.1", .dport = 85});
        while (!stop)
            run_frame(frame, 0, 0, 1000);
    });
    for (int i = 0; i < 40; i++) {
        rule(20 + i, 3, {.dst = "10." + std::to_string(i) + ".0.0/16", .dport = std::to_string(100 + i)});
        if (i % 2)
            del_rule(*maps_, 20 + i - 1);
    }
    stop = true;
    traffic.join();
    EXPECT_GT(maps_->counters(2).packets, 0u);
    EXPECT_EQ(maps_->counters(0).packets, 0u);
    EXPECT_EQ(maps_->counters(3).packets, 0u);
}

}  // namespace
