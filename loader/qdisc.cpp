#include "loader/qdisc.h"

#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "loader/rtnetlink.h"

namespace shaperctl {
namespace {

using rtnl::describe;
using rtnl::Link;
using rtnl::read_link;
using rtnl::Reply;
using rtnl::Request;
using rtnl::RouteSocket;

// Handle of the qdisc install_fq() puts at the root ("EDT"). Below 0x8000:, so never one the
// kernel picks itself, and fixed, so installing again finds and updates its own set-up.
constexpr uint32_t kOurHandle = 0x7edf0000;

// A qdisc request's header: the device, where in its tree, which handle.
void put_tcmsg(Request& request, const Link& link, uint32_t parent, uint32_t handle)
{
    auto& tcm = request.family_header<tcmsg>();
    tcm.tcm_family = AF_UNSPEC;
    tcm.tcm_ifindex = link.ifindex;
    tcm.tcm_parent = parent;
    tcm.tcm_handle = handle;
}

std::vector<Qdisc> dump_qdiscs(RouteSocket& sock, const Link& link)
{
    Request request(RTM_GETQDISC, NLM_F_DUMP);
    put_tcmsg(request, link, 0, 0);  // kernels dump all devices anyway

    std::vector<Qdisc> qdiscs;
    Reply reply = sock.dump(request, [&] { qdiscs.clear(); }, [&](const nlmsghdr& msg) {
        auto* tcm = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(&msg));
        if (msg.nlmsg_type != RTM_NEWQDISC || mnl_nlmsg_get_payload_len(&msg) < sizeof(tcmsg) ||
            tcm->tcm_ifindex != link.ifindex)
            return;
        Qdisc& q = qdiscs.emplace_back();
        q.handle = tcm->tcm_handle;
        q.parent = tcm->tcm_parent;
        rtnl::for_each_attr(msg, sizeof(tcmsg), [&](const nlattr& attr) {
            switch (mnl_attr_get_type(&attr)) {
            case TCA_KIND:
                if (mnl_attr_validate(&attr, MNL_TYPE_NUL_STRING) == 0)
                    q.kind = mnl_attr_get_str(&attr);
                break;
            case TCA_OPTIONS: {
                const auto options = rtnl::attr_bytes(attr);
                q.options.assign(options.begin(), options.end());
                break;
            }
            }
        });
    });
    if (reply.err)
        throw Error(link.dev() + ": cannot list qdiscs: " + describe(reply));
    return qdiscs;
}

std::optional<Qdisc> root_of(std::vector<Qdisc> qdiscs)
{
    auto root = std::ranges::find(qdiscs, TC_H_ROOT, &Qdisc::parent);
    if (root == qdiscs.end())
        return std::nullopt;
    return std::move(*root);
}

// Creates `kind` at `parent`, or changes the options of the qdisc of that kind already there
// (NLM_F_CREATE | NLM_F_REPLACE, as `tc qdisc replace`).
Reply replace_qdisc(RouteSocket& sock, const Link& link, uint32_t parent, uint32_t handle,
                    std::string_view kind, std::span<const uint8_t> options)
{
    Request request(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE);
    put_tcmsg(request, link, parent, handle);
    request.put(TCA_KIND, kind);
    // Newer qdiscs parse their options strictly, which wants the flag; older ones ignore it.
    if (!options.empty())
        request.put(TCA_OPTIONS | NLA_F_NESTED, options);
    return sock.request(request);
}

std::string handle_text(uint32_t handle)
{
    char text[16];
    std::snprintf(text, sizeof text, "%x:", TC_H_MAJ(handle) >> 16);
    return text;
}

// The options a qdisc dumps, made fit to create it again. htb dumps its full version (0x30011)
// in TCA_HTB_INIT but wants only the major (3) when created.
std::vector<uint8_t> creatable_options(const Qdisc& q)
{
    std::vector<uint8_t> options = q.options;
    if (q.kind != "htb")
        return options;
    rtnl::for_each_attr(std::span(options), [](nlattr& attr) {
        if (mnl_attr_get_type(&attr) != TCA_HTB_INIT ||
            mnl_attr_get_payload_len(&attr) < sizeof(tc_htb_glob))
            return;
        auto* glob = static_cast<tc_htb_glob*>(mnl_attr_get_payload(&attr));
        if (glob->version > 0xffff)
            glob->version >>= 16;
    });
    return options;
}

// Without a root of its own, the kernel attaches its default one (on a device that is down:
// when it comes up).
void delete_root(RouteSocket& sock, const Link& link, const Qdisc& root)
{
    Request request(RTM_DELQDISC, 0);
    // With the handle: the kernel refuses if the root is no longer this one.
    put_tcmsg(request, link, TC_H_ROOT, root.handle);
    Reply reply = sock.request(request);
    if (reply.err)
        throw Error(link.dev() + ": cannot delete root qdisc " + root.kind + " (handle " +
                    handle_text(root.handle) + "): " + describe(reply));
}

void restore(RouteSocket& sock, const Link& link, const std::optional<Qdisc>& prior)
{
    const std::optional<Qdisc> current = root_of(dump_qdiscs(sock, link));
    if (!prior || prior->handle == 0) {
        if (current && current->handle != 0)
            delete_root(sock, link, *current);
        return;
    }
    if (current && current->handle == prior->handle) {
        if (current->kind == prior->kind)
            return;
        delete_root(sock, link, *current);  // the kernel would not change it into another kind
    }
    Reply reply =
        replace_qdisc(sock, link, TC_H_ROOT, prior->handle, prior->kind, creatable_options(*prior));
    if (reply.err)
        throw Error(link.dev() + ": cannot re-create root qdisc " + prior->kind + " (handle " +
                    handle_text(prior->handle) + "): " + describe(reply));
}

std::vector<uint8_t> fq_options(const FqOptions& options)
{
    const uint64_t horizon_us = options.horizon_ns / 1000;
    if (horizon_us < 1 || horizon_us > UINT32_MAX)
        throw Error("fq horizon of " + std::to_string(options.horizon_ns) +
                    "ns is out of range (1us to " + std::to_string(UINT32_MAX / 1'000'000) + "s)");
    alignas(nlmsghdr) std::array<char, 256> buf{};
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
    mnl_attr_put_u32(nlh, TCA_FQ_HORIZON, static_cast<uint32_t>(horizon_us));
    mnl_attr_put_u8(nlh, TCA_FQ_HORIZON_DROP, options.horizon_drop ? 1 : 0);
    // The defaults are sent too (fq_init's): an fq changed in place keeps what it is not told.
    mnl_attr_put_u32(nlh, TCA_FQ_FLOW_PLIMIT, options.flow_limit ? options.flow_limit : 100);
    mnl_attr_put_u32(nlh, TCA_FQ_PLIMIT, options.limit ? options.limit : 10000);
    auto* payload = static_cast<const uint8_t*>(mnl_nlmsg_get_payload(nlh));
    return {payload, payload + mnl_nlmsg_get_payload_len(nlh)};
}

std::string leaf_failure(const Link& link, std::string_view kind, const Reply& reply,
                         const std::string& where)
{
    std::string sch = "sch_" + std::string(kind);
    std::string text = link.dev() + ": cannot create " + sch + where + ": ";
    // Unknown kinds are ENOENT; the parent was just found or created, so it is not that.
    if (reply.err == ENOENT)
        text += "the kernel has no " + sch + " (" + std::strerror(ENOENT) + ")";
    else
        text += describe(reply);
    if (kind == "fq")
        text += "; departure times would not be enforced";
    return text;
}

[[noreturn]] void throw_leaf_failure(const Reply& reply, const std::string& text)
{
    if (reply.err == ENOENT)
        throw QdiscUnavailable(text);
    throw Error(text);
}

void install(int ifindex, std::string_view kind, std::span<const uint8_t> options)
{
    RouteSocket sock;
    const Link link = read_link(sock, ifindex);

    if (link.tx_queues == 1) {
        // One request: the kernel either grafts the new root or leaves the old one.
        Reply reply = replace_qdisc(sock, link, TC_H_ROOT, kOurHandle, kind, options);
        if (reply.err)
            throw_leaf_failure(reply, leaf_failure(link, kind, reply, ""));
        return;
    }

    const std::optional<Qdisc> prior = root_of(dump_qdiscs(sock, link));
    if (!prior || prior->kind != "mq" || prior->handle != kOurHandle) {
        Reply reply = replace_qdisc(sock, link, TC_H_ROOT, kOurHandle, "mq", {});
        if (reply.err)
            throw Error(link.dev() + ": cannot create root qdisc mq (handle " +
                        handle_text(kOurHandle) + "): " + describe(reply));
    }
    for (unsigned queue = 0; queue < link.tx_queues; ++queue) {
        Reply reply = replace_qdisc(sock, link, TC_H_MAKE(kOurHandle, queue + 1), 0, kind, options);
        if (reply.err == 0)
            continue;
        std::string text = leaf_failure(link, kind, reply,
                                        " on TX queue " + std::to_string(queue + 1) + " of " +
                                            std::to_string(link.tx_queues));
        try {
            restore(sock, link, prior);
        } catch (const Error& e) {
            text += "; restoring the prior root failed too: " + std::string(e.what());
        }
        throw_leaf_failure(reply, text);
    }
}

}  // namespace

std::vector<Qdisc> list_qdiscs(int ifindex)
{
    RouteSocket sock;
    return dump_qdiscs(sock, read_link(sock, ifindex));
}

std::optional<Qdisc> root_qdisc(int ifindex)
{
    return root_of(list_qdiscs(ifindex));
}

unsigned tx_queue_count(int ifindex)
{
    RouteSocket sock;
    return read_link(sock, ifindex).tx_queues;
}

void install_fq(int ifindex, const FqOptions& options)
{
    install(ifindex, "fq", fq_options(options));
}

void restore_root(int ifindex, const std::optional<Qdisc>& prior)
{
    RouteSocket sock;
    restore(sock, read_link(sock, ifindex), prior);
}

namespace {

// TCA_FQ_HORIZON (whole microseconds) of an fq qdisc's dumped options, in ns; 0 if absent.
uint64_t fq_horizon_ns(const Qdisc& fq)
{
    uint64_t ns = 0;
    rtnl::for_each_attr(std::span(fq.options), [&](const nlattr& attr) {
        if (mnl_attr_get_type(&attr) == TCA_FQ_HORIZON &&
            mnl_attr_get_payload_len(&attr) >= sizeof(uint32_t))
            ns = uint64_t(mnl_attr_get_u32(&attr)) * 1000;
    });
    return ns;
}

}  // namespace

PacingSetup inspect_pacing(int ifindex)
{
    RouteSocket sock;
    const Link link = read_link(sock, ifindex);
    const std::vector<Qdisc> qdiscs = dump_qdiscs(sock, link);

    PacingSetup setup;
    setup.queues = link.tx_queues;
    const std::optional<Qdisc> root = root_of(qdiscs);
    if (!root)
        return setup;
    setup.root_kind = root->kind;
    auto horizon = [&](const Qdisc& fq) {
        const uint64_t ns = fq_horizon_ns(fq);
        if (ns && (!setup.fq_horizon_ns || ns < setup.fq_horizon_ns))
            setup.fq_horizon_ns = ns;
    };
    if (root->kind == "fq") {
        setup.fq_queues = setup.queues;  // one fq in front of all queues
        horizon(*root);
    } else if (root->kind == "mq" || root->kind == "mqprio") {
        // Both have class :N for TX queue N-1. The kernel does not dump the default children of
        // queues beyond the ones in use, but install_fq() puts fq on all of them.
        for (const Qdisc& q : qdiscs) {
            if (q.kind == "fq" && q.parent != TC_H_ROOT && TC_H_MAJ(q.parent) == root->handle &&
                TC_H_MIN(q.parent) >= 1 && TC_H_MIN(q.parent) <= setup.queues) {
                setup.fq_queues++;
                horizon(q);
            }
        }
    }
    setup.fq_everywhere = setup.fq_queues == setup.queues;
    return setup;
}

namespace detail {
void install_leaves(int ifindex, std::string_view kind, std::span<const uint8_t> options)
{
    install(ifindex, kind, options);
}
}  // namespace detail

}  // namespace shaperctl
