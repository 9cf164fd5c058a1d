// Shared by the fuzz targets: a property checker that aborts (libFuzzer saves the input as a
// crash artifact) and an independent reference for the units grammar of core/units.h.
//
// The reference is written from the contract (the comments of core/units.h and README.md's
// "Units" paragraph), not from units.cpp: it decides acceptance with its own grammar and
// computes values in decimal arithmetic of unbounded size, so a disagreement is a real
// divergence between what the parser does and what it promises.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/units.h"

namespace fuzz {

// Printable form of fuzzer input for a failure report: C escapes, cut at 200 bytes.
inline std::string printable(std::string_view s)
{
    std::string out;
    for (char c : s.substr(0, 200)) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f || c == '\\' || c == '"') {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += c;
        }
    }
    return s.size() > 200 ? out + "...(" + std::to_string(s.size()) + " bytes)" : out;
}

[[noreturn]] inline void violated(const char* property, std::string_view input,
                                  const std::string& detail)
{
    std::fprintf(stderr, "\n*** PROPERTY VIOLATED: %s\n*** input: \"%s\"\n*** %s\n", property,
                 printable(input).c_str(), detail.c_str());
    std::abort();
}

// What every refusal must look like: one line without control characters, at most `max_size`
// bytes.
inline void check_one_line(std::string_view input, std::string_view m, size_t max_size = 1024)
{
    for (char c : m) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f)
            violated("error message is one line without control characters", input,
                     "message: " + printable(m));
    }
    if (m.size() > max_size)
        violated("error message is short", input,
                 std::to_string(m.size()) + " bytes (at most " + std::to_string(max_size) +
                     "): " + printable(m));
}

// A quantity's refusal: one short line, starting "bad <what> \"".
inline void check_message(std::string_view input, std::string_view m, std::string_view prefix)
{
    if (!m.starts_with(prefix))
        violated("error message starts with the prefix", input,
                 "expected prefix \"" + std::string(prefix) + "\", got: " + printable(m));
    check_one_line(input, m);
}

// Runs `call`; returns its value, or nullopt after `check_refusal(message)` on the
// shaperctl::Error it threw. Any other exception is a property violation.
template <typename CheckRefusal, typename Call>
auto accepts_checked(std::string_view input, CheckRefusal check_refusal, std::string* message,
                     Call call) -> std::optional<decltype(call())>
{
    try {
        return call();
    } catch (const shaperctl::Error& e) {
        check_refusal(std::string_view(e.what()));
        if (message) *message = e.what();
        return std::nullopt;
    } catch (const std::exception& e) {
        violated("only shaperctl::Error escapes", input,
                 std::string("std::exception escaped: ") + e.what());
    } catch (...) {
        violated("only shaperctl::Error escapes", input, "a non-std exception escaped");
    }
}

// The same for a quantity parser: the message starts with `prefix`.
template <typename Call>
auto accepts(std::string_view input, std::string_view prefix, std::string* message, Call call)
    -> std::optional<decltype(call())>
{
    return accepts_checked(
        input, [&](std::string_view m) { check_message(input, m, prefix); }, message, call);
}

// ---- Reference: unsigned decimal numbers as digit strings (no leading zeros, "0" for 0).

inline std::string strip_zeros(std::string_view digits)
{
    size_t i = digits.find_first_not_of('0');
    return i == std::string_view::npos ? "0" : std::string(digits.substr(i));
}

inline int compare_dec(const std::string& a, const std::string& b)
{
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
    return a < b ? -1 : (a > b ? 1 : 0);
}

// digits x m, m < 2^64.
inline std::string multiply_dec(const std::string& digits, uint64_t m)
{
    std::string out(digits.size() + 20, '0');
    unsigned __int128 carry = 0;
    size_t o = out.size();
    for (size_t i = digits.size(); i > 0; --i) {
        carry += static_cast<unsigned __int128>(digits[i - 1] - '0') * m;
        out[--o] = static_cast<char>('0' + static_cast<int>(carry % 10));
        carry /= 10;
    }
    while (carry) {
        out[--o] = static_cast<char>('0' + static_cast<int>(carry % 10));
        carry /= 10;
    }
    return strip_zeros(out);
}

// digits + 5 x 10^(d-1): half a unit of the d-th decimal place (d >= 1).
inline std::string add_half_dec(const std::string& digits, size_t d)
{
    std::string out = std::string(d + 1, '0') + digits;
    size_t i = out.size() - d;
    int carry = 5;
    while (carry) {
        int v = out[i] - '0' + carry;
        out[i] = static_cast<char>('0' + v % 10);
        carry = v / 10;
        if (i == 0) break;
        --i;
    }
    return strip_zeros(out);
}

inline std::string dec(uint64_t v) { return std::to_string(v); }

struct RefUnit {
    std::string_view name;
    uint64_t scale;
};

// The unit tables as core/units.h and README.md state them.
inline constexpr uint64_t K = 1000, Ki = 1024;
inline const std::vector<RefUnit> kRefRate = {
    {"bit", 1}, {"kbit", K}, {"mbit", K * K}, {"gbit", K * K * K}, {"tbit", K * K * K * K},
    {"kibit", Ki}, {"mibit", Ki * Ki}, {"gibit", Ki * Ki * Ki}, {"tibit", Ki * Ki * Ki * Ki},
    {"bps", 8}, {"kbps", 8 * K}, {"mbps", 8 * K * K}, {"gbps", 8 * K * K * K},
    {"tbps", 8 * K * K * K * K}, {"kibps", 8 * Ki}, {"mibps", 8 * Ki * Ki},
    {"gibps", 8 * Ki * Ki * Ki}, {"tibps", 8 * Ki * Ki * Ki * Ki},
};
inline const std::vector<RefUnit> kRefSize = {
    {"b", 1}, {"k", Ki}, {"kb", Ki}, {"kib", Ki}, {"m", Ki * Ki}, {"mb", Ki * Ki},
    {"mib", Ki * Ki}, {"g", Ki * Ki * Ki}, {"gb", Ki * Ki * Ki}, {"gib", Ki * Ki * Ki},
    {"kbit", Ki / 8}, {"mbit", Ki * Ki / 8}, {"gbit", Ki * Ki * Ki / 8},
};
inline const std::vector<RefUnit> kRefTime = {
    {"ns", 1}, {"nsec", 1}, {"nsecs", 1}, {"us", K}, {"usec", K}, {"usecs", K},
    {"ms", K * K}, {"msec", K * K}, {"msecs", K * K},
    {"s", K * K * K}, {"sec", K * K * K}, {"secs", K * K * K},
};

// Why the reference refuses: the text (grammar, unit) or the value (range, rounding, decimals).
enum class Verdict { Accept, BadText, BadValue };

struct RefResult {
    Verdict verdict;
    uint64_t value = 0;
};

// digits [ "." digits ] [ letters ], a known unit (or none where `bare_ok`), at most 18
// decimals once trailing zeros are dropped, rounded half up, min..max, and a non-zero number
// that rounds to 0 refused.
inline RefResult ref_quantity(std::string_view text, const std::vector<RefUnit>& units,
                              bool bare_ok, uint64_t min, uint64_t max)
{
    auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    size_t i = 0;
    while (i < text.size() && is_digit(text[i])) ++i;
    std::string whole(text.substr(0, i)), frac;
    if (whole.empty()) return {Verdict::BadText};
    if (i < text.size() && text[i] == '.') {
        size_t start = ++i;
        while (i < text.size() && is_digit(text[i])) ++i;
        frac = std::string(text.substr(start, i - start));
        if (frac.empty()) return {Verdict::BadText};
    }
    std::string unit;
    for (; i < text.size(); ++i) {
        if (!is_alpha(text[i])) return {Verdict::BadText};
        unit += static_cast<char>(text[i] >= 'A' && text[i] <= 'Z' ? text[i] - 'A' + 'a' : text[i]);
    }
    uint64_t scale = 0;
    if (unit.empty()) {
        if (!bare_ok) return {Verdict::BadText};
        scale = 1;
    } else {
        auto it = std::find_if(units.begin(), units.end(),
                               [&](const RefUnit& u) { return u.name == unit; });
        if (it == units.end()) return {Verdict::BadText};
        scale = it->scale;
    }
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (frac.size() > 18) return {Verdict::BadValue};

    const std::string number = strip_zeros(whole + frac);  // value x 10^d
    std::string scaled = multiply_dec(number, scale);
    if (!frac.empty()) scaled = add_half_dec(scaled, frac.size());
    std::string rounded = strip_zeros(
        scaled.size() > frac.size() ? std::string_view(scaled).substr(0, scaled.size() - frac.size())
                                    : std::string_view("0"));
    if (compare_dec(rounded, dec(min)) < 0 || compare_dec(rounded, dec(max)) > 0)
        return {Verdict::BadValue};
    if (rounded == "0" && number != "0") return {Verdict::BadValue};
    return {Verdict::Accept, std::stoull(rounded)};
}

// [-] digits, min..max.
inline RefResult ref_int(std::string_view text, int64_t min, int64_t max)
{
    bool negative = !text.empty() && text[0] == '-';
    std::string_view digits = text.substr(negative ? 1 : 0);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
        return {Verdict::BadText};
    const std::string magnitude = strip_zeros(digits);
    // Signed comparison of (negative, magnitude) against an int64_t.
    auto cmp = [&](int64_t bound) {
        bool bound_negative = bound < 0;
        std::string bound_magnitude = bound_negative
                                          ? dec(static_cast<uint64_t>(-(bound + 1)) + 1)
                                          : dec(static_cast<uint64_t>(bound));
        bool neg = negative && magnitude != "0";
        if (neg != bound_negative) return neg ? -1 : 1;
        int c = compare_dec(magnitude, bound_magnitude);
        return neg ? -c : c;
    };
    if (cmp(min) < 0 || cmp(max) > 0) return {Verdict::BadValue};
    int64_t value = 0;
    if (magnitude != "0")
        value = negative ? -static_cast<int64_t>(std::stoull(magnitude) - 1) - 1
                         : static_cast<int64_t>(std::stoull(magnitude));
    return {Verdict::Accept, static_cast<uint64_t>(value)};
}

// A value from the input's first 8 bytes (little endian), for the formatter properties.
inline uint64_t value_from(const uint8_t* data, size_t size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size && i < 8; ++i) v |= uint64_t(data[i]) << (8 * i);
    return v;
}

inline bool mentions_value_problem(const std::string& m)
{
    return m.find("out of range") != std::string::npos || m.find("too large") != std::string::npos ||
           m.find("rounds to") != std::string::npos ||
           m.find("too many decimal places") != std::string::npos;
}

}  // namespace fuzz
