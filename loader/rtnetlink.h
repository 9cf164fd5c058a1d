// A small rtnetlink client over libmnl: one NETLINK_ROUTE socket in the calling thread's network
// namespace, requests answered by an ACK or a (retried) dump, attribute iteration, and the
// kernel's refusals as text (its extended-ACK message beside strerror). It knows no policy: what
// to ask and what a failure means to the user belong to its callers (qdisc.cpp, tc_filter.cpp).
#pragma once

#include <libmnl/libmnl.h>
#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace shaperctl::rtnl {

// Generous: the kernel sizes dump messages to the reader's buffer, and a qdisc's options may
// be re-sent verbatim.
constexpr size_t kBufferSize = 32768;

// The outcome of one request: 0 or an errno, and the kernel's extended-ACK text if it gave one.
struct Reply {
    int err = 0;
    std::string extack;
};

// "extack (strerror)", or strerror alone.
std::string describe(const Reply& reply);

// Calls fn(attr) for each well-formed attribute of a packed run of them (a nested attribute's
// payload, TCA_OPTIONS say); a mutable run gives mutable attributes.
template <class Byte, class Fn>
void for_each_attr(std::span<Byte> attrs, Fn&& fn)
{
    static_assert(sizeof(Byte) == 1);
    using Attr = std::conditional_t<std::is_const_v<Byte>, const nlattr, nlattr>;
    Byte* const end = attrs.data() + attrs.size();
    for (auto* attr = reinterpret_cast<Attr*>(attrs.data());
         mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<Byte*>(attr)));
         attr = mnl_attr_next(attr))
        fn(*attr);
}

// The same over a message's attributes, which start `offset` bytes into its payload (after the
// family header).
template <class Fn>
void for_each_attr(const nlmsghdr& msg, size_t offset, Fn&& fn)
{
    const size_t len = mnl_nlmsg_get_payload_len(&msg);
    if (offset > len)
        return;
    auto* payload = static_cast<const uint8_t*>(mnl_nlmsg_get_payload(&msg));
    for_each_attr(std::span(payload + offset, len - offset), fn);
}

// An attribute's payload as bytes.
std::span<const uint8_t> attr_bytes(const nlattr& attr);

// A request message being built: header, family header, attributes.
class Request {
public:
    Request(uint16_t type, uint16_t flags);
    template <class T>
    T& family_header()
    {
        return *static_cast<T*>(mnl_nlmsg_put_extra_header(nlh_, sizeof(T)));
    }
    // Throws when the attribute does not fit.
    void put(uint16_t type, std::span<const uint8_t> payload);
    void put(uint16_t type, std::string_view text);  // NUL-terminated
    void put_u32(uint16_t type, uint32_t value);
    nlmsghdr* message() { return nlh_; }

private:
    std::vector<char> buf_ = std::vector<char>(kBufferSize);  // new[]: aligned for nlmsghdr
    nlmsghdr* nlh_;
};

// A NETLINK_ROUTE socket in the calling thread's network namespace.
class RouteSocket {
public:
    using OnReply = std::function<void(const nlmsghdr&)>;

    RouteSocket();  // throws
    ~RouteSocket();
    RouteSocket(const RouteSocket&) = delete;
    RouteSocket& operator=(const RouteSocket&) = delete;

    // Sends the request and hands each reply message to on_reply until the ACK (or the end of
    // a dump). A dump that a concurrent change interrupted fails with EINTR.
    Reply request(Request& request, const OnReply& on_reply = {});

    // A dump (NLM_F_DUMP), asked again while a concurrent change interrupts it, a few times at
    // most; `restart` forgets what on_reply collected from the interrupted attempt.
    Reply dump(Request& request, const std::function<void()>& restart, const OnReply& on_reply);

private:
    mnl_socket* sock_ = nullptr;
    unsigned portid_ = 0;
    unsigned seq_ = 0;
    std::vector<char> buf_ = std::vector<char>(kBufferSize);
};

// What qdisc set-up needs to know of a device.
struct Link {
    int ifindex = 0;
    std::string name;       // "ifindex N" if the kernel did not say
    unsigned tx_queues = 1;  // IFLA_NUM_TX_QUEUES
    std::string dev() const { return "dev " + name; }
};

// RTM_GETLINK of one device; throws naming the ifindex (no such device in this namespace, or
// the kernel's refusal).
Link read_link(RouteSocket& sock, int ifindex);

}  // namespace shaperctl::rtnl
