#include "netconf.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cni_error.h"
#include "core/json_read.h"
#include "core/class_config.h"
#include "core/direction.h"
#include "core/error.h"
#include "core/mode.h"

namespace shaperctl::cni {
namespace {

using json = nlohmann::json;

// A value the runtime gave, as an error echoes it: its first 64 bytes in quotes, any byte
// besides printable ASCII as \xNN, so that the message stays one short line.
std::string echoed(const std::string& text)
{
    std::string out = "\"";
    for (size_t i = 0; i < text.size() && i < 64; i++) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        } else {
            out += char(c);
        }
    }
    return out + (text.size() > 64 ? "...\"" : "\"");
}

const json* member(const json& object, const char* key)
{
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

// shaperctl's own optional keys, the same for both directions (ClassSpec fields).
void apply_shaperctl_keys(const json& conf, ClassSpec& spec)
{
    if (const json* v = member(conf, "overhead"))
        spec.overhead = int32_t(get_int(*v, "overhead", SHAPER_OVERHEAD_MIN, SHAPER_OVERHEAD_MAX));
    if (const json* v = member(conf, "sparse"))
        spec.sparse = get_switch(*v, "sparse", "on", "off");
    if (const json* v = member(conf, "fair"))
        spec.fair = get_switch(*v, "fair", "on", "off");
    if (const json* v = member(conf, "aqm"))
        spec.aqm = get_switch(*v, "aqm", "codel", "off");
}

// One direction of the bandwidth capability ("ingress" or "egress" keys) as the class of the
// host-side device's `side`: rate in bits/s, burst in bits (rounded up to bytes).
std::optional<ClassSpec> direction_class(const json& conf, const json& bandwidth, const std::string& path,
                                         const std::string& prefix, Direction side)
{
    const json* rate = member(bandwidth, (prefix + "Rate").c_str());
    const json* burst = member(bandwidth, (prefix + "Burst").c_str());
    const std::string rate_path = member_path(path, prefix + "Rate");
    const std::string burst_path = member_path(path, prefix + "Burst");
    if (!rate && !burst)
        return std::nullopt;
    if (!rate)
        fail(burst_path, "a burst needs " + rate_path + " (bits/s)");
    const int64_t bps = get_int(*rate, rate_path, INT64_MIN, INT64_MAX);
    if (bps <= 0)
        fail(rate_path, std::to_string(bps) + " is not a rate: give a positive number of bits/s, or "
                        "leave the key out for no shaping in this direction");
    const int64_t bits = burst ? get_int(*burst, burst_path, INT64_MIN, INT64_MAX) : 0;
    if (bits < 0)
        fail(burst_path, std::to_string(bits) + " is not a burst: give a number of bits (0 or more)");
    ClassSpec spec = class_defaults(side);
    spec.id = 1;
    spec.rate_bps = uint64_t(bps);
    spec.burst_bytes = (uint64_t(bits) + 7) / 8;
    apply_shaperctl_keys(conf, spec);
    ClassSpec resolved = spec;
    resolve_horizon(resolved, side, SHAPER_MODE_EDT);
    at(rate_path, [&] { return make_class_config(resolved, SHAPER_DEFAULT_MAX_CLASSES, resolved.horizon_ns); });
    return spec;
}

}  // namespace

Attachment check_attachment(const std::string& container_id, const std::string& ifname)
{
    if (container_id.empty())
        throw CniError(kInvalidEnvironment, "CNI_CONTAINERID is empty");
    for (char c : container_id)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
            throw CniError(kInvalidEnvironment, "CNI_CONTAINERID " + echoed(container_id) +
                                                    " has a character besides letters, digits, _ . -");
    if (ifname.empty() || ifname.find('/') != std::string::npos || ifname == "." || ifname == ".." ||
        ifname.size() > 15)
        throw CniError(kInvalidEnvironment, "CNI_IFNAME " + echoed(ifname) + " is not an interface name");
    return {container_id, ifname};
}

const std::vector<std::string>& supported_versions()
{
    static const std::vector<std::string> versions = {"0.3.1", "0.4.0", "1.0.0"};
    return versions;
}

std::string error_version(const std::string& text)
{
    const json doc = json::parse(text, nullptr, false);
    if (doc.is_object() && doc.contains("cniVersion") && doc["cniVersion"].is_string()) {
        const std::string v = doc["cniVersion"];
        const auto& all = supported_versions();
        if (std::find(all.begin(), all.end(), v) != all.end())
            return v;
    }
    return supported_versions().back();
}

NetConf parse_netconf(const std::string& text, bool need_prev_result)
{
    json doc;
    try {
        doc = parse_json(text);
    } catch (const std::exception& e) {
        throw CniError(kDecodeFailure, std::string("stdin: ") + e.what());
    }
    if (!doc.is_object())
        throw CniError(kDecodeFailure, std::string("the network configuration on stdin is a JSON ") +
                                           doc.type_name() + ", not an object");
    NetConf conf;
    try {
        const json* version = member(doc, "cniVersion");
        if (!version)
            fail("cniVersion", "missing (the CNI specification version, e.g. \"1.0.0\")");
        conf.cni_version = get_string(*version, "cniVersion", "\"1.0.0\"");
        const auto& all = supported_versions();
        if (std::find(all.begin(), all.end(), conf.cni_version) == all.end())
            throw CniError(kIncompatibleVersion, "cniVersion " + echoed(conf.cni_version) +
                                                     " is not supported (shaperctl-cni speaks 0.3.1, 0.4.0 and 1.0.0)");
        if (const json* name = member(doc, "name"))
            conf.name = get_string(*name, "name", "\"mynet\"");

        // The runtime's capability wins over the keys in the plugin's own configuration, as
        // with the reference bandwidth plugin.
        const json* runtime = member(doc, "runtimeConfig");
        const json* capability = runtime && runtime->is_object() ? member(*runtime, "bandwidth") : nullptr;
        const json& bandwidth = capability ? *capability : doc;
        const std::string path = capability ? "runtimeConfig.bandwidth" : "";
        if (!bandwidth.is_object())
            fail(path, std::string("expected an object, not a ") + bandwidth.type_name());
        conf.container_ingress = direction_class(doc, bandwidth, path, "ingress", Direction::Egress);
        conf.container_egress = direction_class(doc, bandwidth, path, "egress", Direction::Ingress);

        const json* prev = member(doc, "prevResult");
        if (prev) {
            if (!prev->is_object())
                fail("prevResult", std::string("expected the previous plugin's result object, not a ") + prev->type_name());
            const json* interfaces = member(*prev, "interfaces");
            if (!interfaces || !interfaces->is_array())
                fail("prevResult.interfaces", "missing or not an array: shaperctl-cni follows a plugin that "
                                              "creates the container's interface (bridge, ptp)");
            conf.has_prev_result = true;
            conf.prev_result = *prev;
            conf.prev_result_text = nlohmann::ordered_json::parse(text)["prevResult"].dump();
        } else if (need_prev_result) {
            fail("prevResult", "missing: shaperctl-cni is a chained plugin; list it after the plugin "
                               "that creates the interface (bridge, ptp) in a conflist");
        }
    } catch (const Error& e) {
        throw CniError(kInvalidConfig, e.what());
    }
    return conf;
}

}  // namespace shaperctl::cni
