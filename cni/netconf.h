// Why: the plugin's whole input is one JSON document on stdin (the conflist's entry for this
// plugin, with runtimeConfig and prevResult added by the runtime) and the CNI_* environment. Reading it in one place, into
// the ClassSpecs the library takes, keeps every rule about that input (versions, the bandwidth
// capability's units, shaperctl's own keys) here and lets the rest of the plugin work on typed
// values; a bad document is refused before anything on the host is touched.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/class_spec.h"

namespace shaperctl::cni {

// The specification versions this plugin speaks (VERSION lists them).
const std::vector<std::string>& supported_versions();

struct NetConf {
    std::string cni_version;
    std::string name;
    // The container's ingress, shaped on the host-side device's egress, and the container's
    // egress, shaped on its ingress; absent: that direction is left alone.
    std::optional<ClassSpec> container_ingress, container_egress;
    bool has_prev_result = false;
    nlohmann::json prev_result;        // for finding the host-side device
    std::string prev_result_text;      // passed through unchanged (key order kept)
};

// What the runtime names an attachment by: CNI_CONTAINERID, which becomes a file name under
// /run/shaperctl-cni, and CNI_IFNAME, the container's interface.
struct Attachment {
    std::string container_id, ifname;
};

// The attachment the runtime names, checked: CniError (4) for a container id that is empty or
// has a character besides letters, digits, _ . -, and for an interface name that is empty,
// ".", "..", has a '/' or is over 15 bytes.
Attachment check_attachment(const std::string& container_id, const std::string& ifname);

// Parses and checks stdin's document (CniError: 6 not JSON, 1 unsupported cniVersion,
// 7 anything else invalid). prevResult is required by ADD and CHECK, not by DEL.
NetConf parse_netconf(const std::string& text, bool need_prev_result);

// The cniVersion of a document if it states a supported one, else the newest supported: the
// version of an error object.
std::string error_version(const std::string& text);

}  // namespace shaperctl::cni
