// shaperctl-cni: a chained CNI plugin that shapes a container's traffic with shaperctl.
//
// Why: runtimes (containerd, CRI-O, podman) and so Kubernetes hand per-pod bandwidth to CNI
// plugins as the `bandwidth` capability; a plugin executed by the runtime for every container
// puts shaperctl under all of them with no daemon of ours. This file is the protocol: the CNI_*
// environment, the configuration on stdin, the result or the error object on stdout, and the
// exit status (CNI specification 0.3.1, 0.4.0 and 1.0.0).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cni_error.h"
#include "host_device.h"
#include "netconf.h"
#include "shaping.h"

using namespace shaperctl::cni;

namespace {

std::string env(const char* name, bool required)
{
    const char* value = std::getenv(name);
    if ((!value || !*value) && required)
        throw CniError(kInvalidEnvironment, std::string(name) + " is not set (the runtime sets it for every plugin)");
    return value ? value : "";
}

Attachment attachment()
{
    return check_attachment(env("CNI_CONTAINERID", true), env("CNI_IFNAME", true));
}

int run(const std::string& command, const std::string& input)
{
    if (command == "VERSION") {
        nlohmann::ordered_json out = {{"cniVersion", supported_versions().back()},
                                      {"supportedVersions", supported_versions()}};
        std::cout << out.dump() << std::endl;
        return 0;
    }
    if (command != "ADD" && command != "DEL" && command != "CHECK")
        throw CniError(kInvalidEnvironment, "CNI_COMMAND \"" + command + "\" is none of ADD, DEL, CHECK, VERSION");
    const Attachment a = attachment();
    if (command == "DEL") {
        // DEL removes what ADD recorded; a configuration ADD would have refused leaves nothing.
        try {
            parse_netconf(input, false);
        } catch (const CniError& e) {
            if (e.code() != kInvalidConfig)
                throw;
        }
        del_shaping(a);
        return 0;
    }
    const NetConf conf = parse_netconf(input, true);
    if (command == "CHECK" && conf.cni_version.starts_with("0.3."))
        throw CniError(kIncompatibleVersion, "CHECK is not part of cniVersion " + conf.cni_version + " (0.4.0 and later)");
    const std::string netns = env("CNI_NETNS", true);
    if (command == "CHECK") {
        check_shaping(conf, find_host_device(conf.prev_result, netns, a.ifname), a);
        return 0;
    }
    if (conf.container_ingress || conf.container_egress)
        add_shaping(conf, find_host_device(conf.prev_result, netns, a.ifname), a);
    std::cout << conf.prev_result_text << std::endl;  // the chain's result, unchanged
    return 0;
}

}  // namespace

int main()
{
    const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    const char* command = std::getenv("CNI_COMMAND");
    int code = kOther;
    std::string msg, details;
    try {
        if (!command || !*command)
            throw CniError(kInvalidEnvironment, "CNI_COMMAND is not set: shaperctl-cni is a CNI plugin, run by a "
                                                "container runtime (ADD, DEL, CHECK or VERSION)");
        return run(command, input);
    } catch (const CniError& e) {
        code = e.code();
        msg = e.what();
        details = e.details();
    } catch (const std::exception& e) {
        msg = e.what();
    }
    nlohmann::ordered_json error = {{"cniVersion", error_version(input)}, {"code", code}, {"msg", msg}};
    if (!details.empty())
        error["details"] = details;
    std::cout << error.dump() << std::endl;
    std::fprintf(stderr, "shaperctl-cni: %s\n", msg.c_str());
    return 1;
}
