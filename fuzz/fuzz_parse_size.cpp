// libFuzzer target: shaperctl::parse_size and format_size (properties in quantity.h), with
// the maxima the CLI uses (burst 1 GiB, mpu 65535), none, and one taken from the input.
#include "quantity.h"

namespace {

const fuzz::QuantityKind kSize{
    "size",
    shaperctl::parse_size,
    shaperctl::format_size,
    &fuzz::kRefSize,
    {"b", "kb", "mb", "gb"},
    true,
    0,
    UINT64_MAX,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const uint64_t from_input = fuzz::value_from(data, size) >> (size % 64);
    fuzz::check_quantity(kSize, data, size, {UINT64_MAX, 1ull << 30, 65535, from_input});
    return 0;
}
