#include "loader/shaper.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "loader/bpffs.h"
#include "loader/device_dirs.h"
#include "loader/hook.h"
#include "loader/libbpf_log.h"
#include "core/error.h"
#include "loader/program.h"

namespace shaperctl {
namespace {

constexpr const char* kPoliceInstead = " (attach --mode police shapes by dropping instead)";

// Undo steps of a multi-step change, run in reverse unless the change completes.
class Rollback {
public:
    ~Rollback()
    {
        for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
            try {
                (*it)();
            } catch (...) {
                // Best effort: the original error is the one to report.
            }
        }
    }
    void add(std::function<void()> step) { steps_.push_back(std::move(step)); }
    void commit() { steps_.clear(); }

private:
    std::vector<std::function<void()>> steps_;
};

// How to attach the side a command addressed.
std::string attach_hint(const std::string& dev, Direction side)
{
    return "run shaperctl attach --dev " + dev + (side == Direction::Ingress ? " --ingress" : "");
}

// Bytes before the network header on this device, which the datapath's parser must know: 14
// where the kernel builds an Ethernet header (loopback too), 0 where packets start at the
// network header (tun, WireGuard, PPP, IP-in-IP), and for any other type (IPoIB's 24 bytes,
// GRE devices without a remote, which push the outer header before egress) "read from the
// network header" (bpf/parse.h).
uint32_t l2_header_len(const Device& device)
{
    Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, device.name.c_str(), IFNAMSIZ - 1);
    if (!sock || ioctl(sock.get(), SIOCGIFHWADDR, &ifr))
        return SHAPER_L2_AT_NETWORK_HEADER;
    switch (ifr.ifr_hwaddr.sa_family) {
    case ARPHRD_ETHER:
    case ARPHRD_LOOPBACK:
        return 14;
    case ARPHRD_NONE:
    case ARPHRD_RAWIP:
    case ARPHRD_PPP:
    case ARPHRD_TUNNEL:
    case ARPHRD_TUNNEL6:
    case ARPHRD_SIT:
        return 0;
    default:
        return SHAPER_L2_AT_NETWORK_HEADER;
    }
}

ProgramOptions program_options(const Device& device, const AttachOptions& options)
{
    ProgramOptions p;
    p.pin_dir = device.pin_dir();
    p.max_classes = options.max_classes;
    p.l2_header_len = l2_header_len(device);
    p.ingress = device.direction == Direction::Ingress;
    p.ack_pace_pin = device.ack_pace_pin();
    return p;
}

}  // namespace

void require_privileges(bool loading)
{
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data))
        throw Error(errno_message("cannot read the process capabilities", errno));
    auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1; };
    const bool bpf = has(CAP_SYS_ADMIN) || has(CAP_BPF);
    if (!bpf || !has(CAP_NET_ADMIN))
        throw Error("permission denied: shaperctl needs root (CAP_BPF and CAP_NET_ADMIN)");
    // The verifier refuses the datapath's pointer arithmetic without CAP_PERFMON, with a bare
    // "Bad address": say what is missing instead.
    if (loading && !has(CAP_SYS_ADMIN) && !has(CAP_PERFMON))
        throw Error("permission denied: loading the datapath needs CAP_PERFMON (or CAP_SYS_ADMIN) "
                    "beside CAP_BPF and CAP_NET_ADMIN");
}

bool same_fq(const FqOptions& a, const FqOptions& b)
{
    return a.horizon_ns == b.horizon_ns && a.horizon_drop == b.horizon_drop &&
           a.flow_limit == b.flow_limit && a.limit == b.limit;
}

namespace {

// What attach asks of a device attached already: its fq options with the given ones replaced.
FqOptions fq_with_given(FqOptions fq, const AttachOptions& options)
{
    if (options.fq_given.horizon)
        fq.horizon_ns = options.fq.horizon_ns;
    if (options.fq_given.flow_limit)
        fq.flow_limit = options.fq.flow_limit;
    if (options.fq_given.limit)
        fq.limit = options.fq.limit;
    return fq;
}

// sch_fq's options changed in place: a horizon lowered below a class's would have fq drop what
// the class has charged. Then fq itself and the record.
void change_fq(const Device& device, const ShaperMaps& maps, AttachRecord& record, const FqOptions& fq)
{
    if (fq.horizon_ns < record.fq.horizon_ns) {
        const FqHorizon bound{fq.horizon_ns, " on " + device.name + " (lower the class's horizon first)"};
        for (const auto& [id, config] : maps.class_configs())
            check_fits_fq_horizon(id, config.horizon_ns, bound);
    }
    install_fq(device.ifindex, fq);
    record.fq = fq;
    record.save(device.run_dir() + "/" + kRecordFile);
}

}  // namespace

namespace {

// One side, as the options say.
AttachResult attach_side(const std::string& dev, const AttachOptions& options)
{
    require_privileges(/*loading=*/true);
    const Device device = Device::resolve(dev).side(options.direction);
    const bool ingress = options.direction == Direction::Ingress;
    if (ingress && options.fq_given.any())
        throw Error(dev_prefix(device) + "fq options apply to egress only (nothing queues received packets)");
    if (options.mode != SHAPER_MODE_EDT && options.fq_given.any())
        throw Error(dev_prefix(device) + "fq options apply to edt mode only");
    // Nothing queues a received packet: ingress polices, and marks before it has to drop.
    const uint32_t mode = ingress ? uint32_t(SHAPER_MODE_POLICE) : options.mode;
    const Hook hook = chosen_hook();
    ensure_bpffs();
    make_private_dir(device.pin_dir(), kPinRoot);
    make_private_dir(device.run_dir(), kRunRoot);
    const Fd lock = lock_device(device);
    const std::string record_path = device.run_dir() + "/" + kRecordFile;

    if (auto record = AttachRecord::load(record_path)) {
        if (record->for_ack_pacing && !options.for_ack_pacing) {
            record->for_ack_pacing = false;  // the operator's own attach: theirs from now on
            record->save(record_path);
        }
        if (record->mode != mode)
            throw Error(dev_prefix(device) + "already attached in " + mode_name(record->mode) +
                        " mode; detach first to change the mode");
        const uint32_t capacity = pinned_max_classes(device.pin_dir());
        if (options.max_classes && capacity && options.max_classes != capacity)
            throw Error(dev_prefix(device) + "attached with max classes " + std::to_string(capacity) +
                        ", fixed at first attach; detach first to change it");
        Program program = Program::load(program_options(device, options));
        if (ingress)
            program.set_ack_pacing(true);
        AttachResult result{AttachOutcome::AlreadyAttached, false, record->attachment.hook};
        const FqOptions fq = fq_with_given(record->fq, options);
        if (mode == SHAPER_MODE_EDT && !same_fq(fq, record->fq)) {
            change_fq(device, ShaperMaps::of(program), *record, fq);  // in place, as apply -f does
            result.fq_changed = true;
        }
        if (!is_current(record->attachment, hook)) {
            // Another hook (or an older build's filter priority): the maps stay as they are.
            record->attachment = move_hook(device, record->attachment, hook, program.prog_fd());
            record->save(record_path);
            pin_program(program.prog_fd(), device.pin_dir());
            result.outcome = AttachOutcome::Moved;
            result.hook = hook;
            return result;
        }
        const uint32_t running = hook_prog_id(device, record->attachment);
        if (running && runs_same_program(running, program.prog_fd()))
            return result;
        // A different build: swap the program in place (the link's or the filter's); the maps
        // are the pinned ones. Put back if someone took it off.
        const bool created_clsact = attach_hook(device, hook, program.prog_fd()).created_clsact;
        if (created_clsact && !record->attachment.created_clsact) {
            record->attachment.created_clsact = true;
            record->save(record_path);
        }
        pin_program(program.prog_fd(), device.pin_dir());
        result.outcome = AttachOutcome::Upgraded;
        return result;
    }

    AttachRecord record;
    record.device = device.name;
    record.ifindex = device.ifindex;
    record.netns = device.netns;
    record.mode = mode;
    record.fq = options.fq;
    record.direction = options.direction;
    record.for_ack_pacing = options.for_ack_pacing;

    Rollback rollback;
    rollback.add([&] { remove_device_dirs(device); });
    Program program = Program::load(program_options(device, options));
    const ShaperMaps maps = ShaperMaps::of(program);
    shaper_settings settings = maps.settings();
    settings.mode = mode;
    settings.abi_version = SHAPER_ABI_VERSION;
    maps.set_settings(settings);

    if (mode == SHAPER_MODE_EDT) {
        record.prior_root = root_qdisc(device.ifindex);
        try {
            install_fq(device.ifindex, options.fq);
        } catch (const QdiscUnavailable& e) {
            throw QdiscUnavailable(std::string(e.what()) + kPoliceInstead);
        } catch (const Error& e) {
            throw Error(std::string(e.what()) + kPoliceInstead);
        }
        record.installed_fq = true;
        rollback.add([&] { restore_root(device.ifindex, record.prior_root); });
    }
    record.attachment = attach_hook(device, hook, program.prog_fd());
    rollback.add([&] { detach_hook(device, record.attachment); });
    pin_program(program.prog_fd(), device.pin_dir());
    if (ingress)
        program.set_ack_pacing(true);
    record.save(record_path);
    rollback.commit();
    return {AttachOutcome::Attached, false, hook};
}

// The send side a receive side's ACKs are paced by: attached now (edt, no class) where there is
// none and sch_fq exists; `why` says what is given up where nothing can pace.
AckPacing pace_acks(const std::string& dev, std::string& why)
{
    constexpr const char* kGivenUp =
        ", so senders are held by marks and drops alone (without ECN, 15-24 % of their segments "
        "retransmitted in our runs, against under 1 % when paced)";
    if (Shaper::is_attached(dev, Direction::Egress)) {
        if (Shaper::open_unlocked(dev, Direction::Egress).attach_options().mode == SHAPER_MODE_EDT)
            return AckPacing::SendSideThere;
        why = std::string("its send side is attached in police mode, which delays nothing") + kGivenUp;
        return AckPacing::Unavailable;
    }
    AttachOptions send;
    send.for_ack_pacing = true;
    try {
        attach_side(dev, send);
    } catch (const QdiscUnavailable&) {
        why = std::string("this kernel has no sch_fq (Linux 3.12+, CONFIG_NET_SCH_FQ) to hold the ACKs") + kGivenUp;
        return AckPacing::Unavailable;
    } catch (const Error& e) {
        // The receive side stands on its own: it is attached, and says what pacing lacks.
        why = std::string("its send side could not be attached (") + e.what() + ")" + kGivenUp;
        return AckPacing::Unavailable;
    }
    return AckPacing::SendSideAttached;
}

}  // namespace

AttachResult Shaper::attach(const std::string& dev, const AttachOptions& options)
{
    AttachResult result = attach_side(dev, options);
    if (options.direction == Direction::Ingress && options.ack_pacing)
        result.ack_pacing = pace_acks(dev, result.ack_pacing_why);
    return result;
}

Shaper Shaper::open(const std::string& dev, Direction side)
{
    Shaper shaper = open_unlocked(dev, side);
    if (shaper.device_.current_name() != shaper.device_.name)
        throw Error(dev_prefix(shaper.device_) + "the device was deleted since attach (ifindex " +
                    std::to_string(shaper.device_.ifindex) + "); only status and detach apply");
    shaper.lock_ = lock_device(shaper.device_);
    return shaper;
}

Shaper Shaper::open_unlocked(const std::string& dev, Direction side)
{
    require_privileges();
    const Device device = Device::resolve_managed(dev, side);  // also one deleted since attach
    auto record = AttachRecord::load(device.run_dir() + "/" + kRecordFile);
    if (!record)
        throw Error("dev " + dev + ": not attached" +
                    (side == Direction::Ingress ? " for ingress" : "") + " (" + attach_hint(dev, side) + ")");
    return Shaper(device, *record, ShaperMaps::open_pinned(device.pin_dir()), Fd());
}

bool Shaper::is_attached(const std::string& dev, Direction side)
{
    const Device device = Device::resolve(dev).side(side);
    return path_exists(device.run_dir() + "/" + kRecordFile);
}

bool Shaper::paces_acks(const std::string& dev)
{
    return paces_acks(Device::resolve(dev));
}

bool Shaper::paces_acks(const Device& device)
{
    const std::string record = device.side(Direction::Egress).run_dir() + "/" + kRecordFile;
    const std::optional<AttachRecord> send = AttachRecord::load(record);
    return send && send->mode == SHAPER_MODE_EDT;
}

AttachOptions Shaper::attach_options() const
{
    AttachOptions options;
    options.mode = record_.mode;
    options.fq = record_.fq;
    options.max_classes = maps_.max_classes();
    return options;
}

void Shaper::set_fq_options(const FqOptions& fq)
{
    if (record_.mode != SHAPER_MODE_EDT)
        throw Error(dev_prefix(device_) + "fq options apply to edt mode only");
    change_fq(device_, maps_, record_, fq);
}

}  // namespace shaperctl
