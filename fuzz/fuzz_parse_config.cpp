// libFuzzer target: shaperctl::parse_config, the loader of `shaperctl apply -f FILE`, on the
// bytes as a file's text. Cgroup paths go to a fake resolver (never the host's filesystem);
// nothing touches the kernel. Properties, on every input:
//   1. only shaperctl::Error escapes; its message is one line that starts with the JSON path
//      of the problem (or "not valid JSON: ", "(top level): "), its length bounded by the input's;
//   2. an accepted file is what config_file.h promises: device names unique and valid, classes
//      ascending by id, each one valid for the datapath, parents among them forming a tree at
//      most SHAPER_MAX_DEPTH deep, rules ascending by unique pref, valid, naming classes of
//      the device, compiling into the datapath's tables, the default class among the classes;
//   3. dump round trip: parse_config(config_json(file)) gives the same devices and
//      configurations, and its dump is the same text (dump is canonical);
//   4. plan_config(c, c) is empty (apply of an unchanged file changes nothing), and every step
//      from an empty device to c describes itself in one line.
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "common.h"
#include "core/config_file.h"
#include "core/plan.h"
#include "core/rule_compiler.h"

namespace {

using shaperctl::CgroupRef;
using shaperctl::ConfigFile;
using shaperctl::ShaperConfig;

// Cgroup paths without a filesystem: any path without ".." (as resolve_cgroup refuses) and not
// under "/nosuch" exists; its id is a hash of the text, its level its number of components.
// path_of answers for the paths resolved so far, so a dump names them again.
class FakeCgroups : public shaperctl::CgroupNames {
public:
    CgroupRef resolve(const std::string& path) const override
    {
        if (path.find("..") != std::string::npos || path.starts_with("/nosuch"))
            throw shaperctl::Error("cgroup \"" + path + "\" does not exist");
        CgroupRef ref;
        ref.id = 14695981039346656037ull;  // FNV-1a
        for (unsigned char c : path)
            ref.id = (ref.id ^ c) * 1099511628211ull;
        ref.id |= 1;  // never 0
        for (size_t i = 0; i < path.size(); i++)
            if (path[i] != '/' && (i == 0 || path[i - 1] == '/'))
                ref.level++;
        ref.path = path;
        known_[{ref.id, ref.level}] = path;
        return ref;
    }
    std::string path_of(uint64_t id, uint32_t level) const override
    {
        auto it = known_.find({id, level});
        return it == known_.end() ? "" : it->second;
    }

private:
    mutable std::map<std::pair<uint64_t, uint32_t>, std::string> known_;
};

// Property 1: "<path>: ...". A path is a member name (a word: letters, digits, '_', not
// starting with a digit) or ["any key"] (JSON-quoted) or [n], then any number of .word,
// ["any key"] and [n].
void check_refusal(std::string_view input, std::string_view m)
{
    fuzz::check_one_line(input, m, 1024 + 4 * input.size());  // escapes: \x01 is 4 bytes
    if (m.starts_with("not valid JSON: ") || m.starts_with("(top level): "))
        return;
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    size_t i = 0;
    for (bool first = true; i < m.size(); first = false) {
        if (!first && m.substr(i).starts_with(": "))
            return;
        if (m.substr(i).starts_with("[\"")) {  // a JSON string: up to the unescaped quote
            size_t j = i + 2;
            while (j < m.size() && m[j] != '"')
                j += m[j] == '\\' ? 2 : 1;
            if (j + 1 >= m.size() || m[j + 1] != ']')
                break;
            i = j + 2;
        } else if (m.substr(i).starts_with("[")) {
            size_t close = m.find(']', i);
            if (close == std::string_view::npos || close == i + 1 ||
                m.substr(i + 1, close - i - 1).find_first_not_of("0123456789") != std::string_view::npos)
                break;
            i = close + 1;
        } else {
            if (!first && m[i++] != '.')
                break;
            if (i >= m.size() || !word(m[i]) || std::isdigit(static_cast<unsigned char>(m[i])))
                break;
            while (i < m.size() && word(m[i]))
                i++;
        }
    }
    fuzz::violated("error message starts with a JSON path", input, "message: " + fuzz::printable(m));
}

uint64_t mode_horizon(uint32_t mode)
{
    return mode == SHAPER_MODE_POLICE ? SHAPER_DEFAULT_POLICE_HORIZON_NS : SHAPER_DEFAULT_HORIZON_NS;
}

// Property 2.
void check_valid(std::string_view input, const ConfigFile& file)
{
    auto bad = [&](const std::string& where, const std::string& what) {
        fuzz::violated("an accepted file is valid as a whole", input, where + ": " + what);
    };
    std::set<std::string> names;
    for (const shaperctl::ConfigDevice& d : file.devices) {
        const ShaperConfig& c = d.config;
        if (d.name.empty() || d.name.size() >= 16 || d.name.find('/') != std::string::npos)
            bad(d.path, "device name \"" + fuzz::printable(d.name) + "\"");
        if (!names.insert(d.name).second)
            bad(d.path, "device \"" + fuzz::printable(d.name) + "\" twice");
        if (c.mode != SHAPER_MODE_EDT && c.mode != SHAPER_MODE_POLICE)
            bad(d.path, "mode " + std::to_string(c.mode));
        const uint32_t max = c.max_classes ? c.max_classes : SHAPER_LIMIT_MAX_CLASSES;
        std::map<uint32_t, uint32_t> parents;
        for (const shaperctl::ClassSpec& s : c.classes) {
            const std::string who = d.path + " class " + std::to_string(s.id);
            if (!parents.empty() && s.id <= parents.rbegin()->first)
                bad(who, "classes not in ascending id order");
            parents[s.id] = s.parent;
            if (s.horizon_ns == 0)
                bad(who, "horizon not resolved");
            auto made = fuzz::accepts_checked(
                input, [](std::string_view) {}, nullptr,
                [&] {
                    shaperctl::FqHorizon fq;  // edt mode: every class within fq's horizon
                    if (c.mode == SHAPER_MODE_EDT)
                        fq.ns = c.fq.horizon_ns;
                    return shaperctl::make_class_config(s, max, mode_horizon(c.mode), fq);
                });
            if (!made)
                bad(who, "make_class_config refuses it");
        }
        for (const auto& [id, parent] : parents) {
            unsigned levels = 1;
            for (uint32_t up = parent; up; up = parents[up]) {
                if (!parents.count(up))
                    bad(d.path + " class " + std::to_string(id), "parent " + std::to_string(up) + " missing");
                if (++levels > SHAPER_MAX_DEPTH)
                    bad(d.path + " class " + std::to_string(id), "more than SHAPER_MAX_DEPTH levels (or a cycle)");
            }
        }
        if (c.default_class && !parents.count(c.default_class))
            bad(d.path, "default class " + std::to_string(c.default_class) + " missing");
        std::vector<uint32_t> slots;
        std::vector<shaper_rule> compiled;
        for (size_t i = 0; i < c.rules.size(); i++) {
            const shaperctl::RuleSpec& r = c.rules[i];
            const std::string who = d.path + " rule " + std::to_string(r.pref);
            if (i && r.pref <= c.rules[i - 1].pref)
                bad(who, "rules not in ascending, unique pref order");
            if (!parents.count(r.class_id))
                bad(who, "class " + std::to_string(r.class_id) + " missing");
            std::string why;
            if (!fuzz::accepts_checked(input, [](std::string_view) {}, &why,
                                       [&] { return (compiled.push_back(shaperctl::compile_rule(r)), 0); }))
                bad(who, "compile_rule refuses it: " + why);
            slots.push_back(uint32_t(i));
        }
        std::string why;
        if (!c.rules.empty() &&
            !fuzz::accepts_checked(input, [](std::string_view) {}, &why,
                                   [&] { return shaperctl::compile_rules(compiled, slots, 1).tuples.size(); }))
            bad(d.path, "compile_rules refuses the rules: " + why);
    }
}

std::string dump(std::string_view input, const ConfigFile& file, const FakeCgroups& cgroups)
{
    std::vector<std::pair<std::string, ShaperConfig>> devices;
    for (const auto& d : file.devices)
        devices.push_back({d.name, d.config});
    return *fuzz::accepts_checked(
        input, [&](std::string_view m) { fuzz::violated("dump never fails", input, std::string(m)); },
        nullptr, [&] { return shaperctl::config_json(devices, cgroups).dump(); });
}

bool same_config(const ShaperConfig& a, const ShaperConfig& b)
{
    if (a.side != b.side || a.mode != b.mode || a.fq.horizon_ns != b.fq.horizon_ns || a.fq.horizon_drop != b.fq.horizon_drop ||
        a.fq.flow_limit != b.fq.flow_limit || a.fq.limit != b.fq.limit || a.max_classes != b.max_classes ||
        a.default_class != b.default_class || a.classes != b.classes || a.rules != b.rules)
        return false;
    return true;
}

// Properties 3 and 4.
void check_round_trip(std::string_view input, const ConfigFile& file, const FakeCgroups& cgroups)
{
    const std::string dumped = dump(input, file, cgroups);
    std::string message;
    auto again = fuzz::accepts_checked(input, [](std::string_view) {}, &message,
                                       [&] { return shaperctl::parse_config(dumped, cgroups); });
    if (!again)
        fuzz::violated("the dump of an accepted file parses", input,
                       "refused: " + message + "\n*** dump: " + fuzz::printable(dumped));
    if (again->devices.size() != file.devices.size())
        fuzz::violated("the dump has the same devices", input, "dump: " + fuzz::printable(dumped));
    for (size_t i = 0; i < file.devices.size(); i++) {
        const auto &a = file.devices[i], &b = again->devices[i];
        if (a.name != b.name || !same_config(a.config, b.config))
            fuzz::violated("parse(dump(c)) == c", input,
                           a.path + " differs; dump: " + fuzz::printable(dumped));
    }
    if (dump(input, *again, cgroups) != dumped)
        fuzz::violated("dump is canonical", input, "dump: " + fuzz::printable(dumped));

    for (const auto& d : file.devices) {
        if (!shaperctl::plan_config(d.config, d.config).empty())
            fuzz::violated("plan_config(c, c) is empty", input, d.path);
        ShaperConfig empty;
        empty.mode = d.config.mode;
        for (const auto& step : shaperctl::plan_config(empty, d.config))
            fuzz::check_one_line(input, shaperctl::describe_step(step, d.config));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    FakeCgroups cgroups;
    auto file = fuzz::accepts_checked(
        text, [&](std::string_view m) { check_refusal(text, m); }, nullptr,
        [&] { return shaperctl::parse_config(text, cgroups); });
    if (!file)
        return 0;
    check_valid(text, *file);
    check_round_trip(text, *file, cgroups);
    return 0;
}
