// A rule as operators describe it, and the one table of its match fields from which the
// command line (add-rule's options, their help and parsing), the configuration file, dump,
// apply's diff and status are all made. compile_rule() turns it into the datapath's form.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/cgroup_names.h"
#include "shaper_abi.h"

namespace shaperctl {

struct Cidr {
    uint8_t family = 0;  // 4 or 6
    std::array<uint8_t, 16> addr{};
    uint8_t plen = 0;
    bool operator==(const Cidr&) const = default;
};

struct PortRange {
    uint16_t lo = 0, hi = 0;
    bool operator==(const PortRange&) const = default;
};

struct MarkMatch {
    uint32_t value = 0, mask = 0;
    bool operator==(const MarkMatch&) const = default;
};

struct CgroupMatch {
    uint64_t id = 0;
    uint32_t level = 0;  // depth below the cgroup2 root
    bool operator==(const CgroupMatch&) const = default;
};

// A packet matches when it matches every field present.
struct RuleSpec {
    uint32_t pref = 0;  // lowest matching pref wins
    uint32_t class_id = 0;
    std::optional<Cidr> src, dst;
    std::optional<uint32_t> proto;
    std::optional<PortRange> sport, dport;
    std::optional<MarkMatch> mark;
    std::optional<CgroupMatch> cgroup;
    std::optional<uint32_t> priority, dscp, vlan;
    bool operator==(const RuleSpec&) const = default;
};

// How a match is written: CIDRs ("10.0.0.0/8"), ports or ranges ("80-90"), protocols ("tcp" or
// a number), marks ("0x10/0xff"), cgroup paths, skb priorities ("1:10" or a number), and plain
// integers within a range.
enum class MatchKind { Cidr, Ports, Proto, Mark, Cgroup, Priority, Int };

struct RuleField {
    const char* name;     // the file's key and the match's word; the option is --NAME
    MatchKind kind;
    const char* noun;     // names the value in errors ("source CIDR")
    const char* help;     // add-rule --help and the man page
    const char* example;  // a file value, in type errors ("\"10.0.0.0/8\"")
    std::variant<std::optional<Cidr> RuleSpec::*, std::optional<PortRange> RuleSpec::*,
                 std::optional<MarkMatch> RuleSpec::*, std::optional<CgroupMatch> RuleSpec::*,
                 std::optional<uint32_t> RuleSpec::*>
        member;
    // The datapath's form: the field's flag (SHAPER_RULE_F_*), and how a present field is
    // written into a shaper_rule and read back from one that has the flag.
    uint32_t flag;
    void (*compile)(const RuleSpec&, shaper_rule&);
    void (*decompile)(const shaper_rule&, RuleSpec&);
    int64_t min = 0, max = 0;  // an Int's range
};

// The protocols known by name, as rules write them.
struct ProtocolName {
    const char* name;
    uint8_t number;
};
const std::vector<ProtocolName>& protocol_names();

// Every match field, in the order files, dump, diffs and status list them.
const std::vector<RuleField>& rule_fields();

// Whether the rule has the field.
bool has_match(const RuleSpec& rule, const RuleField& field);

// Sets a field from its text as the command line writes it; one-line Error naming the bad text.
// `option` is how errors about two fields write a field's name ("--" on the command line);
// `resolve` finds a cgroup path.
void set_match(RuleSpec& rule, const RuleField& field, const std::string& text, std::string_view option,
               const std::function<CgroupRef(const std::string&)>& resolve);

// A present field's text as the command line writes it ("10.0.0.0/8", "tcp", "80-90"); a
// cgroup as "id N".
std::string match_text(const RuleSpec& rule, const RuleField& field);

// What concerns the fields together: ports need a protocol that has them, a rule needs a match
// (`every_packet` says what serves all packets instead: "set-default").
void check_matches(const RuleSpec& rule, std::string_view option, std::string_view every_packet);

// "dst 10.0.0.0/24 proto tcp dport 80-90", as status and diffs show a rule.
std::string format_rule_match(const RuleSpec& rule);

// The datapath's form of a rule, checked (validate_rule); and back.
shaper_rule compile_rule(const RuleSpec& rule);
RuleSpec rule_spec_of(const shaper_rule& rule);

// Parsers of single values; `what` names the value in errors.
Cidr parse_cidr(const std::string& text, const char* what);
PortRange parse_port_range(const std::string& text, const char* what);
uint8_t parse_proto(const std::string& text);
MarkMatch parse_mark(const std::string& text);
uint32_t parse_priority(const std::string& text);

}  // namespace shaperctl
