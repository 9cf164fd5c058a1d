// shaperctl exporter scraped over loopback, and status --watch: long-running commands, started in
// the background in a throw-away network namespace and stopped with a signal.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/exporter.h"
#include "loader/device.h"
#include "loader/error.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

// A TCP port nobody listens on now (in the calling thread's namespace).
int free_port()
{
    const int sock = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
    close(sock);
    return ntohs(addr.sin_port);
}

class Exporter : public DeviceTest {
protected:
    void SetUp() override
    {
        DeviceTest::SetUp();
        if (IsSkipped())
            return;
        ASSERT_EQ(sh("attach --dev sh0 --mode police").status, 0);
    }
    void prepare_namespace() override
    {
        ns_->ip("link set lo up");  // the test scrapes over the namespace's loopback
        ns_->disable_ipv6();        // no router solicitations in the counters
    }
    // `count` packets of `wire_len` bytes through the attached program (BPF_PROG_TEST_RUN).
    void send(unsigned count, uint32_t wire_len)
    {
        const std::string pin = shaperctl::Device::resolve("sh0").pin_dir() + "/shaper_egress";
        const int prog = bpf_obj_get(pin.c_str());
        ASSERT_GE(prog, 0) << pin;
        std::array<uint8_t, 64> frame{};
        __sk_buff ctx{};
        ctx.wire_len = wire_len;
        ctx.gso_segs = 1;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = 64, .ctx_in = &ctx,
                    .ctx_size_in = sizeof ctx, .repeat = static_cast<int>(count));
        ASSERT_EQ(bpf_prog_test_run_opts(prog, &opts), 0);
        close(prog);
    }
};

// Sample lines by metric and labels: {"name{labels}" -> value}; checks HELP/TYPE come first.
std::map<std::string, std::string> samples(const std::string& text)
{
    std::map<std::string, std::string> out;
    std::set<std::string> typed, helped;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("# HELP ")) {
            helped.insert(line.substr(7, line.find(' ', 7) - 7));
            continue;
        }
        if (line.starts_with("# TYPE ")) {
            const std::string name = line.substr(7, line.find(' ', 7) - 7);
            const std::string type = line.substr(line.rfind(' ') + 1);
            EXPECT_TRUE(type == "counter" || type == "gauge") << line;
            EXPECT_EQ(type == "counter", name.ends_with("_total")) << "counters end in _total: " << line;
            EXPECT_TRUE(typed.insert(name).second) << "family typed twice: " << line;
            continue;
        }
        const auto space = line.rfind(' ');
        const std::string series = line.substr(0, space);
        const std::string name = series.substr(0, series.find('{'));
        EXPECT_TRUE(typed.count(name)) << "no TYPE before " << line;
        EXPECT_TRUE(helped.count(name)) << "no HELP before " << line;
        EXPECT_TRUE(name.starts_with("shaperctl_")) << line;
        out[series] = line.substr(space + 1);
    }
    return out;
}

TEST_F(Exporter, ServesMetricsOverLoopbackUntilSigterm)
{
    ok("add-class --dev sh0 --id 1 --rate 8mbit --overhead 24 --burst 64kb");
    ok("add-class --dev sh0 --id 2 --rate 1mbit --parent 1");
    ok("add-rule --dev sh0 --pref 10 --class 2 --dport 80");
    ok("set-default --dev sh0 --class 1");
    send(3, 1000);

    const int port = free_port();
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    Background exporter("-n " + ns_->name() + " exporter --listen " + listen);
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(1);
    auto res = client.Get("/metrics");
    for (int i = 0; i < 100 && !res; i++) {
        ASSERT_TRUE(exporter.running()) << exporter.err();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        res = client.Get("/metrics");
    }
    ASSERT_TRUE(res) << "no answer on " << listen << ": " << exporter.err();
    EXPECT_EQ(res->status, 200);
    EXPECT_TRUE(res->get_header_value("Content-Type").starts_with("text/plain; version=0.0.4")) << res->get_header_value("Content-Type");
    const auto m = samples(res->body);
    const std::string c1 = R"({device="sh0",class="1"})", c2 = R"({device="sh0",class="2"})";
    EXPECT_EQ(m.at("shaperctl_device_up{device=\"sh0\"}"), "1");
    EXPECT_EQ(m.at("shaperctl_device_info{device=\"sh0\",ifindex=\"" + std::to_string(ns_->ifindex("sh0")) +
                   "\",mode=\"police\"}"), "1");
    EXPECT_EQ(m.at("shaperctl_device_filter_attached{device=\"sh0\"}"), "1");
    EXPECT_EQ(m.at("shaperctl_device_default_class{device=\"sh0\"}"), "1");
    EXPECT_EQ(m.at("shaperctl_class_packets_total" + c1), "3");
    EXPECT_EQ(m.at("shaperctl_class_segments_total" + c1), "3");
    EXPECT_EQ(m.at("shaperctl_class_bytes_total" + c1), "3072");  // (1000 + 24) x 3
    EXPECT_EQ(m.at("shaperctl_class_packets_total" + c2), "0");
    EXPECT_EQ(m.at(R"(shaperctl_class_drops_total{device="sh0",class="1",cause="horizon"})"), "0");
    EXPECT_EQ(m.at(R"(shaperctl_class_drops_total{device="sh0",class="1",cause="aqm"})"), "0");
    EXPECT_EQ(m.at("shaperctl_class_ecn_marks_total" + c1), "0");
    EXPECT_EQ(m.at("shaperctl_class_rate_limit_bytes_per_second" + c1), "1000000");
    EXPECT_EQ(m.at("shaperctl_class_burst_bytes" + c1), "65536");
    EXPECT_EQ(m.at("shaperctl_class_horizon_seconds" + c1), "0.005");
    EXPECT_TRUE(m.count("shaperctl_class_backlog_seconds" + c1));
    EXPECT_TRUE(m.count("shaperctl_class_sparse_packets_total" + c1));
    EXPECT_EQ(m.at(R"(shaperctl_class_info{device="sh0",class="2",parent="1"})"), "1");
    EXPECT_EQ(m.at(R"(shaperctl_rule_hits_total{device="sh0",pref="10",class="2"})"), "0");
    EXPECT_EQ(m.at(R"(shaperctl_rule_bytes_total{device="sh0",pref="10",class="2"})"), "0");
    EXPECT_TRUE(m.count("shaperctl_unclassified_packets_total{device=\"sh0\"}"));

    // Counters move between scrapes.
    send(2, 1000);
    res = client.Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(samples(res->body).at("shaperctl_class_packets_total" + c1), "5");
    EXPECT_EQ(client.Get("/nope")->status, 404);

    // A second exporter on the port: one line, non-zero, the first one unharmed.
    Outcome second = sh("exporter --listen " + listen);
    EXPECT_NE(second.status, 0);
    EXPECT_NE(second.err.find("cannot listen on " + listen + ": the port is in use"), std::string::npos) << second.err;
    EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
    EXPECT_TRUE(exporter.running());
    EXPECT_TRUE(client.Get("/metrics"));

    EXPECT_EQ(exporter.stop(SIGTERM), 0) << exporter.err();
    EXPECT_FALSE(client.Get("/metrics")) << "still serving after SIGTERM";
}

TEST_F(Exporter, StopsOnSigintAndRefusesABadListenAddress)
{
    const int port = free_port();
    Background exporter("-n " + ns_->name() + " exporter --listen 127.0.0.1:" + std::to_string(port));
    httplib::Client client("127.0.0.1", port);
    bool up = false;
    for (int i = 0; i < 100 && !(up = bool(client.Get("/metrics"))); i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(up) << exporter.err();
    EXPECT_EQ(exporter.stop(SIGINT), 0) << exporter.err();

    for (const auto& [listen, needle] : std::vector<std::pair<std::string, std::string>>{
             {"9464", "bad --listen \"9464\" (use HOST:PORT"},
             {"127.0.0.1:0", "the port must be 1 to 65535"},
             {"127.0.0.1:http", "the port must be 1 to 65535"},
             {"::1:9464", "brackets"},
             {"eth0:9464", "is not an IP address"},
             {"192.0.2.1:9464", "cannot listen on 192.0.2.1:9464"}}) {
        Outcome o = sh("exporter --listen " + listen);
        EXPECT_NE(o.status, 0) << listen;
        EXPECT_NE(o.err.find(needle), std::string::npos) << listen << ": " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
}

TEST(ExporterText, EscapesLabelsAndListsDownDevices)
{
    shaperctl::DeviceStatus st;
    st.device.name = "we\"ird\\dev";
    st.device.ifindex = 7;
    st.mode = SHAPER_MODE_EDT;
    shaperctl::ClassStatus c;
    c.spec.id = 3;
    c.spec.rate_bps = 1'000'001;  // 125000.125 bytes/s
    c.spec.horizon_ns = 2'000'000'000;
    c.backlog_ns = 1'500'000;
    st.classes.push_back(c);
    const std::string text = shaperctl::metrics_text({st}, {"gone0"});
    EXPECT_NE(text.find(R"(shaperctl_class_rate_limit_bytes_per_second{device="we\"ird\\dev",class="3"} 125000.125)"),
              std::string::npos) << text;
    EXPECT_NE(text.find(R"(shaperctl_class_backlog_seconds{device="we\"ird\\dev",class="3"} 0.0015)"), std::string::npos);
    EXPECT_NE(text.find(R"(shaperctl_class_horizon_seconds{device="we\"ird\\dev",class="3"} 2)"), std::string::npos);
    EXPECT_NE(text.find("shaperctl_device_up{device=\"gone0\"} 0\n"), std::string::npos);
    EXPECT_EQ(shaperctl::parse_listen(":9464"), std::make_pair(std::string("0.0.0.0"), 9464));
    EXPECT_EQ(shaperctl::parse_listen("[::1]:80"), std::make_pair(std::string("::1"), 80));
    EXPECT_THROW(shaperctl::parse_listen("1.2.3.4:99999"), shaperctl::Error);
}

// status --watch: redrawn every interval with the rate over it; Ctrl-C ends it with status 0.
TEST_F(Exporter, StatusWatchRefreshesUntilCtrlC)
{
    ok("add-class --dev sh0 --id 1 --rate 10gbit");  // nothing dropped
    ok("set-default --dev sh0 --class 1");
    Background json_watch("-n " + ns_->name() + " status --dev sh0 --watch 100ms --json");
    Background table_watch("-n " + ns_->name() + " status --dev sh0 --watch 100ms");
    auto frames = [](const std::string& text, const std::string& mark) {
        size_t n = 0;
        for (size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at + 1))
            n++;
        return n;
    };
    // Waits (slow machines: the stock-kernel VM emulates its CPU) for frames to appear.
    auto wait_for = [&](size_t json_frames, size_t table_frames) {
        for (int i = 0; i < 200; i++) {
            if (frames(json_watch.out(), "\n") >= json_frames && frames(table_watch.out(), "every 100ms") >= table_frames)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    };
    ASSERT_TRUE(wait_for(1, 1)) << json_watch.err() << table_watch.err();
    send(100, 1000);
    const size_t before = frames(json_watch.out(), "\n");
    EXPECT_TRUE(wait_for(before + 2, 3));
    EXPECT_EQ(json_watch.stop(SIGINT), 0) << json_watch.err();
    EXPECT_EQ(table_watch.stop(SIGINT), 0) << table_watch.err();

    std::istringstream lines(json_watch.out());
    std::string line;
    unsigned count = 0;
    uint64_t best_rate = 0;
    while (std::getline(lines, line)) {
        const json st = json::parse(line);
        count++;
        ASSERT_EQ(st["classes"].size(), 1u);
        best_rate = std::max(best_rate, st["classes"][0]["rate_estimate_bps"].get<uint64_t>());
    }
    EXPECT_GE(count, 3u);
    // The frame after the 100 packets of 1000 bytes shows their rate over its interval.
    EXPECT_GT(best_rate, 0u) << json_watch.out();

    const std::string table = table_watch.out();
    EXPECT_GE(frames(table, "every 100ms"), 3u) << table;
    EXPECT_NE(table.find("rate now"), std::string::npos) << table;

    Outcome bad = sh("status --dev sh0 --watch 1ms");
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.err.find("at least 10ms"), std::string::npos) << bad.err;
}

}  // namespace
