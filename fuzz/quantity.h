// The properties every quantity parser (parse_rate, parse_size, parse_time) must have, run
// by each fuzz target on its input:
//   1. only shaperctl::Error escapes, and its message is one short line "bad <what> "...";
//   2. it accepts exactly what the reference (common.h) accepts, with the same value, and a
//      refusal for a value problem (range, rounding, decimals) says so;
//   3. format(v) of an accepted v is canonical tc style and parse(format(v)) == v;
//   4. for an arbitrary v (the input's first 8 bytes) in range, format(v) is accepted by the
//      reference as exactly v, has at most 3 decimals, and uses the largest display unit that
//      shows v exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"

namespace fuzz {

struct QuantityKind {
    const char* name;                            // "rate"
    uint64_t (*parse)(std::string_view, uint64_t max);
    std::string (*format)(uint64_t);
    const std::vector<RefUnit>* units;
    std::vector<std::string_view> display_units;  // what format may print
    bool bare_ok;                                // a number without unit is accepted
    uint64_t min, max;                           // the parser's own bounds
};

inline uint64_t scale_of(const QuantityKind& kind, std::string_view unit)
{
    for (const RefUnit& u : *kind.units)
        if (u.name == unit) return u.scale;
    return 0;
}

inline void check_format(const QuantityKind& kind, std::string_view input, uint64_t v)
{
    const std::string s = kind.format(v);
    const std::string where = std::string(kind.name) + " " + std::to_string(v) + " formats as \"" +
                              printable(s) + "\"";
    // Shape: digits [ "." 1-3 digits, no trailing 0 ] display-unit; no leading zeros.
    size_t i = s.find_first_not_of("0123456789");
    if (i == 0 || i == std::string::npos || (s[0] == '0' && i > 1))
        violated("format: a whole number without leading zeros first", input, where);
    size_t unit_at = i;
    if (s[i] == '.') {
        unit_at = s.find_first_not_of("0123456789", i + 1);
        size_t decimals = (unit_at == std::string::npos ? s.size() : unit_at) - i - 1;
        if (decimals < 1 || decimals > 3 || s[unit_at - 1] == '0')
            violated("format: 1 to 3 decimals, no trailing zero", input, where);
    }
    const std::string unit = s.substr(unit_at);
    bool display = false;
    for (auto d : kind.display_units) display |= d == unit;
    if (!display) violated("format: a display unit", input, where);
    // Largest display unit that shows v exactly with at most three decimals.
    const uint64_t scale = scale_of(kind, unit);
    for (auto d : kind.display_units) {
        uint64_t bigger = scale_of(kind, d);
        if (bigger > scale && v >= bigger && (unsigned __int128)v * 1000 % bigger == 0)
            violated("format: the largest unit that shows the value exactly", input,
                     where + ", but " + std::string(d) + " would");
    }
    // The contract's reader reads it back exactly.
    RefResult ref = ref_quantity(s, *kind.units, kind.bare_ok, 0, UINT64_MAX);
    if (ref.verdict != Verdict::Accept || ref.value != v)
        violated("format: the text means exactly the value", input,
                 where + ", which the reference reads as " +
                     (ref.verdict == Verdict::Accept ? std::to_string(ref.value) : "invalid"));
}

inline void check_parse(const QuantityKind& kind, std::string_view text, uint64_t max)
{
    const std::string prefix = "bad " + std::string(kind.name) + " \"";
    std::string message;
    auto got = accepts(text, prefix, &message, [&] { return kind.parse(text, max); });
    RefResult ref = ref_quantity(text, *kind.units, kind.bare_ok, kind.min, max);
    const std::string with_max = " (max " + std::to_string(max) + ")";

    if (ref.verdict == Verdict::Accept && !got)
        violated("accepts what the contract accepts", text,
                 "expected " + std::to_string(ref.value) + with_max + ", refused: " + message);
    if (ref.verdict != Verdict::Accept && got)
        violated("refuses what the contract refuses", text,
                 "accepted as " + std::to_string(*got) + with_max);
    if (!got) {
        if (ref.verdict == Verdict::BadValue && !mentions_value_problem(message))
            violated("a refused value is named as a value problem", text, "message: " + message);
        return;
    }
    if (*got != ref.value)
        violated("the value is exact", text,
                 "parsed " + std::to_string(*got) + ", expected " + std::to_string(ref.value));

    // Round trip and canonical form.
    const std::string s = kind.format(*got);
    std::string again_message;
    auto again = accepts(s, prefix, &again_message, [&] { return kind.parse(s, max); });
    if (!again || *again != *got)
        violated("parse(format(v)) == v", text,
                 std::to_string(*got) + " formats as \"" + s + "\", which parses as " +
                     (again ? std::to_string(*again) : "an error: " + again_message));
    if (kind.format(*again) != s)
        violated("format(parse(format(v))) == format(v)", text, s);
}

inline void check_quantity(const QuantityKind& kind, const uint8_t* data, size_t size,
                           const std::vector<uint64_t>& maxima)
{
    std::string_view text(reinterpret_cast<const char*>(data), size);
    for (uint64_t max : maxima) check_parse(kind, text, max);

    uint64_t v = value_from(data, size);
    if (kind.min > 0 || kind.max < UINT64_MAX) v = kind.min + v % (kind.max - kind.min + 1);
    check_format(kind, text, v);
    std::string s = kind.format(v);
    auto back = accepts(s, "bad", nullptr, [&] { return kind.parse(s, kind.max); });
    if (!back || *back != v)
        violated("parse(format(v)) == v for every v in range", text,
                 std::to_string(v) + " formats as \"" + s + "\"");
}

}  // namespace fuzz
