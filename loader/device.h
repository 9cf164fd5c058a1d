// A network device as shaperctl keys its state: by network namespace and ifindex, so that
// same-named devices in different namespaces, or a device re-created under an old name, are
// never confused.
#pragma once

#include <cstdint>
#include <string>

#include "core/direction.h"

namespace shaperctl {

struct Device {
    std::string name;
    int ifindex = 0;
    uint64_t netns = 0;  // inode of the network namespace
    Direction direction = Direction::Egress;  // the side whose state pin_dir and run_dir hold

    // Resolves a name in the calling thread's network namespace; Error "unknown device".
    static Device resolve(const std::string& name);

    // Like resolve(), but a device that shaperctl manages and that was deleted (or renamed away)
    // since is found by its attach record, under its old ifindex: status can report it gone and
    // detach can clean up after it. A live device of that name that is attached comes first.
    static Device resolve_managed(const std::string& name, Direction direction = Direction::Egress);

    // The same device, addressing its other side's state.
    Device side(Direction other) const
    {
        Device d = *this;
        d.direction = other;
        return d;
    }

    // Where its pinned programs and maps live, and where its attach record lives: one
    // directory each per side (ingress's beside egress's, so that either goes alone).
    std::string pin_dir() const;
    std::string run_dir() const;
    // The pin of the table both sides share (ACK pacing, bpf/ack_pace.h), beside their pin
    // directories: made by the first side attached, removed by the last one detached.
    std::string ack_pace_pin() const;
    // The name the ifindex has now ("" when the device is gone).
    std::string current_name() const;
};

constexpr const char* kPinRoot = "/sys/fs/bpf/shaperctl";
constexpr const char* kRunRoot = "/run/shaperctl";

uint64_t current_netns();

// Moves the process into a named network namespace (/run/netns/NAME, as `ip -n` does), keeping
// its mount namespace: the pins stay on the host's bpffs.
void enter_netns(const std::string& name);

// "dev eth0: ", the start of an error about the device.
std::string dev_prefix(const Device& device);

}  // namespace shaperctl
