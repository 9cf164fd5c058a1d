#include "loader/tc_filter.h"

#include <bpf/libbpf.h>
#include <libmnl/libmnl.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <time.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "loader/error.h"

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

int count_filter(const nlmsghdr* nlh, void* data)
{
    const auto* tcm = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
    if (tcm->tcm_handle != 0)  // each filter is dumped once with its handle, once per chain
        ++*static_cast<unsigned*>(data);
    return MNL_CB_OK;
}

// Filters on one clsact direction, over an RTM_GETTFILTER dump.
unsigned filters_on(int ifindex, uint32_t parent)
{
    std::unique_ptr<mnl_socket, decltype(&mnl_socket_close)> nl(mnl_socket_open(NETLINK_ROUTE),
                                                               mnl_socket_close);
    if (!nl || mnl_socket_bind(nl.get(), 0, MNL_SOCKET_AUTOPID))
        throw Error(errno_message("cannot open rtnetlink", errno));
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
    nlh->nlmsg_type = RTM_GETTFILTER;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    nlh->nlmsg_seq = static_cast<uint32_t>(time(nullptr));
    auto* tcm = static_cast<tcmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(tcmsg)));
    tcm->tcm_family = AF_UNSPEC;
    tcm->tcm_ifindex = ifindex;
    tcm->tcm_parent = parent;
    if (mnl_socket_sendto(nl.get(), nlh, nlh->nlmsg_len) < 0)
        throw Error(errno_message("cannot list tc filters", errno));
    unsigned count = 0;
    const unsigned portid = mnl_socket_get_portid(nl.get());
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl.get(), buf.data(), buf.size());
        if (n < 0)
            throw Error(errno_message("cannot list tc filters", errno));
        int ret = mnl_cb_run(buf.data(), n, nlh->nlmsg_seq, portid, count_filter, &count);
        if (ret <= MNL_CB_STOP)
            break;
    }
    return count;
}

}  // namespace

bool attach_egress_filter(int ifindex, int prog_fd, uint32_t priority, Direction side)
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

bool detach_egress_filter(int ifindex, uint32_t priority, bool remove_clsact, Direction side)
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

uint32_t egress_filter_prog_id(int ifindex, uint32_t priority, Direction side)
{
    bpf_tc_hook hook = clsact_hook(ifindex, side);
    bpf_tc_opts opts = filter_opts(priority);
    return bpf_tc_query(&hook, &opts) == 0 ? opts.prog_id : 0;
}

}  // namespace shaperctl
