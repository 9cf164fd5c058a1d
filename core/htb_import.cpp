#include "core/htb_import.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/cgroup_names.h"
#include "core/config_file.h"
#include "core/direction.h"
#include "core/error.h"
#include "core/htb_tc.h"
#include "core/units.h"

namespace shaperctl {
namespace {

using json = nlohmann::json;

// A class as tc shows it, with what the translation needs of its place in the tree.
struct TcClass {
    TcHandle handle;
    std::optional<uint32_t> parent;  // minor; none at the top
    const json* entry;
    std::vector<uint32_t> children;
};

// A file of imports names no cgroup: rules come from tc's filters.
struct NoCgroups : CgroupNames {
    CgroupRef resolve(const std::string& path) const override { throw Error("no cgroup \"" + path + "\""); }
    std::string path_of(uint64_t, uint32_t) const override { return ""; }
};

uint64_t number(const json& entry, const char* key, const std::string& where)
{
    if (!entry.contains(key))
        throw Error(where + ": no \"" + key + "\"");
    if (!entry[key].is_number_unsigned())
        throw Error(where + ": \"" + key + "\" is not a whole number");
    return entry[key].get<uint64_t>();
}

uint64_t number_or(const json& entry, const char* key, uint64_t otherwise, const std::string& where)
{
    return entry.contains(key) ? number(entry, key, where) : otherwise;
}

// A class's number, checked by htb_classes() already.
uint64_t u64(const json& entry, const char* key)
{
    return entry.value(key, uint64_t(0));
}

// The HTB classes of one qdisc, by minor: `major` when known (--qdiscs), else the only one shown.
std::map<uint32_t, TcClass> htb_classes(const json& list, const TcOutput& out, std::optional<uint32_t> major)
{
    std::set<uint32_t> majors;
    std::vector<std::pair<TcHandle, const json*>> htb;
    for (size_t i = 0; i < list.size(); i++) {
        const json& e = list[i];
        if (tc_text(e, "class") != "htb")
            continue;  // a class of another qdisc (a leaf qdisc's flows): its qdisc is noted
        const auto handle = parse_tc_handle(tc_text(e, "handle"));
        if (!handle || !handle->minor)
            throw Error(out.name + ": [" + std::to_string(i) + "]: bad class handle \"" + tc_text(e, "handle") + "\"");
        majors.insert(handle->major);
        htb.push_back({*handle, &e});
    }
    if (!major && majors.size() > 1)
        throw Error(out.name + ": classes of " + std::to_string(majors.size()) +
                    " HTB qdiscs; import-htb maps one tree (give --qdiscs, whose root HTB qdisc is then taken)");
    std::map<uint32_t, TcClass> classes;
    for (const auto& [handle, entry] : htb) {
        const json& e = *entry;
        if (major && handle.major != *major)
            continue;
        const std::string name = out.name + ": class " + tc_handle_text(handle);
        number(e, "rate", name);
        number(e, "ceil", name);
        for (const char* key : {"burst", "cburst", "prio", "quantum", "overhead", "mpu_rate"})
            number_or(e, key, 0, name);  // each a number where present: read freely from here on
        TcClass c{handle, std::nullopt, &e, {}};
        if (!tc_flag(e, "root")) {
            const auto parent = parse_tc_handle(tc_text(e, "parent"));
            if (!parent || parent->major != handle.major)
                throw Error(name + ": no parent in its qdisc (\"" + tc_text(e, "parent") + "\")");
            if (parent->minor)
                c.parent = parent->minor;
        }
        if (!classes.emplace(handle.minor, c).second)
            throw Error(name + ": listed twice");
    }
    if (classes.empty())
        throw Error(out.name + ": no HTB class" + (major ? " of qdisc " + tc_handle_text({*major, 0}) : std::string()) +
                    " (expected the output of tc -j class show dev DEV)");
    for (auto& [minor, c] : classes) {
        if (!c.parent)
            continue;
        auto p = classes.find(*c.parent);
        if (p == classes.end())
            throw Error(out.name + ": class " + tc_handle_text(c.handle) + "'s parent " +
                        tc_handle_text({c.handle.major, *c.parent}) + " is not listed");
        p->second.children.push_back(minor);
    }
    // Malformed input may loop: every class must reach the top within as many steps as classes.
    for (const auto& [minor, c] : classes) {
        std::optional<uint32_t> up = c.parent;
        for (size_t steps = 0; up; steps++, up = classes.at(*up).parent)
            if (steps == classes.size())
                throw Error(out.name + ": class " + tc_handle_text(c.handle) + "'s parents form a loop");
    }
    return classes;
}

// Operators read 1:10 as "class 10": the minors' digits become the ids where every minor is
// written in decimal digits; else (1:1a) the minors' values, said in a note.
std::map<uint32_t, uint32_t> class_ids(const std::map<uint32_t, TcClass>& classes, std::vector<std::string>& notes)
{
    std::map<uint32_t, uint32_t> ids;
    char hex[16];
    const bool decimal = std::all_of(classes.begin(), classes.end(), [&](const auto& c) {
        std::snprintf(hex, sizeof hex, "%x", c.first);
        return std::string(hex).find_first_not_of("0123456789") == std::string::npos;
    });
    for (const auto& [minor, c] : classes) {
        std::snprintf(hex, sizeof hex, "%x", minor);
        ids[minor] = decimal ? uint32_t(std::stoul(hex)) : minor;
    }
    if (!decimal)
        notes.push_back("class ids are the HTB minors' values (1:1a is class 26): some minors are not decimal digits");
    return ids;
}

// tc's rates are bytes per second; "bps" is tc's unit for them, where bits would not fit.
std::string rate_text(uint64_t bytes_per_s)
{
    return bytes_per_s <= UINT64_MAX / 8 ? format_rate(bytes_per_s * 8) : std::to_string(bytes_per_s) + "bps";
}

// The lowest prio among the leaves below `minor` that borrow (ceil above rate), or among all of
// them when none does: HTB lends through an inner class at its leaves' prios, its own is unused.
uint32_t inner_prio(const std::map<uint32_t, TcClass>& classes, uint32_t minor, std::set<uint32_t>& borrowing)
{
    std::set<uint32_t> all;
    std::vector<uint32_t> stack = {minor};
    while (!stack.empty()) {
        const TcClass& c = classes.at(stack.back());
        stack.pop_back();
        if (c.children.empty()) {
            const uint32_t prio = uint32_t(std::min<uint64_t>(u64(*c.entry, "prio"), SHAPER_PRIO_MAX));
            all.insert(prio);
            if (u64(*c.entry, "ceil") > u64(*c.entry, "rate"))
                borrowing.insert(prio);
        }
        stack.insert(stack.end(), c.children.begin(), c.children.end());
    }
    return borrowing.empty() ? *all.begin() : *borrowing.begin();
}

ClassSpec class_spec(const std::map<uint32_t, TcClass>& classes, const TcClass& c,
                     const std::map<uint32_t, uint32_t>& ids, const std::string& where, std::vector<std::string>& notes)
{
    const json& e = *c.entry;
    const std::string name = "class " + tc_handle_text(c.handle);
    ClassSpec s = class_defaults(Direction::Egress);
    s.id = ids.at(c.handle.minor);
    s.parent = c.parent ? ids.at(*c.parent) : 0;
    uint64_t rate = u64(e, "rate"), ceil = u64(e, "ceil");
    for (uint64_t r : {rate, ceil})
        if (r > SHAPER_RATE_MAX_BPS / 8 || r * 8 < SHAPER_RATE_MIN_BPS)
            throw Error(where + ": rate " + rate_text(r) + " is beyond shaperctl's " +
                        format_rate(SHAPER_RATE_MIN_BPS) + " to " + format_rate(SHAPER_RATE_MAX_BPS));
    if (ceil < rate) {
        notes.push_back(name + ": its ceil " + rate_text(ceil) + " is below its rate " + rate_text(rate) +
                        ", which HTB caps at the ceil: rate " + rate_text(ceil));
        rate = ceil;
    }
    s.rate_bps = rate * 8;
    if (!c.parent) {
        // HTB lends a class at the top nothing (it has no parent): it sends at its rate, whatever
        // its ceil (measured: 1.9 Mbit/s with rate 2mbit ceil 10mbit, 9.6 once under a parent).
        if (ceil > rate)
            notes.push_back("not carried: " + name + "'s ceil " + rate_text(ceil) +
                            ": a class at the top cannot borrow, in HTB as in shaperctl; its rate " +
                            rate_text(rate) + " is its cap");
    } else {
        // A ceil equal to the rate still makes the rate a guarantee: without a ceil a class waits
        // on its parent, whose clock borrowing siblings book, while HTB serves a class under its
        // rate first (bpf/borrow.h).
        s.ceil_bps = ceil * 8;
    }
    s.burst_bytes = u64(e, "burst");
    s.prio = c.children.empty() ? uint32_t(std::min<uint64_t>(u64(e, "prio"), SHAPER_PRIO_MAX)) : 0;
    if (!c.children.empty() && c.parent) {  // a class at the top never borrows: its prio is moot
        std::set<uint32_t> borrowing;
        s.prio = inner_prio(classes, c.handle.minor, borrowing);
        if (borrowing.size() > 1)
            notes.push_back("not carried: the prios of the leaves that borrow through " + name + " (" +
                            std::to_string(*borrowing.begin()) + " to " + std::to_string(*borrowing.rbegin()) +
                            "): it borrows at prio " + std::to_string(s.prio) + " for them all");
    }
    // Beyond shaperctl's ranges they stay beyond, for the file's check to name.
    s.overhead = int32_t(std::min<uint64_t>(u64(e, "overhead"), SHAPER_OVERHEAD_MAX + 1u));
    s.mpu = uint32_t(std::min<uint64_t>(u64(e, "mpu_rate"), SHAPER_MPU_MAX + 1u));
    if (const std::string ll = tc_text(e, "linklayer"); !ll.empty() && ll != "ethernet")
        notes.push_back("not carried: " + name + "'s linklayer " + ll + " (cells are not counted; overhead is)");
    return s;
}

// One line for the classes whose cburst is not their burst, and one for those whose quantum
// is not HTB's default rate / r2q (where the spare is then not split by rate).
void note_bursts_and_quanta(const std::map<uint32_t, TcClass>& classes, uint64_t r2q, std::vector<std::string>& notes)
{
    std::string cbursts, quanta;
    for (const auto& [minor, c] : classes) {
        const json& e = *c.entry;
        const std::string h = tc_handle_text(c.handle);
        // iproute2 before 6.15 truncates a burst to whole microseconds at the rate (a cburst at the
        // ceil) where it sets it and again where it writes it, then to whole bytes: one size given
        // to both reads 1593b and 1600b. Within that, they are the same.
        const uint64_t burst = u64(e, "burst"), cburst = u64(e, "cburst");
        const uint64_t slack = 2 * (u64(e, "rate") + u64(e, "ceil")) / 1'000'000 + 2;
        if (e.contains("cburst") && (burst > cburst ? burst - cburst : cburst - burst) > slack)
            cbursts += (cbursts.empty() ? "" : ", ") + h + " " + format_size(u64(e, "cburst"));
        if (e.contains("quantum") && r2q && u64(e, "quantum") != u64(e, "rate") / r2q)
            quanta += (quanta.empty() ? "" : ", ") + h + " " + std::to_string(u64(e, "quantum"));
    }
    if (!cbursts.empty())
        notes.push_back("not carried: cburst (" + cbursts + "): a shaperctl class has one burst, and takes HTB's burst");
    if (!quanta.empty())
        notes.push_back("not carried: quantum (" + quanta + "): shaperctl splits a parent's spare in proportion "
                        "to the borrowers' rates, as HTB does with its default quantum, rate / r2q");
}

// fq_codel's times as tc shows them: the kernel keeps them in units of 1.024 us, and tc rounds
// down (2ms reads 1999): a value within 2 us of a whole millisecond is that millisecond.
uint64_t codel_time_ns(const json& options, const char* key, uint64_t otherwise)
{
    if (!options.contains(key) || !options[key].is_number_unsigned())
        return otherwise;
    const uint64_t us = options[key].get<uint64_t>(), ms = (us + 500) / 1000;
    const uint64_t diff = ms * 1000 > us ? ms * 1000 - us : us - ms * 1000;
    return (ms && diff <= 2 ? ms * 1000 : us) * 1000;
}

// A leaf qdisc, in its class. fq_codel and codel become the class's CoDel; sfq's fairness, and
// a FIFO's order within a flow, are what the class's fair shares and sparse flows keep, and a
// FIFO's length is what its horizon bounds.
void leaf_qdisc(const json& q, const std::string& kind, const std::string& what, ClassSpec& s, std::vector<std::string>& notes)
{
    const json options = q.value("options", json::object());
    if (kind == "fq_codel" || kind == "codel") {
        s.aqm = true;
        s.aqm_target_ns = codel_time_ns(options, "target", s.aqm_target_ns);
        s.aqm_interval_ns = codel_time_ns(options, "interval", s.aqm_interval_ns);
        s.ecn = tc_flag(options, "ecn");
        if (options.contains("ce_threshold"))
            notes.push_back("not carried: " + what + "'s ce_threshold");
    } else if (kind != "sfq" && kind != "pfifo" && kind != "bfifo") {
        notes.push_back("not carried: " + what + " (the class keeps shaperctl's fair shares and sparse flows)");
    }
}

// The HTB qdisc's default class, leaf qdiscs, and notes on every other qdisc.
void apply_qdiscs(const json& list, const HtbTree& tree, std::vector<ClassSpec>& specs, HtbImport& result)
{
    for (const json& q : list) {
        const std::string kind = tc_text(q, "kind");
        const auto handle = parse_tc_handle(tc_text(q, "handle"));
        const auto parent = parse_tc_handle(tc_text(q, "parent"));
        const std::string what = "qdisc " + kind + " " + tc_text(q, "handle");
        if (kind == "htb" && handle && handle->major == tree.major) {
            const json options = q.value("options", json::object());
            const auto minor = tc_number(tc_text(options, "default"));
            if (!minor || !*minor || *minor > 0xffff)
                continue;  // 0: unclassified packets pass unshaped, as without a default class
            const auto c = tree.classes.find(uint32_t(*minor));
            if (c == tree.classes.end() || !c->second.leaf)
                result.notes.push_back("not carried: the default " + tc_handle_text({tree.major, uint32_t(*minor)}) +
                                       (c == tree.classes.end() ? ", not a class" : ", a class with children") +
                                       ": HTB sends unclassified packets unshaped, as shaperctl without a default class");
            else
                result.config.default_class = c->second.id;
            continue;
        }
        if (parent && parent->major == tree.major && tree.classes.count(parent->minor)) {
            const uint32_t id = tree.classes.at(parent->minor).id;
            auto s = std::find_if(specs.begin(), specs.end(), [&](const ClassSpec& x) { return x.id == id; });
            leaf_qdisc(q, kind, what + " on class " + tc_handle_text(*parent), *s, result.notes);
            continue;
        }
        result.notes.push_back("not carried: " + what + (tc_flag(q, "root") ? " (the root)" : "") +
                               (q.contains("parent") ? " under " + tc_text(q, "parent") : std::string()));
    }
}

}  // namespace

HtbImport import_htb(const TcOutput& classes, const std::optional<TcOutput>& qdiscs,
                     const std::optional<TcOutput>& filters, uint32_t mode)
{
    HtbImport result;
    result.config.mode = mode;
    const json class_list = read_tc_classes(classes);
    json qdisc_list = json::array();
    std::optional<uint32_t> major;
    uint64_t r2q = 10;  // HTB's default
    if (qdiscs) {
        qdisc_list = read_tc_array(*qdiscs, "qdisc show dev DEV");
        // The HTB qdisc at the root, else the only one.
        std::vector<const json*> htbs;
        for (const json& q : qdisc_list)
            if (tc_text(q, "kind") == "htb" && parse_tc_handle(tc_text(q, "handle")))
                htbs.push_back(&q);
        auto root = std::find_if(htbs.begin(), htbs.end(), [](const json* q) { return tc_flag(*q, "root"); });
        if (htbs.empty())
            throw Error(qdiscs->name + ": no HTB qdisc (are the outputs of one device?)");
        if (root == htbs.end() && htbs.size() > 1)
            throw Error(qdiscs->name + ": " + std::to_string(htbs.size()) + " HTB qdiscs, none at the root: "
                        "import-htb maps one tree");
        const json& htb = root != htbs.end() ? **root : *htbs.front();
        major = parse_tc_handle(tc_text(htb, "handle"))->major;
        const json options = htb.value("options", json::object());
        r2q = options.contains("r2q") && options["r2q"].is_number_unsigned() ? options["r2q"].get<uint64_t>() : r2q;
    }
    std::map<uint32_t, TcClass> tc_classes = htb_classes(class_list, classes, major);
    const std::map<uint32_t, uint32_t> ids = class_ids(tc_classes, result.notes);
    HtbTree tree{tc_classes.begin()->second.handle.major, {}};
    uint32_t max_id = 0;
    for (const auto& [minor, c] : tc_classes) {
        tree.classes[minor] = {ids.at(minor), c.children.empty()};
        max_id = std::max(max_id, ids.at(minor));
        const std::string where = classes.name + ": class " + tc_handle_text(c.handle);
        result.config.classes.push_back(class_spec(tc_classes, c, ids, where, result.notes));
    }
    // Attach's default capacity holds ids below 16384; beyond, the file says how many it needs.
    if (max_id >= 16384)
        result.config.max_classes = max_id + 1;
    note_bursts_and_quanta(tc_classes, r2q, result.notes);
    if (qdiscs)
        apply_qdiscs(qdisc_list, tree, result.config.classes, result);
    else
        result.notes.push_back("not carried: the default class and leaf qdiscs (no --qdiscs)");
    if (filters)
        result.config.rules = htb_rules(read_tc_array(*filters, "filter show dev DEV"), tree, result.notes);
    else
        result.notes.push_back("not carried: filters (no --filters): the file has no rules");
    const auto leaf = std::find_if(tree.classes.begin(), tree.classes.end(), [](const auto& c) { return c.second.leaf; });
    result.notes.push_back("not carried: HTB's classification by skb->priority (SO_PRIORITY, iptables CLASSIFY) "
                           "set to a classid: where used, add rules such as \"priority\": \"" +
                           tc_handle_text({tree.major, leaf->first}) + "\"");
    std::sort(result.config.classes.begin(), result.config.classes.end(),
              [](const ClassSpec& a, const ClassSpec& b) { return a.id < b.id; });
    for (ClassSpec& s : result.config.classes)
        resolve_horizon(s, Direction::Egress, mode);
    return result;
}

nlohmann::ordered_json htb_config_file(const std::string& device, const ShaperConfig& config)
{
    const NoCgroups none;
    nlohmann::ordered_json file = config_json({{device, config}}, none);
    try {
        parse_config(file.dump(), none);
    } catch (const Error& e) {
        throw Error(std::string("the configuration made would be refused: ") + e.what());
    }
    return file;
}

}  // namespace shaperctl
