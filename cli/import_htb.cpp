// `import-htb`: tc's JSON of an HTB setup in, the configuration file for apply -f out
// (core/htb_import.h translates); notes on stderr, one line each.
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "command.h"
#include "core/error.h"
#include "core/htb_import.h"
#include "core/mode.h"

namespace shaperctl {
namespace {

// The text of FILE, or of stdin for "-"; named as the option and the file ("--classes x.json").
std::optional<TcOutput> read_output(const char* option, const std::string& path)
{
    if (path.empty())
        return std::nullopt;
    TcOutput out{std::string(option) + " " + path, ""};
    std::stringstream text;
    if (path == "-") {
        text << std::cin.rdbuf();
    } else {
        std::ifstream in(path);
        if (!in)
            throw Error(errno_message(std::string(option) + ": cannot read " + path, errno));
        text << in.rdbuf();
    }
    out.text = text.str();
    return out;
}

}  // namespace

Run import_htb(CLI::App* cmd, Common& c)
{
    struct Opts { std::string classes, qdiscs, filters, mode = "edt"; };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--dev", c.dev, "the device the configuration is for (the file's \"device\")")->required();
    cmd->add_option("--classes", o->classes,
                    "FILE: tc -d -j class show dev DEV (-d adds quantum, mpu, overhead; its JSON, or the "
                    "text iproute2 before 6.2 writes); - for stdin")
        ->required();
    cmd->add_option("--qdiscs", o->qdiscs,
                    "FILE: tc -j qdisc show dev DEV: the default class and leaf qdiscs (fq_codel: aqm codel); - for stdin");
    cmd->add_option("--filters", o->filters,
                    "FILE: tc -j filter show dev DEV: fw and flower filters on the HTB qdisc become rules; - for stdin");
    cmd->add_option("--mode", o->mode, "the file's mode: edt (default) or police, as attach's");
    cmd->footer("Prints the configuration file on stdout; what is not carried, one line each on stderr.\n"
                  "Reads Debian 12's tc (iproute2 6.1) as well: classes as text, fw's options as text in the JSON.");
    return [o, &c] {
        const int stdin_uses = (o->classes == "-") + (o->qdiscs == "-") + (o->filters == "-");
        if (stdin_uses > 1)
            throw Error("only one of --classes, --qdiscs and --filters can read stdin (-)");
        const uint32_t mode = mode_from_name(o->mode);
        const auto classes = read_output("--classes", o->classes);
        const HtbImport result = import_htb(*classes, read_output("--qdiscs", o->qdiscs),
                                            read_output("--filters", o->filters), mode);
        const std::string file = htb_config_file(c.dev, result.config).dump(2);
        for (const std::string& note : result.notes)
            std::fprintf(stderr, "import-htb: %s\n", one_line(note).c_str());
        std::cout << file << std::endl;
        return 0;
    };
}

}  // namespace shaperctl
