// libFuzzer target: shaperctl::parse_time and format_time (properties in quantity.h).
#include "quantity.h"

namespace {

const fuzz::QuantityKind kTime{
    "time",
    [](std::string_view t, uint64_t) { return shaperctl::parse_time(t); },
    shaperctl::format_time,
    &fuzz::kRefTime,
    {"ns", "us", "ms", "s"},
    false,
    0,
    UINT64_MAX,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    fuzz::check_quantity(kTime, data, size, {UINT64_MAX});
    return 0;
}
