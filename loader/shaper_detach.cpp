// Shaper's removals: detach of one side, the listing of managed sides, and detach --gone for
// sides whose device went with its namespace.
#include "loader/shaper.h"

#include <optional>

#include "loader/bpffs.h"
#include "loader/device_dirs.h"
#include "loader/hook.h"
#include "core/error.h"
#include "loader/libbpf_log.h"

namespace shaperctl {
namespace {

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
    if (record && record->attachment.hook == Hook::TcClsact && !record->attachment.created_clsact) {
        record->attachment.created_clsact = true;
        record->save(path);
    }
}

// The send side a receive side's attach brought for ACK pacing, after that receive side went:
// detached unless the operator has given it classes, rules or a default class since.
PacingSideAfterDetach release_pacing_side(const std::string& dev)
try {
    if (!Shaper::is_attached(dev, Direction::Egress))
        return PacingSideAfterDetach::None;
    const Shaper send = Shaper::open_unlocked(dev, Direction::Egress);
    const auto record = AttachRecord::load(send.device().run_dir() + "/" + kRecordFile);
    if (!record || !record->for_ack_pacing)
        return PacingSideAfterDetach::None;
    const ShaperConfig config = send.config();
    if (!config.classes.empty() || !config.rules.empty() || config.default_class)
        return PacingSideAfterDetach::KeptWithClasses;
    Shaper::detach(dev, Direction::Egress);
    return PacingSideAfterDetach::Detached;
} catch (const Error&) {
    return PacingSideAfterDetach::Failed;  // the receive side is gone all the same
}

}  // namespace

PacingSideAfterDetach Shaper::detach(const std::string& dev, Direction side)
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
            const bool removed_clsact = detach_hook(device, record ? record->attachment : HookAttachment{});
            if (record && record->installed_fq)
                restore_root(device.ifindex, record->prior_root);
            if (record && record->attachment.created_clsact && !removed_clsact)
                hand_over_clsact(device);
        }
        remove_device_dirs(device);
    }
    return side == Direction::Ingress ? release_pacing_side(dev) : PacingSideAfterDetach::None;
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
                            record->attachment, record->direction, record->for_ack_pacing};
            const Device d{record->device, record->ifindex, record->netns, record->direction};
            if (record->netns == here) {
                std::string name = d.current_name();
                m.present = !name.empty();
                if (m.present)
                    m.name = name;
            }
            m.gone = hook_gone(d, record->attachment, here);
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
        if (!record || !hook_gone(device, record->attachment, here))
            continue;
        remove_device_dirs(device);
        removed.push_back(m);
    }
    return removed;
}

}  // namespace shaperctl
