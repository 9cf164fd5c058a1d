// tc's filters on the HTB qdisc as rules: fw (a mark) and flower (addresses, protocol, ports).
// Anything a rule cannot say exactly is left out whole, with a note: a filter carried with a
// key dropped would match more than it did.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/error.h"
#include "core/htb_tc.h"

namespace shaperctl {
namespace {

using json = nlohmann::json;

const RuleField& rule_field(const char* name)
{
    for (const RuleField& f : rule_fields())
        if (std::string(f.name) == name)
            return f;
    throw Error(std::string("no rule field ") + name);
}

void set(RuleSpec& rule, const char* field, const std::string& text)
{
    set_match(rule, rule_field(field), text, "", [](const std::string& path) -> CgroupRef {
        throw Error("no cgroup \"" + path + "\"");
    });
}

// A filter as tc lists it: one entry with options (entries without are the heads tc prints
// before a pref's filters, and u32's hash tables are none either).
struct TcFilter {
    const json* entry;
    uint32_t pref;
    std::string kind, name;  // "filter pref 10 flower (handle 2)"
};

// A value tc writes either as a number or as text.
std::string value_text(const json& v)
{
    if (v.is_number_unsigned())
        return std::to_string(v.get<uint64_t>());
    return v.is_string() ? v.get<std::string>() : "";
}

// flower's ports: 80, or {"start": 1000, "end": 2000}.
std::string port_text(const json& v)
{
    if (v.is_object() && v.contains("start") && v.contains("end"))
        return value_text(v["start"]) + "-" + value_text(v["end"]);
    return value_text(v);
}

// flower's ip_proto: a name, or the number in hexadecimal for the others.
std::string proto_text(const json& v)
{
    std::string text = value_text(v);
    for (const ProtocolName& p : protocol_names())
        if (text == p.name)
            return text;
    const auto number = v.is_string() ? tc_number(text.starts_with("0x") ? text : "0x" + text) : std::nullopt;
    return number ? std::to_string(*number) : text;
}

// The matches of a flower filter; Error naming a key that has no rule field.
void flower_matches(const json& options, const std::string& family, RuleSpec& rule)
{
    if (tc_flag(options, "skip_sw"))
        throw Error("skip_sw: it runs in hardware only");
    const json keys = options.value("keys", json::object());
    std::vector<std::string> other;
    for (const auto& [key, value] : keys.items()) {
        if (key == "eth_type" && value == family)
            continue;
        if (key == "ip_proto")
            set(rule, "proto", proto_text(value));
        else if (key == "src_ip" || key == "dst_ip")
            set(rule, key == "src_ip" ? "src" : "dst", value_text(value));
        else if (key == "src_port" || key == "dst_port")
            set(rule, key == "src_port" ? "sport" : "dport", port_text(value));
        else
            other.push_back(key);
    }
    if (!other.empty()) {
        std::string list;
        for (const std::string& k : other)
            list += (list.empty() ? "" : ", ") + k;
        throw Error("no rule matches on " + list);
    }
}

// The rule of a filter that sends packets to `id`; Error saying why there is none.
RuleSpec filter_rule(const TcFilter& f, uint32_t id)
{
    const json& options = (*f.entry)["options"];
    // The family tc's protocol names, or with protocol all, a flower's eth_type.
    const std::string protocol = tc_text(*f.entry, "protocol");
    const std::string eth_type = tc_text(options.value("keys", json::object()), "eth_type");
    const std::string family = protocol == "ip" ? "ipv4" : protocol == "ipv6" ? "ipv6" : protocol == "all" ? eth_type : "";
    if (protocol != "all" && family.empty())
        throw Error("protocol " + protocol);
    if (family != "" && family != "ipv4" && family != "ipv6")
        throw Error("eth_type " + family);
    RuleSpec rule;
    rule.class_id = id;
    // fw's input dev and flower's indev: a rule matches packets whatever device they came in on,
    // so it would match more than the filter did.
    if (const std::string indev = tc_text(options, "indev"); !indev.empty())
        throw Error("input dev " + indev + ": a rule does not match on the device packets came in on");
    if (f.kind == "fw") {
        if (const std::string text = tc_text(options, "text"); !text.empty())
            throw Error("its options as tc wrote them in text hold \"" + text + "\": add its rule by hand");
        const json fw = options.value("fw", json::object());
        const std::string mark = tc_text(fw, "mark"), mask = tc_text(fw, "mask");
        if (mark.empty())
            throw Error("fw without a mark");
        set(rule, "mark", mask.empty() || mask == "0xffffffff" ? mark : mark + "/" + mask);
    } else if (f.kind == "flower") {
        flower_matches(options, family, rule);
    } else if (f.kind == "u32") {
        throw Error("u32's raw offsets and masks are not translated: add its rule by hand (src, dst, proto, ports)");
    } else {
        throw Error("no rule matches as " + f.kind + " does");
    }
    // A rule with no address matches both families: one of the whole family keeps tc's protocol.
    if (!family.empty() && !rule.src && !rule.dst)
        set(rule, "src", family == "ipv4" ? "0.0.0.0/0" : "::/0");
    check_matches(rule, "", "default_class");
    return rule;
}

// The filter's class as the tree maps it; Error when it is not a leaf of the tree.
uint32_t target_class(const TcFilter& f, const HtbTree& tree)
{
    const json& options = (*f.entry)["options"];
    std::string target = tc_text(options, "classid");
    if (target.empty())
        target = tc_text(options, "flowid");
    if (target.empty())
        throw Error("it names no class");
    const auto h = parse_tc_handle(target);
    if (!h || h->major != tree.major)
        throw Error("its class " + target + " is not one of the HTB qdisc's");
    if (!h->minor)
        throw Error("it sends to " + target + ", HTB's direct queue (unshaped)");
    const auto c = tree.classes.find(h->minor);
    if (c == tree.classes.end())
        throw Error("its class " + target + " does not exist (HTB sends those packets to the default class)");
    if (!c->second.leaf)
        throw Error("its class " + target + " has children: HTB goes on through that class's own filters");
    return c->second.id;
}

std::vector<TcFilter> tc_filters(const json& list)
{
    std::vector<TcFilter> out;
    for (const json& e : list) {
        if (!e.contains("options") || !e["options"].is_object())
            continue;
        const json& o = e["options"];
        const std::string kind = tc_text(e, "kind");
        if (kind == "u32" && !o.contains("flowid") && !o.contains("classid") && o.contains("ht_divisor"))
            continue;  // a hash table
        std::string name = "filter pref " + tc_text(e, "pref") + " " + kind;
        if (const std::string h = tc_text(o, o.contains("fh") ? "fh" : "handle"); !h.empty())
            name += " (handle " + h + ")";
        const auto pref = tc_number(tc_text(e, "pref"));
        if (!pref || *pref > 0xffff)
            throw Error(name + ": no pref (tc's are 1 to 65535)");
        out.push_back({&e, uint32_t(*pref), kind, name});
    }
    return out;
}

}  // namespace

std::vector<RuleSpec> htb_rules(const json& filters, const HtbTree& tree, std::vector<std::string>& notes)
{
    const std::vector<TcFilter> list = tc_filters(filters);
    // Prefs are unique among rules, not among filters (flower and u32 hold many at one pref):
    // a rule's pref is the filter's times a power of ten, plus its place in tc's listing.
    std::map<uint32_t, uint32_t> per_pref;
    uint32_t most = 1, scale = 1;
    for (const TcFilter& f : list)
        most = std::max(most, ++per_pref[f.pref]);
    while (scale < most)
        scale *= 10;
    if (scale > 1) {
        const auto busiest = std::find_if(per_pref.begin(), per_pref.end(), [&](const auto& p) { return p.second == most; });
        notes.push_back("rule prefs are the filters' prefs times " + std::to_string(scale) +
                        " plus their place within the pref: rule prefs are unique, and filter pref " +
                        std::to_string(busiest->first) + " holds " + std::to_string(most) + " filters");
    }
    std::map<uint32_t, uint32_t> place;
    std::vector<RuleSpec> rules;
    const std::string qdisc = tc_handle_text({tree.major, 0});
    for (const TcFilter& f : list) {
        const uint64_t pref = uint64_t(f.pref) * scale + place[f.pref]++;
        const json& options = (*f.entry)["options"];
        try {
            const std::string parent = tc_text(*f.entry, "parent");
            if (parse_tc_handle(parent) != TcHandle{tree.major, 0})
                throw Error("it is attached to " + parent + ", not to the HTB qdisc " + qdisc);
            if (const std::string chain = tc_text(*f.entry, "chain"); !chain.empty() && chain != "0")
                throw Error("chain " + chain + " (reached by goto actions)");
            const uint32_t id = target_class(f, tree);
            RuleSpec rule = filter_rule(f, id);
            if (!pref || pref >= SHAPER_PREF_NONE)
                throw Error("pref " + std::to_string(pref) + " is out of range");
            rule.pref = uint32_t(pref);
            rules.push_back(rule);
            // fw writes a police action's members among its options.
            const char* what = options.contains("actions") ? "actions"
                               : tc_text(options, "kind") == "police" ? "police" : nullptr;
            if (what)
                notes.push_back(std::string("not carried: the ") + what + " of " + f.name + " (its rule " +
                                std::to_string(pref) + " only classifies)");
        } catch (const Error& e) {
            notes.push_back("not carried: " + f.name + ": " + e.what());
        }
    }
    std::sort(rules.begin(), rules.end(), [](const RuleSpec& a, const RuleSpec& b) { return a.pref < b.pref; });
    return rules;
}

}  // namespace shaperctl
