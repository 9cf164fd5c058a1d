#include "class_options.h"

#include <algorithm>

namespace shaperctl {

void ClassOptions::add_to(CLI::App* cmd, bool add)
{
    for (const ClassField& f : class_fields()) {
        std::string option_name = std::string("--") + f.name;
        std::replace(option_name.begin(), option_name.end(), '_', '-');
        auto* option = cmd->add_option(option_name, text_[f.name], f.help);
        if (f.required && (add || f.kind == FieldKind::ClassId))
            option->required();
    }
}

ClassSpec ClassOptions::apply(ClassSpec spec) const
{
    for (const ClassField& f : class_fields())
        if (const std::string& text = text_.at(f.name); !text.empty() || (f.required && f.kind == FieldKind::ClassId))
            f.set(spec, parse_field(f, text));
    return spec;
}

void add_rule_options(CLI::App* cmd, RuleArgs& a)
{
    cmd->add_option("--class", a.class_id, "class id")->required();
    cmd->add_option("--pref", a.pref, "precedence, 1 = first; unique per device")->required();
    cmd->add_option("--src", a.src, "source CIDR (10.0.0.0/8, 2001:db8::/32)");
    cmd->add_option("--dst", a.dst, "destination CIDR");
    cmd->add_option("--proto", a.proto, "tcp, udp, icmp, icmpv6, sctp, gre or a number");
    cmd->add_option("--sport", a.sport, "source port or range P-Q");
    cmd->add_option("--dport", a.dport, "destination port or range P-Q");
    cmd->add_option("--mark", a.mark, "firewall mark V[/MASK]");
    cmd->add_option("--cgroup", a.cgroup, "cgroup v2 path: the cgroup and its descendants (local sockets)");
    cmd->add_option("--priority", a.priority, "skb priority: N, or MAJ:MIN as tc writes classids");
    cmd->add_option("--dscp", a.dscp, "DSCP code point 0 to 63");
    cmd->add_option("--vlan", a.vlan, "outermost VLAN id 1 to 4094");
}

}  // namespace shaperctl
