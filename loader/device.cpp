#include "loader/device.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cerrno>

#include "loader/attach_record.h"
#include "loader/bpffs.h"
#include "core/error.h"

namespace shaperctl {

uint64_t current_netns()
{
    struct stat st {};
    if (stat("/proc/self/ns/net", &st))
        throw Error(errno_message("cannot read the network namespace (/proc/self/ns/net)", errno));
    return st.st_ino;
}

void enter_netns(const std::string& name)
{
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw Error("bad network namespace name \"" + name + "\"");
    const std::string path = "/run/netns/" + name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw Error(errno_message("unknown network namespace \"" + name + "\"", errno));
    int err = setns(fd, CLONE_NEWNET);
    int saved = errno;
    ::close(fd);
    if (err)
        throw Error(errno_message("cannot enter network namespace \"" + name + "\"", saved));
}

Device Device::resolve(const std::string& name)
{
    if (name.empty() || name.size() >= IFNAMSIZ)
        throw Error("bad device name \"" + name + "\"");
    unsigned ifindex = if_nametoindex(name.c_str());
    if (!ifindex)
        throw Error("unknown device \"" + name + "\"");
    return Device{name, static_cast<int>(ifindex), current_netns()};
}

Device Device::resolve_managed(const std::string& name, Direction direction)
{
    if (name.empty() || name.size() >= IFNAMSIZ)
        throw Error("bad device name \"" + name + "\"");
    const uint64_t netns = current_netns();
    const unsigned live = if_nametoindex(name.c_str());
    if (live) {
        Device device{name, static_cast<int>(live), netns, direction};
        if (path_exists(device.run_dir() + "/attach.json"))
            return device;
    }
    const std::string ns_dir = std::string(kRunRoot) + "/ns" + std::to_string(netns);
    for (const std::string& entry : list_dir(ns_dir)) {
        auto record = AttachRecord::load(ns_dir + "/" + entry + "/attach.json");
        if (!record || record->device != name || record->direction != direction)
            continue;
        Device old{name, record->ifindex, netns, direction};
        if (old.current_name() != name)
            return old;  // gone, or its ifindex now names another device
    }
    if (live)
        return Device{name, static_cast<int>(live), netns, direction};
    throw Error("unknown device \"" + name + "\"");
}

namespace {

std::string side_dir(const char* root, const Device& device)
{
    return std::string(root) + "/ns" + std::to_string(device.netns) + "/if" +
           std::to_string(device.ifindex) + (device.direction == Direction::Ingress ? "-ingress" : "");
}

}  // namespace

std::string Device::pin_dir() const
{
    return side_dir(kPinRoot, *this);
}

std::string Device::ack_pace_pin() const
{
    return std::string(kPinRoot) + "/ns" + std::to_string(netns) + "/if" + std::to_string(ifindex) +
           "-ack-pace";
}

std::string Device::run_dir() const
{
    return side_dir(kRunRoot, *this);
}

std::string Device::current_name() const
{
    char name[IF_NAMESIZE] = {};
    return if_indextoname(ifindex, name) ? std::string(name) : std::string();
}

std::string dev_prefix(const Device& device)
{
    return "dev " + device.name + (device.direction == Direction::Ingress ? " ingress: " : ": ");
}

}  // namespace shaperctl
