#include "core/config_file.h"

#include <net/if.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/cgroup_names.h"
#include "core/config_check.h"
#include "core/error.h"
#include "core/mode.h"
#include "core/rule_spec.h"
#include "core/json_read.h"
#include "core/units.h"

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
    case FieldKind::Rate: return v.is_null() && f.min == 0 ? 0 : int64_t(get_rate(v, path));
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

// A class of a device whose side and mode are parsed: its fields over the side's defaults (a
// horizon of 0 is the default for its rate too, as on the command line). check_config()
// checks the rest.
ClassSpec parse_class(const json& j, const std::string& path, const ShaperConfig& c)
{
    const ClassSpec defaults = class_defaults(c.side, c.acks_paced);
    check_keys(j, path, "class");
    for (const ClassField& f : class_fields())
        if (f.required && !j.contains(f.name))
            fail(path, std::string("\"") + f.name + "\" is required");
    ClassSpec spec = defaults;
    for (const ClassField& f : class_fields())
        if (j.contains(f.name))
            f.set(spec, get_class_field(f, j[f.name], path + "." + f.name));
    resolve_horizon(spec, c.side, c.mode);
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

// The device's configuration checked whole (check_config()), a fault named by its JSON path.
CheckedRules check_device(const ConfigDevice& d)
{
    const ShaperConfig& c = d.config;
    ConfigLimits limits;
    if (c.max_classes)
        limits.max_classes = c.max_classes;
    if (c.mode == SHAPER_MODE_EDT)
        limits.fq = {c.fq.horizon_ns, " (" + d.path + ".fq.horizon raises it)"};
    limits.side = c.side;
    try {
        return check_config(c, limits);
    } catch (const ConfigFault& fault) {
        using Item = ConfigFault::Item;
        std::string path = d.path;
        if (fault.item == Item::Class)
            path += ".classes[" + std::to_string(d.class_index.at(fault.id)) + "]";
        else if (fault.item == Item::Rule)
            path += ".rules[" + std::to_string(d.rule_index.at(fault.id)) + "]";
        else
            path += fault.item == Item::DefaultClass ? ".default_class" : ".rules";
        if (!fault.field.empty())
            path += "." + fault.field;
        fail(path, fault.what() + (fault.missing_class ? " among " + d.path + ".classes" : std::string()));
    }
}

uint32_t key_of(const ClassSpec& c) { return c.id; }
uint32_t key_of(const RuleSpec& r) { return r.pref; }

// The array `name` of the device at `path` ("classes", "rules"), each item parsed by `parse` (which
// returns it and the path of its key), its key (a class id, a pref) given once: `index` maps each
// key to its item's index. Sorted by key.
template <typename Item, typename Parse>
std::vector<Item> parse_list(const json& device, const std::string& path, const char* name,
                             std::map<uint32_t, size_t>& index, const char* noun, Parse parse)
{
    std::vector<Item> items;
    if (!device.contains(name))
        return items;
    const std::string list = path + "." + name;
    const json& array = device[name];
    if (!array.is_array())
        fail(list, std::string("expected an array of ") + name);
    for (size_t i = 0; i < array.size(); i++) {
        auto [item, key_path] = parse(array[i], list + "[" + std::to_string(i) + "]");
        const uint32_t key = key_of(item);
        if (auto it = index.find(key); it != index.end())
            fail(key_path, std::string(noun) + " " + std::to_string(key) + " is given twice (also " + list +
                               "[" + std::to_string(it->second) + "])");
        index[key] = i;
        items.push_back(item);
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return key_of(a) < key_of(b); });
    return items;
}

ConfigDevice parse_device(const json& j, const std::string& path, const CgroupNames& cgroups, const AcksPaced& paced)
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
    if (j.contains("direction")) {
        const std::string side = get_string(j["direction"], path + ".direction", "\"ingress\"");
        c.side = at(path + ".direction", [&] { return direction_from_name(side); });
    }
    const bool ingress = c.side == Direction::Ingress;
    if (ingress)
        c.mode = SHAPER_MODE_POLICE;  // nothing queues a received packet
    c.acks_paced = !ingress || !paced || paced(d.name);
    if (j.contains("mode")) {
        const std::string mode = get_string(j["mode"], path + ".mode", "\"edt\"");
        c.mode = at(path + ".mode", [&] { return mode_from_name(mode); });
        if (ingress && c.mode != SHAPER_MODE_POLICE)
            fail(path + ".mode", "ingress is police mode: received packets are not queued, so ingress marks and drops");
    }
    if (j.contains("fq")) {
        const std::string p = path + ".fq";
        check_keys(j["fq"], p, "fq");
        if (ingress)
            fail(p, "fq options apply to egress only (nothing queues received packets)");
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
    c.classes = parse_list<ClassSpec>(j, path, "classes", d.class_index, "class", [&](const json& v, const std::string& p) {
        return std::pair{parse_class(v, p, c), p + ".id"};
    });
    if (j.contains("default_class") && !j["default_class"].is_null())
        c.default_class = uint32_t(get_int(j["default_class"], path + ".default_class", 0,
                                           SHAPER_LIMIT_MAX_CLASSES - 1));
    c.rules = parse_list<RuleSpec>(j, path, "rules", d.rule_index, "pref", [&](const json& v, const std::string& p) {
        return std::pair{parse_rule_json(v, p, cgroups), p + ".pref"};
    });
    d.rules = check_device(d);
    return d;
}

// A receive side's horizon at its rate's default goes unsaid, so that a file whose rate is edited
// brings that rate's default, as change-class does (an egress default follows the mode alone).
bool follows_rate(const ClassField& f, const ClassSpec& s, const ShaperConfig& c)
{
    return f.mode_default && c.side == Direction::Ingress && horizon_is_default(s, c.side, c.mode);
}

// Fields dump leaves out: a horizon that follows the rate, and a field listed only when set.
bool left_out(const ClassField& f, const ClassSpec& s, const ShaperConfig& c)
{
    return follows_rate(f, s, c) || (f.listed_when_set && f.get(s) == f.get(ClassSpec{}));
}

}  // namespace

const std::vector<std::string>& config_keys(const std::string& object)
{
    static const std::map<std::string, std::vector<std::string>> keys = {
        {"file", {"version", "devices"}},
        {"device", {"device", "direction", "mode", "fq", "max_classes", "default_class", "classes", "rules"}},
        {"fq", {"horizon", "flow_limit", "limit"}},
        {"cgroup", {"id", "level"}},
    };
    // A class's and a rule's from their tables.
    static const std::vector<std::string> class_keys = [] {
        std::vector<std::string> names;
        for (const ClassField& f : class_fields())
            names.push_back(f.name);
        return names;
    }();
    static const std::vector<std::string> rule_keys = [] {
        std::vector<std::string> names = {"pref", "class"};
        for (const RuleField& f : rule_fields())
            names.push_back(f.name);
        return names;
    }();
    if (object == "class")
        return class_keys;
    return object == "rule" ? rule_keys : keys.at(object);
}

ConfigFile parse_config(const std::string& text, const CgroupNames& cgroups, const AcksPaced& acks_paced)
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
    std::map<std::pair<std::string, Direction>, std::string> names;  // each side once
    for (size_t i = 0; i < j["devices"].size(); i++) {
        ConfigDevice d = parse_device(j["devices"][i], "devices[" + std::to_string(i) + "]", cgroups, acks_paced);
        if (auto it = names.find({d.name, d.config.side}); it != names.end())
            fail(d.path + ".device", "device \"" + d.name + "\" is given twice (also " + it->second + ")");
        names[{d.name, d.config.side}] = d.path;
        file.devices.push_back(std::move(d));
    }
    return file;
}

ConfigFile load_config(const std::string& path, const CgroupNames& cgroups, const AcksPaced& acks_paced)
{
    std::ifstream in(path);
    if (!in)
        throw Error(errno_message("cannot read " + path, errno));
    std::stringstream text;
    text << in.rdbuf();
    try {
        return parse_config(text.str(), cgroups, acks_paced);
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
        if (c.side != Direction::Egress)  // egress, the default, goes unsaid
            d["direction"] = direction_name(c.side);
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
                if (!left_out(f, s, c))
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
