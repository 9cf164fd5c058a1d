// What every subcommand definition shares (cli/main.cpp holds the table of them): the common
// options, and a definition's shape: it adds its options to its CLI11 command and returns
// what runs once they are parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "core/direction.h"

namespace shaperctl {

// Options every command shares.
struct Common {
    std::string dev, netns;
    bool json = false;
    bool ingress = false;  // the device's receive side: classes, rules and counters of its own
    const CLI::App* app = nullptr;

    Direction side() const { return ingress ? Direction::Ingress : Direction::Egress; }
};

using Run = std::function<int()>;
using Define = Run (*)(CLI::App* cmd, Common& c);

// The device's receive side, and --dev, which every device-scoped command takes.
CLI::Option* ingress_flag(CLI::App* cmd, Common& c);
CLI::Option* dev_option(CLI::App* cmd, Common& c);

// The commands that change one item of a device's configuration (cli/edit_commands.cpp).
Run add_class(CLI::App* cmd, Common& c);
Run change_class(CLI::App* cmd, Common& c);
Run del_class(CLI::App* cmd, Common& c);
Run set_default(CLI::App* cmd, Common& c);
Run add_rule(CLI::App* cmd, Common& c);
Run del_rule(CLI::App* cmd, Common& c);

// The containers shaperctl-cni shapes (cli/container_commands.cpp).
Run containers(CLI::App* cmd, Common& c);
Run change_container(CLI::App* cmd, Common& c);

// tc's JSON of an HTB setup into a configuration file (cli/import_htb.cpp).
Run import_htb(CLI::App* cmd, Common& c);

}  // namespace shaperctl
