// libFuzzer target: shaperctl::parse_rate and format_rate (properties in quantity.h).
#include "quantity.h"

namespace {

const fuzz::QuantityKind kRate{
    "rate",
    [](std::string_view t, uint64_t) { return shaperctl::parse_rate(t); },
    shaperctl::format_rate,
    &fuzz::kRefRate,
    {"bit", "kbit", "mbit", "gbit", "tbit"},
    false,
    shaperctl::kMinRate,
    shaperctl::kMaxRate,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    fuzz::check_quantity(kRate, data, size, {shaperctl::kMaxRate});
    return 0;
}
