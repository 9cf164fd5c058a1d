// The units tc users know: rates, sizes and times, parsed exactly and printed tc style.
//
// Parsers throw shaperctl::Error with one line naming the bad text and what is accepted.
// Units are case-insensitive; a number may have a fractional part ("1.5gbit") but no sign,
// no exponent and no spaces. The decimal is scaled exactly (no floating point) and rounded
// to the nearest integer, halves up; a non-zero number that rounds to 0 is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shaper_abi.h"

namespace shaperctl {

// The datapath's bounds (bits/s): 8kbit to 400gbit.
inline constexpr uint64_t kMinRate = SHAPER_RATE_MIN_BPS;
inline constexpr uint64_t kMaxRate = SHAPER_RATE_MAX_BPS;

// Bits per second, kMinRate..kMaxRate. A unit is required.
//   bit kbit mbit gbit tbit        (x1000 steps)
//   kibit mibit gibit tibit        (x1024 steps)
//   bps kbps mbps gbps tbps        BYTES per second, as in tc: "mbps" is 8 mbit
//   kibps mibps gibps tibps        (x1024 bytes)
uint64_t parse_rate(std::string_view text);

// Bytes, 0..max. Binary multiples as in tc: b; k kb kib; m mb mib; g gb gib;
// kbit mbit gbit (tc's binary bits: 1kbit = 1024 bits = 128 bytes). A bare number is bytes.
uint64_t parse_size(std::string_view text, uint64_t max);

// Nanoseconds. ns nsec nsecs; us usec usecs; ms msec msecs; s sec secs. A unit is required.
uint64_t parse_time(std::string_view text);

// A plain decimal integer ("-64", "256") in min..max; `what` names it in errors ("overhead").
int64_t parse_int(std::string_view text, int64_t min, int64_t max, std::string_view what);

// Exact, short, tc style: the largest unit that shows the value exactly with at most three
// decimals, so parse(format(x)) == x. format_rate(1'500'000'000) == "1.5gbit",
// format_rate(1'234'567) == "1234.567kbit", format_size(1536) == "1.5kb",
// format_size(1500) == "1500b", format_time(250'000) == "250us".
std::string format_rate(uint64_t bits_per_second);  // bit kbit mbit gbit tbit
std::string format_size(uint64_t bytes);            // b kb mb gb
std::string format_time(uint64_t nanoseconds);      // ns us ms s

}  // namespace shaperctl
