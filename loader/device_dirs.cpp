#include "loader/device_dirs.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "loader/bpffs.h"
#include "core/error.h"
#include "shaper_abi.h"

namespace shaperctl {
namespace {

constexpr const char* kLockFile = "lock";

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

}  // namespace

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

// rmdir refuses a directory that is not empty: the namespace's and the root ones stay while
// another side or device uses them.
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

}  // namespace shaperctl
