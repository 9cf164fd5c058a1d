#include "exporter.h"

#include <arpa/inet.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "exporter_http.h"
#include "exporter_privileges.h"
#include "exporter_web_config.h"
#include "loader/device.h"
#include "loader/error.h"
#include "loader/fd.h"

namespace shaperctl {
namespace {

std::string escape_label(const std::string& value)
{
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"')
            out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

// `n / 10^digits` as an exact decimal: "0.0015", "12".
std::string decimal(uint64_t n, unsigned digits)
{
    uint64_t scale = 1;
    for (unsigned i = 0; i < digits; i++)
        scale *= 10;
    std::string out = std::to_string(n / scale);
    if (uint64_t frac = n % scale) {
        std::string f = std::to_string(frac);
        f = std::string(digits - f.size(), '0') + f;
        f.erase(f.find_last_not_of('0') + 1);
        out += "." + f;
    }
    return out;
}

class Exposition {
public:
    // Families print in the order they are first declared; samples group under their family.
    void family(const std::string& name, const char* type, const std::string& help)
    {
        order_.push_back(name);
        families_[name] = {type, help, {}};
    }
    void sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                const std::string& value)
    {
        std::string line = name;
        if (!labels.empty()) {
            line += "{";
            for (size_t i = 0; i < labels.size(); i++)
                line += (i ? "," : "") + labels[i].first + "=\"" + escape_label(labels[i].second) + "\"";
            line += "}";
        }
        families_.at(name).samples.push_back(line + " " + value);
    }
    void sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                uint64_t value)
    {
        sample(name, labels, std::to_string(value));
    }
    std::string text() const
    {
        std::string out;
        for (const std::string& name : order_) {
            const Family& f = families_.at(name);
            out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
            for (const std::string& s : f.samples)
                out += s + "\n";
        }
        return out;
    }

private:
    struct Family {
        std::string type, help;
        std::vector<std::string> samples;
    };
    std::vector<std::string> order_;
    std::map<std::string, Family> families_;
};

std::string scrape()
{
    std::vector<DeviceStatus> devices;
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
            devices.push_back(Shaper::open_unlocked(m.name, m.direction).status(std::chrono::nanoseconds(0)));
        } catch (const Error&) {
            down.push_back({m.name, m.direction});  // detached under our feet, say
        }
    }
    return metrics_text(devices, down);
}

using Labels = std::vector<std::pair<std::string, std::string>>;

Labels side_labels(const std::string& device, Direction direction)
{
    if (direction == Direction::Ingress)
        return {{"device", device}, {"direction", direction_name(direction)}};
    return {{"device", device}};
}

}  // namespace

std::string metrics_text(const std::vector<DeviceStatus>& devices, const std::vector<DownDevice>& down)
{
    Exposition e;
    e.family("shaperctl_device_up", "gauge",
             "1 when the managed device is present and its maps were read, else 0.");
    e.family("shaperctl_device_info", "gauge", "Managed device: ifindex and mode (edt or police) as labels.");
    e.family("shaperctl_device_filter_attached", "gauge",
             "1 when shaperctl's program is on the device's egress hook (tcx or tc clsact).");
    e.family("shaperctl_device_tx_queues", "gauge", "TX queues of the device.");
    e.family("shaperctl_device_fq_queues", "gauge", "TX queues whose qdisc is fq (edt mode paces on them).");
    e.family("shaperctl_device_default_class", "gauge", "Class of packets no rule matches (0: none).");
    e.family("shaperctl_unclassified_packets_total", "counter", "Packets that matched no rule and no default class (unshaped).");
    e.family("shaperctl_unclassified_segments_total", "counter", "Segments of unclassified packets.");
    e.family("shaperctl_unclassified_bytes_total", "counter", "Bytes of unclassified packets.");
    e.family("shaperctl_class_info", "gauge", "Configured class, with its parent (0: top level) as a label.");
    e.family("shaperctl_class_rate_limit_bytes_per_second", "gauge", "Configured shaping rate of the class.");
    e.family("shaperctl_class_burst_bytes", "gauge", "Configured burst of the class.");
    e.family("shaperctl_class_horizon_seconds", "gauge", "Largest queueing delay the class accepts before dropping.");
    e.family("shaperctl_class_packets_total", "counter", "Packets charged to the class (descendants included).");
    e.family("shaperctl_class_segments_total", "counter", "GSO segments charged to the class (descendants included).");
    e.family("shaperctl_class_bytes_total", "counter",
             "Bytes charged to the class: wire length plus overhead, after mpu (descendants included).");
    e.family("shaperctl_class_drops_total", "counter",
             "Packets dropped by the class, by cause: horizon (departure too far ahead), aqm (CoDel) "
             "or fair (a flow above its fair share).");
    e.family("shaperctl_class_ecn_marks_total", "counter", "Packets CoDel marked CE instead of dropping.");
    e.family("shaperctl_class_fair_marks_total", "counter",
             "Packets marked CE instead of dropped for a flow above its fair share.");
    e.family("shaperctl_class_sparse_packets_total", "counter",
             "Packets of sparse flows sent ahead of the class backlog (still charged).");
    e.family("shaperctl_class_backlog_seconds", "gauge", "How far the class clock runs ahead of now (0 when idle).");
    e.family("shaperctl_rule_hits_total", "counter", "Packets the rule classified.");
    e.family("shaperctl_rule_bytes_total", "counter", "Bytes of the packets the rule classified.");

    for (const DownDevice& dd : down)
        e.sample("shaperctl_device_up", side_labels(dd.name, dd.direction), 0);
    for (const DeviceStatus& st : devices) {
        const Labels d = side_labels(st.device.name, st.device.direction);
        const auto with = [&d](std::initializer_list<std::pair<std::string, std::string>> more) {
            Labels l = d;
            l.insert(l.end(), more);
            return l;
        };
        e.sample("shaperctl_device_up", d, st.present ? 1 : 0);
        e.sample("shaperctl_device_info",
                 with({{"ifindex", std::to_string(st.device.ifindex)}, {"mode", mode_name(st.mode)}}), 1);
        e.sample("shaperctl_device_filter_attached", d, st.program_id ? 1 : 0);
        e.sample("shaperctl_device_tx_queues", d, st.pacing.queues);
        e.sample("shaperctl_device_fq_queues", d, st.pacing.fq_queues);
        e.sample("shaperctl_device_default_class", d, st.default_class);
        e.sample("shaperctl_unclassified_packets_total", d, st.unclassified.packets);
        e.sample("shaperctl_unclassified_segments_total", d, st.unclassified.segments);
        e.sample("shaperctl_unclassified_bytes_total", d, st.unclassified.bytes);
        for (const ClassStatus& c : st.classes) {
            const std::string id = std::to_string(c.spec.id);
            const Labels l = with({{"class", id}});
            e.sample("shaperctl_class_info", with({{"class", id}, {"parent", std::to_string(c.spec.parent)}}), 1);
            e.sample("shaperctl_class_rate_limit_bytes_per_second", l, decimal(c.spec.rate_bps * 125, 3));
            e.sample("shaperctl_class_burst_bytes", l, c.spec.burst_bytes);
            e.sample("shaperctl_class_horizon_seconds", l, decimal(c.spec.horizon_ns, 9));
            e.sample("shaperctl_class_packets_total", l, c.counters.packets);
            e.sample("shaperctl_class_segments_total", l, c.counters.segments);
            e.sample("shaperctl_class_bytes_total", l, c.counters.bytes);
            e.sample("shaperctl_class_drops_total", with({{"class", id}, {"cause", "horizon"}}), c.counters.drops_horizon);
            e.sample("shaperctl_class_drops_total", with({{"class", id}, {"cause", "aqm"}}), c.counters.drops_aqm);
            e.sample("shaperctl_class_drops_total", with({{"class", id}, {"cause", "fair"}}), c.counters.drops_fair);
            e.sample("shaperctl_class_ecn_marks_total", l, c.counters.ecn_marks);
            e.sample("shaperctl_class_fair_marks_total", l, c.counters.fair_marks);
            e.sample("shaperctl_class_sparse_packets_total", l, c.counters.sparse);
            e.sample("shaperctl_class_backlog_seconds", l, decimal(uint64_t(std::max<int64_t>(c.backlog_ns, 0)), 9));
        }
        for (const RuleStatus& r : st.rules) {
            const Labels l = with({{"pref", std::to_string(r.rule.pref)}, {"class", std::to_string(r.rule.class_id)}});
            e.sample("shaperctl_rule_hits_total", l, r.counters.packets);
            e.sample("shaperctl_rule_bytes_total", l, r.counters.bytes);
        }
    }
    return e.text();
}

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
            return {200, "text/plain; version=0.0.4; charset=utf-8", scrape()};
        } catch (const std::exception& e) {
            return {500, "text/plain; charset=utf-8", std::string("shaperctl: ") + e.what() + "\n"};
        }
    }
    if (path == "/")
        return {200, "text/plain; charset=utf-8", "shaperctl exporter: metrics at /metrics\n"};
    return {404, "text/plain; charset=utf-8", "not found\n"};
}

}  // namespace

void run_exporter(const std::string& listen, const std::string& netns, const std::string& web_config)
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
    serve_http(std::move(listener), std::move(web), answer, stop_signals);
}

}  // namespace shaperctl
