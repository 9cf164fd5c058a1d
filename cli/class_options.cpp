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
    for (const RuleField& f : rule_fields())
        cmd->add_option(std::string("--") + f.name, a.match(f.name), f.help);
}

}  // namespace shaperctl
