// The commands that change one item: each reads its options, then makes its change through the
// library (Shaper::add_class and the rest: a one-item plan, checked as a whole file is and run
// with apply -f's undo).
#include "command.h"

#include <memory>

#include "apply.h"
#include "class_options.h"
#include "core/error.h"
#include "loader/shaper.h"
#include "rule_args.h"
#include "core/units.h"

namespace shaperctl {

CLI::Option* ingress_flag(CLI::App* cmd, Common& c)
{
    return cmd->add_flag("--ingress", c.ingress,
                         "the device's receive side (its own classes, rules, default class, counters)");
}

// Every device-scoped command addresses one side of the device: egress, or --ingress.
CLI::Option* dev_option(CLI::App* cmd, Common& c)
{
    ingress_flag(cmd, c);
    return cmd->add_option("--dev", c.dev, "network device")->required();
}

namespace {

uint32_t class_id(const std::string& text)
{
    return uint32_t(parse_field(*find_class_field("id"), text));
}

// add-class (the required fields given) or change-class (the given fields over the class's own).
Run class_verb(CLI::App* cmd, Common& c, bool add)
{
    auto o = std::make_shared<ClassOptions>();
    dev_option(cmd, c);
    o->add_to(cmd, add);
    return [o, add, &c] {
        // Validates the id and every given field, over the side's defaults.
        const ClassSpec given = o->apply(class_defaults(c.side()));
        const Shaper shaper = Shaper::open(c.dev, c.side());
        // A receive side whose ACKs are paced has CoDel defaults of its own.
        const bool paced = c.side() == Direction::Ingress && Shaper::paces_acks(c.dev);
        if (add)
            shaper.add_class(paced ? o->apply(class_defaults(c.side(), true)) : given);
        else
            shaper.change_class(o->apply(shaper.class_spec(given.id)));
        warn_of_guarantees(c.dev, shaper.config().classes);
        return 0;
    };
}

}  // namespace

Run add_class(CLI::App* cmd, Common& c) { return class_verb(cmd, c, true); }
Run change_class(CLI::App* cmd, Common& c) { return class_verb(cmd, c, false); }

Run del_class(CLI::App* cmd, Common& c)
{
    auto id = std::make_shared<std::string>();
    dev_option(cmd, c);
    cmd->add_option("--id", *id, "class id")->required();
    return [id, &c] {
        Shaper::open(c.dev, c.side()).del_class(class_id(*id));
        return 0;
    };
}

Run set_default(CLI::App* cmd, Common& c)
{
    struct Opts { std::string id; bool none = false; };
    auto o = std::make_shared<Opts>();
    dev_option(cmd, c);
    auto* class_opt = cmd->add_option("--class", o->id, "class id");
    auto* none_opt = cmd->add_flag("--none", o->none, "unclassified packets pass unshaped");
    class_opt->excludes(none_opt);
    return [o, &c] {
        if (!o->none && o->id.empty())
            throw Error("set-default needs --class N or --none");
        Shaper::open(c.dev, c.side()).set_default(o->none ? 0 : class_id(o->id));
        return 0;
    };
}

Run add_rule(CLI::App* cmd, Common& c)
{
    auto args = std::make_shared<RuleArgs>();
    dev_option(cmd, c);
    add_rule_options(cmd, *args);
    return [args, &c] {
        Shaper::open(c.dev, c.side()).add_rule(parse_rule(*args));
        return 0;
    };
}

Run del_rule(CLI::App* cmd, Common& c)
{
    auto pref = std::make_shared<std::string>();
    dev_option(cmd, c);
    cmd->add_option("--pref", *pref, "the rule's pref")->required();
    return [pref, &c] {
        Shaper::open(c.dev, c.side()).del_rule(uint32_t(parse_int(*pref, 1, SHAPER_PREF_NONE - 1, "pref")));
        return 0;
    };
}

}  // namespace shaperctl
