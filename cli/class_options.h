// The options of add-class and change-class, one per field of the class table
// (core/class_spec.h) with its help text, and those of add-rule.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "core/class_spec.h"
#include "rule_args.h"

namespace shaperctl {

class ClassOptions {
public:
    // --id is always required, --rate (every required field) when `add`.
    void add_to(CLI::App* cmd, bool add);
    // The fields given on the command line replace those of `spec`; each is parsed (and its
    // token named in errors) only when given.
    ClassSpec apply(ClassSpec spec) const;

private:
    std::map<std::string, std::string> text_;  // field name -> as typed
};

void add_rule_options(CLI::App* cmd, RuleArgs& args);

}  // namespace shaperctl
