// Parsers and formatters of core/units.h: every unit, decimals, ranges, malformed input,
// and parse(format(x)) == x.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "output.h"
#include "core/units.h"

namespace shaperctl {
namespace {

struct Good {
    const char* text;
    uint64_t value;
};
struct Bad {
    const char* text;
    const char* reason;  // must appear in the message
};

// Runs `parse` on `text` and returns the Error's message, or "" if nothing was thrown.
template <typename Parse>
std::string error_of(Parse parse, const char* text)
{
    try {
        parse(text);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

template <typename Parse>
void expect_bad(Parse parse, const std::vector<Bad>& cases, const std::string& prefix)
{
    for (const Bad& c : cases) {
        std::string message = error_of(parse, c.text);
        EXPECT_NE(message.find(c.reason), std::string::npos)
            << '"' << c.text << "\" gave: " << (message.empty() ? "(no error)" : message);
        EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
}

constexpr uint64_t K = 1000, Ki = 1024;

const auto rate = [](const char* t) { return parse_rate(t); };
const auto size = [](const char* t) { return parse_size(t, UINT64_MAX); };
const auto time = [](const char* t) { return parse_time(t); };

TEST(Units, RateEveryUnit)
{
    const std::vector<Good> cases = {
        {"8000bit", 8 * K},         {"10kbit", 10 * K},          {"20mbit", 20 * K * K},
        {"1gbit", K * K * K},       {"0.4tbit", 400 * K * K * K},
        {"10kibit", 10 * Ki},       {"10mibit", 10 * Ki * Ki},   {"10gibit", 10 * Ki * Ki * Ki},
        {"0.25tibit", Ki * Ki * Ki * Ki / 4},
        {"1000bps", 8 * K},         {"10kbps", 80 * K},          {"10mbps", 80 * K * K},
        {"1gbps", 8 * K * K * K},   {"0.05tbps", 400 * K * K * K},
        {"10kibps", 80 * Ki},       {"10mibps", 80 * Ki * Ki},   {"10gibps", 80 * Ki * Ki * Ki},
        {"0.01tibps", 87960930222},  // 0.01 x 8 x 2^40 = 87960930222.08
    };
    for (const Good& c : cases) EXPECT_EQ(parse_rate(c.text), c.value) << c.text;
}

TEST(Units, RateDecimalsCaseAndRange)
{
    const std::vector<Good> cases = {
        {"1.5gbit", 1'500'000'000}, {"0.5mbit", 500'000}, {"1.1mbit", 1'100'000},
        {"1.10mbit", 1'100'000},    {"8.000kbit", 8'000}, {"0010mbit", 10'000'000},
        {"100.0004kbit", 100'000},  // 100000.4 rounds down
        {"100.0005kbit", 100'001},  // 100000.5: halves round up
        {"1.5Gbit", 1'500'000'000}, {"1.5GBIT", 1'500'000'000}, {"10Mbit", 10'000'000},
        {"10MBps", 80'000'000},     {"10MiBps", 80 * Ki * Ki}, {"10KiBit", 10 * Ki},
        {"8kbit", 8'000},           {"8000bit", 8'000},    {"400gbit", 400'000'000'000},
        {"400000000000bit", 400'000'000'000}, {"50gbps", 400'000'000'000},
        {"7999.5bit", 8'000},  // rounds into range
    };
    for (const Good& c : cases) EXPECT_EQ(parse_rate(c.text), c.value) << c.text;
}

TEST(Units, RateRefused)
{
    const char* range = "out of range (must be 8kbit to 400gbit)";
    expect_bad(rate,
               {
                   {"7999bit", range},
                   {"7.999kbit", range},
                   {"400000000001bit", range},
                   {"400.000000001gbit", range},
                   {"0bit", range},
                   {"0.0000001bit", range},
                   {"99999999999999999999gbit", range},  // does not fit 64 bits
                   {"18446744073709551615tibps", range},  // fits, but x scale does not
                   {"1000", "missing unit; tc would read a bare number as bit/s"},
                   {"10mbt", "unknown unit \"mbt\" (use bit, kbit, mbit, gbit, tbit, kibit, "
                             "mibit, gibit, tibit, bps, kbps, mbps, gbps, tbps, kibps, mibps, "
                             "gibps, tibps)"},
                   {"10kb", "unknown unit \"kb\""},  // a size unit is not a rate
                   {"10mbitkbit", "more than one unit \"mbitkbit\""},
                   {"10mbit5", "unexpected \"5\" after the unit"},
                   {"0x10mbit", "unknown unit \"x10mbit\""},
               },
               "bad rate \"");
}

TEST(Units, MalformedNumbersRefusedByAllParsers)
{
    const std::vector<Bad> cases = {
        {"", "empty"},
        {" 10mbit", "contains whitespace"},
        {"10 mbit", "contains whitespace"},
        {"10mbit\n", "contains whitespace"},
        {"-10mbit", "no sign allowed"},
        {"+10mbit", "no sign allowed"},
        {"1e9bit", "exponents are not supported"},
        {"1E+9bit", "exponents are not supported"},
        {"1.2.3mbit", "more than one '.'"},
        {"1..2mbit", "expected a digit after '.'"},
        {"1.mbit", "expected a digit after '.'"},
        {".5mbit", "expected a digit before '.'"},
        {"mbit", "not a number"},
        {"nan", "not a number"},
        {"inf", "not a number"},
        {"NaNmbit", "not a number"},
        {"10%", "unexpected \"%\" after the number"},
        {"10,5mbit", "unexpected \",5mbit\" after the number"},
        {"1.0000000000000000001mbit", "too many decimal places (at most 18)"},
    };
    expect_bad(rate, cases, "bad rate \"");
    expect_bad(size, cases, "bad size \"");
    expect_bad(time, cases, "bad time \"");
}

TEST(Units, MessagesStayOnOneLineAndShort)
{
    std::string message = error_of(rate, "10\x01\"mbit");
    EXPECT_EQ(message, R"(bad rate "10\x01\"mbit": unexpected "\x01\"mbit" after the number)");
    message = error_of(rate, (std::string(1000, '9') + "mbit").c_str());
    EXPECT_EQ(message, "bad rate \"" + std::string(40, '9') +
                           "...\": out of range (must be 8kbit to 400gbit)");
}

TEST(Units, SizeEveryUnit)
{
    const std::vector<Good> cases = {
        {"1500", 1500},          {"1500b", 1500},           {"0", 0},
        {"2k", 2 * Ki},          {"2kb", 2 * Ki},           {"2kib", 2 * Ki},
        {"2m", 2 * Ki * Ki},     {"2mb", 2 * Ki * Ki},      {"2mib", 2 * Ki * Ki},
        {"2g", 2 * Ki * Ki * Ki}, {"2gb", 2 * Ki * Ki * Ki}, {"2gib", 2 * Ki * Ki * Ki},
        {"1kbit", 128},          {"1mbit", 128 * Ki},       {"1gbit", 128 * Ki * Ki},  // as tc
        {"1.5kb", 1536},         {"0.5k", 512},             {"1.3kb", 1331},  // 1331.2
        {"64KB", 64 * Ki},       {"1MiB", Ki * Ki},         {"1B", 1},
    };
    for (const Good& c : cases)
        EXPECT_EQ(parse_size(c.text, UINT64_MAX), c.value) << c.text;
}

TEST(Units, SizeMaximumAndRefused)
{
    EXPECT_EQ(parse_size("64kb", 64 * Ki), 64 * Ki);
    EXPECT_EQ(parse_size("65536", 64 * Ki), 64 * Ki);
    expect_bad([](const char* t) { return parse_size(t, 64 * Ki); },
               {
                   {"65537", "too large (at most 64kb)"},
                   {"64.001kb", "too large (at most 64kb)"},
                   {"99999999999999999999gb", "too large (at most 64kb)"},
               },
               "bad size \"");
    expect_bad(size,
               {
                   {"0.4b", "rounds to 0b"},
                   {"10bit", "unknown unit \"bit\" (use b, k, kb, kib, m, mb, mib, g, gb, gib, "
                             "kbit, mbit, gbit)"},
                   {"10kbkb", "more than one unit"},
                   {"18446744073709551616", "too large (at most 18446744073709551615b)"},
                   {"16gbit5", "unexpected \"5\" after the unit"},
               },
               "bad size \"");
    EXPECT_EQ(parse_size("18446744073709551615", UINT64_MAX), UINT64_MAX);
}

TEST(Units, TimeEveryUnit)
{
    const std::vector<Good> cases = {
        {"7ns", 7},            {"7nsec", 7},            {"7nsecs", 7},
        {"7us", 7 * K},        {"7usec", 7 * K},        {"7usecs", 7 * K},
        {"7ms", 7 * K * K},    {"7msec", 7 * K * K},    {"7msecs", 7 * K * K},
        {"7s", 7 * K * K * K}, {"7sec", 7 * K * K * K}, {"7secs", 7 * K * K * K},
        {"1.5ms", 1'500'000},  {"0.000001ms", 1},       {"2.5ns", 3},  // halves round up
        {"10MS", 10'000'000},  {"1Sec", 1'000'000'000}, {"0s", 0},
        {"18446744073.709551615s", UINT64_MAX},
    };
    for (const Good& c : cases) EXPECT_EQ(parse_time(c.text), c.value) << c.text;
    expect_bad(time,
               {
                   {"100", "missing unit; tc would read a bare number as microseconds"},
                   {"0.4ns", "rounds to 0ns"},
                   {"10m", "unknown unit \"m\" (use ns, nsec, nsecs, us, usec, usecs, ms, msec, "
                           "msecs, s, sec, secs)"},
                   {"18446744073.709551616s", "too large"},
                   {"10mss", "more than one unit"},
               },
               "bad time \"");
}

TEST(Units, Int)
{
    EXPECT_EQ(parse_int("-64", -64, 256, "overhead"), -64);
    EXPECT_EQ(parse_int("256", -64, 256, "overhead"), 256);
    EXPECT_EQ(parse_int("0", -64, 256, "overhead"), 0);
    EXPECT_EQ(parse_int("-9223372036854775808", INT64_MIN, INT64_MAX, "n"), INT64_MIN);
    expect_bad([](const char* t) { return parse_int(t, -64, 256, "overhead"); },
               {
                   {"-65", "out of range (must be -64 to 256)"},
                   {"257", "out of range (must be -64 to 256)"},
                   {"99999999999999999999", "out of range (must be -64 to 256)"},
                   {"", "not an integer (expected -64 to 256)"},
                   {"+4", "not an integer"},
                   {" 4", "not an integer"},
                   {"4 ", "not an integer"},
                   {"1.5", "not an integer"},
                   {"1e2", "not an integer"},
                   {"0x10", "not an integer"},
                   {"-", "not an integer"},
               },
               "bad overhead \"");
}

TEST(Units, Format)
{
    const std::vector<std::pair<uint64_t, const char*>> rates = {
        {8'000, "8kbit"},         {100'000, "100kbit"},   {20'000'000, "20mbit"},
        {1'500'000'000, "1.5gbit"}, {400'000'000'000, "400gbit"}, {1'250'000, "1.25mbit"},
        {1'234'567, "1234.567kbit"}, {10'001, "10.001kbit"}, {999, "999bit"}, {0, "0bit"},
        {1'000'000'000'000, "1tbit"}, {1024, "1.024kbit"},
    };
    for (auto [v, s] : rates) EXPECT_EQ(format_rate(v), s);
    const std::vector<std::pair<uint64_t, const char*>> sizes = {
        {64 * Ki, "64kb"}, {1500, "1500b"}, {1536, "1.5kb"}, {0, "0b"}, {1023, "1023b"},
        {Ki * Ki, "1mb"},  {3 * Ki * Ki * Ki, "3gb"}, {Ki * Ki + 128, "1024.125kb"},
    };
    for (auto [v, s] : sizes) EXPECT_EQ(format_size(v), s);
    const std::vector<std::pair<uint64_t, const char*>> times = {
        {2'000'000'000, "2s"}, {10'000'000, "10ms"}, {250'000, "250us"}, {1'500'000, "1.5ms"},
        {7, "7ns"},            {0, "0ns"},           {1'001, "1.001us"}, {1'000'001, "1000.001us"},
    };
    for (auto [v, s] : times) EXPECT_EQ(format_time(v), s);
}

TEST(Units, FormatRoundTrips)
{
    std::vector<uint64_t> values = {kMinRate, kMaxRate, 8'001, 1'234'567, 999'999'999, 1024,
                                    3 * Ki * Ki * Ki, 1'000'000'001, 123'456'789'012};
    for (uint64_t x = 0x9e3779b97f4a7c15, i = 0; i < 2000; ++i) {  // deterministic spread
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        values.push_back(x >> (i % 64));
    }
    for (uint64_t v : values) {
        if (v >= kMinRate && v <= kMaxRate) {
            EXPECT_EQ(parse_rate(format_rate(v)), v) << format_rate(v);
        }
        EXPECT_EQ(parse_size(format_size(v), UINT64_MAX), v) << format_size(v);
        EXPECT_EQ(parse_time(format_time(v)), v) << format_time(v);
    }
}

}  // namespace
}  // namespace shaperctl

// `status --json` streams the classes as text (100,000 of them in half a second); it must be
// byte for byte what the JSON value prints.
TEST(StatusJson, StreamedTextIsTheJsonValueDumped)
{
    shaperctl::DeviceStatus st;
    st.device.name = "eth0";
    EXPECT_EQ(shaperctl::status_json_text(st), shaperctl::status_json(st).dump(2));
    for (uint32_t id = 1; id <= 3; id++) {
        shaperctl::ClassStatus c;
        c.spec.id = id;
        c.spec.parent = id == 1 ? 0 : 1;
        c.spec.rate_bps = 1'000'000ull * id;
        c.spec.overhead = -4;
        c.spec.aqm = id == 2;
        c.spec.fair = id != 3;
        c.counters.packets = 18'446'744'073'709'551'615ull;
        c.counters.drops_fair = 7;
        c.backlog_ns = id == 3 ? -5 : 1'500'000;
        st.classes.push_back(c);
    }
    EXPECT_EQ(shaperctl::status_json_text(st), shaperctl::status_json(st).dump(2));

    // status --watch --json: one line a frame, as dump() prints it, whatever the device's name.
    auto compact = [](const shaperctl::DeviceStatus& status) {
        shaperctl::TextSink text;
        shaperctl::StatusJsonWriter json(text, true);
        json.head(status);
        for (const shaperctl::ClassStatus& c : status.classes)
            json.add(c);
        json.end();
        return text.take();
    };
    st.device.name = "we\"classes\":[]ird";
    st.rules.resize(1);
    EXPECT_EQ(compact(st), shaperctl::status_json(st).dump());
    st.classes.clear();
    EXPECT_EQ(compact(st), shaperctl::status_json(st).dump());
}
