#include "core/htb_tc.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.h"

namespace shaperctl {

using json = nlohmann::json;

std::optional<TcHandle> parse_tc_handle(std::string_view text)
{
    const auto colon = text.find(':');
    if (colon == std::string_view::npos || colon > 4 || text.size() - colon - 1 > 4)
        return std::nullopt;
    TcHandle h;
    for (size_t i = 0; i < text.size(); i++) {
        if (i == colon)
            continue;
        const char c = char(std::tolower(uint8_t(text[i])));
        if (!std::isxdigit(uint8_t(c)))
            return std::nullopt;
        uint32_t& part = i < colon ? h.major : h.minor;
        part = part * 16 + uint32_t(std::isdigit(uint8_t(c)) ? c - '0' : c - 'a' + 10);
    }
    return h;
}

std::string tc_handle_text(TcHandle h)
{
    char text[16];
    if (h.minor)
        std::snprintf(text, sizeof text, "%x:%x", h.major, h.minor);
    else
        std::snprintf(text, sizeof text, "%x:", h.major);
    return text;
}

std::string tc_text(const json& object, const char* key)
{
    if (!object.is_object() || !object.contains(key))
        return "";
    const json& v = object[key];
    return v.is_string() ? v.get<std::string>() : v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : "";
}

bool tc_flag(const json& object, const char* key)
{
    return object.is_object() && object.contains(key) && object[key] == true;
}

std::optional<uint64_t> tc_number(std::string_view text)
{
    const bool hex = text.starts_with("0x") || text.starts_with("0X");
    const std::string_view digits = text.substr(hex ? 2 : 0);
    if (digits.empty() || digits.size() > (hex ? 16 : 19))
        return std::nullopt;
    uint64_t n = 0;
    for (char c : digits) {
        const char l = char(std::tolower(uint8_t(c)));
        if (!(hex ? std::isxdigit(uint8_t(l)) : std::isdigit(uint8_t(l))))
            return std::nullopt;
        n = n * (hex ? 16 : 10) + uint64_t(std::isdigit(uint8_t(l)) ? l - '0' : l - 'a' + 10);
    }
    return n;
}

json read_tc_array(const TcOutput& output, const char* command)
{
    const std::string expected = std::string(" (expected the JSON of tc -j ") + command + ")";
    const std::string& text = output.text;
    const auto start = text.find_first_not_of(" \t\r\n");
    if (start == std::string::npos)
        throw Error(output.name + ": empty" + expected);
    json j;
    try {
        j = json::parse(text);  // tc repeats a key now and then (u32's "match"): the last is kept
    } catch (const json::parse_error& e) {
        const bool fw = text.find("\"kind\":\"fw\"") != std::string::npos;
        if (fw)  // no exception: discarded where it is not JSON still
            j = json::parse(repair_fw_options(text), nullptr, false);
        if (!fw || j.is_discarded()) {
            // nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
            const std::string what = e.what(), at = "parse error ";
            const auto from = what.find(at);
            std::string why = "not JSON: " + (from == std::string::npos ? what : what.substr(from + at.size()));
            if (text.compare(start, 6, "class ") == 0 || text.compare(start, 6, "qdisc ") == 0 ||
                text.compare(start, 7, "filter ") == 0)
                why = "tc's text, not its JSON" + expected;
            else if (fw)
                why += " (iproute2 before 6.8 writes fw filters' options as text in the JSON, read where it holds "
                       "a handle, a classid and an input dev: a newer tc writes JSON; without --filters, no rules "
                       "are imported)";
            throw Error(output.name + ": " + why);
        }
    }
    if (!j.is_array())
        throw Error(output.name + ": not an array" + expected);
    for (size_t i = 0; i < j.size(); i++)
        if (!j[i].is_object())
            throw Error(output.name + ": [" + std::to_string(i) + "]: not an object" + expected);
    return j;
}

}  // namespace shaperctl
