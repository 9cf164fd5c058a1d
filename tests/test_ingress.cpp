// The receive side end to end on the host kernel (which needs no sch_fq for it): real TCP from a
// peer namespace into an ingress class on a veth, asserted on the class's counters and clock;
// the two sides attached, changed and detached apart; bad input refused in one line.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <bpf/bpf.h>

#include "core/class_counters.h"
#include "loader/device.h"
#include "loader/fd.h"
#include "loader/maps.h"
#include "loader/tcx_link.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl;
using namespace shaperctl::test;
using nlohmann::json;

namespace {

constexpr uint64_t kRate = 20'000'000;
const uint64_t kHorizonNs = kIngressDefaultHorizonNs;
constexpr uint16_t kPort = 5201;
constexpr int kFlows = 4;

class IngressSide : public DeviceTest {
protected:
    void TearDown() override
    {
        if (ns_)
            sh("detach --dev sh0 --ingress");
        DeviceTest::TearDown();
    }

    json status(const std::string& side = " --ingress")
    {
        Outcome o = sh("status --dev sh0 --json --sample 0" + side);
        EXPECT_EQ(o.status, 0) << o.err;
        return o.status == 0 ? json::parse(o.out) : json::object();
    }

    // A refused command: non-zero exit, one line on stderr that contains `needle`.
    void refused(const std::string& args, const std::string& needle)
    {
        Outcome o = sh(args);
        EXPECT_NE(o.status, 0) << args;
        EXPECT_NE(o.err.find(needle), std::string::npos) << args << " said: " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << " said: " << o.err;
    }

    Device side(Direction direction) { return Device::resolve("sh0").side(direction); }

    // Our program on the side's hook: the pinned TCX link, or the tc filter.
    bool hooked(Direction direction)
    {
        const std::string name = direction_name(direction);
        if (kernel_has_tcx())
            return access((side(direction).pin_dir() + "/tcx_" + name).c_str(), F_OK) == 0;
        return ns_->tc("filter show dev sh0 " + name).find(" shaper:[") != std::string::npos;
    }
};

TEST_F(IngressSide, EachSideHasItsOwnClassesAndDetachingOneLeavesTheOther)
{
    ok("attach --dev sh0 --mode police");
    ok("attach --dev sh0 --ingress");
    ok("add-class --dev sh0 --id 1 --rate 10mbit");
    ok("add-class --dev sh0 --ingress --id 2 --rate 20mbit");
    ok("set-default --dev sh0 --ingress --class 2");
    json in = status();
    EXPECT_EQ(in["direction"], "ingress");
    EXPECT_EQ(in["attach_point"], kernel_has_tcx() ? "tcx ingress" : "tc clsact ingress");
    ASSERT_EQ(in["classes"].size(), 1u);
    EXPECT_EQ(in["classes"][0]["id"], 2);
    EXPECT_EQ(in["classes"][0]["horizon_ns"], kHorizonNs) << "ingress's default horizon";
    EXPECT_EQ(in["default_class"], 2);
    json out = status("");
    EXPECT_EQ(out["direction"], "egress");
    ASSERT_EQ(out["classes"].size(), 1u);
    EXPECT_EQ(out["classes"][0]["id"], 1);
    EXPECT_TRUE(out["default_class"].is_null());
    EXPECT_TRUE(hooked(Direction::Egress));
    EXPECT_TRUE(hooked(Direction::Ingress));

    ok("detach --dev sh0");
    EXPECT_FALSE(hooked(Direction::Egress));
    EXPECT_TRUE(hooked(Direction::Ingress)) << "detaching egress took ingress's program";
    in = status();
    EXPECT_EQ(in["classes"].size(), 1u);
    EXPECT_GT(in["program_id"].get<uint32_t>(), 0u);
    ok("change-class --dev sh0 --ingress --id 2 --rate 30mbit");

    ok("attach --dev sh0 --mode police");
    ok("detach --dev sh0 --ingress");
    EXPECT_FALSE(hooked(Direction::Ingress));
    EXPECT_TRUE(hooked(Direction::Egress)) << "detaching ingress took egress's program";
    EXPECT_EQ(status("")["program_id"].get<uint32_t>() > 0, true);
    ok("detach --dev sh0");

    EXPECT_NE(access(side(Direction::Egress).pin_dir().c_str(), F_OK), 0);
    EXPECT_NE(access(side(Direction::Ingress).pin_dir().c_str(), F_OK), 0);
    EXPECT_NE(access(side(Direction::Ingress).run_dir().c_str(), F_OK), 0);
    EXPECT_EQ(ns_->tc("filter show dev sh0 ingress"), "");
    EXPECT_EQ(ns_->tc("filter show dev sh0 egress"), "");
    EXPECT_EQ(ns_->tc("qdisc show dev sh0").find("clsact"), std::string::npos)
        << ns_->tc("qdisc show dev sh0");
}

// A slow class given no horizon gets room for 100 full frames (four flows' initial windows are
// 40): 606 ms at 2 Mbit/s, where 150 ms would be 25. The default follows a new rate; a horizon
// given stays; the command line, files and the diff of apply resolve it alike.
TEST_F(IngressSide, ASlowClassGivenNoHorizonGetsRoomForAHundredFramesThatFollowsItsRate)
{
    ok("attach --dev sh0 --ingress");
    ok("add-class --dev sh0 --ingress --id 1 --rate 2mbit");
    ok("add-class --dev sh0 --ingress --id 2 --rate 8kbit");
    ok("add-class --dev sh0 --ingress --id 3 --rate 2mbit --horizon 300ms");
    const auto horizons = [&] {
        std::vector<uint64_t> out;
        const json side = status();
        for (const json& c : side["classes"])
            out.push_back(c["horizon_ns"]);
        return out;
    };
    EXPECT_EQ(horizons(), (std::vector<uint64_t>{606'000'000, 60'000'000'000, 300'000'000}))
        << "100 x 1514 B at 2 Mbit/s, rounded up to a ms; at 8 kbit/s the largest horizon";

    ok("change-class --dev sh0 --ingress --id 1 --rate 20mbit");
    ok("change-class --dev sh0 --ingress --id 3 --rate 20mbit");
    EXPECT_EQ(horizons(), (std::vector<uint64_t>{150'000'000, 60'000'000'000, 300'000'000}));
    ok("change-class --dev sh0 --ingress --id 1 --rate 4mbit");
    EXPECT_EQ(horizons()[0], 303'000'000u);
    ok("change-class --dev sh0 --ingress --id 1 --horizon 303ms --rate 2mbit");
    EXPECT_EQ(horizons()[0], 303'000'000u) << "given, even equal to the old default, it stays";

    // A file's class with no horizon: the default for its rate, and the diff leaves it out.
    ok("del-class --dev sh0 --ingress --id 1");
    json file = json::parse(sh("dump --dev sh0").out);
    file["devices"][0]["classes"].push_back({{"id", 1}, {"rate", "2mbit"}});
    const std::string path = "/tmp/shaperctl-test-horizon-" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << file.dump();
    Outcome diff = sh("apply -f " + path);
    std::remove(path.c_str());
    EXPECT_EQ(diff.out, "dev sh0 ingress:\n+ class 1 rate 2mbit\n") << diff.err;
    EXPECT_EQ(horizons(), (std::vector<uint64_t>{606'000'000, 60'000'000'000, 300'000'000}));
}

// ACK pacing's table (bpf/ack_pace.h): one per device, pinned beside both sides' directories,
// made by the first side attached and reused by the other, its gate open while the receive side
// is attached, and gone with the last side's detach, whichever order they go in.
TEST_F(IngressSide, TheAckPacingTableIsSharedAndGoesWithTheLastSide)
{
    const std::string pin = side(Direction::Egress).ack_pace_pin();
    auto map_id = [&] {
        Fd fd(bpf_obj_get(pin.c_str()));
        bpf_map_info info{};
        uint32_t len = sizeof info;
        return fd && bpf_obj_get_info_by_fd(fd.get(), &info, &len) == 0 ? info.id : 0u;
    };
    auto gate_open = [&] {
        Fd fd(bpf_obj_get(pin.c_str()));
        const uint32_t zero = 0;
        shaper_ack_pace gate{};
        EXPECT_TRUE(fd && bpf_map_lookup_elem(fd.get(), &zero, &gate) == 0) << pin;
        return gate.until_ns != 0;
    };

    ok("attach --dev sh0 --ingress");
    const uint32_t table = map_id();
    ASSERT_NE(table, 0u) << "the receive side alone makes it";
    EXPECT_TRUE(gate_open());
    ok("detach --dev sh0 --ingress");
    EXPECT_NE(access(pin.c_str(), F_OK), 0) << "the last side took it";

    ok("attach --dev sh0 --mode police");
    const uint32_t second = map_id();
    ASSERT_NE(second, 0u);
    EXPECT_FALSE(gate_open());
    ok("attach --dev sh0 --ingress");
    EXPECT_EQ(map_id(), second) << "the receive side reuses the send side's table";
    EXPECT_TRUE(gate_open());
    ok("attach --dev sh0 --ingress");  // again: nothing changes
    EXPECT_EQ(map_id(), second);
    EXPECT_TRUE(gate_open());
    ok("detach --dev sh0 --ingress");
    EXPECT_EQ(map_id(), second) << "the send side still holds it";
    EXPECT_FALSE(gate_open()) << "no receive side: nothing to wait for";

    ok("attach --dev sh0 --ingress");
    EXPECT_TRUE(gate_open());
    ok("detach --dev sh0");
    EXPECT_EQ(map_id(), second) << "the receive side still holds it";
    EXPECT_TRUE(gate_open());
    ok("detach --dev sh0 --ingress");
    EXPECT_NE(access(pin.c_str(), F_OK), 0);
    EXPECT_NE(access(pin.substr(0, pin.rfind('/')).c_str(), F_OK), 0) << "nothing of the device's namespace left";
}

// The table both sides share, made by a side of another map format (a smaller record): the
// other side's attach says so in one line, and attaches nothing.
TEST_F(IngressSide, ASharedTableOfAnotherFormatIsRefusedInOneLine)
{
    ok("attach --dev sh0 --mode police");
    const std::string pin = side(Direction::Egress).ack_pace_pin();
    ASSERT_EQ(unlink(pin.c_str()), 0);
    Fd older(bpf_map_create(BPF_MAP_TYPE_ARRAY, "shaper_ack_pace", 4, 16, SHAPER_ACK_PACE_SLOTS + 1, nullptr));
    ASSERT_TRUE(older);
    ASSERT_EQ(bpf_obj_pin(older.get(), pin.c_str()), 0);
    refused("attach --dev sh0 --ingress", "another map format");
    EXPECT_FALSE(hooked(Direction::Ingress));
}

// Status says whether the receive side's ACKs are paced now: whether the send side held one
// within the last second, the gate the datapath reads before pacing's marks, steps and boxes.
TEST_F(IngressSide, StatusSaysWhetherTheSendSideHeldAnAckInTheLastSecond)
{
    ok("attach --dev sh0 --mode police");
    ok("attach --dev sh0 --ingress");
    const auto paced = [&] { return status(" --ingress")["acks_paced"]; };
    const auto table = [&] { return sh("status --dev sh0 --ingress --sample 0").out; };
    const auto held = [&](uint64_t at_ns) {  // the gate as the send side writes it
        Fd fd(bpf_obj_get(side(Direction::Egress).ack_pace_pin().c_str()));
        const uint32_t zero = 0;
        const shaper_ack_pace gate{0, at_ns};
        ASSERT_TRUE(fd && bpf_map_update_elem(fd.get(), &zero, &gate, BPF_ANY) == 0);
    };

    EXPECT_EQ(paced(), false) << "attached, no ACK held yet";
    EXPECT_NE(table().find("ACKs not paced"), std::string::npos) << table();
    EXPECT_FALSE(status("").contains("acks_paced")) << "the send side's status has no such field";
    // "Just now" as each status will see it however slowly its process starts (a guest on a
    // busy host took over a second between two): an hour ahead is within the last second.
    held(monotonic_ns() + 3600'000'000'000ull);
    EXPECT_EQ(paced(), true);
    EXPECT_NE(table().find("ACKs paced: the send side held one"), std::string::npos) << table();
    held(monotonic_ns() - 2'000'000'000ull);
    EXPECT_EQ(paced(), false) << "the last one two seconds ago";
}

// `attach --ingress` alone paces: where the kernel has sch_fq it attaches the send side too (edt,
// no class) and says so in a line, dump leaves that bare side to the receive side's entry, and
// `detach --ingress` takes it away again, unless it was given a class since or attached by the
// operator. Where nothing can pace, the line says what is given up. --no-ack-pacing: neither.
TEST_F(IngressSide, AttachAlonePacesAcksWhereItCanAndDetachTakesThatSendSideAway)
{
    Outcome o = sh("attach --dev sh0 --ingress");
    ASSERT_EQ(o.status, 0) << o.err;
    if (o.out.find("no ACK pacing") != std::string::npos) {
        EXPECT_NE(o.out.find("sh0: no ACK pacing: this kernel has no sch_fq (Linux 3.12+"), std::string::npos) << o.out;
        EXPECT_NE(o.out.find("without ECN, 15-24 %"), std::string::npos) << o.out;
        EXPECT_FALSE(hooked(Direction::Egress));
        ok("detach --dev sh0 --ingress");
        o = sh("attach --dev sh0 --ingress --no-ack-pacing");
        EXPECT_EQ(o.out, "attached to sh0 ingress\n") << o.err;
        return;
    }
    EXPECT_EQ(o.out, "attached to sh0 ingress\nsh0: its send side attached too, in edt mode with no class, to pace "
                     "the ACKs of received flows (detach --ingress takes it away; --no-ack-pacing declines it)\n");
    EXPECT_TRUE(hooked(Direction::Egress));
    const json send = status("");
    EXPECT_EQ(send["mode"], "edt");
    EXPECT_TRUE(send["classes"].empty());
    const json file = json::parse(sh("dump --dev sh0").out);
    ASSERT_EQ(file["devices"].size(), 1u) << file;
    EXPECT_EQ(file["devices"][0]["direction"], "ingress") << "the bare send side is the receive side's";
    bool listed_for_pacing = false;
    for (const json& d : json::parse(sh("list --json").out))  // every namespace's: this one's sh0
        if (d["device"] == "sh0" && d["direction"] == "egress" && d["netns"] == shaperctl::current_netns())
            listed_for_pacing = d["for_ack_pacing"];
    EXPECT_TRUE(listed_for_pacing);
    EXPECT_EQ(sh("attach --dev sh0 --ingress").out, "sh0: already attached with this program; nothing changed\n");
    o = sh("detach --dev sh0 --ingress");
    EXPECT_EQ(o.out, "detached from sh0 ingress\ndetached from sh0, the send side attached for ACK pacing\n") << o.err;
    EXPECT_FALSE(hooked(Direction::Egress));
    EXPECT_FALSE(hooked(Direction::Ingress));

    ok("attach --dev sh0 --ingress");
    ok("add-class --dev sh0 --id 5 --rate 10mbit");
    EXPECT_NE(sh("detach --dev sh0 --ingress").out.find("stays: it has classes"), std::string::npos);
    EXPECT_TRUE(hooked(Direction::Egress));
    ok("detach --dev sh0");

    ok("attach --dev sh0 --ingress");
    ok("attach --dev sh0");  // the operator's own: theirs from now on
    EXPECT_EQ(sh("detach --dev sh0 --ingress").out, "detached from sh0 ingress\n");
    EXPECT_TRUE(hooked(Direction::Egress));
    ok("detach --dev sh0");

    EXPECT_EQ(sh("attach --dev sh0 --ingress --no-ack-pacing").out, "attached to sh0 ingress\n");
    EXPECT_FALSE(hooked(Direction::Egress));
}

// A receive side whose ACKs are paced gives its new classes CoDel's paced target and interval
// (5 ms / 50 ms: its senders feel the backlog, and 2 ms / 5 ms marked them 10 % under the rate);
// one whose ACKs are not paced (--no-ack-pacing, a send side in police mode, no sch_fq) the short
// ones. Values given are kept; status lists no default as an option; a file follows the same rule.
TEST_F(IngressSide, ItsClassesCodelDefaultsFollowWhetherItsAcksArePaced)
{
    const auto codel = [&](size_t i) {
        const json c = status()["classes"][i];
        return std::pair<uint64_t, uint64_t>{c["aqm_target_ns"], c["aqm_interval_ns"]};
    };
    const std::pair<uint64_t, uint64_t> lan{2'000'000, 5'000'000}, paced{5'000'000, 50'000'000};
    ok("attach --dev sh0 --ingress --no-ack-pacing");
    ok("add-class --dev sh0 --ingress --id 1 --rate 10mbit");
    EXPECT_EQ(codel(0), lan);
    ok("detach --dev sh0 --ingress");
    ok("attach --dev sh0 --mode police");  // a send side that delays nothing
    ok("attach --dev sh0 --ingress");
    ok("add-class --dev sh0 --ingress --id 1 --rate 10mbit");
    EXPECT_EQ(codel(0), lan);
    ok("detach --dev sh0 --ingress");
    ok("detach --dev sh0");

    const Outcome o = sh("attach --dev sh0 --ingress");
    ASSERT_EQ(o.status, 0) << o.err;
    if (o.out.find("no ACK pacing") != std::string::npos)
        GTEST_SKIP() << "nothing paces ACKs on this kernel: " << o.out;
    ok("add-class --dev sh0 --ingress --id 1 --rate 10mbit");
    ok("add-class --dev sh0 --ingress --id 2 --rate 5mbit --parent 1 --target 2ms");
    EXPECT_EQ(codel(0), paced);
    EXPECT_EQ(codel(1), std::make_pair(uint64_t(2'000'000), paced.second)) << "the given target stays";
    const std::string table = sh("status --dev sh0 --ingress").out;
    EXPECT_EQ(table.find("interval"), std::string::npos) << "a default listed as an option:\n" << table;
    EXPECT_NE(table.find("target 2ms"), std::string::npos) << table;

    // A file's class: the same defaults; the diff leaves them out, and a dump applies unchanged.
    json file = json::parse(sh("dump --dev sh0").out);
    const std::string path = "/tmp/shaperctl-test-codel-" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << file.dump();
    EXPECT_EQ(sh("apply -f " + path).out, "no changes\n");
    ok("detach --dev sh0 --ingress");
    file["devices"][0]["classes"] = json::array({{{"id", 3}, {"rate", "20mbit"}}});
    file["devices"][0].erase("max_classes");
    std::ofstream(path) << file.dump();
    const Outcome applied = sh("apply -f " + path);
    std::remove(path.c_str());
    EXPECT_EQ(applied.out, "dev sh0 ingress:\n+ attach mode police\n+ class 3 rate 20mbit\n") << applied.err;
    EXPECT_EQ(codel(0), paced);
}

TEST_F(IngressSide, BadInputIsRefusedInOneLineAndChangesNothing)
{
    ok("attach --dev sh0 --mode police");
    ok("add-class --dev sh0 --id 5 --rate 10mbit");
    refused("add-class --dev sh0 --ingress --id 1 --rate 20mbit", "not attached for ingress");
    refused("status --dev sh0 --ingress", "not attached for ingress");
    refused("detach --dev sh0 --ingress", "not attached");
    EXPECT_TRUE(hooked(Direction::Egress));
    EXPECT_EQ(status("")["classes"].size(), 1u);

    ok("attach --dev sh0 --ingress");
    ok("add-class --dev sh0 --ingress --id 1 --rate 20mbit");
    const json before = status();
    refused("set-default --dev sh0 --ingress --class 5", "exists on egress only");
    refused("add-rule --dev sh0 --ingress --pref 10 --class 5 --dport 80", "exists on egress only");
    refused("add-rule --dev sh0 --ingress --pref 10 --class 1 --cgroup /", "cgroup");
    refused("attach --dev sh0 --ingress --mode edt", "--mode");
    refused("attach --dev sh0 --ingress --fq-horizon 5s", "fq options");
    refused("attach --dev sh0 --no-ack-pacing", "--no-ack-pacing goes with --ingress");
    json after = status();
    EXPECT_EQ(after["classes"], before["classes"]);
    EXPECT_EQ(after["rules"], before["rules"]);
    EXPECT_EQ(after["default_class"], before["default_class"]);
    EXPECT_EQ(after["program_id"], before["program_id"]);
}

// Real TCP from namespace `peer` (sh1, 10.77.0.2) into sh0's ingress class (10.77.0.1).
class IngressTcp : public IngressSide {
protected:
    void SetUp() override
    {
        IngressSide::SetUp();
        if (IsSkipped())
            return;
        peer_ = ns_->name() + "-peer";
        must_run(ip_tool() + " netns add " + peer_);
        ns_->ip("link set sh1 netns " + peer_);
        ns_->ip("addr add 10.77.0.1/24 dev sh0");
        ns_->ip("link set lo up");
        must_run(ip_tool() + " -n " + peer_ + " addr add 10.77.0.2/24 dev sh1");
        must_run(ip_tool() + " -n " + peer_ + " link set sh1 up");
        ok("attach --dev sh0 --ingress --no-ack-pacing");  // the policer alone; one test paces
        ok("add-class --dev sh0 --ingress --id 1 --rate 20mbit");
        ok("set-default --dev sh0 --ingress --class 1");
    }
    void TearDown() override
    {
        if (ns_)
            sh("detach --dev sh0");  // the send side, where a test attached it
        IngressSide::TearDown();
        if (!peer_.empty())
            run(ip_tool() + " netns del " + peer_);
    }

    void set_ecn(bool on)
    {
        for (const std::string& ns : {ns_->name(), peer_})
            must_run(ip_tool() + " netns exec " + ns + " sysctl -qw net.ipv4.tcp_ecn=" + (on ? "1" : "0"));
    }

    // The receiver's IP counter of CE-marked packets (segments), after tc ingress.
    uint64_t in_ce_packets()
    {
        std::ifstream in("/proc/thread-self/net/netstat");
        std::string names, values;
        while (std::getline(in, names) && std::getline(in, values)) {
            if (!names.starts_with("IpExt:"))
                continue;
            std::istringstream n(names), v(values);
            std::string name, value;
            while (n >> name && v >> value)
                if (name == "InCEPkts")
                    return std::stoull(value);
        }
        return 0;
    }

    // kFlows connections from the peer each send `bytes`, each paced by TCP at `pace_bps` if
    // given; returns what the receiver read. A stalled transfer (no byte for 60 s) ends it early:
    // the caller's equality check fails.
    uint64_t transfer(uint64_t bytes, uint64_t pace_bps)
    {
        int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(kPort);
        inet_pton(AF_INET, "10.77.0.1", &addr.sin_addr);
        EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        EXPECT_EQ(listen(listener, kFlows), 0);

        const std::string peer_path = "/run/netns/" + peer_;
        std::vector<pid_t> senders;
        for (int i = 0; i < kFlows; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                int ns = open(peer_path.c_str(), O_RDONLY);
                if (ns < 0 || setns(ns, CLONE_NEWNET))
                    _exit(2);
                int s = socket(AF_INET, SOCK_STREAM, 0);
                const unsigned pace = unsigned(pace_bps / 8);  // TCP paces itself, no qdisc needed
                if (pace && setsockopt(s, SOL_SOCKET, SO_MAX_PACING_RATE, &pace, sizeof pace))
                    _exit(5);
                if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr))
                    _exit(3);
                std::vector<char> chunk(64 * 1024, 'x');
                for (uint64_t sent = 0; sent < bytes;) {
                    ssize_t n = send(s, chunk.data(), std::min<uint64_t>(chunk.size(), bytes - sent), 0);
                    if (n <= 0)
                        _exit(4);
                    sent += uint64_t(n);
                }
                close(s);
                _exit(0);
            }
            senders.push_back(pid);
        }
        std::vector<pollfd> fds;
        for (int i = 0; i < kFlows; i++) {
            pollfd p{listener, POLLIN, 0};
            if (poll(&p, 1, 60'000) != 1)
                break;
            fds.push_back({accept4(listener, nullptr, nullptr, SOCK_CLOEXEC), POLLIN, 0});
        }
        uint64_t received = 0;
        std::vector<char> buf(256 * 1024);
        for (size_t open_flows = fds.size(); open_flows > 0;) {
            if (poll(fds.data(), fds.size(), 60'000) <= 0)
                break;
            for (pollfd& p : fds) {
                if (p.fd < 0 || !p.revents)
                    continue;
                ssize_t n = read(p.fd, buf.data(), buf.size());
                if (n > 0) {
                    received += uint64_t(n);
                } else {
                    close(p.fd);
                    p.fd = -1;
                    open_flows--;
                }
            }
        }
        for (pollfd& p : fds)
            if (p.fd >= 0)
                close(p.fd);
        close(listener);
        for (pid_t pid : senders) {
            int status = 0;
            waitpid(pid, &status, 0);
            EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "sender status " << status;
        }
        return received;
    }

    // Four flows of 1 MB through the 20 Mbit class; the class's counters of this transfer alone.
    // The class's clock holds every charge: it lies at least the whole transfer's cost past its
    // start, and never beyond the horizon (plus one packet) of the moment it is read: the class
    // admitted at most rate x (T + horizon).
    ClassCounters run_flows(uint64_t pace_bps = 0)
    {
        const uint64_t per_flow = 1'000'000;
        const ShaperMaps maps = ShaperMaps::open_pinned(side(Direction::Ingress).pin_dir());
        const ClassCounters before = maps.counters(1);
        const uint64_t start = monotonic_ns();
        const uint64_t received = transfer(per_flow, pace_bps);
        const uint64_t tat = maps.clock(1).tat_ns;
        const uint64_t end = monotonic_ns();
        ClassCounters c = maps.counters(1);
        for (const CounterField& f : counter_fields())
            c.*f.member -= before.*f.member;
        std::cout << "class: " << c.segments << " segments in " << (end - start) / 1'000'000 << " ms; drops aqm "
                  << c.drops_aqm << ", fair " << c.drops_fair << ", horizon " << c.drops_horizon << "; marks "
                  << c.ecn_marks + c.fair_marks << "\n";
        EXPECT_EQ(received, kFlows * per_flow);
        // Each data segment carries at most 1448 bytes and 54 of headers at least, L2 included.
        EXPECT_GE(c.bytes, received + 54 * (received / 1448)) << "segments " << c.segments;
        const uint64_t cost_ns = c.bytes * 8'000'000'000ull / kRate;
        EXPECT_GE(tat, start + cost_ns) << "the clock lacks charges";
        const uint64_t largest_packet_ns = 65536ull * 8'000'000'000ull / kRate;
        EXPECT_LE(tat, end + kHorizonNs + largest_packet_ns) << "admitted beyond the horizon";
        return c;
    }

    // The round trips the handshakes measured (ms), as the send side's records hold them.
    std::string handshake_round_trips()
    {
        Fd table(bpf_obj_get(side(Direction::Egress).ack_pace_pin().c_str()));
        std::ostringstream out;
        out.precision(2);
        for (uint32_t slot = 1; table && slot <= SHAPER_ACK_PACE_SLOTS; slot++) {
            shaper_ack_pace r{};
            if (bpf_map_lookup_elem(table.get(), &slot, &r) == 0 && r.flow && r.rtt_ns)
                out << std::fixed << r.rtt_ns / 1e6 << " ";
        }
        return out.str() + "ms";
    }

    std::string peer_;
};

// Senders that outrun the class steadily (each paced at half the class rate, four of them) are
// marked: the backlog passes CoDel's target and stays above it for an interval long before it
// reaches the boxes at half the horizon. (Unpaced senders on this sub-millisecond path offer
// gigabits: the backlog runs from the target to the boxes within one CoDel interval, and whether
// a mark comes before the boxes is timing, not the shaper.) Every mark counted reaches the
// receiver's IP as CE: a packet marked and then refused at the horizon counts as a drop alone.
TEST_F(IngressTcp, WithEcnTheClassMarksAndTheReceiverSeesTheMarks)
{
    set_ecn(true);
    const uint64_t ce_before = in_ce_packets();
    const ClassCounters c = run_flows(kRate / 2);
    EXPECT_GT(c.ecn_marks + c.fair_marks, 0u) << "no CE mark told a sender to slow down; drops: aqm "
                                              << c.drops_aqm << ", fair " << c.drops_fair << ", horizon "
                                              << c.drops_horizon;
    EXPECT_GE(in_ce_packets() - ce_before, c.ecn_marks + c.fair_marks)
        << "the receiver's IP saw fewer CE packets than were marked";
}

// With the send side attached too (edt: sch_fq, in the stock-kernel VM), as `attach --ingress`
// does by default, the receiver's ACKs are held, and offer each flow no more than its share of
// the class for its round trip plus a sixteenth of the horizon (bpf/ack_pace.h): senders without
// ECN then need no losses past the one that ends each flow's slow start. The records say what the
// handshake gave: the window scale of the receiver's SYN-ACK, the path's round trip, a window.
// On a guest that runs evenly each flow loses one packet (4 in each of 30 runs of two guests side
// by side); unpaced, the same transfer loses 90-140. A guest that stalls (TCG beside a host whose
// cores are all busy) lets a flow a little further: of 70 such runs, 4 lost 5-8 packets and one
// 15 (some of their handshakes measured 11-44 ms on this sub-millisecond path: larger windows,
// and fair shares' drops of a flow past twice its share). So the
// bound is two per flow, and a transfer past it is run once more and judged on that one: a
// broken rule fails both.
TEST_F(IngressTcp, PacedSendersWithoutEcnLoseAtMostTwoPacketsPerFlow)
{
    ok("change-class --dev sh0 --ingress --id 1 --target 5ms --interval 50ms");
    const Outcome again = sh("attach --dev sh0 --ingress");  // now with ACK pacing, as by default
    if (again.out.find("no ACK pacing") != std::string::npos)
        GTEST_SKIP() << "this kernel has no sch_fq";
    ASSERT_NE(again.out.find("its send side attached too"), std::string::npos) << again.out << again.err;
    set_ecn(false);
    const auto drops = [](const ClassCounters& c) { return c.drops_aqm + c.drops_fair + c.drops_horizon; };
    ClassCounters c = run_flows();
    if (drops(c) > 2 * uint64_t(kFlows)) {
        std::cout << "lost " << drops(c) << " packets (round trips " << handshake_round_trips()
                  << "); once more\n";
        c = run_flows();
    }
    EXPECT_EQ(c.ecn_marks + c.fair_marks, 0u);
    EXPECT_LE(drops(c), 2 * uint64_t(kFlows))
        << "aqm " << c.drops_aqm << ", fair " << c.drops_fair << ", horizon " << c.drops_horizon
        << "; round trips " << handshake_round_trips();

    Fd table(bpf_obj_get(side(Direction::Egress).ack_pace_pin().c_str()));
    ASSERT_TRUE(table);
    int windowed = 0;
    for (uint32_t slot = 1; slot <= SHAPER_ACK_PACE_SLOTS; slot++) {
        shaper_ack_pace r{};
        if (bpf_map_lookup_elem(table.get(), &slot, &r) == 0 && r.flow && r.window_cap && r.rtt_ns)
            windowed += r.wscale > 1;  // Linux scales a listener's window by default
    }
    EXPECT_GE(windowed, kFlows) << "flows whose held ACKs offered a window of the shaper's";
}

TEST_F(IngressTcp, WithoutEcnTheClassDrops)
{
    set_ecn(false);
    const ClassCounters c = run_flows();
    EXPECT_EQ(c.ecn_marks + c.fair_marks, 0u);
    EXPECT_GT(c.drops_aqm + c.drops_fair + c.drops_horizon, 0u);
}

}  // namespace
