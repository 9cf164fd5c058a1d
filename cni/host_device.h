// Why: the shaping lives on the host side of the container's link, in the host network namespace
// where the container cannot remove it, but CNI names only the container's side (CNI_IFNAME in
// CNI_NETNS). The previous plugin's result lists the host-side interfaces (those without a
// sandbox: the bridge plugin lists the bridge, the host veth, then the container's interface);
// the one that is the peer of the container's interface (its IFLA_LINK, read inside CNI_NETNS) is
// the device to shape, so a bridge or another container's veth is never taken by mistake.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace shaperctl::cni {

struct HostDevice {
    std::string name;
    int ifindex = 0;
};

// The host-side device of `ifname` in the network namespace at `netns_path`, among prevResult's
// interfaces without a sandbox. CniError 7 when prevResult lists none, 999 when none is the
// peer (or the namespace or the interface cannot be read).
HostDevice find_host_device(const nlohmann::json& prev_result, const std::string& netns_path,
                            const std::string& ifname);

}  // namespace shaperctl::cni
