// shaperctl exporter scraped over loopback, and status --watch: long-running commands, started in
// the background in a throw-away network namespace and stopped with a signal.
#include <bpf/bpf.h>
#include <crypt.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <httplib.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/exporter.h"
#include "loader/device.h"
#include "core/error.h"
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

// A TCP connection to 127.0.0.1:port (blocking), or -1.
int connect_loopback(int port)
{
    const int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(uint16_t(port));
    if (sock >= 0 && connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0)
        return sock;
    if (sock >= 0)
        close(sock);
    return -1;
}

// Entries of /proc/PID/DIR ("task": threads, "fd": open files).
size_t proc_entries(pid_t pid, const std::string& dir)
{
    size_t n = 0;
    if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/" + dir).c_str())) {
        while (const dirent* e = readdir(d))
            n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

// Resident memory of PID in kB (VmRSS of /proc/PID/status).
size_t rss_kb(pid_t pid)
{
    std::istringstream status(read_file("/proc/" + std::to_string(pid) + "/status"));
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmRSS:"))
            return std::stoul(line.substr(6));
    return 0;
}

// What a stuck exporter was doing, for a failure message: its state and kernel wait channel,
// and the accept queue of the listener on `port` (in the calling thread's namespace).
std::string exporter_state(pid_t pid, int port)
{
    std::string state = read_file("/proc/" + std::to_string(pid) + "/stat");
    if (const size_t paren = state.rfind(')'); paren != std::string::npos)
        state = state.substr(paren + 2, 1);
    std::string out = "exporter state " + state + ", waiting in " + read_file("/proc/" + std::to_string(pid) + "/wchan");
    std::istringstream tcp(read_file("/proc/self/net/tcp"));
    std::string line;
    char hex[8];
    std::snprintf(hex, sizeof hex, ":%04X", port);
    while (std::getline(tcp, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, st, queues;
        fields >> slot >> local >> remote >> st >> queues;
        if (st == "0A" && local.ends_with(hex))  // listening: rx_queue is the accept queue
            out += ", accept queue " + std::to_string(std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16));
    }
    return out;
}

// Polls `done` every 50 ms for up to `seconds`.
template <typename F>
bool eventually(F done, int seconds = 10)
{
    for (int i = 0; i < seconds * 20; i++) {
        if (done())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
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
        const std::string pin = shaperctl::Device::resolve("sh0").pin_dir() + "/shaper";
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
    // `shaperctl exporter --listen 127.0.0.1:PORT ARGS` in the background, once it accepts
    // connections. It starts in the test's namespace (this thread's); `prefix` runs it under
    // another command (setpriv).
    std::unique_ptr<Background> start_exporter(int port, const std::string& args = "", const std::string& prefix = "")
    {
        auto exporter = std::make_unique<Background>(
            "exporter --listen 127.0.0.1:" + std::to_string(port) + " " + args, prefix);
        const bool up = eventually([&] {
            const int sock = connect_loopback(port);
            if (sock >= 0)
                close(sock);
            return sock >= 0 || !exporter->running();
        });
        EXPECT_TRUE(up && exporter->running()) << exporter->err();
        return exporter;
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
            EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
            EXPECT_EQ(type == "counter", name.ends_with("_total")) << "counters end in _total: " << line;
            EXPECT_TRUE(typed.insert(name).second) << "family typed twice: " << line;
            continue;
        }
        const auto space = line.rfind(' ');
        const std::string series = line.substr(0, space);
        std::string name = series.substr(0, series.find('{'));
        for (const char* suffix : {"_bucket", "_sum", "_count"})  // a histogram's samples
            if (!typed.count(name) && name.ends_with(suffix))
                name.resize(name.size() - std::strlen(suffix));
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
    ok("add-class --dev sh0 --id 2 --rate 1mbit --ceil 4mbit --parent 1");
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
    EXPECT_EQ(m.at("shaperctl_class_ceil_bytes_per_second" + c1), "0");
    EXPECT_EQ(m.at("shaperctl_class_ceil_bytes_per_second" + c2), "500000");
    EXPECT_EQ(m.at("shaperctl_class_borrowed_bytes_total" + c2), "0");
    EXPECT_EQ(m.at("shaperctl_class_ceil_held_total" + c2), "0");
    EXPECT_EQ(m.at("shaperctl_class_spare_bytes_per_second" + c1), "0");
    EXPECT_EQ(m.at("shaperctl_class_burst_bytes" + c1), "65536");
    EXPECT_EQ(m.at("shaperctl_class_horizon_seconds" + c1), "0.005");
    EXPECT_TRUE(m.count("shaperctl_class_backlog_seconds" + c1));
    EXPECT_TRUE(m.count("shaperctl_class_sparse_packets_total" + c1));
    EXPECT_EQ(m.at(R"(shaperctl_class_info{device="sh0",class="2",parent="1"})"), "1");
    EXPECT_EQ(m.at(R"(shaperctl_rule_hits_total{device="sh0",pref="10",class="2"})"), "0");
    EXPECT_EQ(m.at(R"(shaperctl_rule_bytes_total{device="sh0",pref="10",class="2"})"), "0");
    EXPECT_TRUE(m.count("shaperctl_unclassified_packets_total{device=\"sh0\"}"));

    // The text is streamed: in chunks to HTTP/1.1 clients, to a HTTP/1.0 one until it closes.
    EXPECT_EQ(res->get_header_value("Transfer-Encoding"), "chunked");
    const int old_client = connect_loopback(port);
    ASSERT_GE(old_client, 0);
    const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
    ASSERT_EQ(::send(old_client, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
    std::string answer;
    char buf[4096];
    for (ssize_t n; (n = recv(old_client, buf, sizeof buf, 0)) > 0;)
        answer.append(buf, size_t(n));
    close(old_client);
    const size_t body = answer.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << answer;
    EXPECT_EQ(answer.find("Transfer-Encoding"), std::string::npos) << answer.substr(0, body);
    EXPECT_EQ(answer.substr(body + 4), res->body);

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
             {"192.0.2.1:9464", "cannot listen on 192.0.2.1:9464"},
             {"127.0.0.1:1 --head-timeout 10ms", "bad --head-timeout \"10ms\": must be 100ms to 3600s"},
             {"127.0.0.1:1 --head-timeout 7200s", "must be 100ms to 3600s"},
             {"127.0.0.1:1 --head-timeout 10", "bad time"}}) {
        Outcome o = sh("exporter --listen " + listen);
        EXPECT_NE(o.status, 0) << listen;
        EXPECT_NE(o.err.find(needle), std::string::npos) << listen << ": " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
}

// Slow clients cannot silence the exporter: with 256 connections that sent a request line and
// never the blank line after the headers, a scrape is still answered (measured, not bounded: the
// test only needs it answered before a liveness timeout far longer than any header timeout).
// Memory stays bounded, and once they close the exporter is back to its threads and fds.
TEST_F(Exporter, AnswersWhileHundredsOfClientsHangHalfWayThroughTheirRequest)
{
    ok("add-class --dev sh0 --id 1 --rate 8mbit");
    const int port = free_port();
    auto exporter = start_exporter(port);
    ASSERT_TRUE(exporter->running());
    const pid_t pid = exporter->pid();
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(60);
    ASSERT_TRUE(client.Get("/metrics"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its keep-alive ends: a quiet baseline
    client.stop();
    const size_t threads = proc_entries(pid, "task"), fds = proc_entries(pid, "fd");

    std::vector<int> slow;
    for (int i = 0; i < 256; i++) {
        const int sock = connect_loopback(port);
        ASSERT_GE(sock, 0) << "connection " << i;
        const std::string half = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";  // no blank line
        ASSERT_EQ(::send(sock, half.data(), half.size(), MSG_NOSIGNAL), ssize_t(half.size()));
        slow.push_back(sock);
    }
    const auto start = std::chrono::steady_clock::now();
    auto res = client.Get("/metrics");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("scrape with 256 half-open connections: %.3f s, exporter RSS %zu kB\n", seconds, rss_kb(pid));
    ASSERT_TRUE(res) << "no answer within 60 s with 256 half-open connections";
    EXPECT_EQ(res->status, 200);
    EXPECT_NE(res->body.find("shaperctl_class_packets_total{device=\"sh0\",class=\"1\"} 0"), std::string::npos);
    EXPECT_LT(rss_kb(pid), 64u * 1024);
    client.stop();

    for (int sock : slow)
        close(sock);
    EXPECT_TRUE(eventually([&] { return proc_entries(pid, "task") == threads && proc_entries(pid, "fd") == fds; }))
        << "threads " << proc_entries(pid, "task") << " (were " << threads << "), fds " << proc_entries(pid, "fd")
        << " (were " << fds << ")";

    // A client trickling its headers a byte at a time (a timeout per read would never fire) is
    // closed all the same: its request head had a deadline.
    const int trickle = connect_loopback(port);
    ASSERT_GE(trickle, 0);
    bool closed = false;
    for (int i = 0; i < 120 && !closed; i++) {  // 60 s: liveness only
        char byte;
        closed = ::send(trickle, i ? "a" : "GET /metrics HTTP/1.1\r\nX-Slow: ", i ? 1 : 32, MSG_NOSIGNAL) < 0 ||
                 recv(trickle, &byte, 1, MSG_DONTWAIT) == 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    close(trickle);
    EXPECT_TRUE(closed) << "a client sending a header byte every 500 ms was never closed";
    EXPECT_EQ(exporter->stop(SIGTERM), 0) << exporter->err();
}

// Whether the peer closed `sock` (EOF or reset), without waiting.
bool closed_by_peer(int sock)
{
    char byte;
    const ssize_t n = recv(sock, &byte, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN);
}

// The exporter takes at most 512 connections. A new one beyond makes room: an idle keep-alive
// connection goes first, even when younger than a client still sending its request.
TEST_F(Exporter, MakesRoomForNewConnectionsClosingIdleKeepAliveOnesFirst)
{
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    if (files.rlim_cur < 1200)
        GTEST_SKIP() << "needs 1200 file descriptors (RLIMIT_NOFILE " << files.rlim_cur << ")";
    const int port = free_port();
    // A head timeout longer than the test: a starved exporter takes its time accepting the 512,
    // and the default 10 s from each accept would close the first before the last came in.
    auto exporter = start_exporter(port, "--head-timeout 3600s");
    ASSERT_TRUE(exporter->running());

    const int oldest = connect_loopback(port);  // half-open, older than the idle one
    ASSERT_EQ(::send(oldest, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL), 16);
    const int idle = connect_loopback(port);
    const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::send(idle, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
    char answer[512];
    ASSERT_GT(recv(idle, answer, sizeof answer, 0), 0);  // answered, kept alive
    // Counted once both are in (start_exporter's probe connection is gone by then: its close
    // came before the request the exporter answered).
    const size_t fds = proc_entries(exporter->pid(), "fd") - 2;
    std::vector<int> others;
    for (int i = 0; i < 510; i++) {  // 512 with the two above: full
        others.push_back(connect_loopback(port));
        ASSERT_GE(others.back(), 0) << "connection " << i << ": " << strerror(errno);
    }
    // However long a starved exporter takes to accept them all.
    ASSERT_TRUE(eventually([&] { return proc_entries(exporter->pid(), "fd") == fds + 512; }, 120))
        << proc_entries(exporter->pid(), "fd") << " fds, " << fds << " before; "
        << exporter_state(exporter->pid(), port);
    EXPECT_FALSE(closed_by_peer(idle));

    const int newcomer = connect_loopback(port);
    EXPECT_TRUE(eventually([&] { return closed_by_peer(idle); }, 120)) << "the idle keep-alive connection is still open";
    EXPECT_FALSE(closed_by_peer(oldest)) << "a half-open connection went before the idle one";
    // More newcomers than the limit: the oldest go, the exporter stays at 512 and answers.
    for (int i = 0; i < 100; i++)
        others.push_back(connect_loopback(port));
    EXPECT_TRUE(eventually([&] { return closed_by_peer(oldest); }, 120));
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(60);
    auto res = client.Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_LE(proc_entries(exporter->pid(), "fd"), fds + 512);
    client.stop();
    for (int sock : others)
        close(sock);
    for (int sock : {oldest, idle, newcomer})
        close(sock);
    EXPECT_EQ(exporter->stop(SIGTERM), 0) << exporter->err();
}

// Capabilities in /proc/PID/status, as masks: {"CapEff" -> ..., "NoNewPrivs" -> 0 or 1}.
std::map<std::string, uint64_t> capability_status(pid_t pid)
{
    std::map<std::string, uint64_t> out;
    std::istringstream status(read_file("/proc/" + std::to_string(pid) + "/status"));
    std::string line;
    while (std::getline(status, line)) {
        const std::string key = line.substr(0, line.find(':'));
        if (key.starts_with("Cap"))
            out[key] = std::stoull(line.substr(key.size() + 1), nullptr, 16);
        else if (key == "NoNewPrivs")
            out[key] = std::stoull(line.substr(key.size() + 1));
    }
    return out;
}

constexpr uint64_t cap_bit(int cap)
{
    return uint64_t(1) << cap;
}

// Serving, the exporter holds only what reading the maps takes (docs/operations.md, "Privileges"): as root
// CAP_BPF and CAP_NET_ADMIN; as another user with those and CAP_DAC_OVERRIDE given (as the
// systemd unit gives them), the same three, and it still reads every counter.
TEST_F(Exporter, KeepsOnlyTheCapabilitiesReadingTheMapsTakes)
{
    ok("add-class --dev sh0 --id 1 --rate 8mbit");
    ok("set-default --dev sh0 --class 1");
    send(2, 500);
    int port = free_port();
    auto root = start_exporter(port);
    ASSERT_TRUE(root->running());
    const uint64_t reading = cap_bit(CAP_BPF) | cap_bit(CAP_NET_ADMIN);
    // It listens before it drops them: wait for that.
    eventually([&] { return capability_status(root->pid())["CapEff"] == reading; });
    auto caps = capability_status(root->pid());
    EXPECT_EQ(caps["CapEff"], reading);
    EXPECT_EQ(caps["CapPrm"], reading);
    EXPECT_EQ(caps["CapBnd"], reading);
    EXPECT_EQ(caps["CapInh"], 0u);
    EXPECT_EQ(caps["CapAmb"], 0u);
    EXPECT_EQ(caps["NoNewPrivs"], 1u);
    auto res = httplib::Client("127.0.0.1", port).Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(samples(res->body).at(R"(shaperctl_class_packets_total{device="sh0",class="1"})"), "2");
    EXPECT_EQ(root->stop(SIGTERM), 0) << root->err();

    if (run("setpriv --help | grep -q -- --ambient-caps").status != 0)  // busybox's has no such options
        GTEST_SKIP() << "util-linux's setpriv missing: the exporter was not run as another user";
    const std::string as_nobody = "setpriv --reuid 65534 --regid 65534 --clear-groups "
                                  "--inh-caps=+bpf,+net_admin,+dac_override --ambient-caps=+bpf,+net_admin,+dac_override ";
    port = free_port();
    auto nobody = start_exporter(port, "", as_nobody);
    ASSERT_TRUE(nobody->running());
    caps = capability_status(nobody->pid());
    EXPECT_EQ(caps["CapEff"], reading | cap_bit(CAP_DAC_OVERRIDE));
    EXPECT_EQ(caps["CapInh"], 0u);
    EXPECT_EQ(caps["CapAmb"], 0u);
    EXPECT_EQ(caps["NoNewPrivs"], 1u);
    res = httplib::Client("127.0.0.1", port).Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(samples(res->body).at(R"(shaperctl_class_packets_total{device="sh0",class="1"})"), "2");
    EXPECT_EQ(nobody->stop(SIGTERM), 0) << nobody->err();
}

// A CA, the server's certificate for 127.0.0.1, a client certificate of the CA and one of
// another CA, by openssl(1) in a temporary directory; and curl to use them.
class Pki {
public:
    Pki()
    {
        char tmpl[] = "/tmp/shaperctl-pki-XXXXXX";
        dir_ = mkdtemp(tmpl);
        const std::string key = "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes ";
        must_run("(cd " + dir_ + " && " +
                 key + "-x509 -days 2 -subj /CN=shaperctl-test-ca -keyout ca.key -out ca.pem && " +
                 key + "-x509 -days 2 -subj /CN=other-ca -keyout other-ca.key -out other-ca.pem && " +
                 key + "-subj /CN=127.0.0.1 -keyout server.key -out server.csr && " +
                 "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
                 "openssl x509 -req -days 2 -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                 "-extfile san.ext -out server.pem && " +
                 key + "-subj /CN=prometheus -keyout client.key -out client.csr && "
                 "openssl x509 -req -days 2 -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem && " +
                 key + "-subj /CN=stranger -keyout stranger.key -out stranger.csr && "
                 "openssl x509 -req -days 2 -in stranger.csr -CA other-ca.pem -CAkey other-ca.key "
                 "-CAcreateserial -out stranger.pem)");
    }
    ~Pki() { run("rm -rf " + dir_); }

    std::string path(const std::string& name) const { return dir_ + "/" + name; }
    void write(const std::string& name, const std::string& text) const { write_file(path(name), text); }

    struct Answer {
        int status;  // 0: no HTTP answer (curl failed)
        std::string headers, body;
    };
    Answer curl(const std::string& args, const std::string& url) const
    {
        const CommandResult r = run("curl -s --max-time 20 -o " + path("body") + " -D " + path("headers") +
                                    " -w '%{http_code}' " + args + " " + url);
        Answer a{std::atoi(r.output.c_str()), read_file(path("headers")), read_file(path("body"))};
        std::remove(path("body").c_str());
        std::remove(path("headers").c_str());
        return a;
    }

private:
    std::string dir_;
};

bool tls_tools_missing()
{
    return run("command -v openssl && command -v curl").status != 0;
}

// A bcrypt hash of `password` (libxcrypt; cost 5 keeps the test quick).
std::string bcrypt(const std::string& password)
{
    crypt_data data{};
    const char* salt = crypt_gensalt_rn("$2y$", 5, nullptr, 0, data.setting, sizeof data.setting);
    const char* hash = salt ? crypt_r(password.c_str(), salt, &data) : nullptr;
    return hash ? hash : "";
}

TEST_F(Exporter, ServesOverTlsAndChecksBasicAuth)
{
    if (tls_tools_missing())
        GTEST_SKIP() << "openssl or curl missing (scripts/install-deps.sh installs them)";
    ok("add-class --dev sh0 --id 1 --rate 8mbit");
    const Pki pki;
    const std::string hash = bcrypt("s3cret:with colon");
    ASSERT_FALSE(hash.empty());
    pki.write("web.yml", "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                         "basic_auth_users:\n  prometheus: " + hash + "\n");
    const int port = free_port();
    auto exporter = start_exporter(port, "--web-config " + pki.path("web.yml"));
    ASSERT_TRUE(exporter->running());
    const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/metrics";
    const std::string ca = "--cacert " + pki.path("ca.pem") + " ";

    auto a = pki.curl(ca + "-u 'prometheus:s3cret:with colon'", url);
    EXPECT_EQ(a.status, 200) << a.headers << exporter->err();
    EXPECT_NE(a.body.find("shaperctl_device_up{device=\"sh0\"} 1"), std::string::npos) << a.body;
    a = pki.curl(ca + "-u 'prometheus:s3cret:with colon'", url);  // remembered: no second bcrypt
    EXPECT_EQ(a.status, 200);

    // No credentials: 401 with the challenge. Wrong ones, or an unknown user: the same 401, no
    // body, nothing of the metrics.
    const auto challenge = pki.curl(ca, url);
    EXPECT_EQ(challenge.status, 401);
    EXPECT_NE(challenge.headers.find("WWW-Authenticate: Basic"), std::string::npos) << challenge.headers;
    EXPECT_EQ(challenge.body, "");
    for (const char* wrong : {"prometheus:s3cret", "prometheus:", "nobody:s3cret:with colon"}) {
        a = pki.curl(ca + "-u '" + wrong + "'", url);
        EXPECT_EQ(a.status, 401) << wrong;
        EXPECT_EQ(a.body, "") << wrong;
        EXPECT_EQ(a.headers, challenge.headers) << wrong;
    }
    EXPECT_EQ(pki.curl(ca + "-H 'Authorization: Basic !!!!'", url).status, 401);

    // Not without the CA that signed the server's certificate, and not in plain HTTP.
    EXPECT_EQ(pki.curl("-u 'prometheus:s3cret:with colon'", url).status, 0);
    EXPECT_EQ(pki.curl("-u 'prometheus:s3cret:with colon'", "http://127.0.0.1:" + std::to_string(port) + "/metrics").status, 0);
    EXPECT_TRUE(exporter->running());
    EXPECT_EQ(exporter->stop(SIGTERM), 0) << exporter->err();
}

TEST_F(Exporter, AsksForAClientCertificateOfTheConfiguredCa)
{
    if (tls_tools_missing())
        GTEST_SKIP() << "openssl or curl missing (scripts/install-deps.sh installs them)";
    const Pki pki;
    pki.write("web.yml", "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                         "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n");
    const int port = free_port();
    auto exporter = start_exporter(port, "--web-config " + pki.path("web.yml"));
    ASSERT_TRUE(exporter->running());
    const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/metrics";
    const std::string ca = "--cacert " + pki.path("ca.pem") + " ";
    EXPECT_EQ(pki.curl(ca + "--cert " + pki.path("client.pem") + " --key " + pki.path("client.key"), url).status, 200);
    EXPECT_EQ(pki.curl(ca, url).status, 0) << "served without a client certificate";
    EXPECT_EQ(pki.curl(ca + "--cert " + pki.path("stranger.pem") + " --key " + pki.path("stranger.key"), url).status, 0)
        << "served to a certificate of another CA";
    EXPECT_EQ(exporter->stop(SIGTERM), 0) << exporter->err();
}

// Each mistake: one line naming the file and the field, exit 1, nothing listening.
TEST_F(Exporter, RefusesABadWebConfigNamingTheField)
{
    if (tls_tools_missing())
        GTEST_SKIP() << "openssl or curl missing (scripts/install-deps.sh installs them)";
    const Pki pki;
    const std::string tls = "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"tls_server_config:\n  cert_file: /nonexistent/cert.pem\n  key_file: server.key\n",
         "tls_server_config.cert_file: cannot read /nonexistent/cert.pem: No such file or directory"},
        {"tls_server_config:\n  cert_file: server.pem\n", "tls_server_config.key_file: missing"},
        {"tls_server_config:\n  cert_file: server.pem\n  key_file: client.key\n",
         "tls_server_config.key_file: " + pki.path("client.key") + ": does not match"},
        {"tls_server_config:\n  cert_file: server.csr\n  key_file: server.key\n",
         "tls_server_config.cert_file: " + pki.path("server.csr") + ": not a PEM certificate"},
        {tls + "  client_auth_type: Sometimes\n", "tls_server_config.client_auth_type: unknown \"Sometimes\""},
        {tls + "  client_auth_type: RequireAndVerifyClientCert\n", "tls_server_config.client_ca_file: missing"},
        {tls + "  client_ca_file: ca.pem\n", "tls_server_config.client_ca_file: given, but client_auth_type"},
        {tls + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.key\n",
         "tls_server_config.client_ca_file: " + pki.path("ca.key") + ": not a PEM certificate"},
        {tls + "  min_version: TLS14\n", "tls_server_config.min_version: unknown \"TLS14\""},
        {tls + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "tls_server_config.cipher_suites: not supported"},
        {"tls_config:\n  cert_file: server.pem\n", "tls_config: unknown field"},
        {"basic_auth_users:\n  alice: plaintext\n", "basic_auth_users.alice: not a bcrypt hash"},
        {"basic_auth_users: [alice]\n", "basic_auth_users: expected a mapping"},
        {"tls_server_config: [\n", ": line 2: "},
    };
    const int port = free_port();
    for (const auto& [text, needle] : cases) {
        pki.write("web.yml", text);
        Outcome o = sh("exporter --listen 127.0.0.1:" + std::to_string(port) + " --web-config " + pki.path("web.yml"));
        EXPECT_EQ(o.status, 1) << text;
        EXPECT_NE(o.err.find("shaperctl: " + pki.path("web.yml") + ": "), std::string::npos) << o.err;
        EXPECT_NE(o.err.find(needle), std::string::npos) << text << "\n" << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
    Outcome o = sh("exporter --listen 127.0.0.1:" + std::to_string(port) + " --web-config " + pki.path("absent.yml"));
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find(pki.path("absent.yml") + ": cannot read: No such file or directory"), std::string::npos) << o.err;
    EXPECT_LT(connect_loopback(port), 0) << "something listens on the port";
}

// Beyond loopback without TLS or users: served, with a one-line warning; none with them.
TEST_F(Exporter, WarnsWhenServingBeyondLoopbackUnprotected)
{
    int port = free_port();
    auto open = std::make_unique<Background>("exporter --listen 0.0.0.0:" + std::to_string(port));
    ASSERT_TRUE(eventually([&] { return open->err().find("listening") != std::string::npos || !open->running(); }));
    const std::string err = open->err();
    EXPECT_NE(err.find("shaperctl: warning: 0.0.0.0:" + std::to_string(port) +
                       " is not a loopback address and metrics are served without TLS or authentication"),
              std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;  // the warning, then "listening"
    EXPECT_EQ(open->stop(SIGTERM), 0);

    const std::string web = "/tmp/shaperctl-test-web-" + std::to_string(getpid()) + ".yml";
    write_file(web, "basic_auth_users:\n  prometheus: " + bcrypt("x") + "\n");
    port = free_port();
    auto guarded = std::make_unique<Background>("exporter --listen 0.0.0.0:" + std::to_string(port) + " --web-config " + web);
    ASSERT_TRUE(eventually([&] { return guarded->err().find("listening") != std::string::npos || !guarded->running(); }));
    EXPECT_EQ(guarded->err().find("warning"), std::string::npos) << guarded->err();
    EXPECT_EQ(guarded->stop(SIGTERM), 0);
    std::remove(web.c_str());
}

// The units as `cmake --install` puts them, rated by systemd-analyze (0 safe, 10 unsafe): the
// exporter serves the network, at most 3.0; shaperctl.service, which loads and attaches the
// program, at most 5.0. packaging/check-units.sh runs them under systemd.
TEST(SystemdUnits, AreHardenedAsSystemdAnalyzeRatesThem)
{
    if (run("command -v systemd-analyze").status != 0)
        GTEST_SKIP() << "systemd-analyze missing (scripts/install-deps.sh installs systemd)";
    if (run("command -v cmake && test -f " SHAPERCTL_BUILD_DIR "/cmake_install.cmake").status != 0)
        GTEST_SKIP() << "no cmake or no build tree at " SHAPERCTL_BUILD_DIR " to install from";
    char tmpl[] = "/tmp/shaperctl-install-XXXXXX";
    const std::string prefix = mkdtemp(tmpl);
    // Under DESTDIR: the CNI plugin's directories are absolute, and a --prefix alone would put it
    // in the host's /opt/cni/bin and /usr/lib/cni.
    must_run("DESTDIR=" + prefix + " cmake --install " SHAPERCTL_BUILD_DIR " --prefix /usr/local >/dev/null");
    for (const auto& [unit, most] : std::vector<std::pair<std::string, double>>{
             {"shaperctl-exporter.service", 3.0}, {"shaperctl.service", 5.0}}) {
        const CommandResult r = run("systemd-analyze security --offline=true --no-pager " + prefix +
                                    "/usr/local/lib/systemd/system/" + unit);
        const std::string mark = "Overall exposure level for " + unit + ": ";
        const size_t at = r.output.find(mark);
        ASSERT_NE(at, std::string::npos) << r.output;
        const double exposure = std::stod(r.output.substr(at + mark.size()));
        std::printf("systemd-analyze security %s: %.1f\n", unit.c_str(), exposure);
        EXPECT_LE(exposure, most) << r.output;
    }
    run("rm -rf " + prefix);
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
    const std::string text = shaperctl::metrics_text({st}, {{"gone0", shaperctl::Direction::Egress}});
    EXPECT_NE(text.find(R"(shaperctl_class_rate_limit_bytes_per_second{device="we\"ird\\dev",class="3"} 125000.125)"),
              std::string::npos) << text;
    EXPECT_NE(text.find(R"(shaperctl_class_backlog_seconds{device="we\"ird\\dev",class="3"} 0.0015)"), std::string::npos);
    EXPECT_NE(text.find(R"(shaperctl_class_horizon_seconds{device="we\"ird\\dev",class="3"} 2)"), std::string::npos);
    EXPECT_NE(text.find("shaperctl_device_up{device=\"gone0\"} 0\n"), std::string::npos);
    EXPECT_EQ(shaperctl::parse_listen(":9464"), std::make_pair(std::string("0.0.0.0"), 9464));
    EXPECT_EQ(shaperctl::parse_listen("[::1]:80"), std::make_pair(std::string("::1"), 80));
    EXPECT_THROW(shaperctl::parse_listen("1.2.3.4:99999"), shaperctl::Error);
}

// The text a piece at a time, whatever the pieces' size: whole lines each, the same text in all.
TEST(ExporterText, PiecesOfAnySizeMakeTheWholeTextOfWholeLines)
{
    shaperctl::DeviceStatus st;
    st.device.name = "eth0";
    for (uint32_t id = 1; id <= 2000; id++) {
        shaperctl::ClassStatus c;
        c.spec.id = id;
        c.spec.rate_bps = id * 1000;
        c.counters.bytes = id * 7;
        st.classes.push_back(c);
    }
    st.rules.resize(3);
    const std::vector<shaperctl::DownDevice> down = {{"gone0", shaperctl::Direction::Egress}};
    const std::string whole = shaperctl::metrics_text({st}, down);
    EXPECT_NE(whole.find("shaperctl_class_bytes_total{device=\"eth0\",class=\"2000\"} 14000\n"), std::string::npos);
    for (size_t size : {1, 100, 4096, 1 << 20}) {
        shaperctl::DeviceSamples d;
        d.status = st;
        d.status.classes.clear();
        for (const shaperctl::ClassStatus& c : st.classes)
            d.classes.push_back(shaperctl::ClassSample::of(c));
        shaperctl::MetricsWriter writer({d}, down);
        std::string text;
        for (bool more = true; more;) {
            std::string piece;
            more = writer.next(piece, size);
            EXPECT_TRUE(piece.empty() ? !more : piece.back() == '\n') << "piece of " << size << " bytes";
            text += piece;
        }
        EXPECT_EQ(text, whole) << "pieces of " << size << " bytes";
    }
}

// Both sides of one device with the same class id: every series exactly once (a scrape with a
// repeated series is refused whole by Prometheus), the ingress side's with direction="ingress".
TEST(ExporterText, BothSidesOfADeviceAreDistinctSeries)
{
    std::vector<shaperctl::DeviceStatus> sides(2);
    for (int i = 0; i < 2; i++) {
        sides[i].device.name = "eth0";
        sides[i].device.direction = i ? shaperctl::Direction::Ingress : shaperctl::Direction::Egress;
        sides[i].mode = SHAPER_MODE_POLICE;
        shaperctl::ClassStatus c;
        c.spec.id = 1;
        sides[i].classes.push_back(c);
        sides[i].rules.push_back({});
        sides[i].acks_paced = true;
    }
    const std::string text =
        shaperctl::metrics_text(sides, {{"eth1", shaperctl::Direction::Ingress}});
    std::set<std::string> series;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line[0] != '#') {
            EXPECT_TRUE(series.insert(line.substr(0, line.rfind(' '))).second) << "repeated: " << line;
        }
    EXPECT_TRUE(series.count(R"(shaperctl_class_packets_total{device="eth0",class="1"})")) << text;
    EXPECT_TRUE(series.count(R"(shaperctl_class_packets_total{device="eth0",direction="ingress",class="1"})"));
    EXPECT_TRUE(series.count(R"(shaperctl_class_drops_total{device="eth0",direction="ingress",class="1",cause="aqm"})"));
    EXPECT_TRUE(series.count(R"(shaperctl_device_up{device="eth1",direction="ingress"})"));
    // Whether ACKs are paced is the receive side's alone.
    EXPECT_NE(text.find("shaperctl_device_acks_paced{device=\"eth0\",direction=\"ingress\"} 1\n"),
              std::string::npos) << text;
    EXPECT_EQ(text.find("shaperctl_device_acks_paced{device=\"eth0\"}"), std::string::npos);
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
