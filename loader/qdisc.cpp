#include "loader/qdisc.h"

#include "loader/error.h"

#include <libmnl/libmnl.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>

namespace shaperctl {
namespace {

// Handle of the qdisc install_fq() puts at the root ("EDT"). Below 0x8000:, so never one the
// kernel picks itself, and fixed, so installing again finds and updates its own set-up.
constexpr uint32_t kOurHandle = 0x7edf0000;

// Generous: the kernel sizes dump messages to the reader's buffer, and a qdisc's options may
// be re-sent verbatim.
constexpr size_t kBufferSize = 32768;

// The outcome of one request: 0 or an errno, and the kernel's extended-ACK text if it gave one.
struct Reply {
    int err = 0;
    std::string extack;
};

std::string describe(const Reply& reply)
{
    std::string text = std::strerror(reply.err);
    return reply.extack.empty() ? text : reply.extack + " (" + text + ")";
}

template <class Fn>
void for_each_attr(const nlmsghdr& msg, size_t offset, Fn&& fn)
{
    if (offset > mnl_nlmsg_get_payload_len(&msg))
        return;
    auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(&msg, offset));
    auto* tail = static_cast<const char*>(mnl_nlmsg_get_payload_tail(&msg));
    for (; mnl_attr_ok(attr, static_cast<int>(tail - reinterpret_cast<const char*>(attr)));
         attr = mnl_attr_next(attr))
        fn(*attr);
}

// NLMSGERR_ATTR_MSG of an error or done message, whose TLVs start at `offset` into its payload.
std::string extack_text(const nlmsghdr& msg, size_t offset)
{
    std::string text;
    if (!(msg.nlmsg_flags & NLM_F_ACK_TLVS))
        return text;
    for_each_attr(msg, offset, [&](const nlattr& attr) {
        if (mnl_attr_get_type(&attr) == NLMSGERR_ATTR_MSG &&
            mnl_attr_validate(&attr, MNL_TYPE_NUL_STRING) == 0)
            text = mnl_attr_get_str(&attr);
    });
    return text;
}

Reply error_reply(const nlmsghdr& msg)
{
    if (mnl_nlmsg_get_payload_len(&msg) < sizeof(nlmsgerr))
        return {EBADMSG, "truncated netlink error message"};
    auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(&msg));
    if (err->error == 0)
        return {};  // the ACK
    // Without NETLINK_CAP_ACK honoured, the kernel echoes our request before the TLVs.
    size_t offset = sizeof(nlmsgerr);
    if (!(msg.nlmsg_flags & NLM_F_CAPPED) && err->msg.nlmsg_len >= sizeof(nlmsghdr))
        offset += err->msg.nlmsg_len - sizeof(nlmsghdr);
    return {-err->error, extack_text(msg, offset)};
}

// A dump's NLMSG_DONE carries its status: a dump can fail after it started.
Reply done_reply(const nlmsghdr& msg)
{
    if (mnl_nlmsg_get_payload_len(&msg) < sizeof(int))
        return {};
    int status;
    std::memcpy(&status, mnl_nlmsg_get_payload(&msg), sizeof status);
    if (status >= 0)
        return {};
    return {-status, extack_text(msg, sizeof(int))};
}

// A request message being built: header, family header, attributes.
class Request {
public:
    Request(uint16_t type, uint16_t flags)
    {
        nlh_ = mnl_nlmsg_put_header(buf_.data());
        nlh_->nlmsg_type = type;
        nlh_->nlmsg_flags = NLM_F_REQUEST | flags;
    }
    template <class T>
    T& family_header()
    {
        return *static_cast<T*>(mnl_nlmsg_put_extra_header(nlh_, sizeof(T)));
    }
    void put(uint16_t type, std::span<const uint8_t> payload)
    {
        if (!mnl_attr_put_check(nlh_, buf_.size(), type, payload.size(), payload.data()))
            throw Error("netlink request too large (" + std::to_string(payload.size()) +
                        " bytes of attribute " + std::to_string(type & NLA_TYPE_MASK) + ")");
    }
    void put(uint16_t type, std::string_view text)
    {
        std::string z(text);
        put(type, std::span(reinterpret_cast<const uint8_t*>(z.c_str()), z.size() + 1));
    }
    nlmsghdr* message() { return nlh_; }

private:
    std::vector<char> buf_ = std::vector<char>(kBufferSize);  // new[]: aligned for nlmsghdr
    nlmsghdr* nlh_;
};

// A NETLINK_ROUTE socket in the calling thread's network namespace.
class RouteSocket {
public:
    using OnReply = std::function<void(const nlmsghdr&)>;

    RouteSocket()
    {
        sock_ = mnl_socket_open(NETLINK_ROUTE);
        if (!sock_)
            throw Error(errno_message("cannot open a rtnetlink socket", errno));
        // Best effort, both: extended ACKs explain refusals; capped ACKs don't echo requests.
        int on = 1;
        mnl_socket_setsockopt(sock_, NETLINK_EXT_ACK, &on, sizeof on);
        mnl_socket_setsockopt(sock_, NETLINK_CAP_ACK, &on, sizeof on);
        if (mnl_socket_bind(sock_, 0, MNL_SOCKET_AUTOPID) < 0) {
            int err = errno;
            mnl_socket_close(sock_);
            throw Error(errno_message("cannot bind a rtnetlink socket", err));
        }
        portid_ = mnl_socket_get_portid(sock_);
    }
    ~RouteSocket() { mnl_socket_close(sock_); }
    RouteSocket(const RouteSocket&) = delete;
    RouteSocket& operator=(const RouteSocket&) = delete;

    // Sends the request and hands each reply message to on_reply until the ACK (or the end of
    // a dump). A dump that a concurrent change interrupted fails with EINTR.
    Reply request(Request& request, const OnReply& on_reply = {})
    {
        nlmsghdr* nlh = request.message();
        const bool dump = (nlh->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
        if (!dump)
            nlh->nlmsg_flags |= NLM_F_ACK;
        nlh->nlmsg_seq = ++seq_;
        if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0)
            return {errno, "cannot send the netlink request"};

        bool interrupted = false;
        for (;;) {
            ssize_t len = mnl_socket_recvfrom(sock_, buf_.data(), buf_.size());
            if (len < 0) {
                if (errno == EINTR)
                    continue;
                return {errno, "cannot receive the netlink reply"};
            }
            int left = static_cast<int>(len);
            for (auto* msg = reinterpret_cast<const nlmsghdr*>(buf_.data());
                 mnl_nlmsg_ok(msg, left); msg = mnl_nlmsg_next(msg, &left)) {
                if (msg->nlmsg_seq != seq_ || msg->nlmsg_pid != portid_)
                    continue;  // not a reply to this request
                if (msg->nlmsg_flags & NLM_F_DUMP_INTR)
                    interrupted = true;
                switch (msg->nlmsg_type) {
                case NLMSG_ERROR:
                    return error_reply(*msg);
                case NLMSG_DONE: {
                    Reply reply = done_reply(*msg);
                    if (reply.err == 0 && interrupted)
                        reply = {EINTR, "dump interrupted by a concurrent change"};
                    return reply;
                }
                case NLMSG_NOOP:
                case NLMSG_OVERRUN:
                    break;
                default:
                    if (on_reply)
                        on_reply(*msg);
                }
            }
        }
    }

private:
    mnl_socket* sock_ = nullptr;
    unsigned portid_ = 0;
    unsigned seq_ = 0;
    std::vector<char> buf_ = std::vector<char>(kBufferSize);
};

struct Link {
    int ifindex = 0;
    std::string name;
    unsigned tx_queues = 1;
    std::string dev() const { return "dev " + name; }
};

Link read_link(RouteSocket& sock, int ifindex)
{
    Request request(RTM_GETLINK, 0);
    auto& ifi = request.family_header<ifinfomsg>();
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = ifindex;
    uint32_t skip_stats = RTEXT_FILTER_SKIP_STATS;
    request.put(IFLA_EXT_MASK,
                std::span(reinterpret_cast<const uint8_t*>(&skip_stats), sizeof skip_stats));

    Link link;
    link.ifindex = ifindex;
    link.name = "ifindex " + std::to_string(ifindex);
    Reply reply = sock.request(request, [&](const nlmsghdr& msg) {
        if (msg.nlmsg_type != RTM_NEWLINK)
            return;
        for_each_attr(msg, sizeof(ifinfomsg), [&](const nlattr& attr) {
            switch (mnl_attr_get_type(&attr)) {
            case IFLA_IFNAME:
                if (mnl_attr_validate(&attr, MNL_TYPE_NUL_STRING) == 0)
                    link.name = mnl_attr_get_str(&attr);
                break;
            case IFLA_NUM_TX_QUEUES:
                if (mnl_attr_validate(&attr, MNL_TYPE_U32) == 0)
                    link.tx_queues = std::max(1u, mnl_attr_get_u32(&attr));
                break;
            }
        });
    });
    if (reply.err == ENODEV)
        throw Error("ifindex " + std::to_string(ifindex) +
                    ": no such device in this network namespace");
    if (reply.err)
        throw Error("ifindex " + std::to_string(ifindex) +
                    ": cannot read the device: " + describe(reply));
    return link;
}

std::vector<Qdisc> dump_qdiscs(RouteSocket& sock, const Link& link)
{
    for (int attempt = 1;; ++attempt) {
        Request request(RTM_GETQDISC, NLM_F_DUMP);
        request.family_header<tcmsg>().tcm_ifindex =
            link.ifindex;  // kernels dump all devices anyway

        std::vector<Qdisc> qdiscs;
        Reply reply = sock.request(request, [&](const nlmsghdr& msg) {
            auto* tcm = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(&msg));
            if (msg.nlmsg_type != RTM_NEWQDISC || mnl_nlmsg_get_payload_len(&msg) < sizeof(tcmsg) ||
                tcm->tcm_ifindex != link.ifindex)
                return;
            Qdisc& q = qdiscs.emplace_back();
            q.handle = tcm->tcm_handle;
            q.parent = tcm->tcm_parent;
            for_each_attr(msg, sizeof(tcmsg), [&](const nlattr& attr) {
                switch (mnl_attr_get_type(&attr)) {
                case TCA_KIND:
                    if (mnl_attr_validate(&attr, MNL_TYPE_NUL_STRING) == 0)
                        q.kind = mnl_attr_get_str(&attr);
                    break;
                case TCA_OPTIONS: {
                    auto* data = static_cast<const uint8_t*>(mnl_attr_get_payload(&attr));
                    q.options.assign(data, data + mnl_attr_get_payload_len(&attr));
                    break;
                }
                }
            });
        });
        if (reply.err == EINTR && attempt < 5)
            continue;
        if (reply.err)
            throw Error(link.dev() + ": cannot list qdiscs: " + describe(reply));
        return qdiscs;
    }
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
    auto& tcm = request.family_header<tcmsg>();
    tcm.tcm_family = AF_UNSPEC;
    tcm.tcm_ifindex = link.ifindex;
    tcm.tcm_parent = parent;
    tcm.tcm_handle = handle;
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
    uint8_t* const end = options.data() + options.size();
    for (auto* attr = reinterpret_cast<nlattr*>(options.data());
         mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<uint8_t*>(attr)));
         attr = mnl_attr_next(attr)) {
        if (mnl_attr_get_type(attr) != TCA_HTB_INIT ||
            mnl_attr_get_payload_len(attr) < sizeof(tc_htb_glob))
            continue;
        auto* glob = static_cast<tc_htb_glob*>(mnl_attr_get_payload(attr));
        if (glob->version > 0xffff)
            glob->version >>= 16;
    }
    return options;
}

// Without a root of its own, the kernel attaches its default one (on a device that is down:
// when it comes up).
void delete_root(RouteSocket& sock, const Link& link, const Qdisc& root)
{
    Request request(RTM_DELQDISC, 0);
    auto& tcm = request.family_header<tcmsg>();
    tcm.tcm_family = AF_UNSPEC;
    tcm.tcm_ifindex = link.ifindex;
    tcm.tcm_parent = TC_H_ROOT;
    tcm.tcm_handle = root.handle;  // the kernel refuses if the root is no longer this one
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

void install(int ifindex, std::string_view kind, std::span<const uint8_t> options)
{
    RouteSocket sock;
    const Link link = read_link(sock, ifindex);

    if (link.tx_queues == 1) {
        // One request: the kernel either grafts the new root or leaves the old one.
        Reply reply = replace_qdisc(sock, link, TC_H_ROOT, kOurHandle, kind, options);
        if (reply.err)
            throw Error(leaf_failure(link, kind, reply, ""));
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
        throw Error(text);
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
    const uint8_t* const end = fq.options.data() + fq.options.size();
    for (auto* attr = reinterpret_cast<const nlattr*>(fq.options.data());
         mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<const uint8_t*>(attr)));
         attr = mnl_attr_next(attr))
        if (mnl_attr_get_type(attr) == TCA_FQ_HORIZON && mnl_attr_get_payload_len(attr) >= sizeof(uint32_t))
            return uint64_t(mnl_attr_get_u32(attr)) * 1000;
    return 0;
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
