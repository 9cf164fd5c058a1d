#include "core/rule_spec.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstdio>
#include <cstring>

#include "core/units.h"
#include "core/error.h"
#include "core/rule_compiler.h"

namespace shaperctl {
namespace {


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

std::string hex_text(const char* format, uint32_t a, uint32_t b)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, format, a, b);
    return buf;
}

using CidrMember = std::optional<Cidr> RuleSpec::*;
using PortsMember = std::optional<PortRange> RuleSpec::*;
using MarkMember = std::optional<MarkMatch> RuleSpec::*;
using CgroupMember = std::optional<CgroupMatch> RuleSpec::*;
using NumberMember = std::optional<uint32_t> RuleSpec::*;

void put_cidr(const Cidr& cidr, shaper_rule& r, uint8_t* addr, uint8_t& plen)
{
    r.family = cidr.family;
    std::memcpy(addr, cidr.addr.data(), 16);
    plen = cidr.plen;
}

Cidr cidr_of(const shaper_rule& r, const uint8_t* addr, uint8_t plen)
{
    Cidr c{r.family, {}, plen};
    std::memcpy(c.addr.data(), addr, 16);
    return c;
}

}  // namespace

const std::vector<ProtocolName>& protocol_names()
{
    static const std::vector<ProtocolName> names = {{"tcp", 6},   {"udp", 17},   {"icmp", 1},
                                                    {"icmpv6", 58}, {"sctp", 132}, {"gre", 47}};
    return names;
}

// A field's flag, then its two conversions: `to` writes the present field of spec s into rule r,
// `from` reads it back.
#define DATAPATH(flag, to, from)                                        \
    flag, [](const RuleSpec& s, shaper_rule& r) { to; },                \
        [](const shaper_rule& r, RuleSpec& s) { from; }

const std::vector<RuleField>& rule_fields()
{
    using K = MatchKind;
    static const std::vector<RuleField> fields = {
        {"src", K::Cidr, "source CIDR", "source CIDR (10.0.0.0/8, 2001:db8::/32)", "\"10.0.0.0/8\"",
         &RuleSpec::src,
         DATAPATH(SHAPER_RULE_F_SRC, put_cidr(*s.src, r, r.src, r.src_plen), s.src = cidr_of(r, r.src, r.src_plen))},
        {"dst", K::Cidr, "destination CIDR", "destination CIDR", "\"10.0.0.0/8\"", &RuleSpec::dst,
         DATAPATH(SHAPER_RULE_F_DST, put_cidr(*s.dst, r, r.dst, r.dst_plen), s.dst = cidr_of(r, r.dst, r.dst_plen))},
        {"proto", K::Proto, "protocol", "tcp, udp, icmp, icmpv6, sctp, gre or a number", "\"tcp\"",
         &RuleSpec::proto, DATAPATH(SHAPER_RULE_F_PROTO, r.proto = uint8_t(*s.proto), s.proto = r.proto)},
        {"sport", K::Ports, "source port", "source port or range P-Q", "\"80\" or \"1024-65535\"",
         &RuleSpec::sport,
         DATAPATH(SHAPER_RULE_F_SPORT, (r.sport_lo = s.sport->lo, r.sport_hi = s.sport->hi),
                  s.sport = (PortRange{r.sport_lo, r.sport_hi}))},
        {"dport", K::Ports, "destination port", "destination port or range P-Q", "\"80\" or \"1024-65535\"",
         &RuleSpec::dport,
         DATAPATH(SHAPER_RULE_F_DPORT, (r.dport_lo = s.dport->lo, r.dport_hi = s.dport->hi),
                  s.dport = (PortRange{r.dport_lo, r.dport_hi}))},
        {"mark", K::Mark, "mark", "firewall mark V[/MASK]", "\"0x10/0xff\"", &RuleSpec::mark,
         DATAPATH(SHAPER_RULE_F_MARK, (r.mark = s.mark->value, r.mark_mask = s.mark->mask),
                  s.mark = (MarkMatch{r.mark, r.mark_mask}))},
        {"cgroup", K::Cgroup, "cgroup", "cgroup v2 path: the cgroup and its descendants (local sockets)",
         "\"/system.slice/nginx.service\"", &RuleSpec::cgroup,
         DATAPATH(SHAPER_RULE_F_CGROUP, (r.cgroup_id = s.cgroup->id, r.cgroup_level = s.cgroup->level),
                  s.cgroup = (CgroupMatch{r.cgroup_id, r.cgroup_level}))},
        {"priority", K::Priority, "priority", "skb priority: N, or MAJ:MIN as tc writes classids", "\"1:10\"",
         &RuleSpec::priority, DATAPATH(SHAPER_RULE_F_PRIORITY, r.priority = *s.priority, s.priority = r.priority)},
        {"dscp", K::Int, "dscp", "DSCP code point 0 to 63", "10", &RuleSpec::dscp,
         DATAPATH(SHAPER_RULE_F_DSCP, r.dscp = uint8_t(*s.dscp), s.dscp = r.dscp), 0, 63},
        {"vlan", K::Int, "vlan", "outermost VLAN id 1 to 4094", "100", &RuleSpec::vlan,
         DATAPATH(SHAPER_RULE_F_VLAN, r.vlan = uint16_t(*s.vlan), s.vlan = r.vlan), 1, 4094},
    };
    return fields;
}

#undef DATAPATH

bool has_match(const RuleSpec& rule, const RuleField& field)
{
    return std::visit([&](auto member) { return (rule.*member).has_value(); }, field.member);
}

void set_match(RuleSpec& rule, const RuleField& field, const std::string& text, std::string_view option,
               const std::function<CgroupRef(const std::string&)>& resolve)
{
    switch (field.kind) {
    case MatchKind::Cidr: {
        const Cidr cidr = parse_cidr(text, field.noun);
        for (const RuleField& other : rule_fields())
            if (other.kind == MatchKind::Cidr && &other != &field && has_match(rule, other) &&
                (rule.*std::get<CidrMember>(other.member))->family != cidr.family)
                throw Error(std::string(option) + "src and " + std::string(option) +
                            "dst must both be IPv4 or both IPv6");
        rule.*std::get<CidrMember>(field.member) = cidr;
        return;
    }
    case MatchKind::Ports: rule.*std::get<PortsMember>(field.member) = parse_port_range(text, field.noun); return;
    case MatchKind::Proto: rule.*std::get<NumberMember>(field.member) = parse_proto(text); return;
    case MatchKind::Mark: rule.*std::get<MarkMember>(field.member) = parse_mark(text); return;
    case MatchKind::Cgroup: {
        const CgroupRef ref = resolve(text);
        rule.*std::get<CgroupMember>(field.member) = CgroupMatch{ref.id, ref.level};
        return;
    }
    case MatchKind::Priority: rule.*std::get<NumberMember>(field.member) = parse_priority(text); return;
    case MatchKind::Int:
        rule.*std::get<NumberMember>(field.member) = uint32_t(parse_int(text, field.min, field.max, field.noun));
        return;
    }
}

std::string match_text(const RuleSpec& rule, const RuleField& field)
{
    switch (field.kind) {
    case MatchKind::Cidr: {
        const Cidr& c = *(rule.*std::get<CidrMember>(field.member));
        return address_text(c.family, c.addr.data()) + "/" + std::to_string(c.plen);
    }
    case MatchKind::Ports: {
        const PortRange& p = *(rule.*std::get<PortsMember>(field.member));
        return p.lo == p.hi ? std::to_string(p.lo) : std::to_string(p.lo) + "-" + std::to_string(p.hi);
    }
    case MatchKind::Proto: {
        const uint32_t proto = *(rule.*std::get<NumberMember>(field.member));
        for (const auto& p : protocol_names())
            if (p.number == proto)
                return p.name;
        return std::to_string(proto);
    }
    case MatchKind::Mark: {
        const MarkMatch& m = *(rule.*std::get<MarkMember>(field.member));
        return hex_text("0x%x/0x%x", m.value, m.mask);
    }
    case MatchKind::Cgroup: return "id " + std::to_string((rule.*std::get<CgroupMember>(field.member))->id);
    case MatchKind::Priority: {
        const uint32_t priority = *(rule.*std::get<NumberMember>(field.member));
        return hex_text("%x:%x", priority >> 16, priority & 0xffff);
    }
    case MatchKind::Int: return std::to_string(*(rule.*std::get<NumberMember>(field.member)));
    }
    return "";
}

void check_matches(const RuleSpec& rule, std::string_view option, std::string_view every_packet)
{
    if ((rule.sport || rule.dport) && rule.proto && *rule.proto != 6 && *rule.proto != 17 && *rule.proto != 132)
        throw Error("ports only exist for tcp, udp and sctp");
    std::string names;
    for (const RuleField& f : rule_fields()) {
        if (has_match(rule, f))
            return;
        names += (names.empty() ? "" : ", ") + std::string(option) + f.name;
    }
    throw Error("a rule needs at least one match (" + names + "); for every packet use " +
                std::string(every_packet));
}

std::string format_rule_match(const RuleSpec& rule)
{
    std::string out;
    for (const RuleField& f : rule_fields())
        if (has_match(rule, f))
            out += (out.empty() ? "" : " ") + std::string(f.name) + " " + match_text(rule, f);
    return out;
}

shaper_rule compile_rule(const RuleSpec& spec)
{
    shaper_rule r{};
    r.pref = spec.pref;
    r.class_id = spec.class_id;
    for (const RuleField& f : rule_fields()) {
        if (!has_match(spec, f))
            continue;
        r.fields |= f.flag;
        f.compile(spec, r);
    }
    validate_rule(r);
    return r;
}

RuleSpec rule_spec_of(const shaper_rule& r)
{
    RuleSpec spec;
    spec.pref = r.pref;
    spec.class_id = r.class_id;
    for (const RuleField& f : rule_fields())
        if (r.fields & f.flag)
            f.decompile(r, spec);
    return spec;
}

Cidr parse_cidr(const std::string& text, const char* what)
{
    Cidr cidr;
    const auto slash = text.find('/');
    const std::string address = text.substr(0, slash);
    if (inet_pton(AF_INET, address.c_str(), cidr.addr.data()) == 1)
        cidr.family = 4;
    else if (inet_pton(AF_INET6, address.c_str(), cidr.addr.data()) == 1)
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
    if (std::memcmp(network, cidr.addr.data(), 16))
        throw Error(std::string("bad ") + what + " \"" + text + "\": host bits set (did you mean " +
                    address_text(cidr.family, network) + "/" + std::to_string(cidr.plen) + "?)");
    return cidr;
}

PortRange parse_port_range(const std::string& text, const char* what)
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
    for (const auto& p : protocol_names())
        if (text == p.name)
            return p.number;
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
        return uint8_t(parse_number(text, 255, "protocol"));
    throw Error("bad protocol \"" + text + "\" (use tcp, udp, icmp, icmpv6, sctp, gre or a number)");
}

MarkMatch parse_mark(const std::string& text)
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

}  // namespace shaperctl
