// shaperctl: parses the command line (kCommands: each subcommand, its options and its run) and prints.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "apply.h"
#include "command.h"
#include "core/config_schema.h"
#include "exporter.h"
#include "loader/device.h"
#include "loader/doctor.h"
#include "core/error.h"
#include "core/mode.h"
#include "loader/shaper.h"
#include "manpage.h"
#include "output.h"
#include "core/units.h"
#include "watch.h"

#ifndef SHAPERCTL_VERSION
#define SHAPERCTL_VERSION "0"
#endif

using namespace shaperctl;

namespace {

// What a command needs before it runs: nothing (it prints what the binary knows), its own
// checks (doctor reports missing privileges as a finding), privileges, or privileges and the
// device's network namespace (the exporter binds first, then enters it itself).
enum class Needs { Nothing, OwnChecks, Privileges, Namespace };

void print_json(const nlohmann::ordered_json& j)
{
    std::cout << j.dump(2) << std::endl;
}

// --json's text, else the table.
template <typename JsonText, typename Table>
void print_as(bool json, const JsonText& json_text, const Table& table)
{
    if (json)
        std::cout << json_text() << std::endl;
    else
        std::cout << table();
}

// The line an ingress attach adds about ACK pacing: what pacing has, or what is given up.
void print_ack_pacing(const std::string& dev, const AttachResult& result)
{
    switch (result.ack_pacing) {
    case AckPacing::NotAsked:
    case AckPacing::SendSideThere:
        break;
    case AckPacing::SendSideAttached:
        std::printf("%s: its send side attached too, in edt mode with no class, to pace the ACKs of "
                    "received flows (detach --ingress takes it away; --no-ack-pacing declines it)\n",
                    dev.c_str());
        break;
    case AckPacing::Unavailable:
        std::printf("%s: no ACK pacing: %s\n", dev.c_str(), result.ack_pacing_why.c_str());
        break;
    }
}

// The line a receive side's detach adds about the send side it had attached for ACK pacing.
void print_pacing_side(const std::string& dev, PacingSideAfterDetach pacing)
{
    const char* d = dev.c_str();
    if (pacing == PacingSideAfterDetach::Detached)
        std::printf("detached from %s, the send side attached for ACK pacing\n", d);
    else if (pacing == PacingSideAfterDetach::KeptWithClasses)
        std::printf("%s: its send side, attached for ACK pacing, stays: it has classes, rules or a default "
                    "class now (detach --dev %s removes it)\n", d, d);
    else if (pacing == PacingSideAfterDetach::Failed)
        std::fprintf(stderr, "shaperctl: warning: %s: the send side attached for ACK pacing could not be "
                             "detached; detach --dev %s removes it\n", d, d);
}

Run attach(CLI::App* cmd, Common& c)
{
    struct Opts {
        std::string mode = "edt", fq_horizon = "10s", fq_flow_limit, fq_limit, max_classes;
        bool no_ack_pacing = false;
        CLI::Option *mode_opt, *horizon, *flow_limit, *limit;
    };
    auto o = std::make_shared<Opts>();
    dev_option(cmd, c);
    o->mode_opt = cmd->add_option("--mode", o->mode, "edt (pace with sch_fq) or police (drop beyond the horizon)");
    o->horizon = cmd->add_option("--fq-horizon", o->fq_horizon, "sch_fq horizon: departure times further ahead are dropped; at least every class horizon");
    o->flow_limit = cmd->add_option("--fq-flow-limit", o->fq_flow_limit, "sch_fq packets per flow (default 100000; the kernel's 100 overflows under small packets)");
    o->limit = cmd->add_option("--fq-limit", o->fq_limit, "sch_fq packets in all (default 1000000)");
    cmd->add_option("--max-classes", o->max_classes, "class id capacity, fixed at first attach (default 16384)");
    cmd->add_flag("--no-ack-pacing", o->no_ack_pacing,
                  "with --ingress: police alone, without attaching the send side to pace ACKs");
    return [o, &c] {
        if (c.ingress && o->mode_opt->count())
            throw Error("attach --ingress takes no --mode: received packets are not queued, so "
                        "ingress marks and drops");
        if (!c.ingress && o->no_ack_pacing)
            throw Error("--no-ack-pacing goes with --ingress: ACKs are paced for the receive side");
        AttachOptions options;
        options.direction = c.side();
        options.mode = mode_from_name(o->mode);
        options.fq.horizon_ns = parse_time(o->fq_horizon);
        if (!o->fq_flow_limit.empty())
            options.fq.flow_limit = uint32_t(parse_int(o->fq_flow_limit, 1, UINT32_MAX, "fq flow limit"));
        if (!o->fq_limit.empty())
            options.fq.limit = uint32_t(parse_int(o->fq_limit, 1, UINT32_MAX, "fq limit"));
        if (!o->max_classes.empty())
            options.max_classes = uint32_t(parse_int(o->max_classes, 2, SHAPER_LIMIT_MAX_CLASSES, "max classes"));
        options.fq_given = {o->horizon->count() > 0, o->flow_limit->count() > 0, o->limit->count() > 0};
        options.ack_pacing = !o->no_ack_pacing;
        const AttachResult result = Shaper::attach(c.dev, options);
        const char* dev = c.dev.c_str();
        const char* fq_note = result.fq_changed ? "; fq options changed" : "";
        switch (result.outcome) {
        case AttachOutcome::Attached:
            if (c.ingress)
                std::printf("attached to %s ingress\n", dev);
            else
                std::printf("attached to %s (%s mode)\n", dev, mode_name(options.mode));
            break;
        case AttachOutcome::Upgraded:
            std::printf("%s: program upgraded in place; classes and clocks kept%s\n", dev, fq_note);
            break;
        case AttachOutcome::Moved:
            std::printf("%s: moved to %s; classes, rules and clocks kept%s\n", dev,
                        attach_point_name(result.hook, c.side()), fq_note);
            break;
        case AttachOutcome::AlreadyAttached:
            std::printf("%s: already attached with this program; %s\n", dev,
                        result.fq_changed ? "fq options changed" : "nothing changed");
            break;
        }
        print_ack_pacing(c.dev, result);
        return 0;
    };
}

Run detach(CLI::App* cmd, Common& c)
{
    auto file = std::make_shared<std::string>();
    auto* dev = cmd->add_option("--dev", c.dev, "network device");
    auto* from = cmd->add_option("-f,--file", *file, "every attached device of this configuration file (as apply reads it)");
    auto gone = std::make_shared<bool>(false);
    auto* gone_flag = cmd->add_flag("--gone", *gone,
                                    "every side whose device is gone, in any network namespace (its pins and records)");
    dev->excludes(from);
    gone_flag->excludes(dev)->excludes(from);
    ingress_flag(cmd, c)->excludes(from)->excludes(gone_flag);
    return [file, gone, &c] {
        if (!file->empty()) {
            detach_file(*file, std::cout);
            return 0;
        }
        if (*gone) {
            const std::vector<ManagedDevice> removed = Shaper::detach_gone();
            for (const ManagedDevice& m : removed)
                std::printf("removed %s%s (ifindex %d, netns %llu): the device is gone\n", m.name.c_str(),
                            m.direction == Direction::Ingress ? " ingress" : "", m.ifindex,
                            static_cast<unsigned long long>(m.netns));
            if (removed.empty())
                std::printf("no side's device is gone\n");
            return 0;
        }
        if (c.dev.empty())
            throw Error("detach needs --dev DEV, -f FILE or --gone");
        const PacingSideAfterDetach pacing = Shaper::detach(c.dev, c.side());
        std::printf("detached from %s%s\n", c.dev.c_str(), c.ingress ? " ingress" : "");
        print_pacing_side(c.dev, pacing);
        return 0;
    };
}

Run status(CLI::App* cmd, Common& c)
{
    struct Opts { std::string sample = "200ms", watch; };
    auto o = std::make_shared<Opts>();
    dev_option(cmd, c);
    cmd->add_flag("--json", c.json, "print JSON (schema in README.md)");
    cmd->add_option("--sample", o->sample, "interval over which rates are measured (0 for none)");
    cmd->add_option("--watch", o->watch, "redraw every INTERVAL (1s, 500ms) with rates over it; Ctrl-C quits");
    return [o, &c] {
        if (!o->watch.empty()) {
            const uint64_t interval = parse_time(o->watch);
            if (interval < 10'000'000)
                throw Error("bad --watch \"" + o->watch + "\": at least 10ms");
            watch_status(c.dev, interval, c.json, c.side());
            return 0;
        }
        const auto interval = std::chrono::nanoseconds(o->sample == "0" ? 0 : parse_time(o->sample));
        print_status(Shaper::open_unlocked(c.dev, c.side()), interval, c.json, std::cout);
        return 0;
    };
}

Run list(CLI::App* cmd, Common& c)
{
    cmd->add_flag("--json", c.json, "print JSON");
    return [&c] {
        const auto devices = Shaper::list();
        const auto containers = list_containers();
        print_as(c.json, [&] { return list_json(devices, containers).dump(2); },
                 [&] { return list_table(devices, containers); });
        return 0;
    };
}

Run dump(CLI::App* cmd, Common& c)
{
    cmd->add_option("--dev", c.dev, "one device (default: every attached device of the namespace)");
    return [&c] {
        print_json(dump_config(c.dev));
        return 0;
    };
}

Run apply(CLI::App* cmd, Common&)
{
    struct Opts { std::string path; bool dry_run = false; };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-f,--file", o->path, "JSON configuration (format of dump; README.md)")->required();
    cmd->add_flag("--dry-run", o->dry_run, "print the changes, make none");
    return [o] {
        apply_file(o->path, o->dry_run, std::cout);
        return 0;
    };
}

Run doctor(CLI::App* cmd, Common& c)
{
    cmd->add_flag("--json", c.json, "print JSON");
    return [&c] {
        const std::vector<Finding> findings = run_doctor(c.netns);
        print_as(c.json, [&] { return doctor_json(findings).dump(2); }, [&] { return doctor_table(findings); });
        for (const Finding& f : findings)
            if (f.status == "fail")
                return 1;
        return 0;
    };
}

Run exporter(CLI::App* cmd, Common& c)
{
    struct Opts { std::string listen = "127.0.0.1:9464", web_config, head_timeout = "10s"; };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--listen", o->listen, "HOST:PORT to serve /metrics on (default 127.0.0.1:9464)");
    cmd->add_option("--web-config", o->web_config,
                    "FILE: TLS and basic auth, in the Prometheus exporter-toolkit format (README.md)");
    cmd->add_option("--head-timeout", o->head_timeout,
                    "how long a client has from connecting to send a request's head (default 10s)");
    return [o, &c] {
        const uint64_t head_timeout = parse_time(o->head_timeout);
        if (head_timeout < 100'000'000ull || head_timeout > 3'600'000'000'000ull)
            throw Error("bad --head-timeout \"" + o->head_timeout + "\": must be 100ms to 3600s");
        // Binds before it enters the namespace.
        run_exporter(o->listen, c.netns, o->web_config, std::chrono::nanoseconds(head_timeout));
        return 0;
    };
}

Run schema(CLI::App*, Common&)
{
    return [] { return std::cout << config_schema_text() ? 0 : 1; };
}

Run help_man(CLI::App*, Common& c)
{
    return [&c] {
        std::cout << man_page(*c.app, SHAPERCTL_VERSION);
        return 0;
    };
}

Run completion(CLI::App* cmd, Common& c)
{
    auto shell = std::make_shared<std::string>("bash");
    cmd->add_option("shell", *shell, "bash (the only one)");
    return [shell, &c] {
        if (*shell != "bash") {
            std::fprintf(stderr, "shaperctl: no completion for \"%s\" (only bash)\n", shell->c_str());
            return 2;
        }
        std::cout << bash_completion(*c.app);
        return 0;
    };
}

struct Command {
    const char* name;
    const char* help;
    Needs needs;
    Define define;
};

const Command kCommands[] = {
    {"attach", "start shaping a device (tcx or tc clsact egress + fq)", Needs::Namespace, attach},
    {"detach", "stop shaping; restore the prior qdisc, remove every pin", Needs::Namespace, detach},
    {"add-class", "create a class", Needs::Namespace, add_class},
    {"change-class", "change a class; its clock carries on", Needs::Namespace, change_class},
    {"del-class", "delete a class without children", Needs::Namespace, del_class},
    {"set-default", "the class of packets no rule matches", Needs::Namespace, set_default},
    {"add-rule", "send matching packets to a class (lowest pref wins)", Needs::Namespace, add_rule},
    {"del-rule", "delete a rule", Needs::Namespace, del_rule},
    {"status", "configuration, counters and rates of a device", Needs::Namespace, status},
    {"list", "every device shaperctl manages", Needs::Namespace, list},
    {"containers", "the containers shaperctl-cni shapes here, with their rates", Needs::Namespace, containers},
    {"change-container", "change a running container's rates in place", Needs::Namespace, change_container},
    {"dump", "the live configuration as JSON, in apply's file format", Needs::Namespace, dump},
    {"apply", "make devices match a configuration file; prints the diff", Needs::Namespace, apply},
    {"doctor", "check the kernel, the host and the managed devices", Needs::OwnChecks, doctor},
    {"exporter", "serve Prometheus metrics of the managed devices", Needs::Privileges, exporter},
    {"import-htb", "translate tc's JSON of an HTB setup into a configuration file for apply", Needs::Nothing,
     import_htb},
    {"schema", "print the JSON Schema of apply's configuration file", Needs::Nothing, schema},
    {"help-man", "print the man page, shaperctl(8), as roff", Needs::Nothing, help_man},
    {"completion", "print the shell completion script", Needs::Nothing, completion},
};

// CLI11 would only say "a subcommand is required" of a misspelt command: name it.
bool names_a_command(const CLI::App& app, int argc, char** argv)
{
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "-n" || arg == "--netns") {
            i++;
            continue;
        }
        if (arg.starts_with("-"))
            continue;
        if (app.get_subcommands([&](const CLI::App* sub) { return sub->check_name(arg); }).empty()) {
            std::fprintf(stderr, "shaperctl: unknown command \"%s\" (see shaperctl --help)\n", arg.c_str());
            return false;
        }
        break;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"shaperctl: exact, low-latency egress shaping with eBPF and sch_fq"};
    app.require_subcommand(1);
    Common common;
    common.app = &app;
    app.add_option("-n,--netns", common.netns, "network namespace of the device (/run/netns/NAME, as ip -n)");
    std::map<const CLI::App*, std::pair<const Command*, Run>> commands;
    for (const Command& command : kCommands) {
        CLI::App* sub = app.add_subcommand(command.name, command.help);
        commands[sub] = {&command, command.define(sub, common)};
    }
    if (!names_a_command(app, argc, argv))
        return 2;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "shaperctl: %s (see shaperctl --help)\n", e.what());
        return 2;
    }
    const auto& [command, run] = commands.at(app.get_subcommands().front());
    try {
        if (command->needs >= Needs::Privileges)
            require_privileges();  // before anything else, so the refusal names the real cause
        if (command->needs == Needs::Namespace && !common.netns.empty())
            enter_netns(common.netns);
        return run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "shaperctl: %s\n", e.what());
        return 1;
    }
}
