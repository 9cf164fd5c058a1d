#include "core/config_check.h"

#include <map>
#include <utility>

#include "core/units.h"

namespace shaperctl {
namespace {

using Item = ConfigFault::Item;

// The classes' tree, once every class is valid on its own.
ClassParents check_classes(const ShaperConfig& config, const ConfigLimits& limits)
{
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    pairs.reserve(config.classes.size());
    for (const ClassSpec& c : config.classes) {
        check_class(c, limits);
        pairs.push_back({c.id, c.parent});
    }
    ClassParents parents(std::move(pairs));
    if (const TreeFault tree = check_class_tree(parents))
        throw tree_fault(tree);
    return parents;
}

ConfigFault too_many_rules(size_t n)
{
    return ConfigFault(Item::Rules, 0, "", std::to_string(n) + " rules (at most " + std::to_string(SHAPER_MAX_RULES) + ")");
}

ConfigFault missing(Item item, uint32_t id, const char* field, uint32_t class_id)
{
    ConfigFault fault(item, id, field, "no class " + std::to_string(class_id));
    fault.missing_class = class_id;
    return fault;
}

}  // namespace

void check_class(const ClassSpec& c, const ConfigLimits& limits)
{
    if (c.id == 0 || c.id >= limits.max_classes)
        throw ConfigFault(Item::Class, c.id, "id",
                          "class id " + std::to_string(c.id) + " is out of range (1 to " +
                              std::to_string(limits.max_classes - 1) + " with max_classes " +
                              std::to_string(limits.max_classes) + ")");
    try {
        validate_class(c, limits.max_classes, limits.fq);
    } catch (const Error& e) {
        throw ConfigFault(Item::Class, c.id, "", e.what());
    }
}

ConfigFault tree_fault(const TreeFault& tree)
{
    ConfigFault fault(Item::Class, tree.id, "parent", tree.describe());
    if (tree.kind == TreeFault::MissingParent)
        fault.missing_class = tree.chain.back();
    fault.tree = tree;
    return fault;
}

CheckedRules check_config(const ShaperConfig& config, const ConfigLimits& limits,
                          const std::vector<RuleSpec>* published)
{
    const ClassParents classes = check_classes(config, limits);
    if (config.default_class && !classes.has(config.default_class))
        throw missing(Item::DefaultClass, 0, "", config.default_class);

    return check_rules(config.rules, [&](uint32_t id) { return classes.has(id); }, limits.side, published);
}

CheckedRules check_rules(const std::vector<RuleSpec>& rules, const std::function<bool(uint32_t)>& has_class,
                         Direction side, const std::vector<RuleSpec>* published)
{
    if (rules.size() > SHAPER_MAX_RULES)
        throw too_many_rules(rules.size());
    for (const RuleSpec& r : rules)
        check_rule(r, has_class, side);
    if (published && *published == rules)
        return CheckedRules{};
    std::map<uint32_t, shaper_rule> by_pref;
    for (const RuleSpec& r : rules)
        by_pref[r.pref] = compile_checked_rule(r);
    return check_rule_set(std::move(by_pref));
}

void check_rule(const RuleSpec& r, const std::function<bool(uint32_t)>& has_class, Direction side)
{
    if (!has_class(r.class_id))
        throw missing(Item::Rule, r.pref, "class", r.class_id);
    // A received packet has no local socket at tc ingress: a cgroup rule could never match.
    if (side == Direction::Ingress && r.cgroup)
        throw ConfigFault(Item::Rule, r.pref, "cgroup",
                          "rule " + std::to_string(r.pref) +
                              ": cgroup rules match local sockets, which received packets do not have at tc ingress");
}

shaper_rule compile_checked_rule(const RuleSpec& r)
{
    try {
        return compile_rule(r);
    } catch (const Error& e) {
        throw ConfigFault(Item::Rule, r.pref, "", e.what());
    }
}

CheckedRules check_rule_set(std::map<uint32_t, shaper_rule> by_pref)
{
    if (by_pref.size() > SHAPER_MAX_RULES)
        throw too_many_rules(by_pref.size());
    CheckedRules checked;
    checked.by_pref = std::move(by_pref);
    std::vector<shaper_rule> compiled;
    std::vector<uint32_t> slots;
    compiled.reserve(checked.by_pref.size());
    slots.reserve(checked.by_pref.size());
    for (const auto& [pref, rule] : checked.by_pref) {
        slots.push_back(uint32_t(compiled.size()));
        compiled.push_back(rule);
    }
    try {
        checked.set = compile_rules(compiled, slots, 0);
    } catch (const Error& e) {
        throw ConfigFault(Item::Rules, 0, "", e.what());
    }
    checked.compiled = true;
    return checked;
}

std::vector<std::string> guarantee_warnings(const std::vector<ClassSpec>& classes)
{
    std::map<uint32_t, uint64_t> guaranteed;  // parent -> its children with a ceil: their rates
    std::map<uint32_t, uint64_t> rate;
    for (const ClassSpec& c : classes) {
        rate[c.id] = c.rate_bps;
        if (c.ceil_bps && c.parent)
            guaranteed[c.parent] += c.rate_bps;
    }
    std::vector<std::string> out;
    for (const auto& [parent, sum] : guaranteed)
        if (rate.count(parent) && sum > rate[parent])
            out.push_back("class " + std::to_string(parent) + ": its children with a ceil are guaranteed " +
                          format_rate(sum) + ", above its rate " + format_rate(rate[parent]) +
                          ": each is still served at its rate, so while all of them send the class sends " +
                          format_rate(sum));
    return out;
}

}  // namespace shaperctl
