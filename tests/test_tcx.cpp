// Where the program runs: a TCX link on kernels that have TCX (6.6+; this host), tc clsact
// before (and with SHAPERCTL_ATTACH=tc); programs of others on the same hook keep running; a
// device attached on tc clsact (by an older build, or with SHAPERCTL_ATTACH=tc) moves to TCX
// keeping its classes, rules and clocks. Police mode: the host has no sch_fq.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loader/device.h"
#include "loader/fd.h"
#include "loader/maps.h"
#include "loader/tcx_link.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using shaperctl::Fd;
using nlohmann::json;

namespace {

constexpr auto kTcxEgress = static_cast<bpf_attach_type>(47);  // BPF_TCX_EGRESS (6.6+)
constexpr uint32_t kMark = 0x77;
constexpr uint64_t kSec = 1'000'000'000ull;

uint64_t now_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * kSec + ts.tv_nsec;
}

// Another party's program on the same hook: counts the packets it sees and returns -1 (on to
// the next program), as a well-behaved classifier does.
struct Counter {
    Fd map, prog;

    Counter()
    {
        map = Fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "test_count", 4, 8, 1, nullptr));
        const bpf_insn insns[] = {
            {BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 0},         // *(u32 *)(r10 - 4) = 0
            {BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0},  // r2 = r10 - 4
            {BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4},
            {BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map.get()},  // r1 = map
            {0, 0, 0, 0, 0},
            {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem},
            {BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 2, 0},  // no value: skip the add
            {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 1},
            {BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_0, BPF_REG_1, 0, BPF_ADD},  // *r0 += 1
            {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, -1},
            {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
        };
        prog = Fd(bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "test_counter", "GPL", insns,
                                sizeof insns / sizeof insns[0], nullptr));
        if (!map || !prog)
            throw std::runtime_error("cannot load the counting program");
    }

    uint64_t count() const
    {
        const uint32_t key = 0;
        uint64_t value = 0;
        bpf_map_lookup_elem(map.get(), &key, &value);
        return value;
    }

    uint32_t id() const
    {
        bpf_prog_info info{};
        uint32_t len = sizeof info;
        bpf_obj_get_info_by_fd(prog.get(), &info, &len);
        return info.id;
    }
};

// The programs on the device's TCX egress, in order.
std::vector<uint32_t> tcx_egress_programs(int ifindex)
{
    uint32_t ids[16] = {}, count = 16, flags = 0;
    if (bpf_prog_query(ifindex, kTcxEgress, 0, &flags, ids, &count))
        return {};
    return {ids, ids + count};
}

// A tc filter on clsact egress: attached with prog_fd, else detached.
int tc_filter(int ifindex, uint32_t handle, uint32_t priority, int prog_fd = 0)
{
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd, .handle = handle, .priority = priority);
    return prog_fd ? bpf_tc_attach(&hook, &opts) : bpf_tc_detach(&hook, &opts);
}

class Hooks : public DeviceTest {
protected:
    void prepare_namespace() override { ns_->disable_ipv6(); }  // no packets but the test's

    void SetUp() override
    {
        DeviceTest::SetUp();
        if (IsSkipped())
            return;
        ns_->ip("addr add 10.77.0.1/24 dev sh0");
        ns_->ip("neigh add 10.77.0.2 lladdr 02:00:00:00:00:02 dev sh0");
    }

    json status()
    {
        Outcome o = sh("status --dev sh0 --json --sample 0");
        EXPECT_EQ(o.status, 0) << o.err;
        return json::parse(o.out);
    }

    json doctor_finding(const std::string& check)
    {
        const json report = json::parse(sh("doctor --json").out);
        for (const auto& f : report["findings"])
            if (f["check"] == check)
                return f;
        return {{"missing", check}, {"report", report}};
    }

    // Class 1 takes the test's packets (by their mark: nothing else is charged to it).
    void add_marked_class(const std::string& class_options)
    {
        ok("add-class --dev sh0 --id 1 " + class_options);
        ok("add-rule --dev sh0 --pref 1 --class 1 --mark " + std::to_string(kMark));
    }

    // UDP datagrams of `payload` bytes from sh0 to its peer's side, marked.
    void send_marked(unsigned count, size_t payload = 1000)
    {
        Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        ASSERT_TRUE(sock);
        const int mark = kMark;
        ASSERT_EQ(setsockopt(sock.get(), SOL_SOCKET, SO_MARK, &mark, sizeof mark), 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(9);
        to.sin_addr.s_addr = inet_addr("10.77.0.2");
        const std::vector<char> data(payload);
        for (unsigned i = 0; i < count; i++)
            ASSERT_EQ(sendto(sock.get(), data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&to),
                             sizeof to),
                      ssize_t(data.size()));
    }

    uint64_t peer_rx_packets()
    {
        return json::parse(ns_->ip("-j -s link show dev sh1"))[0]["stats64"]["rx"]["packets"];
    }

    // Our filters on tc clsact egress (tc lists each once with its handle).
    unsigned our_tc_filters()
    {
        const std::string filters = ns_->tc("filter show dev sh0 egress");
        unsigned n = 0;
        for (size_t pos = 0; (pos = filters.find("handle 0x5348", pos)) != std::string::npos; pos++)
            n++;
        return n;
    }

    bool has_clsact() { return ns_->tc("qdisc show dev sh0").find("clsact") != std::string::npos; }

    // The devices `list` shows in the test's namespace (other tests may run in others).
    json listed()
    {
        const uint64_t here = shaperctl::current_netns();
        json names = json::array();
        for (const auto& d : json::parse(sh("list --json").out))
            if (d["netns"] == here)
                names.push_back(d["device"]);
        return names;
    }

    int ifindex() { return ns_->ifindex("sh0"); }
    std::string pin_dir() { return shaperctl::Device::resolve("sh0").pin_dir(); }
    std::string record_path() { return shaperctl::Device::resolve("sh0").run_dir() + "/attach.json"; }
    uint64_t class_clock() { return shaperctl::ShaperMaps::open_pinned(pin_dir()).clock(1).tat_ns; }

    // The class's configuration, counters and clock as status shows them (no estimate).
    json class_state()
    {
        json st = status();
        json c = st["classes"][0];
        c.erase("rate_estimate_bps");
        c.erase("backlog_ns");
        return {c, st["rules"], st["default_class"], class_clock()};
    }

    const char* expected_attach_point()
    {
        return shaperctl::kernel_has_tcx() ? "tcx egress" : "tc clsact egress";
    }
};

#define REQUIRE_TCX()                                                \
    do {                                                             \
        if (!shaperctl::kernel_has_tcx())                            \
            GTEST_SKIP() << "this kernel has no TCX (6.6+)";         \
    } while (0)

TEST_F(Hooks, TcxAttachShapesAndDetachLeavesNothing)
{
    REQUIRE_TCX();
    const std::string qdisc_before = ns_->tc("qdisc show dev sh0");
    Outcome o = sh("attach --dev sh0 --mode police");
    ASSERT_EQ(o.status, 0) << o.err;
    json st = status();
    EXPECT_EQ(st["attach_point"], "tcx egress");
    const uint32_t prog = st["program_id"];
    EXPECT_EQ(tcx_egress_programs(ifindex()), std::vector<uint32_t>{prog});
    EXPECT_FALSE(st["program_tag"].is_null());
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), qdisc_before) << "no clsact for TCX";
    EXPECT_EQ(access((pin_dir() + "/tcx_egress").c_str(), F_OK), 0) << "the link is pinned";
    EXPECT_NE(sh("status --dev sh0 --sample 0").out.find("tcx egress prog " + std::to_string(prog)),
              std::string::npos);
    EXPECT_NE(sh("attach --dev sh0 --mode police").out.find("nothing changed"), std::string::npos);
    EXPECT_EQ(listed(), json::array({"sh0"}));

    // 1 Mbit, no burst, police horizon 5 ms: a 1042-byte datagram costs 8.3 ms, so a burst of
    // them is mostly dropped. What passed is bounded by the class clock.
    add_marked_class("--rate 1mbit");
    const uint64_t rx_before = peer_rx_packets();
    const unsigned sent = 200;
    const uint64_t t0 = now_ns();
    send_marked(sent);
    const uint64_t t1 = now_ns();
    json c = status()["classes"][0];
    const uint64_t passed = c["packets"], dropped = c["drops_horizon"], bytes = c["bytes"];
    EXPECT_EQ(passed + dropped, sent);
    EXPECT_GT(dropped, 0u);
    EXPECT_EQ(peer_rx_packets() - rx_before, passed) << "dropped packets left the device";
    const uint64_t charged_ns = bytes * 8 * kSec / 1'000'000;
    const uint64_t horizon_ns = c["horizon_ns"], packet_ns = 1042 * 8 * kSec / 1'000'000;
    EXPECT_GE(class_clock() - t0, charged_ns - 8);  // started idle: the clock ran all of it
    EXPECT_LE(charged_ns, t1 - t0 + horizon_ns + packet_ns) << "faster than the rate";

    // Someone takes our link off the device: doctor and status say so; attach puts it back.
    {
        Fd link(bpf_obj_get((pin_dir() + "/tcx_egress").c_str()));
        ASSERT_TRUE(link);
        ASSERT_EQ(bpf_link_detach(link.get()), 0);
    }
    EXPECT_EQ(status()["program_id"], 0);
    json f = doctor_finding("dev sh0 filter");
    EXPECT_EQ(f["status"], "fail") << f;
    EXPECT_NE(f["detail"].get<std::string>().find("no shaperctl program on tcx egress"), std::string::npos) << f;
    ok("attach --dev sh0 --mode police");
    EXPECT_EQ(tcx_egress_programs(ifindex()).size(), 1u);
    EXPECT_NE(status()["program_id"], 0);
    f = doctor_finding("dev sh0 filter");
    EXPECT_EQ(f["status"], "ok") << f;
    EXPECT_NE(f["detail"].get<std::string>().find("on tcx egress"), std::string::npos) << f;

    ok("detach --dev sh0");
    EXPECT_EQ(tcx_egress_programs(ifindex()), std::vector<uint32_t>{});
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), qdisc_before);
    EXPECT_NE(access(pin_dir().c_str(), F_OK), 0) << "pins left in " << pin_dir();
    EXPECT_EQ(listed(), json::array());
}

// Our program ends no chain: a program before ours and one after it see every packet, on TCX
// and on tc clsact, and stay when we detach.
class Chain : public Hooks, public ::testing::WithParamInterface<std::string> {};

TEST_P(Chain, ProgramsBeforeAndAfterOursKeepRunning)
{
    const bool tcx = GetParam() == "tcx";
    if (tcx)
        REQUIRE_TCX();
    Counter before, after;
    Fd before_link, after_link;
    if (tcx) {
        before_link = Fd(bpf_link_create(before.prog.get(), ifindex(), kTcxEgress, nullptr));
        ASSERT_TRUE(before_link);
    } else {
        ns_->tc("qdisc add dev sh0 clsact");
        ASSERT_EQ(tc_filter(ifindex(), 1, 1, before.prog.get()), 0);
    }
    Outcome o = sh("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=" + GetParam() + " ");
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(status()["attach_point"], tcx ? "tcx egress" : "tc clsact egress");
    if (tcx) {
        after_link = Fd(bpf_link_create(after.prog.get(), ifindex(), kTcxEgress, nullptr));
        ASSERT_TRUE(after_link);
        const uint32_t ours = status()["program_id"];
        EXPECT_EQ(tcx_egress_programs(ifindex()), (std::vector<uint32_t>{before.id(), ours, after.id()}));
    } else {
        ASSERT_EQ(tc_filter(ifindex(), 2, 60000, after.prog.get()), 0);
        EXPECT_NE(ns_->tc("filter show dev sh0 egress").find("pref 32768 bpf"), std::string::npos)
            << "ours in the middle";
    }
    add_marked_class("--rate 1gbit");
    send_marked(50);
    EXPECT_EQ(status()["classes"][0]["packets"], 50);
    EXPECT_EQ(before.count(), 50u);
    EXPECT_EQ(after.count(), 50u) << "our program ended the chain";

    ok("detach --dev sh0");
    if (tcx) {
        EXPECT_EQ(tcx_egress_programs(ifindex()), (std::vector<uint32_t>{before.id(), after.id()}));
    } else {
        EXPECT_TRUE(has_clsact()) << "not ours to remove";
        const std::string filters = ns_->tc("filter show dev sh0 egress");
        EXPECT_NE(filters.find("test_counter"), std::string::npos) << filters;
        EXPECT_EQ(our_tc_filters(), 0u) << filters;
    }
    send_marked(10);
    EXPECT_EQ(after.count(), 60u);
}

INSTANTIATE_TEST_SUITE_P(Hooks, Chain, ::testing::Values("tc", "tcx"));

TEST_F(Hooks, BadAttachChoiceIsRefused)
{
    Outcome o = sh("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=xdp ");
    EXPECT_NE(o.status, 0);
    EXPECT_EQ(o.err, "shaperctl: bad SHAPERCTL_ATTACH \"xdp\" (use tc or tcx, or leave it unset)\n");
    EXPECT_NE(access(pin_dir().c_str(), F_OK), 0);
    if (!shaperctl::kernel_has_tcx()) {
        o = sh("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=tcx ");
        EXPECT_NE(o.status, 0);
        EXPECT_NE(o.err.find("has no TCX (6.6+)"), std::string::npos) << o.err;
        EXPECT_FALSE(has_clsact());
    }
}

// A device on tc clsact (SHAPERCTL_ATTACH=tc, or an older build or kernel) attached again where
// TCX exists: the link goes in, our filter and the clsact we created come out, and the class
// keeps its configuration, counters and clock to the nanosecond.
TEST_F(Hooks, ClsactAttachMovesToTcxKeepingClassesRulesAndClocks)
{
    REQUIRE_TCX();
    const std::string qdisc_before = ns_->tc("qdisc show dev sh0");
    ok("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=tc ");
    EXPECT_EQ(status()["attach_point"], "tc clsact egress");
    EXPECT_EQ(our_tc_filters(), 1u);
    EXPECT_TRUE(tcx_egress_programs(ifindex()).empty());
    // 1 Mbit with a 1 s horizon: 20 datagrams move the clock ~170 ms, none dropped. A clock
    // not carried over would read 0 (idle) after the move.
    add_marked_class("--rate 1mbit --horizon 1s");
    send_marked(20);
    const json before = class_state();
    ASSERT_EQ(before[0]["packets"], 20);
    ASSERT_NE(before[3], 0);

    Outcome o = sh("attach --dev sh0 --mode police");
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "sh0: moved to tcx egress; classes, rules and clocks kept\n");
    EXPECT_EQ(class_state(), before);
    json st = status();
    EXPECT_EQ(st["attach_point"], "tcx egress");
    EXPECT_EQ(tcx_egress_programs(ifindex()), std::vector<uint32_t>{st["program_id"].get<uint32_t>()});
    EXPECT_EQ(our_tc_filters(), 0u);
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), qdisc_before) << "the clsact we created is gone";
    EXPECT_NE(read_file(record_path()).find("\"hook\": \"tcx\""), std::string::npos);

    // Charged once each (no filter left behind), on the clock carried over.
    const uint64_t rx_before = peer_rx_packets();
    send_marked(10);
    EXPECT_EQ(status()["classes"][0]["packets"], 30);
    EXPECT_EQ(peer_rx_packets() - rx_before, 10u);
    EXPECT_GE(class_clock(), before[3].get<uint64_t>() + 10 * 1042 * 8 * kSec / 1'000'000 - 10);
    EXPECT_NE(sh("attach --dev sh0 --mode police").out.find("nothing changed"), std::string::npos);

    ok("detach --dev sh0");
    EXPECT_TRUE(tcx_egress_programs(ifindex()).empty());
    EXPECT_EQ(ns_->tc("qdisc show dev sh0"), qdisc_before);
    EXPECT_NE(access(pin_dir().c_str(), F_OK), 0);
}

// A record, filter and pin as builds before TCX left them: our filter at priority 1, no hook in
// the record, the program pinned as shaper_egress. Attaching again moves the program (to TCX
// where the kernel has it, else to our filter's current priority), leaves exactly one of ours on
// the device and pins it under today's name.
TEST_F(Hooks, OlderBuildsFilterAtPriorityOneIsMoved)
{
    ok("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=tc ");
    add_marked_class("--rate 1gbit");
    const std::string pin = pin_dir() + "/shaper", older_pin = pin_dir() + "/shaper_egress";
    {
        Fd prog(bpf_obj_get(pin.c_str()));
        ASSERT_TRUE(prog);
        ASSERT_EQ(tc_filter(ifindex(), 0x5348, 1, prog.get()), 0);
        ASSERT_EQ(tc_filter(ifindex(), 0x5348, 0x8000), 0);
        ASSERT_EQ(bpf_obj_pin(prog.get(), older_pin.c_str()), 0);
        ASSERT_EQ(unlink(pin.c_str()), 0);
        json record = json::parse(read_file(record_path()));
        record.erase("hook");
        record.erase("tc_priority");
        write_file(record_path(), record.dump(2));
    }
    const uint32_t old_prog = status()["program_id"];
    EXPECT_NE(old_prog, 0u) << "the record without a priority names priority 1";
    EXPECT_EQ(doctor_finding("dev sh0 pins")["status"], "ok") << "the older pin's name is read too";

    Outcome o = sh("attach --dev sh0 --mode police");
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, std::string("sh0: moved to ") + expected_attach_point() +
                         "; classes, rules and clocks kept\n");
    EXPECT_EQ(status()["attach_point"], expected_attach_point());
    const std::string filters = ns_->tc("filter show dev sh0 egress");
    EXPECT_EQ(filters.find("pref 1 "), std::string::npos) << filters;
    EXPECT_EQ(our_tc_filters() + tcx_egress_programs(ifindex()).size(), 1u) << filters;
    send_marked(10);
    EXPECT_EQ(status()["classes"][0]["packets"], 10) << "charged once";
    EXPECT_EQ(access(pin.c_str(), F_OK), 0);
    EXPECT_NE(access(older_pin.c_str(), F_OK), 0);

    ok("detach --dev sh0");
    EXPECT_FALSE(has_clsact()) << "created by the first attach: removed";
    EXPECT_TRUE(tcx_egress_programs(ifindex()).empty());
}

// A newer build over a TCX attach: bpf_link_update swaps the link's program; the link, the
// classes and the clocks stay.
TEST_F(Hooks, NewerBuildReplacesTheLinksProgramInPlace)
{
    REQUIRE_TCX();
    const std::string next = shaperctl_bin() + "_next";
    if (access(next.c_str(), X_OK) != 0)
        GTEST_SKIP() << "no " << next;
    ok("attach --dev sh0 --mode police");
    add_marked_class("--rate 1mbit --horizon 1s");
    send_marked(5);
    auto link_id = [&] {
        Fd link(bpf_obj_get((pin_dir() + "/tcx_egress").c_str()));
        bpf_link_info info{};
        uint32_t len = sizeof info;
        bpf_obj_get_info_by_fd(link.get(), &info, &len);
        return info.id;
    };
    const uint32_t link = link_id();
    const json st = status();
    const json before = class_state();

    CommandResult r = run(next + " -n " + ns_->name() + " attach --dev sh0 --mode police");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("program upgraded in place"), std::string::npos) << r.output;
    const json upgraded = status();
    EXPECT_NE(upgraded["program_tag"], st["program_tag"]);
    EXPECT_EQ(tcx_egress_programs(ifindex()), std::vector<uint32_t>{upgraded["program_id"].get<uint32_t>()});
    EXPECT_EQ(link_id(), link);
    EXPECT_EQ(class_state(), before);

    EXPECT_NE(sh("attach --dev sh0 --mode police").out.find("program upgraded in place"), std::string::npos);
    EXPECT_EQ(status()["program_tag"], st["program_tag"]);
    EXPECT_EQ(link_id(), link);
    ok("detach --dev sh0");
    EXPECT_TRUE(tcx_egress_programs(ifindex()).empty());
}

}  // namespace
