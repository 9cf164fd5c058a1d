#include "loader/rtnetlink.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace shaperctl::rtnl {
namespace {

// A dump interrupted this many times in a row gives up: the device is changing too fast to read.
constexpr int kDumpAttempts = 5;

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

}  // namespace

std::string describe(const Reply& reply)
{
    std::string text = std::strerror(reply.err);
    return reply.extack.empty() ? text : reply.extack + " (" + text + ")";
}

std::span<const uint8_t> attr_bytes(const nlattr& attr)
{
    return {static_cast<const uint8_t*>(mnl_attr_get_payload(&attr)),
            mnl_attr_get_payload_len(&attr)};
}

Request::Request(uint16_t type, uint16_t flags)
{
    nlh_ = mnl_nlmsg_put_header(buf_.data());
    nlh_->nlmsg_type = type;
    nlh_->nlmsg_flags = NLM_F_REQUEST | flags;
}

void Request::put(uint16_t type, std::span<const uint8_t> payload)
{
    if (!mnl_attr_put_check(nlh_, buf_.size(), type, payload.size(), payload.data()))
        throw Error("netlink request too large (" + std::to_string(payload.size()) +
                    " bytes of attribute " + std::to_string(type & NLA_TYPE_MASK) + ")");
}

void Request::put(uint16_t type, std::string_view text)
{
    std::string z(text);
    put(type, std::span(reinterpret_cast<const uint8_t*>(z.c_str()), z.size() + 1));
}

void Request::put_u32(uint16_t type, uint32_t value)
{
    put(type, std::span(reinterpret_cast<const uint8_t*>(&value), sizeof value));
}

RouteSocket::RouteSocket()
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

RouteSocket::~RouteSocket()
{
    mnl_socket_close(sock_);
}

Reply RouteSocket::request(Request& request, const OnReply& on_reply)
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
        for (auto* msg = reinterpret_cast<const nlmsghdr*>(buf_.data()); mnl_nlmsg_ok(msg, left);
             msg = mnl_nlmsg_next(msg, &left)) {
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

Reply RouteSocket::dump(Request& request, const std::function<void()>& restart,
                        const OnReply& on_reply)
{
    for (int attempt = 1;; ++attempt) {
        Reply reply = this->request(request, on_reply);
        if (reply.err != EINTR || attempt == kDumpAttempts)
            return reply;
        restart();
    }
}

Link read_link(RouteSocket& sock, int ifindex)
{
    Request request(RTM_GETLINK, 0);
    auto& ifi = request.family_header<ifinfomsg>();
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = ifindex;
    request.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);

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

}  // namespace shaperctl::rtnl
