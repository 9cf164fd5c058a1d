#include "exporter.h"

#include <arpa/inet.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "exporter_http.h"
#include "exporter_privileges.h"
#include "exporter_web_config.h"
#include "loader/device.h"
#include "core/error.h"
#include "loader/fd.h"

namespace shaperctl {
namespace {

// Reads every device of this namespace now; the text is written from what was read as the
// client takes it.
std::shared_ptr<MetricsWriter> scrape()
{
    std::vector<DeviceSamples> devices;
    std::vector<DownDevice> down;
    const uint64_t here = current_netns();
    for (const ManagedDevice& m : Shaper::list()) {
        if (m.netns != here)
            continue;  // reachable by name only from its own namespace
        if (!m.present) {
            down.push_back({m.name, m.direction});
            continue;
        }
        try {
            DeviceSamples d;
            Shaper::open_unlocked(m.name, m.direction)
                .status(std::chrono::nanoseconds(0),
                        [&](const DeviceStatus& st) {
                            d.status = st;
                            d.classes.reserve(st.max_classes);  // address space: only what is written is resident
                        },
                        [&](const ClassStatus& c) { d.classes.push_back(ClassSample::of(c)); });
            devices.push_back(std::move(d));
        } catch (const Error&) {
            down.push_back({m.name, m.direction});  // detached under our feet, say
        }
    }
    return std::make_shared<MetricsWriter>(std::move(devices), std::move(down));
}

}  // namespace

std::pair<std::string, int> parse_listen(const std::string& listen)
{
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos)
        throw Error("bad --listen \"" + listen + "\" (use HOST:PORT, e.g. 127.0.0.1:9464)");
    std::string host = listen.substr(0, colon);
    const std::string port = listen.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    else if (host.find(':') != std::string::npos)
        throw Error("bad --listen \"" + listen + "\": write IPv6 addresses in brackets ([::1]:9464)");
    if (host.empty())
        host = "0.0.0.0";
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
        throw Error("bad --listen \"" + listen + "\": the port must be 1 to 65535");
    return {host, std::stoi(port)};
}

namespace {

bool is_loopback(const std::string& host)
{
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, host.c_str(), &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host.c_str(), &v6) == 1 &&
           (IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127));
}

// What a scrape takes: CAP_BPF (or CAP_SYS_ADMIN before Linux 5.8) and CAP_NET_ADMIN, which
// the loader asks of every command (the map reads need neither on 6.1 and later, but a tcx
// attachment's BPF_PROG_QUERY needs CAP_NET_ADMIN), and, unless the exporter runs as root,
// CAP_DAC_OVERRIDE: pins and records are root's, 0600, and a pin opens for reading and writing.
std::vector<int> capabilities_to_read()
{
    std::vector<int> keep = {kernel_knows_capability(CAP_BPF) ? CAP_BPF : CAP_SYS_ADMIN, CAP_NET_ADMIN};
    if (geteuid() != 0)
        keep.push_back(CAP_DAC_OVERRIDE);
    return keep;
}

HttpResponse answer(const std::string& path)
{
    if (path == "/metrics") {
        try {
            std::shared_ptr<MetricsWriter> text = scrape();
            return {200, "text/plain; version=0.0.4; charset=utf-8", "",
                    [text](std::string& out, size_t size) { return text->next(out, size); }};
        } catch (const std::exception& e) {
            return {500, "text/plain; charset=utf-8", std::string("shaperctl: ") + e.what() + "\n"};
        }
    }
    if (path == "/")
        return {200, "text/plain; charset=utf-8", "shaperctl exporter: metrics at /metrics\n"};
    return {404, "text/plain; charset=utf-8", "not found\n"};
}

}  // namespace

void run_exporter(const std::string& listen, const std::string& netns, const std::string& web_config,
                  std::chrono::nanoseconds head_timeout)
{
    const auto [host, port] = parse_listen(listen);
    WebConfig web = web_config.empty() ? WebConfig{} : load_web_config(web_config);
    Fd listener = listen_tcp(host, port, listen);
    if (!web.tls && web.users.empty() && !is_loopback(host))
        std::fprintf(stderr, "shaperctl: warning: %s is not a loopback address and metrics are served without "
                             "TLS or authentication (see --web-config)\n", listen.c_str());
    if (!netns.empty())
        enter_netns(netns);  // after the bind: scrapers reach us where we started
    keep_only_capabilities(capabilities_to_read());

    // Signals reach the server loop through a signalfd: blocked in every thread, before any starts.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client gone mid-response: OpenSSL writes with plain send()
    std::fprintf(stderr, "shaperctl: exporter listening on %s (GET /metrics%s%s)\n", listen.c_str(),
                 web.tls ? ", TLS" : "", web.users.empty() ? "" : ", basic auth");
    serve_http(std::move(listener), std::move(web), answer, stop_signals,
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(head_timeout));
}

}  // namespace shaperctl
