#include "rule_args.h"

#include "loader/cgroup.h"
#include "core/error.h"
#include "core/units.h"

namespace shaperctl {

std::string& RuleArgs::match(std::string_view name)
{
    for (auto [field, text] : {std::pair{"src", &src}, {"dst", &dst}, {"proto", &proto}, {"sport", &sport},
                               {"dport", &dport}, {"mark", &mark}, {"cgroup", &cgroup},
                               {"priority", &priority}, {"dscp", &dscp}, {"vlan", &vlan}})
        if (name == field)
            return *text;
    throw Error("no rule field \"" + std::string(name) + "\"");
}

RuleSpec parse_rule(const RuleArgs& a)
{
    RuleSpec rule;
    rule.pref = uint32_t(parse_int(a.pref, 1, SHAPER_PREF_NONE - 1, "pref"));
    rule.class_id = uint32_t(parse_int(a.class_id, 1, UINT32_MAX, "class id"));
    for (const RuleField& f : rule_fields())
        if (const std::string& text = a.match(f.name); !text.empty())
            set_match(rule, f, text, "--", resolve_cgroup);
    check_matches(rule, "--", "set-default");
    return rule;  // the datapath's own checks are check_config()'s, with the rest

}

}  // namespace shaperctl
