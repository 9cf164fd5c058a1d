#include "loader/tc_filter.h"

#include <bpf/libbpf.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <cerrno>
#include <string>

#include "core/error.h"
#include "loader/rtnetlink.h"

namespace shaperctl {
namespace {

// Our filter's identity on the hook: other filters (Cilium's, say) keep theirs.
constexpr uint32_t kHandle = 0x5348;  // "SH"

bpf_tc_hook clsact_hook(int ifindex, Direction side)
{
    bpf_tc_hook hook{};
    hook.sz = sizeof hook;
    hook.ifindex = ifindex;
    hook.attach_point = side == Direction::Ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS;
    return hook;
}

bpf_tc_opts filter_opts(uint32_t priority, int prog_fd = 0, uint32_t flags = 0)
{
    bpf_tc_opts opts{};
    opts.sz = sizeof opts;
    opts.handle = kHandle;
    opts.priority = priority;
    opts.prog_fd = prog_fd;
    opts.flags = flags;
    return opts;
}

// Filters on one clsact direction, over an RTM_GETTFILTER dump.
unsigned filters_on(int ifindex, uint32_t parent)
{
    rtnl::RouteSocket sock;
    rtnl::Request request(RTM_GETTFILTER, NLM_F_DUMP);
    auto& tcm = request.family_header<tcmsg>();
    tcm.tcm_family = AF_UNSPEC;
    tcm.tcm_ifindex = ifindex;
    tcm.tcm_parent = parent;
    unsigned count = 0;
    rtnl::Reply reply = sock.dump(request, [&] { count = 0; }, [&](const nlmsghdr& msg) {
        auto* tcm = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(&msg));
        // Each filter is dumped once with its handle, once per chain without.
        if (msg.nlmsg_type == RTM_NEWTFILTER && mnl_nlmsg_get_payload_len(&msg) >= sizeof(tcmsg) &&
            tcm->tcm_handle != 0)
            ++count;
    });
    if (reply.err)
        throw Error("cannot list tc filters: " + rtnl::describe(reply));
    return count;
}

}  // namespace

bool attach_filter(int ifindex, int prog_fd, uint32_t priority, Direction side)
{
    bpf_tc_hook hook = clsact_hook(ifindex, side);
    int err = bpf_tc_hook_create(&hook);
    if (err && err != -EEXIST)
        throw Error(errno_message("cannot create the clsact qdisc", err));
    const bool created_clsact = (err == 0);

    bpf_tc_opts opts = filter_opts(priority, prog_fd, BPF_TC_F_REPLACE);
    err = bpf_tc_attach(&hook, &opts);
    if (err) {
        if (created_clsact) {
            hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
            bpf_tc_hook_destroy(&hook);
        }
        throw Error(errno_message(std::string("cannot attach the filter on tc clsact ") +
                                      direction_name(side), err));
    }
    return created_clsact;
}

bool detach_filter(int ifindex, uint32_t priority, bool remove_clsact, Direction side)
{
    bpf_tc_hook hook = clsact_hook(ifindex, side);
    bpf_tc_opts opts = filter_opts(priority);
    int err = bpf_tc_detach(&hook, &opts);
    if (err && err != -ENOENT && err != -EINVAL && err != -ENODEV)
        throw Error(errno_message(std::string("cannot detach the filter from tc clsact ") +
                                      direction_name(side), err));
    const uint32_t ingress = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS);
    const uint32_t egress = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS);
    if (remove_clsact && filters_on(ifindex, ingress) + filters_on(ifindex, egress) == 0) {
        hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
        return bpf_tc_hook_destroy(&hook) == 0;
    }
    return false;
}

uint32_t filter_prog_id(int ifindex, uint32_t priority, Direction side)
{
    bpf_tc_hook hook = clsact_hook(ifindex, side);
    bpf_tc_opts opts = filter_opts(priority);
    return bpf_tc_query(&hook, &opts) == 0 ? opts.prog_id : 0;
}

}  // namespace shaperctl
