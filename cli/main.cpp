// shaperctl: parses the command line and prints; the work happens in loader/.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "apply.h"
#include "exporter.h"
#include "loader/device.h"
#include "loader/doctor.h"
#include "loader/error.h"
#include "loader/shaper.h"
#include "manpage.h"
#include "output.h"
#include "rule_args.h"
#include "units.h"
#include "watch.h"

#ifndef SHAPERCTL_VERSION
#define SHAPERCTL_VERSION "0"
#endif

using namespace shaperctl;

namespace {

// true for `yes`, false for `no`; anything else is an error naming the option.
bool parse_choice(const std::string& text, const char* option, const char* yes, const char* no)
{
    if (text == yes)
        return true;
    if (text == no)
        return false;
    throw Error(std::string("bad ") + option + " \"" + text + "\" (use " + yes + " or " + no + ")");
}

// Class options as typed; each is parsed (and its token named in errors) only when given.
struct ClassOptions {
    std::string id, rate, burst, parent, overhead, mpu, horizon, aqm, target, interval, ecn, sparse, fair;

    void add_to(CLI::App* cmd, bool rate_required)
    {
        cmd->add_option("--id", id, "class id (1 to max-classes - 1)")->required();
        auto* r = cmd->add_option("--rate", rate, "wire rate: 100kbit, 20mbit, 1.5gbit, 10mbps (bytes/s)");
        if (rate_required)
            r->required();
        cmd->add_option("--burst", burst, "bytes sent at once after idle: 64kb, 1500b (default 0)");
        cmd->add_option("--parent", parent, "parent class id; 0 for none");
        cmd->add_option("--overhead", overhead, "bytes added per segment, -64 to 256 (24: Ethernet L1)");
        cmd->add_option("--mpu", mpu, "minimum bytes charged per segment");
        cmd->add_option("--horizon", horizon, "largest queueing delay accepted: 2s, 50ms (edt: at most the fq horizon)");
        cmd->add_option("--aqm", aqm, "off (default) or codel: CoDel on the class's backlog");
        cmd->add_option("--target", target, "CoDel target delay (default 5ms)");
        cmd->add_option("--interval", interval, "CoDel interval (default 100ms)");
        cmd->add_option("--ecn", ecn, "on (default): mark ECN-capable packets instead of dropping; off");
        cmd->add_option("--sparse", sparse, "on (default): sparse flows leave ahead of a backlogged class; off");
        cmd->add_option("--fair", fair, "on (default): bulk flows above their fair share are marked or dropped; off");
    }

    // Fields given on the command line replace those of `spec`.
    ClassSpec apply(ClassSpec spec) const
    {
        spec.id = uint32_t(parse_int(id, 1, UINT32_MAX, "class id"));
        if (!rate.empty())
            spec.rate_bps = parse_rate(rate);
        if (!burst.empty())
            spec.burst_bytes = parse_size(burst, SHAPER_BURST_MAX_BYTES);
        if (!parent.empty())
            spec.parent = uint32_t(parse_int(parent, 0, UINT32_MAX, "parent id"));
        if (!overhead.empty())
            spec.overhead = int32_t(parse_int(overhead, SHAPER_OVERHEAD_MIN, SHAPER_OVERHEAD_MAX, "overhead"));
        if (!mpu.empty())
            spec.mpu = uint32_t(parse_size(mpu, SHAPER_MPU_MAX));
        if (!horizon.empty())
            spec.horizon_ns = parse_time(horizon);
        if (!aqm.empty())
            spec.aqm = parse_choice(aqm, "aqm", "codel", "off");
        if (!target.empty())
            spec.aqm_target_ns = parse_time(target);
        if (!interval.empty())
            spec.aqm_interval_ns = parse_time(interval);
        if (!ecn.empty())
            spec.ecn = parse_choice(ecn, "ecn", "on", "off");
        if (!sparse.empty())
            spec.sparse = parse_choice(sparse, "sparse", "on", "off");
        if (!fair.empty())
            spec.fair = parse_choice(fair, "fair", "on", "off");
        return spec;
    }
};

uint32_t parse_mode(const std::string& mode)
{
    if (mode == "edt")
        return SHAPER_MODE_EDT;
    if (mode == "police")
        return SHAPER_MODE_POLICE;
    throw Error("bad mode \"" + mode + "\" (use edt or police)");
}

void print_json(const nlohmann::ordered_json& j)
{
    std::cout << j.dump(2) << std::endl;
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"shaperctl: exact, low-latency egress shaping with eBPF and sch_fq"};
    app.require_subcommand(1);
    std::string dev, netns;
    app.add_option("-n,--netns", netns, "network namespace of the device (/run/netns/NAME, as ip -n)");
    bool ingress = false;  // the device's receive side, with classes, rules and counters of its own
    auto add_ingress_flag = [&](CLI::App* cmd) {
        return cmd->add_flag("--ingress", ingress, "the device's receive side (its own classes, rules, default, counters)");
    };

    auto* attach = app.add_subcommand("attach", "start shaping a device (tcx or tc clsact egress + fq)");
    std::string mode = "edt", fq_horizon = "10s", fq_flow_limit, fq_limit, max_classes;
    attach->add_option("--dev", dev, "network device")->required();
    attach->add_option("--mode", mode, "edt (pace with sch_fq) or police (drop beyond the horizon)");
    auto* fq_horizon_opt = attach->add_option("--fq-horizon", fq_horizon, "sch_fq horizon: departure times further ahead are dropped; at least every class horizon");
    auto* fq_flow_limit_opt = attach->add_option("--fq-flow-limit", fq_flow_limit, "sch_fq packets per flow (default 100000; the kernel's 100 overflows under small packets)");
    auto* fq_limit_opt = attach->add_option("--fq-limit", fq_limit, "sch_fq packets in all (default 1000000)");
    auto* mode_opt = attach->get_option("--mode");
    add_ingress_flag(attach);
    attach->add_option("--max-classes", max_classes, "class id capacity, fixed at first attach (default 16384)");

    auto* detach = app.add_subcommand("detach", "stop shaping; restore the prior qdisc, remove every pin");
    std::string detach_file_path;
    auto* detach_dev = detach->add_option("--dev", dev, "network device");
    auto* detach_from = detach->add_option("-f,--file", detach_file_path,
                                           "every attached device of this configuration file (as apply reads it)");
    detach_dev->excludes(detach_from);
    add_ingress_flag(detach)->excludes(detach_from);

    ClassOptions add_opts, change_opts;
    auto* add = app.add_subcommand("add-class", "create a class");
    add->add_option("--dev", dev, "network device")->required();
    add_opts.add_to(add, true);
    add_ingress_flag(add);
    auto* change = app.add_subcommand("change-class", "change a class; its clock carries on");
    change->add_option("--dev", dev, "network device")->required();
    change_opts.add_to(change, false);
    add_ingress_flag(change);

    std::string del_id;
    auto* del = app.add_subcommand("del-class", "delete a class without children");
    del->add_option("--dev", dev, "network device")->required();
    del->add_option("--id", del_id, "class id")->required();
    add_ingress_flag(del);

    std::string default_id;
    bool no_default = false;
    auto* set_default = app.add_subcommand("set-default", "the class of packets no rule matches");
    set_default->add_option("--dev", dev, "network device")->required();
    auto* class_opt = set_default->add_option("--class", default_id, "class id");
    auto* none_opt = set_default->add_flag("--none", no_default, "unclassified packets pass unshaped");
    class_opt->excludes(none_opt);
    add_ingress_flag(set_default);

    RuleArgs rule_args;
    auto* add_rule = app.add_subcommand("add-rule", "send matching packets to a class (lowest pref wins)");
    add_rule->add_option("--dev", dev, "network device")->required();
    add_rule->add_option("--class", rule_args.class_id, "class id")->required();
    add_rule->add_option("--pref", rule_args.pref, "precedence, 1 = first; unique per device")->required();
    add_rule->add_option("--src", rule_args.src, "source CIDR (10.0.0.0/8, 2001:db8::/32)");
    add_rule->add_option("--dst", rule_args.dst, "destination CIDR");
    add_rule->add_option("--proto", rule_args.proto, "tcp, udp, icmp, icmpv6, sctp, gre or a number");
    add_rule->add_option("--sport", rule_args.sport, "source port or range P-Q");
    add_rule->add_option("--dport", rule_args.dport, "destination port or range P-Q");
    add_rule->add_option("--mark", rule_args.mark, "firewall mark V[/MASK]");
    add_rule->add_option("--cgroup", rule_args.cgroup, "cgroup v2 path: the cgroup and its descendants (local sockets)");
    add_rule->add_option("--priority", rule_args.priority, "skb priority: N, or MAJ:MIN as tc writes classids");
    add_rule->add_option("--dscp", rule_args.dscp, "DSCP code point 0 to 63");
    add_rule->add_option("--vlan", rule_args.vlan, "outermost VLAN id 1 to 4094");
    add_ingress_flag(add_rule);

    std::string del_pref;
    auto* del_rule = app.add_subcommand("del-rule", "delete a rule");
    del_rule->add_option("--dev", dev, "network device")->required();
    del_rule->add_option("--pref", del_pref, "the rule's pref")->required();
    add_ingress_flag(del_rule);

    bool json = false;
    std::string sample = "200ms", watch;
    auto* status = app.add_subcommand("status", "configuration, counters and rates of a device");
    status->add_option("--dev", dev, "network device")->required();
    status->add_flag("--json", json, "print JSON (schema in README.md)");
    status->add_option("--sample", sample, "interval over which rates are measured (0 for none)");
    status->add_option("--watch", watch, "redraw every INTERVAL (1s, 500ms) with rates over it; Ctrl-C quits");
    add_ingress_flag(status);

    auto* list = app.add_subcommand("list", "every device shaperctl manages");
    list->add_flag("--json", json, "print JSON");

    auto* dump = app.add_subcommand("dump", "the live configuration as JSON, in apply's file format");
    dump->add_option("--dev", dev, "one device (default: every attached device of the namespace)");

    std::string config_path;
    bool dry_run = false;
    auto* apply = app.add_subcommand("apply", "make devices match a configuration file; prints the diff");
    apply->add_option("-f,--file", config_path, "JSON configuration (format of dump; README.md)")->required();
    apply->add_flag("--dry-run", dry_run, "print the changes, make none");

    auto* doctor = app.add_subcommand("doctor", "check the kernel, the host and the managed devices");
    doctor->add_flag("--json", json, "print JSON");

    std::string listen = "127.0.0.1:9464";
    auto* exporter = app.add_subcommand("exporter", "serve Prometheus metrics of the managed devices");
    exporter->add_option("--listen", listen, "HOST:PORT to serve /metrics on (default 127.0.0.1:9464)");
    std::string web_config;
    exporter->add_option("--web-config", web_config,
                         "FILE: TLS and basic auth, in the Prometheus exporter-toolkit format (README.md)");

    auto* help_man = app.add_subcommand("help-man", "print the man page, shaperctl(8), as roff");
    std::string shell = "bash";
    auto* completion = app.add_subcommand("completion", "print the shell completion script");
    completion->add_option("shell", shell, "bash (the only one)");

    // CLI11 would only say "a subcommand is required" of a misspelt command: name it.
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i];
        if (arg == "-n" || arg == "--netns") {
            i++;
            continue;
        }
        if (arg.starts_with("-"))
            continue;
        if (app.get_subcommands([&](CLI::App* sub) { return sub->check_name(arg); }).empty()) {
            std::fprintf(stderr, "shaperctl: unknown command \"%s\" (see shaperctl --help)\n", arg.c_str());
            return 2;
        }
        break;
    }

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

    // Built from the CLI's own definition; no privileges needed (the build runs these).
    if (*help_man) {
        std::cout << man_page(app, SHAPERCTL_VERSION);
        return 0;
    }
    if (*completion) {
        if (shell != "bash") {
            std::fprintf(stderr, "shaperctl: no completion for \"%s\" (only bash)\n", shell.c_str());
            return 2;
        }
        std::cout << bash_completion(app);
        return 0;
    }

    try {
        if (*doctor) {  // reports missing privileges as a finding of its own
            const std::vector<Finding> findings = run_doctor(netns);
            if (json)
                print_json(doctor_json(findings));
            else
                std::cout << doctor_table(findings);
            for (const Finding& f : findings)
                if (f.status == "fail")
                    return 1;
            return 0;
        }
        require_privileges();  // before anything else, so the refusal names the real cause
        if (*exporter) {
            run_exporter(listen, netns, web_config);  // binds before it enters the namespace
            return 0;
        }
        if (!netns.empty())
            enter_netns(netns);
        const Direction side = ingress ? Direction::Ingress : Direction::Egress;
        if (*attach) {
            if (ingress && mode_opt->count())
                throw Error("attach --ingress takes no --mode: received packets are not queued, "
                            "so ingress marks and drops");
            AttachOptions options;
            options.direction = side;
            options.mode = parse_mode(mode);
            options.fq.horizon_ns = parse_time(fq_horizon);
            if (!fq_flow_limit.empty())
                options.fq.flow_limit = uint32_t(parse_int(fq_flow_limit, 1, UINT32_MAX, "fq flow limit"));
            if (!fq_limit.empty())
                options.fq.limit = uint32_t(parse_int(fq_limit, 1, UINT32_MAX, "fq limit"));
            if (!max_classes.empty())
                options.max_classes = uint32_t(parse_int(max_classes, 2, SHAPER_LIMIT_MAX_CLASSES, "max classes"));
            options.fq_given = {fq_horizon_opt->count() > 0, fq_flow_limit_opt->count() > 0,
                                fq_limit_opt->count() > 0};
            const AttachResult result = Shaper::attach(dev, options);
            const char* fq_note = result.fq_changed ? "; fq options changed" : "";
            switch (result.outcome) {
            case AttachOutcome::Attached:
                if (ingress)
                    std::printf("attached to %s ingress\n", dev.c_str());
                else
                    std::printf("attached to %s (%s mode)\n", dev.c_str(), mode_name(options.mode));
                break;
            case AttachOutcome::Upgraded:
                std::printf("%s: program upgraded in place; classes and clocks kept%s\n", dev.c_str(), fq_note);
                break;
            case AttachOutcome::Moved:
                std::printf("%s: moved to %s; classes, rules and clocks kept%s\n", dev.c_str(),
                            attach_point_name(result.hook, side), fq_note);
                break;
            case AttachOutcome::AlreadyAttached:
                std::printf("%s: already attached with this program; %s\n", dev.c_str(),
                            result.fq_changed ? "fq options changed" : "nothing changed");
                break;
            }
        } else if (*detach) {
            if (!detach_file_path.empty()) {
                detach_file(detach_file_path, std::cout);
            } else {
                if (dev.empty())
                    throw Error("detach needs --dev DEV or -f FILE");
                Shaper::detach(dev, side);
                std::printf("detached from %s%s\n", dev.c_str(), ingress ? " ingress" : "");
            }
        } else if (*add) {
            ClassSpec spec = add_opts.apply(class_defaults(side));
            Shaper::open(dev, side).add_class(spec);
        } else if (*change) {
            ClassSpec probe = change_opts.apply({});  // validates the id and every given field
            const Shaper shaper = Shaper::open(dev, side);
            shaper.change_class(change_opts.apply(shaper.class_spec(probe.id)));
        } else if (*del) {
            Shaper::open(dev, side).del_class(uint32_t(parse_int(del_id, 1, UINT32_MAX, "class id")));
        } else if (*set_default) {
            if (!no_default && default_id.empty())
                throw Error("set-default needs --class N or --none");
            uint32_t id = no_default ? 0 : uint32_t(parse_int(default_id, 1, UINT32_MAX, "class id"));
            Shaper::open(dev, side).set_default(id);
        } else if (*add_rule) {
            const shaper_rule rule = parse_rule(rule_args);
            Shaper::open(dev, side).add_rule(rule);
        } else if (*del_rule) {
            Shaper::open(dev, side).del_rule(uint32_t(parse_int(del_pref, 1, SHAPER_PREF_NONE - 1, "pref")));
        } else if (*status && !watch.empty()) {
            const uint64_t interval = parse_time(watch);
            if (interval < 10'000'000)
                throw Error("bad --watch \"" + watch + "\": at least 10ms");
            watch_status(dev, interval, json, side);
        } else if (*status) {
            const auto interval = std::chrono::nanoseconds(sample == "0" ? 0 : parse_time(sample));
            const DeviceStatus st = Shaper::open_unlocked(dev, side).status(interval);
            if (json)
                std::cout << status_json_text(st) << std::endl;
            else
                std::cout << status_table(st);
        } else if (*list) {
            const auto devices = Shaper::list();
            if (json)
                print_json(list_json(devices));
            else
                std::cout << list_table(devices);
        } else if (*dump) {
            print_json(dump_config(dev));
        } else if (*apply) {
            apply_file(config_path, dry_run, std::cout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "shaperctl: %s\n", e.what());
        return 1;
    }
    return 0;
}
