#include "rule_args.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "loader/cgroup.h"
#include "loader/error.h"
#include "loader/rule_compiler.h"
#include "units.h"

namespace shaperctl {
namespace {

const struct {
    const char* name;
    uint8_t number;
} kProtocols[] = {{"tcp", 6}, {"udp", 17}, {"icmp", 1}, {"icmpv6", 58}, {"sctp", 132}, {"gre", 47}};

uint64_t parse_number(const std::string& text, uint64_t max, const std::string& what)
{
    if (text.empty())
        throw Error("bad " + what + " \"\": empty");
    int base = 10;
    std::string digits = text;
    if (text.size() > 2 && (text.starts_with("0x") || text.starts_with("0X"))) {
        base = 16;
        digits = text.substr(2);
    }
    uint64_t value = 0;
    for (char c : digits) {
        int d = std::isdigit(uint8_t(c)) ? c - '0'
                : (base == 16 && std::isxdigit(uint8_t(c))) ? std::tolower(c) - 'a' + 10
                                                             : -1;
        if (d < 0)
            throw Error("bad " + what + " \"" + text + "\": not a number");
        value = value * base + d;
        if (value > max)
            throw Error("bad " + what + " \"" + text + "\": out of range (at most " +
                        std::to_string(max) + ")");
    }
    return value;
}

std::string address_text(uint8_t family, const uint8_t* addr)
{
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, buf, sizeof buf);
    return buf;
}

}  // namespace

Cidr parse_cidr(const std::string& text, const char* what)
{
    Cidr cidr;
    const auto slash = text.find('/');
    const std::string address = text.substr(0, slash);
    if (inet_pton(AF_INET, address.c_str(), cidr.addr) == 1)
        cidr.family = 4;
    else if (inet_pton(AF_INET6, address.c_str(), cidr.addr) == 1)
        cidr.family = 6;
    else
        throw Error(std::string("bad ") + what + " \"" + text + "\": not an IPv4 or IPv6 address");
    const unsigned max = cidr.family == 4 ? 32 : 128;
    cidr.plen = uint8_t(max);
    if (slash != std::string::npos) {
        const std::string len = text.substr(slash + 1);
        if (len.empty() || len.size() > 3 || len.find_first_not_of("0123456789") != std::string::npos ||
            std::stoul(len) > max)
            throw Error(std::string("bad ") + what + " \"" + text + "\": prefix length must be 0 to " +
                        std::to_string(max));
        cidr.plen = uint8_t(std::stoul(len));
    }
    const auto mask = prefix_mask(cidr.plen);
    uint8_t network[16] = {};
    for (int i = 0; i < 16; i++)
        network[i] = cidr.addr[i] & mask[i];
    if (std::memcmp(network, cidr.addr, 16))
        throw Error(std::string("bad ") + what + " \"" + text + "\": host bits set (did you mean " +
                    address_text(cidr.family, network) + "/" + std::to_string(cidr.plen) + "?)");
    return cidr;
}

std::pair<uint16_t, uint16_t> parse_port_range(const std::string& text, const char* what)
{
    const auto dash = text.find('-');
    const std::string name = std::string(what);
    auto one = [&](const std::string& part) {
        uint64_t port = parse_number(part, 65535, name);
        if (port == 0)
            throw Error("bad " + name + " \"" + text + "\": ports are 1 to 65535");
        return uint16_t(port);
    };
    if (dash == std::string::npos) {
        uint16_t p = one(text);
        return {p, p};
    }
    uint16_t lo = one(text.substr(0, dash)), hi = one(text.substr(dash + 1));
    if (lo > hi)
        throw Error("bad " + name + " \"" + text + "\": reversed range");
    return {lo, hi};
}

uint8_t parse_proto(const std::string& text)
{
    for (const auto& p : kProtocols)
        if (text == p.name)
            return p.number;
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
        return uint8_t(parse_number(text, 255, "protocol"));
    throw Error("bad protocol \"" + text + "\" (use tcp, udp, icmp, icmpv6, sctp, gre or a number)");
}

std::pair<uint32_t, uint32_t> parse_mark(const std::string& text)
{
    const auto slash = text.find('/');
    if (slash == 0)
        throw Error("bad mark \"" + text + "\": a mask without a value");
    const uint32_t value = uint32_t(parse_number(text.substr(0, slash), 0xffffffffu, "mark"));
    const uint32_t mask = slash == std::string::npos
                              ? 0xffffffffu
                              : uint32_t(parse_number(text.substr(slash + 1), 0xffffffffu, "mark mask"));
    if (mask == 0)
        throw Error("bad mark \"" + text + "\": a zero mask matches everything");
    if (value & ~mask)
        throw Error("bad mark \"" + text + "\": the value has bits outside the mask");
    return {value, mask};
}

uint32_t parse_priority(const std::string& text)
{
    const auto colon = text.find(':');
    if (colon == std::string::npos)
        return uint32_t(parse_number(text, 0xffffffffu, "priority"));
    // tc's MAJ:MIN, both hexadecimal, as classids are written.
    const uint32_t major = uint32_t(parse_number("0x" + text.substr(0, colon), 0xffff, "priority"));
    const uint32_t minor = uint32_t(parse_number("0x" + text.substr(colon + 1), 0xffff, "priority"));
    return (major << 16) | minor;
}

shaper_rule parse_rule(const RuleArgs& a)
{
    shaper_rule r{};
    r.pref = uint32_t(parse_int(a.pref, 1, SHAPER_PREF_NONE - 1, "pref"));
    r.class_id = uint32_t(parse_int(a.class_id, 1, UINT32_MAX, "class id"));
    using Side = std::tuple<const std::string*, uint32_t, const char*>;
    for (auto [text, field, name] : {Side{&a.src, SHAPER_RULE_F_SRC, "source CIDR"},
                                     Side{&a.dst, SHAPER_RULE_F_DST, "destination CIDR"}}) {
        if (text->empty())
            continue;
        const Cidr cidr = parse_cidr(*text, name);
        if (r.family && r.family != cidr.family)
            throw Error("--src and --dst must both be IPv4 or both IPv6");
        r.family = cidr.family;
        r.fields |= field;
        std::memcpy(field == SHAPER_RULE_F_SRC ? r.src : r.dst, cidr.addr, 16);
        (field == SHAPER_RULE_F_SRC ? r.src_plen : r.dst_plen) = cidr.plen;
    }
    if (!a.proto.empty()) {
        r.proto = parse_proto(a.proto);
        r.fields |= SHAPER_RULE_F_PROTO;
    }
    if (!a.sport.empty()) {
        std::tie(r.sport_lo, r.sport_hi) = parse_port_range(a.sport, "source port");
        r.fields |= SHAPER_RULE_F_SPORT;
    }
    if (!a.dport.empty()) {
        std::tie(r.dport_lo, r.dport_hi) = parse_port_range(a.dport, "destination port");
        r.fields |= SHAPER_RULE_F_DPORT;
    }
    if ((r.fields & SHAPER_RULE_F_PORTS) && (r.fields & SHAPER_RULE_F_PROTO) && r.proto != 6 &&
        r.proto != 17 && r.proto != 132)
        throw Error("ports only exist for tcp, udp and sctp");
    if (!a.mark.empty()) {
        std::tie(r.mark, r.mark_mask) = parse_mark(a.mark);
        r.fields |= SHAPER_RULE_F_MARK;
    }
    if (!a.cgroup.empty()) {
        const CgroupRef cg = resolve_cgroup(a.cgroup);
        r.cgroup_id = cg.id;
        r.cgroup_level = cg.level;
        r.fields |= SHAPER_RULE_F_CGROUP;
    }
    if (!a.priority.empty()) {
        r.priority = parse_priority(a.priority);
        r.fields |= SHAPER_RULE_F_PRIORITY;
    }
    if (!a.dscp.empty()) {
        r.dscp = uint8_t(parse_int(a.dscp, 0, 63, "dscp"));
        r.fields |= SHAPER_RULE_F_DSCP;
    }
    if (!a.vlan.empty()) {
        r.vlan = uint16_t(parse_int(a.vlan, 1, 4094, "vlan"));
        r.fields |= SHAPER_RULE_F_VLAN;
    }
    if (!r.fields)
        throw Error("a rule needs at least one match (--src, --dst, --proto, --sport, --dport, --mark, "
                    "--cgroup, --priority, --dscp, --vlan); for every packet use set-default");
    validate_rule(r);
    return r;
}

std::string format_rule_match(const shaper_rule& r)
{
    std::string out;
    auto add = [&](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
    auto range = [](uint16_t lo, uint16_t hi) {
        return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
    };
    if (r.fields & SHAPER_RULE_F_SRC)
        add("src " + address_text(r.family, r.src) + "/" + std::to_string(r.src_plen));
    if (r.fields & SHAPER_RULE_F_DST)
        add("dst " + address_text(r.family, r.dst) + "/" + std::to_string(r.dst_plen));
    if (r.fields & SHAPER_RULE_F_PROTO) {
        std::string name = std::to_string(r.proto);
        for (const auto& p : kProtocols)
            if (p.number == r.proto)
                name = p.name;
        add("proto " + name);
    }
    if (r.fields & SHAPER_RULE_F_SPORT)
        add("sport " + range(r.sport_lo, r.sport_hi));
    if (r.fields & SHAPER_RULE_F_DPORT)
        add("dport " + range(r.dport_lo, r.dport_hi));
    if (r.fields & SHAPER_RULE_F_MARK) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "mark 0x%x/0x%x", r.mark, r.mark_mask);
        add(buf);
    }
    if (r.fields & SHAPER_RULE_F_CGROUP)
        add("cgroup id " + std::to_string(r.cgroup_id));
    if (r.fields & SHAPER_RULE_F_PRIORITY) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "priority %x:%x", r.priority >> 16, r.priority & 0xffff);
        add(buf);
    }
    if (r.fields & SHAPER_RULE_F_DSCP)
        add("dscp " + std::to_string(r.dscp));
    if (r.fields & SHAPER_RULE_F_VLAN)
        add("vlan " + std::to_string(r.vlan));
    return out;
}

}  // namespace shaperctl
