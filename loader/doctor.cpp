#include "loader/doctor.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/ethtool.h>
#include <linux/magic.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <thread>

#include "loader/device.h"
#include "loader/hook.h"
#include "core/error.h"
#include "loader/kernel_features.h"
#include "loader/libbpf_log.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "loader/qdisc.h"
#include "loader/shaper.h"
#include "loader/tcx_link.h"

namespace shaperctl {
namespace detail {

void in_scratch_netns(const std::function<void()>& probe)
{
    std::exception_ptr error;
    // Namespaces belong to threads: this one's goes away when it ends, with whatever the probe
    // created in it.
    std::thread thread([&] {
        try {
            if (unshare(CLONE_NEWNET))
                throw Error(errno_message("cannot create a scratch network namespace", errno));
            probe();
        } catch (...) {
            error = std::current_exception();
        }
    });
    thread.join();
    if (error)
        std::rethrow_exception(error);
}

}  // namespace detail

namespace {

constexpr const char* kFqHint = "--mode police, or a kernel with sch_fq (CONFIG_NET_SCH_FQ)";

std::string read_line(const std::string& path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

bool has_word(const std::string& words, const std::string& word)
{
    size_t pos = 0;
    while ((pos = words.find(word, pos)) != std::string::npos) {
        const bool start = pos == 0 || words[pos - 1] == ' ';
        const bool end = pos + word.size() == words.size() || words[pos + word.size()] == ' ';
        if (start && end)
            return true;
        pos += word.size();
    }
    return false;
}

// ETHTOOL_GGSO and the like: -1 when the device does not say.
int ethtool_flag(const std::string& dev, uint32_t cmd)
{
    Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock)
        return -1;
    ethtool_value value{};
    value.cmd = cmd;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&value);
    if (ioctl(sock.get(), SIOCETHTOOL, &ifr))
        return -1;
    return value.data ? 1 : 0;
}

// What the side's commands open: the program's pin and every map's. A pin removed by hand leaves
// the program running with no way to change or read it.
void check_pins(const Device& device, const std::string& who, const std::string& fix, std::vector<Finding>& out)
{
    try {
        ShaperMaps::open_pinned(device.pin_dir());
    } catch (const Error& e) {
        out.push_back({who + " pins", "fail", std::string(e.what()) + ": the side cannot be changed or read", fix});
        return;
    }
    if (!pinned_prog_id(device.pin_dir()))
        out.push_back({who + " pins", "warn",
                       "no program pinned in " + device.pin_dir() + ": the next attach loads a new one", fix});
    else
        out.push_back({who + " pins", "ok", "program and maps pinned in " + device.pin_dir(), ""});
}

// The hook the side runs on, and the kernel feature it stands for: TCX (Linux 6.6) or tc clsact.
Finding hook_finding(const std::string& who, Hook hook, Direction side)
{
    const std::string point = attach_point_name(hook, side);
    if (hook == Hook::Tcx)
        return {who + " hook", "ok", point + ": a TCX link (Linux 6.6+)", ""};
    if (kernel_has_tcx())
        return {who + " hook", "ok", point + ": chosen at attach (SHAPERCTL_ATTACH=tc); this kernel has TCX too", ""};
    return {who + " hook", "ok",
            point + ": this kernel (" + kernel_release() + ") has no TCX " + direction_name(side) +
                " hook; Linux 6.6 has it",
            ""};
}

// Ingress classes slow senders by CE marks where the connection negotiated ECN, else by drops.
// Connections this host opens (its downloads) ask for ECN only with tcp_ecn=1.
Finding ecn_finding(const std::string& who)
{
    const std::string ecn = read_line("/proc/sys/net/ipv4/tcp_ecn");
    if (ecn == "1")
        return {who + " ecn", "ok", "net.ipv4.tcp_ecn=1: connections opened here ask for ECN", ""};
    return {who + " ecn", "warn",
            "net.ipv4.tcp_ecn=" + (ecn.empty() ? std::string("unknown") : ecn) +
                ": connections opened here do not ask for ECN, so their downloads are slowed by drops, not marks",
            "sysctl -w net.ipv4.tcp_ecn=1"};
}

// The receive side's senders feel its virtual backlog only through their ACKs, which the send
// side holds in sch_fq (bpf/ack_pace.h): without it they are held by marks and drops alone.
Finding ack_pacing_finding(const ManagedDevice& m, const std::string& who, const std::string& shaperctl)
{
    const Device egress{m.name, m.ifindex, m.netns, Direction::Egress};
    const auto record = AttachRecord::load(egress.run_dir() + "/attach.json");
    if (record && record->mode == SHAPER_MODE_EDT)
        return {who + " ack pacing", "ok", "the send side runs in edt mode: ACKs of shaped TCP flows are paced", ""};
    return {who + " ack pacing", "warn",
            std::string(record ? "the send side polices (no sch_fq)" : "the send side is not attached") +
                ": ACKs are not paced, so TCP senders are slowed by marks and drops alone (more retransmits)",
            record ? "" : shaperctl + " attach --dev " + m.name + " (edt mode) paces them"};
}

void check_device(const ManagedDevice& m, const std::string& shaperctl, std::vector<Finding>& out)
{
    const bool ingress = m.direction == Direction::Ingress;
    const std::string who = "dev " + m.name + (ingress ? " ingress" : "");
    const std::string side_flag = ingress ? " --ingress" : "";
    const Device device{m.name, m.ifindex, m.netns, m.direction};
    if (!m.present) {
        out.push_back({who, "warn", "ifindex " + std::to_string(m.ifindex) + " is gone; its state remains",
                       m.gone ? shaperctl + " detach --gone" : "remove " + device.pin_dir() + " and " + device.run_dir()});
        return;
    }
    const uint32_t running = hook_prog_id(device, m.attachment);
    const uint32_t pinned = pinned_prog_id(device.pin_dir());
    const std::string hook = attach_point_name(m.attachment.hook, m.direction);
    if (!running)
        out.push_back({who + " filter", "fail",
                       "no shaperctl program on " + hook + ": packets leave unshaped",
                       shaperctl + " attach --dev " + m.name + side_flag + " puts it back"});
    else if (pinned && running != pinned)
        out.push_back({who + " filter", "warn",
                       hook + " runs program " + std::to_string(running) + ", the pinned one is " +
                           std::to_string(pinned),
                       shaperctl + " attach --dev " + m.name + side_flag + " replaces it"});
    else
        out.push_back({who + " filter", "ok", "program " + std::to_string(running) + " on " + hook, ""});

    check_pins(device, who, shaperctl + " detach --dev " + m.name + side_flag + ", then attach again", out);
    out.push_back(hook_finding(who, m.attachment.hook, m.direction));
    if (ingress) {
        out.push_back(ecn_finding(who));
        out.push_back(ack_pacing_finding(m, who, shaperctl));
    }

    if (m.mode == SHAPER_MODE_EDT) {
        const PacingSetup pacing = inspect_pacing(m.ifindex);
        if (pacing.fq_everywhere)
            out.push_back({who + " fq", "ok",
                           "fq on " + std::to_string(pacing.fq_queues) + "/" + std::to_string(pacing.queues) +
                               " TX queues (root " + pacing.root_kind + ")",
                           ""});
        else
            out.push_back({who + " fq", "fail",
                           "root qdisc " + (pacing.root_kind.empty() ? std::string("none") : pacing.root_kind) +
                               ", fq on " + std::to_string(pacing.fq_queues) + "/" +
                               std::to_string(pacing.queues) +
                               " TX queues: departure times are not enforced (was the qdisc replaced?)",
                           shaperctl + " detach --dev " + m.name + ", then attach (or apply) again"});
    } else if (!ingress) {
        out.push_back({who + " fq", "ok", "police mode: no pacing qdisc needed", ""});
    }

    const int gso = ethtool_flag(m.name, ETHTOOL_GGSO), tso = ethtool_flag(m.name, ETHTOOL_GTSO);
    auto state = [](int v) { return v < 0 ? std::string("unknown") : v ? "on" : "off"; };
    const std::string offload = "gso " + state(gso) + ", tso " + state(tso);
    if (gso == 0)
        out.push_back({who + " offload", "warn",
                       offload + ": every packet is classified, charged and stamped on its own",
                       "ethtool -K " + m.name + " gso on" + (tso == 0 ? " tso on" : "")});
    else
        out.push_back({who + " offload", "ok", offload, ""});
}

}  // namespace

std::vector<Finding> run_doctor(const std::string& netns)
{
    quiet_libbpf();
    std::vector<Finding> out;
    // Host-wide settings first: a namespace other than the first shows no net.core.default_qdisc.
    const std::string qdisc = read_line("/proc/sys/net/core/default_qdisc");
    if (!netns.empty())
        enter_netns(netns);

    utsname uts{};
    uname(&uts);
    out.push_back({"kernel", "ok", std::string(uts.sysname) + " " + uts.release + " " + uts.machine, ""});

    bool root = true;
    try {
        require_privileges();
        out.push_back({"privileges", "ok", "CAP_BPF and CAP_NET_ADMIN", ""});
    } catch (const Error& e) {
        root = false;
        out.push_back({"privileges", "fail", e.what(), "run shaperctl as root"});
    }

    if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
        out.push_back({"btf", "ok", "/sys/kernel/btf/vmlinux", ""});
    else
        out.push_back({"btf", "fail", "no /sys/kernel/btf/vmlinux: the program cannot be relocated (CO-RE)",
                       "a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's are)"});

    struct statfs fs {};
    if (statfs("/sys/fs/bpf", &fs) == 0 && fs.f_type == BPF_FS_MAGIC)
        out.push_back({"bpffs", "ok", "mounted at /sys/fs/bpf", ""});
    else
        out.push_back({"bpffs", "warn", "/sys/fs/bpf is not a bpf filesystem (attach mounts one there)",
                       "mount -t bpf bpf /sys/fs/bpf"});

    const std::string needs_root = "not checked: needs root";
    bool fq_ok = false;
    if (!root) {
        for (const char* check : {"bpf program", "set_tstamp", "clsact", "tcx", "sch_fq"})
            out.push_back({check, "warn", needs_root, "run shaperctl doctor as root"});
    } else {
        const std::vector<const KernelFeature*> missing = missing_features(datapath_features());
        if (!missing.empty()) {
            out.push_back({"bpf program", "fail", lacking_sentence(kernel_release(), missing),
                           "a kernel of " + version_needed(missing) + " or later"});
        } else {
            try {
                Program program = Program::load({"", 0, 14});
                out.push_back({"bpf program", "ok", "loads and verifies on this kernel", ""});
            } catch (const Error& e) {
                out.push_back({"bpf program", "fail", e.what(), "a kernel with BPF, BTF and tc clsact (5.15+)"});
            }
        }
        const int tstamp = libbpf_probe_bpf_helper(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_skb_set_tstamp, nullptr);
        if (tstamp == 1)
            out.push_back({"set_tstamp", "ok", "bpf_skb_set_tstamp: departure times flagged as monotonic delivery times", ""});
        else
            out.push_back({"set_tstamp", "warn",
                           "no bpf_skb_set_tstamp (kernel before 5.18): skb->tstamp is written directly",
                           "a 5.18+ kernel keeps the stamp of forwarded packets across namespaces"});
        try {
            detail::in_scratch_netns([] {
                const int lo = static_cast<int>(if_nametoindex("lo"));
                bpf_tc_hook hook{};
                hook.sz = sizeof hook;
                hook.ifindex = lo;
                hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
                if (int err = bpf_tc_hook_create(&hook); err && err != -EEXIST)
                    throw Error(errno_message("cannot create a clsact qdisc", err));
            });
            out.push_back({"clsact", "ok", "a clsact qdisc can be created (egress and ingress hooks)", ""});
        } catch (const Error& e) {
            out.push_back({"clsact", "fail", e.what(), "a kernel with CONFIG_NET_SCH_INGRESS (clsact)"});
        }
        if (kernel_has_tcx())
            out.push_back({"tcx", "ok", "TCX: attach links the program on tcx egress, and tcx ingress for --ingress", ""});
        else
            out.push_back({"tcx", "ok",
                           "no TCX (Linux 6.6 has it): attach uses tc clsact egress, and tc clsact ingress for --ingress",
                           ""});
        std::string fq_error;
        try {
            detail::in_scratch_netns([] { install_fq(static_cast<int>(if_nametoindex("lo")), FqOptions{}); });
            fq_ok = true;
        } catch (const QdiscUnavailable&) {
            fq_error = "the kernel has no sch_fq";
        } catch (const Error& e) {
            fq_error = e.what();
        }
        bool edt_here = false;
        for (const ManagedDevice& m : Shaper::list())
            edt_here |= m.present && m.mode == SHAPER_MODE_EDT;
        if (fq_ok)
            out.push_back({"sch_fq", "ok", "sch_fq can be created: edt mode paces", ""});
        else
            out.push_back({"sch_fq", edt_here ? "fail" : "warn",
                           "sch_fq is missing (" + fq_error + "): edt mode cannot pace", kFqHint});
    }

    if (qdisc == "fq" || (root && !fq_ok))
        out.push_back({"default_qdisc", "ok", qdisc + (qdisc == "fq" ? "" : " (no sch_fq to make the default)"), ""});
    else
        out.push_back({"default_qdisc", "warn", qdisc + ": queues the kernel re-creates would not pace",
                       "sysctl -w net.core.default_qdisc=fq"});

    const std::string cc = read_line("/proc/sys/net/ipv4/tcp_congestion_control");
    const std::string available = read_line("/proc/sys/net/ipv4/tcp_available_congestion_control");
    if (cc == "bbr")
        out.push_back({"congestion_control", "ok", "bbr", ""});
    else
        out.push_back({"congestion_control", "warn",
                       (cc.empty() ? std::string("unknown") : cc) +
                           ": loss-based; it fills the shaper's queue until drops or ECN marks",
                       std::string(has_word(available, "bbr") ? "" : "modprobe tcp_bbr; ") +
                           "sysctl -w net.ipv4.tcp_congestion_control=bbr (BBR paces itself and keeps queues short)"});

    if (root) {
        unsigned elsewhere = 0, here = 0, gone_elsewhere = 0;
        const uint64_t here_ns = current_netns();
        std::vector<ManagedDevice> devices;
        for (const ManagedDevice& m : Shaper::list()) {
            if (m.netns != here_ns) {
                elsewhere++;
                gone_elsewhere += m.gone;
                continue;
            }
            here++;
            devices.push_back(m);
        }
        const std::string prog = netns.empty() ? "shaperctl" : "shaperctl -n " + netns;
        out.push_back({"managed devices", gone_elsewhere ? "warn" : "ok",
                       std::to_string(here) + " in this network namespace" +
                           (elsewhere ? ", " + std::to_string(elsewhere) + " in others (doctor -n NS checks them)" : "") +
                           (gone_elsewhere ? "; " + std::to_string(gone_elsewhere) +
                                                 " of those gone with their namespace, state left behind"
                                           : ""),
                       gone_elsewhere ? prog + " detach --gone" : ""});
        for (const ManagedDevice& m : devices) {
            try {
                check_device(m, prog, out);
            } catch (const Error& e) {
                out.push_back({"dev " + m.name, "fail", e.what(), ""});
            }
        }
    }
    return out;
}

}  // namespace shaperctl
