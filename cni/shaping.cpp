#include "shaping.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <optional>
#include <utility>

#include "cni_error.h"
#include "loader/bpffs.h"
#include "core/direction.h"
#include "core/error.h"
#include "loader/fd.h"
#include "loader/shaper.h"

namespace shaperctl::cni {
namespace {

constexpr const char* kStateDir = "/run/shaperctl-cni";

// The host-side device's two sides and the class each gets (absent: not shaped).
std::pair<Direction, const std::optional<ClassSpec>*> sides(const NetConf& conf, int i)
{
    return i == 0 ? std::pair{Direction::Egress, &conf.container_ingress}
                  : std::pair{Direction::Ingress, &conf.container_egress};
}

std::string side_text(const HostDevice& host, Direction side)
{
    return std::string(side == Direction::Egress ? "the container's ingress" : "the container's egress") +
           " (" + host.name + " " + direction_name(side) + ")";
}

// Whether the host's send side is attached in edt mode: sch_fq there can hold ACKs.
bool send_side_paces(const HostDevice& host)
{
    return Shaper::is_attached(host.name, Direction::Egress) &&
           Shaper::open_unlocked(host.name, Direction::Egress).attach_options().mode == SHAPER_MODE_EDT;
}

// The class a side gets: on the host's receive side, CoDel's paced target and interval when the
// send side paces its ACKs, unless the configuration turned CoDel off.
ClassSpec side_class(const HostDevice& host, Direction side, ClassSpec spec)
{
    if (side == Direction::Ingress && spec.aqm && send_side_paces(host)) {
        spec.aqm_target_ns = kIngressPacedTargetNs;
        spec.aqm_interval_ns = kIngressPacedIntervalNs;
    }
    return spec;
}

// One plugin at a time changes shaperctl's state: the library locks each device, but attaches
// and detaches of different devices share the namespace's directories (a detach removes an
// emptied one while another attach fills it).
Fd lock_plugin()
{
    make_private_dir(kStateDir, kStateDir);
    const std::string path = std::string(kStateDir) + "/lock";
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd || flock(fd.get(), LOCK_EX))
        throw CniError(kTryAgainLater, errno_message("cannot lock " + path, errno));
    return fd;
}

std::string state_path(const Attachment& a)
{
    return std::string(kStateDir) + "/" + a.container_id + "-" + a.ifname;
}

void save_state(const Attachment& a, const HostDevice& host)
{
    const std::string path = state_path(a), tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << host.name << " " << host.ifindex << "\n";
        if (!out.flush())
            throw CniError(kOther, "cannot write " + tmp);
    }
    if (rename(tmp.c_str(), path.c_str()))
        throw CniError(kOther, errno_message("cannot write " + path, errno));
}

std::optional<HostDevice> load_state(const Attachment& a)
{
    std::ifstream in(state_path(a));
    HostDevice host;
    if (!(in >> host.name >> host.ifindex))
        return std::nullopt;
    return host;
}

// Attaches one side; the host's egress paces with sch_fq, or polices where the kernel has none
// (an ADD repeated for a container keeps the mode its first ADD chose).
void attach_side(const HostDevice& host, Direction side)
{
    AttachOptions options;
    options.direction = side;
    if (side == Direction::Egress && Shaper::is_attached(host.name, side))
        options.mode = Shaper::open_unlocked(host.name, side).attach_options().mode;  // ADD again
    try {
        Shaper::attach(host.name, options);
    } catch (const QdiscUnavailable&) {
        if (side != Direction::Egress)
            throw;
        options.mode = SHAPER_MODE_POLICE;
        Shaper::attach(host.name, options);
    }
}

// Class 1, everything's default class. An ADD repeated for the same container changes it.
void shape_side(const HostDevice& host, Direction side, const ClassSpec& spec)
{
    const Shaper shaper = Shaper::open(host.name, side);
    if (shaper.config().classes.empty())
        shaper.add_class(spec);
    else
        shaper.change_class(spec);
    shaper.set_default(spec.id);
}

// The container's egress alone: the host's send side attached in edt mode with no class, so that
// the host's ACKs of the container's flows wait for the ingress class's clock (bpf/ack_pace.h).
// Where the kernel has no sch_fq nothing can pace, and that side is left alone. An ADD that
// shaped the container's ingress before keeps the side and drops its class (or detaches it, in
// police mode).
void attach_ack_pacing(const HostDevice& host)
{
    if (Shaper::is_attached(host.name, Direction::Egress)) {
        if (!send_side_paces(host)) {
            Shaper::detach(host.name, Direction::Egress);
            return;
        }
        const Shaper shaper = Shaper::open(host.name, Direction::Egress);
        shaper.set_default(0);
        for (const auto& c : shaper.config().classes)
            shaper.del_class(c.id);
        return;
    }
    AttachOptions options;
    options.direction = Direction::Egress;
    try {
        Shaper::attach(host.name, options);
    } catch (const QdiscUnavailable&) {
        // Police mode delays nothing: no side to attach.
    }
}

// A side attached only to pace ACKs: the container's egress asked for, its ingress not.
bool pacing_only(const NetConf& conf, const Shaper& shaper)
{
    return conf.container_egress && !conf.container_ingress && shaper.config().classes.empty() &&
           shaper.attach_options().mode == SHAPER_MODE_EDT;
}

// Detaches every side of the recorded device, present or deleted since (then only its pins and
// records are left to remove). A device of that name with another ifindex is not ours.
void detach_recorded(const HostDevice& host)
{
    const uint64_t here = current_netns();
    // Listed again after each detach: a receive side's takes the send side it brought with it.
    for (;;) {
        const std::vector<ManagedDevice> managed = Shaper::list();
        const auto m = std::find_if(managed.begin(), managed.end(), [&](const ManagedDevice& d) {
            return d.netns == here && d.ifindex == host.ifindex && d.name == host.name;
        });
        if (m == managed.end())
            return;
        Shaper::detach(m->name, m->direction);
    }
}

}  // namespace

void add_shaping(const NetConf& conf, const HostDevice& host, const Attachment& attachment)
{
    if (!conf.container_ingress && !conf.container_egress)
        return;  // no bandwidth asked for: the reference plugin passes through too
    const Fd lock = lock_plugin();
    save_state(attachment, host);  // first: a DEL after a failed ADD finds what to remove
    try {
        for (int i = 0; i < 2; i++) {
            const auto [side, spec] = sides(conf, i);
            if (!*spec) {
                if (side == Direction::Egress && conf.container_egress)
                    attach_ack_pacing(host);
                continue;
            }
            attach_side(host, side);
            shape_side(host, side, side_class(host, side, **spec));
        }
    } catch (const Error& e) {
        try {
            detach_recorded(host);
            unlink(state_path(attachment).c_str());
        } catch (...) {
            // The ADD's error is the one to report; the state file lets DEL finish the cleanup.
        }
        throw CniError(kOther, host.name + ": " + e.what());
    }
}

void check_shaping(const NetConf& conf, const HostDevice& host)
{
    try {
        for (int i = 0; i < 2; i++) {
            const auto [side, spec] = sides(conf, i);
            const bool attached = Shaper::is_attached(host.name, side);
            if (!*spec) {
                if (attached && !pacing_only(conf, Shaper::open_unlocked(host.name, side)))
                    throw CniError(kOther, side_text(host, side) + " is shaped, and the configuration asks for no shaping");
                continue;
            }
            if (!attached)
                throw CniError(kOther, side_text(host, side) + " is not shaped");
            const Shaper shaper = Shaper::open_unlocked(host.name, side);
            const DeviceStatus status = shaper.status(std::chrono::nanoseconds(0));
            if (!status.program_id)
                throw CniError(kOther, side_text(host, side) + ": shaperctl's program was removed from the device");
            if (status.mode == SHAPER_MODE_EDT && !status.pacing.fq_everywhere)
                throw CniError(kOther, side_text(host, side) + ": sch_fq was removed (root qdisc " +
                                           status.pacing.root_kind + "): departure times are not enforced");
            const ShaperConfig config = shaper.config();
            ClassSpec want = side_class(host, side, **spec);
            if (config.classes.size() != 1 || config.default_class != want.id)
                throw CniError(kOther, side_text(host, side) + ": the classes were changed (expected class " +
                                           std::to_string(want.id) + " alone, as the default)");
            if (!want.horizon_ns)
                want.horizon_ns = config.classes[0].horizon_ns;  // the mode's default, resolved
            const std::string changes = class_changes(config.classes[0], want);
            if (!changes.empty())
                throw CniError(kOther, side_text(host, side) + ": the class differs from the configuration: " + changes);
        }
    } catch (const Error& e) {
        throw CniError(kOther, host.name + ": " + e.what());
    }
}

void del_shaping(const Attachment& attachment)
{
    const Fd lock = lock_plugin();
    const std::optional<HostDevice> host = load_state(attachment);
    if (!host)
        return;  // never shaped, or deleted already
    try {
        detach_recorded(*host);
    } catch (const Error& e) {
        throw CniError(kOther, host->name + ": " + e.what());  // the state stays: DEL again finishes
    }
    unlink(state_path(attachment).c_str());
}

}  // namespace shaperctl::cni
