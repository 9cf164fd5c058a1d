// libFuzzer target: what shaperctl-cni reads from its runtime. The input's first line is
// CNI_CONTAINERID, its second CNI_IFNAME, the rest the network configuration on stdin; nothing
// touches the kernel. Properties, on every input:
//   1. check_attachment accepts exactly a container id of letters, digits, _ . - (not empty) and
//      an interface name of 1 to 15 bytes, without '/', not "." or ".." (a reference written
//      from its contract), and refuses the others with code 4;
//   2. parse_netconf, as ADD and as DEL, throws nothing but CniError: code 6 (not JSON, or not
//      an object), 1 (an unsupported cniVersion) or 7 (anything else invalid);
//   3. every refusal is one line of at most 1 KiB (what it echoes of the input is cut);
//   4. an accepted configuration has a supported cniVersion, a class the datapath takes for
//      each direction it gives (a positive rate, make_class_config accepting it), and, with a
//      prevResult, the text passed on parses to that same prevResult; ADD accepts only with a
//      prevResult, and what ADD accepts DEL accepts too;
//   5. error_version names a supported version always, the document's own when it states one.
#include <cctype>

#include "cni/cni_error.h"
#include "cni/netconf.h"
#include "common.h"
#include "core/class_config.h"
#include "core/direction.h"

namespace {

using shaperctl::cni::CniError;
using shaperctl::cni::NetConf;

bool reference_attachment(const std::string& id, const std::string& ifname)
{
    if (id.empty() || ifname.empty() || ifname.size() > 15 || ifname == "." || ifname == "..")
        return false;
    for (unsigned char c : id)
        if (!std::isalnum(c) && c != '_' && c != '-' && c != '.')
            return false;
    return ifname.find('/') == std::string::npos;
}

// The call's outcome: its value, or the refusal's code (checked one line) with the value empty.
template <typename Call>
auto outcome(std::string_view input, Call call, int* code) -> std::optional<decltype(call())>
{
    try {
        return call();
    } catch (const CniError& e) {
        fuzz::check_one_line(input, e.what());
        *code = e.code();
        return std::nullopt;
    } catch (const std::exception& e) {
        fuzz::violated("only CniError escapes", input, std::string("escaped: ") + e.what());
    }
}

void check_accepted(std::string_view input, const NetConf& conf)
{
    const auto& versions = shaperctl::cni::supported_versions();
    if (std::find(versions.begin(), versions.end(), conf.cni_version) == versions.end())
        fuzz::violated("an accepted cniVersion is supported", input, conf.cni_version);
    const std::pair<const std::optional<shaperctl::ClassSpec>*, shaperctl::Direction> sides[] = {
        {&conf.container_ingress, shaperctl::Direction::Egress},
        {&conf.container_egress, shaperctl::Direction::Ingress}};
    for (const auto& [spec, side] : sides) {
        if (!*spec)
            continue;
        if ((*spec)->rate_bps == 0)
            fuzz::violated("a direction given has a positive rate", input, "rate 0");
        try {
            shaperctl::make_class_config(**spec, SHAPER_DEFAULT_MAX_CLASSES,
                                         shaperctl::default_horizon(side, SHAPER_MODE_EDT, (*spec)->rate_bps));
        } catch (const std::exception& e) {
            fuzz::violated("an accepted direction is a class the datapath takes", input, e.what());
        }
    }
    if (conf.has_prev_result && nlohmann::json::parse(conf.prev_result_text) != conf.prev_result)
        fuzz::violated("prevResult is passed on as given", input, fuzz::printable(conf.prev_result_text));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string input(reinterpret_cast<const char*>(data), size);
    const size_t first = input.find('\n');
    const size_t second = first == std::string::npos ? std::string::npos : input.find('\n', first + 1);
    const std::string id = input.substr(0, first);
    const std::string ifname = first == std::string::npos ? "" : input.substr(first + 1, second - first - 1);
    const std::string text = second == std::string::npos ? "" : input.substr(second + 1);

    int code = 0;
    const bool attached = outcome(input, [&] { return shaperctl::cni::check_attachment(id, ifname); }, &code).has_value();
    if (attached != reference_attachment(id, ifname))
        fuzz::violated("check_attachment follows its contract", input,
                       std::string(attached ? "accepted" : "refused") + " id " + fuzz::printable(id) +
                           ", ifname " + fuzz::printable(ifname));
    if (!attached && code != shaperctl::cni::kInvalidEnvironment)
        fuzz::violated("a bad attachment is code 4", input, std::to_string(code));

    int add_code = 0, del_code = 0;
    const auto add = outcome(input, [&] { return shaperctl::cni::parse_netconf(text, true); }, &add_code);
    const auto del = outcome(input, [&] { return shaperctl::cni::parse_netconf(text, false); }, &del_code);
    for (int c : {add_code, del_code})
        if (c != 0 && c != shaperctl::cni::kDecodeFailure && c != shaperctl::cni::kIncompatibleVersion &&
            c != shaperctl::cni::kInvalidConfig)
            fuzz::violated("a refused configuration is code 6, 1 or 7", input, std::to_string(c));
    if (add && !add->has_prev_result)
        fuzz::violated("ADD needs a prevResult", input, "accepted without one");
    if (add && !del)
        fuzz::violated("what ADD accepts DEL accepts", input, "DEL refused with code " + std::to_string(del_code));
    if (del)
        check_accepted(input, *del);

    const std::string version = shaperctl::cni::error_version(text);
    const auto& versions = shaperctl::cni::supported_versions();
    if (std::find(versions.begin(), versions.end(), version) == versions.end())
        fuzz::violated("error_version is a supported version", input, version);
    if (del && version != del->cni_version)
        fuzz::violated("error_version is the document's own", input, version + " against " + del->cni_version);
    return 0;
}
