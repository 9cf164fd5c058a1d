#include "host_device.h"

#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "cni_error.h"
#include "core/error.h"
#include "loader/fd.h"
#include "loader/rtnetlink.h"

namespace shaperctl::cni {
namespace {

Fd open_netns(const std::string& path)
{
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        throw CniError(kOther, errno_message("cannot open the container's network namespace " + path, errno));
    return fd;
}

// IFLA_LINK of `ifname` in the calling thread's namespace: a veth's peer ifindex, in the
// namespace of the peer. 0 when the interface has no link.
int link_of(const std::string& ifname)
{
    rtnl::RouteSocket sock;
    rtnl::Request request(RTM_GETLINK, 0);
    auto& ifi = request.family_header<ifinfomsg>();
    ifi.ifi_family = AF_UNSPEC;
    request.put(IFLA_IFNAME, ifname);
    request.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
    int link = 0;
    const rtnl::Reply reply = sock.request(request, [&](const nlmsghdr& msg) {
        if (msg.nlmsg_type != RTM_NEWLINK)
            return;
        rtnl::for_each_attr(msg, sizeof(ifinfomsg), [&](const nlattr& attr) {
            if (mnl_attr_get_type(&attr) == IFLA_LINK && mnl_attr_validate(&attr, MNL_TYPE_U32) == 0)
                link = int(mnl_attr_get_u32(&attr));
        });
    });
    if (reply.err)
        throw CniError(kOther, "the container has no interface " + ifname + " (" + rtnl::describe(reply) + ")");
    return link;
}

// The peer ifindex of the container's interface, read inside its namespace; the calling thread
// is back in its own namespace on return, also on error.
int peer_ifindex(const std::string& netns_path, const std::string& ifname)
{
    const Fd container = open_netns(netns_path);
    const Fd host = open_netns("/proc/self/ns/net");
    if (setns(container.get(), CLONE_NEWNET))
        throw CniError(kOther, errno_message("cannot enter the container's network namespace " + netns_path, errno));
    int link = 0;
    try {
        link = link_of(ifname);
    } catch (...) {
        if (setns(host.get(), CLONE_NEWNET) == 0)
            throw;
        throw CniError(kOther, errno_message("cannot return to the host network namespace", errno));
    }
    if (setns(host.get(), CLONE_NEWNET))
        throw CniError(kOther, errno_message("cannot return to the host network namespace", errno));
    return link;
}

}  // namespace

HostDevice find_host_device(const nlohmann::json& prev_result, const std::string& netns_path,
                            const std::string& ifname)
{
    std::vector<std::string> host_side;
    for (const auto& iface : prev_result.at("interfaces")) {
        if (!iface.is_object() || !iface.contains("name") || !iface["name"].is_string())
            continue;
        const auto sandbox = iface.find("sandbox");
        if (sandbox == iface.end() || (sandbox->is_string() && sandbox->get<std::string>().empty()))
            host_side.push_back(iface["name"].get<std::string>());
    }
    if (host_side.empty())
        throw CniError(kInvalidConfig, "prevResult.interfaces lists no host-side interface (one without "
                                       "\"sandbox\"): the container's link has no host side to shape");
    const int peer = peer_ifindex(netns_path, ifname);
    std::string names;
    for (const std::string& name : host_side) {
        if (peer && int(if_nametoindex(name.c_str())) == peer)
            return {name, peer};
        names += (names.empty() ? "" : ", ") + name;
    }
    throw CniError(kOther, "host device not found: the peer of the container's " + ifname + " (ifindex " +
                               std::to_string(peer) + " on the host) is none of prevResult's host-side "
                               "interfaces (" + names + ")");
}

}  // namespace shaperctl::cni
