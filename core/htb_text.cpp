// What older iproute2 writes where a newer tc writes JSON (Debian 12's 6.1.0 does both): HTB
// classes as text lines even with -j (before 6.2), and fw filters' options as text inside the
// filters' JSON (before 6.8). Both are read into the members a newer tc's JSON has, for the
// JSON's path to take.
#include <sstream>

#include "core/error.h"
#include "core/htb_tc.h"
#include "core/units.h"

namespace shaperctl {
namespace {

using json = nlohmann::json;

std::vector<std::string> words_of(std::string_view text)
{
    std::vector<std::string> words;
    std::istringstream in{std::string(text)};
    for (std::string w; in >> w;)
        words.push_back(w);
    return words;
}

// A rate as tc's print_rate writes it: whole bits per second, in steps of 1000 (K M G T) or,
// with -i, of 1024 (Ki Mi Gi Ti); bytes per second, as in the JSON. Not units.h's parse_rate:
// its range is shaperctl's, which the tree's mapping checks and names alike for text and JSON.
uint64_t rate_bytes(const std::string& text)
{
    static constexpr std::pair<const char*, uint64_t> kUnits[] = {
        {"bit", 1},          {"Kbit", 1000},          {"Mbit", 1000'000},           {"Gbit", 1000'000'000},
        {"Tbit", 1000'000'000'000}, {"Kibit", 1ull << 10}, {"Mibit", 1ull << 20}, {"Gibit", 1ull << 30},
        {"Tibit", 1ull << 40}};
    const size_t digits = text.find_first_not_of("0123456789");
    const auto n = tc_number(text.substr(0, digits));
    for (const auto& [unit, scale] : kUnits) {
        if (!n || digits == std::string::npos || text.compare(digits, std::string::npos, unit) != 0)
            continue;
        const unsigned __int128 bits = (unsigned __int128)*n * scale;
        if (bits / 8 > UINT64_MAX)
            break;
        return uint64_t(bits / 8);  // tc wrote its bytes times 8: whole bytes
    }
    throw Error("bad rate \"" + text + "\" (tc writes e.g. 30Mbit)");
}

// A size as tc's sprint_size writes it (b, and Kb and Mb of 1024), which units.h reads;
// -d adds the cell after a slash (1600b/1).
uint64_t size_bytes(const std::string& text)
{
    return parse_size(text.substr(0, text.find('/')), UINT32_MAX);
}

uint64_t whole(const std::string& key, const std::string& text)
{
    const auto n = tc_number(text);
    if (!n)
        throw Error("bad " + key + " \"" + text + "\"");
    return *n;
}

// One class line, as tc's print_class and htb_print_opt write it:
//   class htb 1:10 [dev D] parent 1:1 leaf 10: prio 0 [quantum Q] rate 30Mbit [overhead O]
//   ceil 100Mbit [linklayer L] burst 1593b[/1 mpu 0b] cburst 1600b[/1 mpu 0b] [level 0]
json class_line(const std::string& line)
{
    const std::vector<std::string> w = words_of(line);
    if (w.size() < 3)
        throw Error("not a class");
    json e = {{"class", w[1]}, {"handle", w[2]}};
    if (w[1] != "htb")
        return e;  // another qdisc's class (fq_codel's and sfq's flows): the JSON's path skips it
    const auto handle = parse_tc_handle(w[2]);
    if (!handle || !handle->minor)
        throw Error("bad class handle \"" + w[2] + "\"");
    for (size_t i = 3; i < w.size(); i++) {
        std::string key = w[i];
        if (key == "root") {
            if (e.contains("root") || e.contains("parent"))
                throw Error("root twice, or with a parent");
            e["root"] = true;
            continue;
        }
        if (i + 1 == w.size())
            throw Error("no value after " + key);
        const std::string& value = w[++i];
        if (key == "mpu")  // the first is the rate's, the second the ceil's
            key = e.contains("cburst") ? "mpu_ceil" : "mpu_rate";
        if (e.contains(key) || (key == "parent" && e.contains("root")))
            throw Error(w[i - 1] + " twice" + (key == "parent" ? ", or with root" : ""));
        // Its device (tc class show without dev), its leaf qdisc's handle, -r's raw ticks: the tree
        // is told from parents, sizes from bursts.
        if (key == "dev" || key == "leaf" || key == "buffer" || key == "cbuffer")
            continue;
        if (key == "parent" || key == "linklayer")
            e[key] = value;
        else if (key == "prio" || key == "quantum" || key == "overhead" || key == "level")
            e[key] = whole(key, value);
        else if (key == "rate" || key == "ceil")
            e[key] = rate_bytes(value);
        else if (key == "burst" || key == "cburst" || key == "mpu_rate" || key == "mpu_ceil")
            e[key] = size_bytes(value);
        else
            throw Error("unknown \"" + key + "\"");
    }
    if (!e.contains("root") && !e.contains("parent"))
        throw Error("neither root nor a parent");
    for (const char* key : {"rate", "ceil"})
        if (!e.contains(key))
            throw Error(std::string("no ") + key);
    return e;
}

// fw's options as tc before 6.8 writes them ("handle 0x10/0xff classid 1:21 input dev eth1 "),
// as the members a newer tc writes, without the braces; what else is there is kept as "text",
// for the filter's note.
std::string fw_members(std::string_view raw)
{
    const std::vector<std::string> w = words_of(raw);
    json o = json::object();
    std::string rest;
    for (size_t i = 0; i < w.size(); i++) {
        if (w[i] == "handle" && i + 1 < w.size()) {
            const std::string& v = w[++i];
            const auto slash = v.find('/');
            const std::string mask = slash == std::string::npos ? "0xffffffff" : v.substr(slash + 1);
            o["fw"] = {{"mark", v.substr(0, slash)}, {"mask", mask}};
        } else if (w[i] == "classid" && i + 1 < w.size()) {
            o["classid"] = w[++i];
        } else if (w[i] == "input" && i + 2 < w.size() && w[i + 1] == "dev") {
            o["indev"] = w[i + 2];
            i += 2;
        } else {
            rest += (rest.empty() ? "" : " ") + w[i];
        }
    }
    if (!rest.empty())
        o["text"] = rest;
    const std::string members = o.dump();
    return members.substr(1, members.size() - 2);
}

}  // namespace

json read_tc_classes(const TcOutput& output)
{
    const std::string& text = output.text;
    const auto start = text.find_first_not_of(" \t\r\n");
    if (start == std::string::npos || text.compare(start, 6, "class ") != 0)
        return read_tc_array(output, "class show dev DEV");
    json list = json::array();
    std::istringstream in(text);
    size_t number = 0;
    for (std::string line; std::getline(in, line);) {
        number++;
        line.erase(line.find_last_not_of(" \t\r") + 1);
        if (line.empty() || line[0] == ' ' || line[0] == '\t')
            continue;  // -s's statistics, under their class
        try {
            if (!line.starts_with("class "))
                throw Error("not a class as tc class show writes it");
            list.push_back(class_line(line));
        } catch (const Error& e) {
            throw Error(output.name + ": line " + std::to_string(number) + ": " + e.what() + ": \"" + line + "\"");
        }
    }
    return list;
}

std::string repair_fw_options(const std::string& text)
{
    const std::string key = "\"options\":{";
    std::string out;
    size_t from = 0;
    for (size_t at; (at = text.find(key, from)) != std::string::npos;) {
        const size_t body = at + key.size();
        out.append(text, from, body - from);
        from = body;
        // Text where JSON has a member or the end, in a fw filter: the entry's members before
        // its options are flat, so its opening brace is the last one before them.
        const size_t first = text.find_first_not_of(" \t\r\n", body);
        const size_t entry = text.rfind('{', at);
        if (first == std::string::npos || text[first] == '"' || text[first] == '}' || entry == std::string::npos ||
            text.substr(entry, at - entry).find("\"kind\":\"fw\"") == std::string::npos)
            continue;
        // The text ends where JSON goes on: the members of actions or police, or the end.
        const size_t end = text.find_first_of("\"}", body);
        if (end == std::string::npos)
            break;
        const std::string members = fw_members(std::string_view(text).substr(body, end - body));
        out += members + (text[end] == '"' && !members.empty() ? "," : "");
        from = end;
    }
    return out.append(text, from);
}

}  // namespace shaperctl
