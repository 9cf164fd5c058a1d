#include "config_file.h"

#include <net/if.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "loader/cgroup.h"
#include "loader/class_tree.h"
#include "loader/error.h"
#include "loader/mode.h"
#include "loader/rule_compiler.h"
#include "loader/rule_spec.h"
#include "json_read.h"
#include "units.h"

namespace shaperctl {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr int kFormatVersion = 1;

std::string join(const std::vector<std::string>& words, const std::string& separator)
{
    std::string out;
    for (const auto& w : words)
        out += (out.empty() ? "" : separator) + w;
    return out;
}

void check_keys(const json& object, const std::string& path, const std::string& kind)
{
    if (!object.is_object())
        fail(path.empty() ? "(top level)" : path, "expected an object");
    const auto& keys = config_keys(kind);
    for (const auto& [key, value] : object.items())
        if (std::find(keys.begin(), keys.end(), key) == keys.end())
            fail(member_path(path, key),
                 "unknown key (" + kind + " keys: " + join(keys, ", ") + ")");
}

// A value of a class field, as the file may write it (a size also as a number of bytes, a switch
// also as a boolean, an id also as null).
int64_t get_class_field(const ClassField& f, const json& v, const std::string& path)
{
    switch (f.kind) {
    case FieldKind::ClassId:
        return v.is_null() && f.min == 0 ? 0 : get_int(v, path, f.min, f.max);
    case FieldKind::Int: return get_int(v, path, f.min, f.max);
    case FieldKind::Rate: return int64_t(get_rate(v, path));
    case FieldKind::Size: return int64_t(get_size(v, path, uint64_t(f.max)));
    case FieldKind::Time: return int64_t(get_time(v, path));
    case FieldKind::Switch: return get_switch(v, path, f.on, f.off);
    }
    return 0;
}

// A value of a class field as dump writes it: ids and integers as numbers (a parent of 0 as
// null), the rest as the command line writes them.
ojson class_field_json(const ClassField& f, int64_t value)
{
    if (f.kind == FieldKind::ClassId)
        return value ? ojson(value) : ojson(nullptr);
    if (f.kind == FieldKind::Int)
        return value;
    return field_text(f, value);
}

// A match as dump writes it: as the command line writes it, numbers as numbers (dscp, vlan, a
// protocol without a name), a cgroup by path, or by id and level where no path is found.
ojson rule_field_json(const RuleSpec& r, const RuleField& f, const CgroupNames& cgroups)
{
    if (f.kind == MatchKind::Cgroup) {
        const std::string path = cgroups.path_of(r.cgroup->id, r.cgroup->level);
        if (!path.empty())
            return path;
        return {{"id", r.cgroup->id}, {"level", r.cgroup->level}};
    }
    const std::string text = match_text(r, f);
    if ((f.kind == MatchKind::Int || f.kind == MatchKind::Proto) &&
        text.find_first_not_of("0123456789") == std::string::npos)
        return std::stoull(text);
    return text;
}

// A class of the device at `device_path` ("devices[0]"), whose mode and fq options are parsed.
ClassSpec parse_class(const json& j, const std::string& path, const std::string& device_path,
                      const ShaperConfig& device)
{
    check_keys(j, path, "class");
    for (const ClassField& f : class_fields())
        if (f.required && !j.contains(f.name))
            fail(path, std::string("\"") + f.name + "\" is required");
    ClassSpec spec;
    for (const ClassField& f : class_fields())
        f.set(spec, j.contains(f.name) ? get_class_field(f, j[f.name], path + "." + f.name)
                                       : field_default(f, device.mode));
    // The datapath's own checks (ranges, an hour of credit at most, within fq's horizon, ...).
    const uint32_t max = device.max_classes ? device.max_classes : SHAPER_LIMIT_MAX_CLASSES;
    FqHorizon fq;
    if (device.mode == SHAPER_MODE_EDT)
        fq = {device.fq.horizon_ns, " (" + device_path + ".fq.horizon raises it)"};
    if (!spec.horizon_ns)  // as on the command line: the mode's default, as the device stores it
        spec.horizon_ns = mode_horizon(device.mode);
    at(path, [&] {
        validate_class(spec, max, fq);
        return 0;
    });
    return spec;
}

// A cgroup by id, as dump shows one it cannot find a path for.
CgroupMatch cgroup_by_id(const json& cg, const std::string& path)
{
    check_keys(cg, path, "cgroup");
    if (!cg.contains("id") || !cg.contains("level"))
        fail(path, "a cgroup by id needs \"id\" and \"level\"");
    if (!cg["id"].is_number_unsigned() || cg["id"].get<uint64_t>() == 0)
        fail(path + ".id", "expected a cgroup id (a positive integer)");
    return {cg["id"].get<uint64_t>(), uint32_t(get_int(cg["level"], path + ".level", 0, 1000))};
}

RuleSpec parse_rule_json(const json& j, const std::string& path, const CgroupNames& cgroups)
{
    check_keys(j, path, "rule");
    for (const char* required : {"pref", "class"})
        if (!j.contains(required))
            fail(path, std::string("\"") + required + "\" is required");
    RuleSpec r;
    r.pref = uint32_t(get_int(j["pref"], path + ".pref", 1, SHAPER_PREF_NONE - 1));
    r.class_id = uint32_t(get_int(j["class"], path + ".class", 1, SHAPER_LIMIT_MAX_CLASSES - 1));
    const auto resolve = [&](const std::string& text) { return cgroups.resolve(text); };
    for (const RuleField& f : rule_fields()) {
        if (!j.contains(f.name))
            continue;
        const std::string p = path + "." + f.name;
        const json& v = j[f.name];
        if (f.kind == MatchKind::Cgroup && v.is_object()) {
            r.cgroup = cgroup_by_id(v, p);
            continue;
        }
        // Text as the command line takes it; numbers where the command line takes digits.
        const std::string text = f.kind == MatchKind::Int ? std::to_string(get_int(v, p, f.min, f.max))
                                 : f.kind == MatchKind::Cidr || f.kind == MatchKind::Cgroup
                                     ? get_string(v, p, f.example)
                                     : text_or_number(v, p, f.example);
        at(p, [&] {
            set_match(r, f, text, "", resolve);
            return 0;
        });
    }
    at(path, [&] {
        check_matches(r, "", "default_class");
        return 0;
    });
    return r;
}

// Parents exist among the device's classes, never loop, and stack at most SHAPER_MAX_DEPTH deep.
void check_tree(const ConfigDevice& d)
{
    ClassParents parents;
    for (const ClassSpec& c : d.config.classes)
        parents[c.id] = c.parent;
    if (const TreeFault fault = check_class_tree(parents)) {
        const std::string path = d.path + ".classes[" + std::to_string(d.class_index.at(fault.id)) + "].parent";
        fail(path, fault.describe() + (fault.kind == TreeFault::MissingParent ? " among " + d.path + ".classes" : ""));
    }
}

ConfigDevice parse_device(const json& j, const std::string& path, const CgroupNames& cgroups)
{
    check_keys(j, path, "device");
    ConfigDevice d;
    d.path = path;
    if (!j.contains("device"))
        fail(path, "\"device\" is required");
    d.name = get_string(j["device"], path + ".device", "\"eth0\"");
    if (d.name.empty() || d.name.size() >= IFNAMSIZ || d.name.find('/') != std::string::npos)
        fail(path + ".device", "bad device name \"" + d.name + "\"");
    ShaperConfig& c = d.config;
    if (j.contains("mode")) {
        const std::string mode = get_string(j["mode"], path + ".mode", "\"edt\"");
        c.mode = at(path + ".mode", [&] { return mode_from_name(mode); });
    }
    if (j.contains("fq")) {
        const std::string p = path + ".fq";
        check_keys(j["fq"], p, "fq");
        if (c.mode != SHAPER_MODE_EDT)
            fail(p, "fq options apply to edt mode only");
        const json& fq = j["fq"];
        if (fq.contains("horizon")) {
            c.fq.horizon_ns = get_time(fq["horizon"], p + ".horizon");
            if (c.fq.horizon_ns < 1000 || c.fq.horizon_ns / 1000 > UINT32_MAX)
                fail(p + ".horizon", "out of range (1us to " + std::to_string(UINT32_MAX / 1'000'000) + "s)");
        }
        // 0: the kernel's own default (what an attach record of an older shaperctl may hold).
        if (fq.contains("flow_limit"))
            c.fq.flow_limit = uint32_t(get_int(fq["flow_limit"], p + ".flow_limit", 0, UINT32_MAX));
        if (fq.contains("limit"))
            c.fq.limit = uint32_t(get_int(fq["limit"], p + ".limit", 0, UINT32_MAX));
    }
    if (j.contains("max_classes"))
        c.max_classes = uint32_t(get_int(j["max_classes"], path + ".max_classes", 2, SHAPER_LIMIT_MAX_CLASSES));
    if (j.contains("classes")) {
        const json& classes = j["classes"];
        if (!classes.is_array())
            fail(path + ".classes", "expected an array of classes");
        for (size_t i = 0; i < classes.size(); i++) {
            const std::string p = path + ".classes[" + std::to_string(i) + "]";
            ClassSpec spec = parse_class(classes[i], p, path, c);
            if (auto it = d.class_index.find(spec.id); it != d.class_index.end())
                fail(p + ".id", "class " + std::to_string(spec.id) + " is given twice (also " + path +
                                    ".classes[" + std::to_string(it->second) + "])");
            d.class_index[spec.id] = i;
            c.classes.push_back(spec);
        }
        std::sort(c.classes.begin(), c.classes.end(),
                  [](const ClassSpec& a, const ClassSpec& b) { return a.id < b.id; });
    }
    check_tree(d);
    auto known_class = [&](uint32_t id, const std::string& p) {
        if (!d.class_index.count(id))
            fail(p, "no class " + std::to_string(id) + " among " + path + ".classes");
    };
    if (j.contains("default_class") && !j["default_class"].is_null()) {
        c.default_class = uint32_t(get_int(j["default_class"], path + ".default_class", 0,
                                           SHAPER_LIMIT_MAX_CLASSES - 1));
        if (c.default_class)
            known_class(c.default_class, path + ".default_class");
    }
    if (j.contains("rules")) {
        const json& rules = j["rules"];
        if (!rules.is_array())
            fail(path + ".rules", "expected an array of rules");
        if (rules.size() > SHAPER_MAX_RULES)
            fail(path + ".rules", std::to_string(rules.size()) + " rules (at most " +
                                      std::to_string(SHAPER_MAX_RULES) + ")");
        std::map<uint32_t, size_t> prefs;
        std::vector<shaper_rule> compiled;  // the datapath's own checks, of each and of the set
        std::vector<uint32_t> slots;
        for (size_t i = 0; i < rules.size(); i++) {
            const std::string p = path + ".rules[" + std::to_string(i) + "]";
            RuleSpec r = parse_rule_json(rules[i], p, cgroups);
            if (auto it = prefs.find(r.pref); it != prefs.end())
                fail(p + ".pref", "pref " + std::to_string(r.pref) + " is given twice (also " + path +
                                      ".rules[" + std::to_string(it->second) + "])");
            prefs[r.pref] = i;
            known_class(r.class_id, p + ".class");
            slots.push_back(uint32_t(compiled.size()));
            compiled.push_back(at(p, [&] { return compile_rule(r); }));
            c.rules.push_back(r);
        }
        std::sort(c.rules.begin(), c.rules.end(),
                  [](const RuleSpec& a, const RuleSpec& b) { return a.pref < b.pref; });
        if (!compiled.empty())
            at(path + ".rules", [&] { return compile_rules(compiled, slots, 0).tuples.size(); });
    }
    return d;
}

}  // namespace

const std::vector<std::string>& config_keys(const std::string& object)
{
    static const std::map<std::string, std::vector<std::string>> keys = {
        {"file", {"version", "devices"}},
        {"device", {"device", "mode", "fq", "max_classes", "default_class", "classes", "rules"}},
        {"fq", {"horizon", "flow_limit", "limit"}},
        {"rule", {"pref", "class", "src", "dst", "proto", "sport", "dport", "mark", "cgroup",
                  "priority", "dscp", "vlan"}},
        {"cgroup", {"id", "level"}},
    };
    static const std::vector<std::string> class_keys = [] {
        std::vector<std::string> names;
        for (const ClassField& f : class_fields())
            names.push_back(f.name);
        return names;
    }();
    return object == "class" ? class_keys : keys.at(object);
}

ConfigFile parse_config(const std::string& text, const CgroupNames& cgroups)
{
    const json j = parse_json(text);
    check_keys(j, "", "file");
    if (j.contains("version") && (!j["version"].is_number_integer() || j["version"] != kFormatVersion))
        fail("version", "unsupported format version " + j["version"].dump() + " (this shaperctl reads " +
                            std::to_string(kFormatVersion) + ")");
    if (!j.contains("devices"))
        fail("devices", "required (an array of devices)");
    if (!j["devices"].is_array())
        fail("devices", "expected an array of devices");
    ConfigFile file;
    std::map<std::string, std::string> names;
    for (size_t i = 0; i < j["devices"].size(); i++) {
        ConfigDevice d = parse_device(j["devices"][i], "devices[" + std::to_string(i) + "]", cgroups);
        if (auto it = names.find(d.name); it != names.end())
            fail(d.path + ".device", "device \"" + d.name + "\" is given twice (also " + it->second + ")");
        names[d.name] = d.path;
        file.devices.push_back(std::move(d));
    }
    return file;
}

ConfigFile load_config(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        throw Error(errno_message("cannot read " + path, errno));
    std::stringstream text;
    text << in.rdbuf();
    try {
        return parse_config(text.str());
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
}

ojson config_json(const std::vector<std::pair<std::string, ShaperConfig>>& devices, const CgroupNames& cgroups)
{
    ojson list = ojson::array();
    for (const auto& [name, c] : devices) {
        ojson d;
        d["device"] = name;
        d["mode"] = mode_name(c.mode);
        if (c.mode == SHAPER_MODE_EDT) {
            ojson fq;
            fq["horizon"] = format_time(c.fq.horizon_ns);
            fq["flow_limit"] = c.fq.flow_limit;
            fq["limit"] = c.fq.limit;
            d["fq"] = fq;
        }
        if (c.max_classes)
            d["max_classes"] = c.max_classes;
        d["default_class"] = c.default_class ? ojson(c.default_class) : ojson(nullptr);
        ojson classes = ojson::array();
        for (const ClassSpec& s : c.classes) {
            ojson k;
            for (const ClassField& f : class_fields())
                k[f.name] = class_field_json(f, f.get(s));
            classes.push_back(k);
        }
        d["classes"] = classes;
        ojson rules = ojson::array();
        for (const RuleSpec& r : c.rules) {
            ojson k;
            k["pref"] = r.pref;
            k["class"] = r.class_id;
            for (const RuleField& f : rule_fields())
                if (has_match(r, f))
                    k[f.name] = rule_field_json(r, f, cgroups);
            rules.push_back(k);
        }
        d["rules"] = rules;
        list.push_back(d);
    }
    ojson out;
    out["version"] = kFormatVersion;
    out["devices"] = list;
    return out;
}

}  // namespace shaperctl
