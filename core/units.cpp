#include "core/units.h"

#include <charconv>
#include <cstdio>
#include <span>
#include <system_error>

#include "core/error.h"

namespace shaperctl {
namespace {

using u128 = unsigned __int128;

struct Unit {
    std::string_view name;  // lower case
    uint64_t scale;         // base units (bit, byte, ns) per one of this unit
    bool display = false;   // used by the formatter
};

constexpr uint64_t K = 1000, Ki = 1024;

constexpr Unit kRateUnits[] = {
    {"bit", 1, true},          {"kbit", K, true},           {"mbit", K * K, true},
    {"gbit", K * K * K, true}, {"tbit", K * K * K * K, true},
    {"kibit", Ki},             {"mibit", Ki * Ki},          {"gibit", Ki * Ki * Ki},
    {"tibit", Ki * Ki * Ki * Ki},
    {"bps", 8},                {"kbps", 8 * K},             {"mbps", 8 * K * K},
    {"gbps", 8 * K * K * K},   {"tbps", 8 * K * K * K * K},
    {"kibps", 8 * Ki},         {"mibps", 8 * Ki * Ki},      {"gibps", 8 * Ki * Ki * Ki},
    {"tibps", 8 * Ki * Ki * Ki * Ki},
};

constexpr Unit kSizeUnits[] = {
    {"b", 1, true},
    {"k", Ki},            {"kb", Ki, true},            {"kib", Ki},
    {"m", Ki * Ki},       {"mb", Ki * Ki, true},       {"mib", Ki * Ki},
    {"g", Ki * Ki * Ki},  {"gb", Ki * Ki * Ki, true},  {"gib", Ki * Ki * Ki},
    {"kbit", Ki / 8},     {"mbit", Ki * Ki / 8},       {"gbit", Ki * Ki * Ki / 8},
};

constexpr Unit kTimeUnits[] = {
    {"ns", 1, true},       {"nsec", 1},       {"nsecs", 1},
    {"us", K, true},       {"usec", K},       {"usecs", K},
    {"ms", K * K, true},   {"msec", K * K},   {"msecs", K * K},
    {"s", K * K * K, true}, {"sec", K * K * K}, {"secs", K * K * K},
};

struct Kind {
    std::string_view what;         // "rate"
    std::span<const Unit> units;
    const Unit* bare;              // unit of a bare number; nullptr: a unit is required
    std::string_view example;      // a valid input, for hints
    std::string_view bare_hint;    // why a unit is required
};

constexpr Kind kRate{"rate", kRateUnits, nullptr, "100mbit",
                 "; tc would read a bare number as bit/s, write e.g. 100mbit or 10mbps (bytes/s)"};
constexpr Kind kSize{"size", kSizeUnits, &kSizeUnits[0], "64kb", ""};
constexpr Kind kTime{"time", kTimeUnits, nullptr, "10ms",
                 "; tc would read a bare number as microseconds, write e.g. 250us or 10ms"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// "text" quoted for a one-line message: control characters escaped, long text cut.
std::string quote(std::string_view text)
{
    constexpr size_t kMax = 40;
    std::string shown;
    for (char c : text.substr(0, kMax)) {
        if (c == '"' || c == '\\')
            shown += '\\';
        shown += c;
    }
    return "\"" + one_line(shown) + (text.size() > kMax ? "...\"" : "\"");
}

const Unit* find_unit(const Kind& kind, std::string_view name)
{
    for (const Unit& u : kind.units)
        if (u.name == name) return &u;
    return nullptr;
}

std::string unit_list(const Kind& kind)
{
    std::string out;
    for (const Unit& u : kind.units) out += (out.empty() ? "" : ", ") + std::string(u.name);
    return out;
}

// "mbitkbit": a known unit followed by another.
bool two_units(const Kind& kind, std::string_view name)
{
    for (const Unit& u : kind.units)
        if (name.size() > u.name.size() && name.starts_with(u.name) &&
            find_unit(kind, name.substr(u.name.size())))
            return true;
    return false;
}

std::string format_quantity(uint64_t value, const Kind& kind)
{
    // The largest display unit that shows the value exactly with at most 3 decimals; the
    // scale-1 unit always does.
    const Unit* best = nullptr;
    for (const Unit& u : kind.units) {
        if (!u.display) continue;
        bool fits = u.scale == 1 || (value >= u.scale && u128(value) * 1000 % u.scale == 0);
        if (fits && (!best || u.scale > best->scale)) best = &u;
    }
    std::string out = std::to_string(value / best->scale);
    if (auto milli = static_cast<unsigned>(u128(value % best->scale) * 1000 / best->scale)) {
        char buf[16];
        std::snprintf(buf, sizeof buf, ".%03u", milli);
        std::string_view frac = buf;
        out += frac.substr(0, frac.find_last_not_of('0') + 1);
    }
    return out + std::string(best->name);
}

// The one parser: digits [ "." digits ] [ unit ], scaled exactly, checked against min..max.
uint64_t parse_quantity(std::string_view text, const Kind& kind, uint64_t min, uint64_t max)
{
    auto fail = [&](const std::string& why) {
        return Error("bad " + std::string(kind.what) + " " + quote(text) + ": " + why);
    };
    const std::string example = " (e.g. " + std::string(kind.example) + ")";
    if (text.empty()) throw fail("empty, expected a number and a unit" + example);
    for (char c : text)
        if (is_space(c)) throw fail("contains whitespace");
    if (text[0] == '+' || text[0] == '-') throw fail("no sign allowed" + example);

    size_t i = 0;
    while (i < text.size() && is_digit(text[i])) ++i;
    std::string_view whole = text.substr(0, i), frac;
    if (whole.empty())
        throw fail(text[0] == '.' ? "expected a digit before '.'" + example
                                  : "not a number" + example);
    if (i < text.size() && text[i] == '.') {
        size_t start = ++i;
        while (i < text.size() && is_digit(text[i])) ++i;
        frac = text.substr(start, i - start);
        if (frac.empty()) throw fail("expected a digit after '.'");
        frac = frac.substr(0, frac.find_last_not_of('0') + 1);
        if (frac.size() > 18) throw fail("too many decimal places (at most 18)");
    }

    std::string_view rest = text.substr(i);
    if (rest.starts_with('.')) throw fail("more than one '.'");
    if (rest.size() >= 2 && (rest[0] == 'e' || rest[0] == 'E') &&
        (is_digit(rest[1]) || rest[1] == '+' || rest[1] == '-'))
        throw fail("exponents are not supported" + example);
    size_t letters = 0;
    while (letters < rest.size() && is_letter(rest[letters])) ++letters;
    std::string name(rest.substr(0, letters));
    for (char& c : name) c = static_cast<char>(c | 0x20);  // ASCII letters: lower case

    const Unit* unit = name.empty() ? kind.bare : find_unit(kind, name);
    if (letters < rest.size() && (unit || name.empty()))
        throw fail("unexpected " + quote(rest.substr(letters)) + " after " +
                   (name.empty() ? "the number" : "the unit"));
    if (!unit && name.empty()) throw fail("missing unit" + std::string(kind.bare_hint));
    if (!unit && two_units(kind, name)) throw fail("more than one unit " + quote(rest));
    if (!unit) throw fail("unknown unit " + quote(rest) + " (use " + unit_list(kind) + ")");

    // value = whole.frac x scale, exactly: whole x scale < 2^64 x 2^43 and
    // frac x scale < 10^18 x 2^43 both fit in 128 bits.
    uint64_t w = 0, f = 0, pow10 = 1;
    bool overflow = std::from_chars(whole.data(), whole.data() + whole.size(), w).ec ==
                    std::errc::result_out_of_range;
    if (!frac.empty()) std::from_chars(frac.data(), frac.data() + frac.size(), f);
    for (size_t n = 0; n < frac.size(); ++n) pow10 *= 10;
    u128 value = overflow ? ~u128(0)
                          : u128(w) * unit->scale + (u128(f) * unit->scale + pow10 / 2) / pow10;

    if (value < min || value > max)
        throw fail(min == 0 ? "too large (at most " + format_quantity(max, kind) + ")"
                            : "out of range (must be " + format_quantity(min, kind) +
                                  " to " + format_quantity(max, kind) + ")");
    if (value == 0 && (w != 0 || f != 0))
        throw fail("rounds to " + format_quantity(0, kind));
    return static_cast<uint64_t>(value);
}

}  // namespace

uint64_t parse_rate(std::string_view text) { return parse_quantity(text, kRate, kMinRate, kMaxRate); }
uint64_t parse_size(std::string_view text, uint64_t max) { return parse_quantity(text, kSize, 0, max); }
uint64_t parse_time(std::string_view text) { return parse_quantity(text, kTime, 0, UINT64_MAX); }

std::string format_rate(uint64_t bits_per_second) { return format_quantity(bits_per_second, kRate); }
std::string format_size(uint64_t bytes) { return format_quantity(bytes, kSize); }
std::string format_time(uint64_t nanoseconds) { return format_quantity(nanoseconds, kTime); }

int64_t parse_int(std::string_view text, int64_t min, int64_t max, std::string_view what)
{
    const std::string range = std::to_string(min) + " to " + std::to_string(max);
    auto fail = [&](const std::string& why) {
        return Error("bad " + std::string(what) + " " + quote(text) + ": " + why);
    };
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
        throw fail("not an integer (expected " + range + ")");
    if (ec == std::errc::result_out_of_range || value < min || value > max)
        throw fail("out of range (must be " + range + ")");
    return value;
}

}  // namespace shaperctl
