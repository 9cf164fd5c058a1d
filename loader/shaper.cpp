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
#include "loader/egress_hook.h"
#include "loader/libbpf_log.h"
#include "loader/error.h"
#include "loader/program.h"

namespace shaperctl {
namespace {

constexpr const char* kProgPin = "shaper_egress";
constexpr const char* kLockFile = "lock";
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

Fd lock_device(const Device& device)
{
    const std::string path = device.run_dir() + "/" + kLockFile;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        throw Error(errno_message("cannot open lock " + path, errno));
    Fd lock(fd);
    if (flock(fd, LOCK_EX))
        throw Error(errno_message("cannot lock " + path, errno));
    return lock;
}

// The side's lock, or none when `still_there` says its directories went while this process
// waited (another detach was first); any other failure to lock is an Error.
std::optional<Fd> lock_unless_removed(const Device& device, const std::function<bool()>& still_there)
{
    try {
        return lock_device(device);
    } catch (const Error&) {
        if (!still_there())
            return std::nullopt;
        throw;
    }
}

void pin_program(const Program& program, const std::string& pin_dir)
{
    const std::string path = pin_dir + "/" + kProgPin;
    unlink(path.c_str());  // an older build's pin; the filter or link holds its own reference
    if (bpf_obj_pin(program.prog_fd(), path.c_str()))
        throw Error(errno_message("cannot pin the program at " + path, errno));
}

// How to attach the side a command addressed.
std::string attach_hint(const std::string& dev, Direction side)
{
    return "run shaperctl attach --dev " + dev + (side == Direction::Ingress ? " --ingress" : "");
}

// The table both sides share (bpf/ack_pace.h) after this side's pins went: removed with the
// last side; left to the send side with its gate closed when the receive side goes (its records
// are never read again, and a receive side attached later opens it anew).
void release_ack_pacing(const Device& device)
{
    const std::string pin = device.ack_pace_pin();
    if (!path_exists(device.side(opposite(device.direction)).pin_dir())) {
        unlink(pin.c_str());
        return;
    }
    if (device.direction != Direction::Ingress)
        return;
    Fd map(bpf_obj_get(pin.c_str()));
    const uint32_t gate = 0;
    const shaper_ack_pace closed{};
    if (map)
        bpf_map_update_elem(map.get(), &gate, &closed, BPF_ANY);
}

// The device's pins and record, then the namespace's and the root directories once empty
// (rmdir refuses otherwise).
void remove_device_dirs(const Device& device)
{
    for (const std::string& dir : {device.pin_dir(), device.run_dir()}) {
        remove_tree(dir);
        if (dir == device.pin_dir())
            release_ack_pacing(device);
        const std::string ns_dir = dir.substr(0, dir.rfind('/'));
        rmdir(ns_dir.c_str());
        rmdir(ns_dir.substr(0, ns_dir.rfind('/')).c_str());
    }
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

// A clsact this side created stays while the other side's filter is on it: the other side's
// detach removes it then.
void hand_over_clsact(const Device& device)
{
    const Device other = device.side(opposite(device.direction));
    const std::string path = other.run_dir() + "/" + kRecordFile;
    if (!path_exists(path))
        return;
    const Fd lock = lock_device(other);
    auto record = AttachRecord::load(path);
    if (record && record->egress.hook == EgressHook::TcClsact && !record->egress.created_clsact) {
        record->egress.created_clsact = true;
        record->save(path);
    }
}

}  // namespace

AttachResult Shaper::attach(const std::string& dev, const AttachOptions& options)
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
    const EgressHook hook = chosen_egress_hook();
    ensure_bpffs();
    make_private_dir(device.pin_dir(), kPinRoot);
    make_private_dir(device.run_dir(), kRunRoot);
    const Fd lock = lock_device(device);
    const std::string record_path = device.run_dir() + "/" + kRecordFile;

    if (auto record = AttachRecord::load(record_path)) {
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
        AttachResult result{AttachOutcome::AlreadyAttached, false, record->egress.hook};
        const FqOptions fq = fq_with_given(record->fq, options);
        if (mode == SHAPER_MODE_EDT && !same_fq(fq, record->fq)) {
            change_fq(device, ShaperMaps::of(program), *record, fq);  // in place, as apply -f does
            result.fq_changed = true;
        }
        if (!is_current(record->egress, hook)) {
            // Another hook (or an older build's filter priority): the maps stay as they are.
            record->egress = move_egress(device, record->egress, hook, program.prog_fd());
            record->save(record_path);
            pin_program(program, device.pin_dir());
            result.outcome = AttachOutcome::Moved;
            result.hook = hook;
            return result;
        }
        const uint32_t running = egress_prog_id(device, record->egress);
        if (running && runs_same_program(running, program.prog_fd()))
            return result;
        // A different build: swap the program in place (the link's or the filter's); the maps
        // are the pinned ones. Put back if someone took it off.
        const bool created_clsact = attach_egress(device, hook, program.prog_fd()).created_clsact;
        if (created_clsact && !record->egress.created_clsact) {
            record->egress.created_clsact = true;
            record->save(record_path);
        }
        pin_program(program, device.pin_dir());
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
    record.egress = attach_egress(device, hook, program.prog_fd());
    rollback.add([&] { detach_egress(device, record.egress); });
    pin_program(program, device.pin_dir());
    if (ingress)
        program.set_ack_pacing(true);
    record.save(record_path);
    rollback.commit();
    return {AttachOutcome::Attached, false, hook};
}

void Shaper::detach(const std::string& dev, Direction side)
{
    require_privileges();
    quiet_libbpf();  // removing a tc filter where there is no clsact (TCX) is no news
    const Device device = Device::resolve_managed(dev, side);
    auto attached = [&] {
        return path_exists(device.run_dir() + "/" + kRecordFile) || path_exists(device.pin_dir());
    };
    if (!attached())
        throw Error(dev_prefix(device) + "not attached");
    std::optional<AttachRecord> record;
    {
        // Held until the directories are gone: a detach at the same time finds nothing left.
        const std::optional<Fd> lock = lock_unless_removed(device, attached);
        if (!lock || !attached())
            throw Error(dev_prefix(device) + "not attached");
        record = AttachRecord::load(device.run_dir() + "/" + kRecordFile);
        // A device deleted since attach took its filter and qdiscs with it; its ifindex may
        // name another device by now, which must not be touched. Only the pins are left.
        if (device.current_name() == device.name) {
            const bool removed_clsact = detach_egress(device, record ? record->egress : EgressAttachment{});
            if (record && record->installed_fq)
                restore_root(device.ifindex, record->prior_root);
            if (record && record->egress.created_clsact && !removed_clsact)
                hand_over_clsact(device);
        }
        remove_device_dirs(device);
    }
}


std::vector<ManagedDevice> Shaper::list()
{
    std::vector<ManagedDevice> devices;
    const uint64_t here = current_netns();
    for (const std::string& ns : list_dir(kRunRoot)) {
        for (const std::string& dev : list_dir(std::string(kRunRoot) + "/" + ns)) {
            auto record = AttachRecord::load(std::string(kRunRoot) + "/" + ns + "/" + dev + "/" +
                                             kRecordFile);
            if (!record)
                continue;
            ManagedDevice m{record->device, record->ifindex, record->netns, record->mode, false, false,
                            record->egress, record->direction};
            const Device d{record->device, record->ifindex, record->netns, record->direction};
            if (record->netns == here) {
                std::string name = d.current_name();
                m.present = !name.empty();
                if (m.present)
                    m.name = name;
            }
            m.gone = egress_gone(d, record->egress, here);
            devices.push_back(m);
        }
    }
    return devices;
}

std::vector<ManagedDevice> Shaper::detach_gone()
{
    require_privileges();
    const uint64_t here = current_netns();
    std::vector<ManagedDevice> removed;
    for (const ManagedDevice& m : list()) {
        if (!m.gone)
            continue;
        const Device device{m.name, m.ifindex, m.netns, m.direction};
        // Under the side's lock, as its record says now (an attach may have taken the ifindex
        // again since the listing, another detach removed it), and removed before the lock goes.
        const std::optional<Fd> lock =
            lock_unless_removed(device, [&] { return path_exists(device.run_dir()); });
        if (!lock)
            continue;
        const auto record = AttachRecord::load(device.run_dir() + "/" + kRecordFile);
        if (!record || !egress_gone(device, record->egress, here))
            continue;
        remove_device_dirs(device);
        removed.push_back(m);
    }
    return removed;
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
