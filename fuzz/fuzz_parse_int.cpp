// libFuzzer target: shaperctl::parse_int over the ranges the CLI uses and one from the input.
// Properties: only shaperctl::Error escapes, one-line "bad <what> "..." messages; it accepts
// exactly [-]digits within min..max (reference in common.h) with the same value; a refusal
// says "out of range" for a well-formed integer outside the range, "not an integer" otherwise.
#include <algorithm>

#include "common.h"

namespace {

void check(std::string_view text, int64_t min, int64_t max)
{
    std::string message;
    auto got = fuzz::accepts(text, "bad overhead \"", &message,
                             [&] { return shaperctl::parse_int(text, min, max, "overhead"); });
    fuzz::RefResult ref = fuzz::ref_int(text, min, max);
    const std::string range = " (range " + std::to_string(min) + " to " + std::to_string(max) + ")";
    if (ref.verdict == fuzz::Verdict::Accept) {
        if (!got)
            fuzz::violated("accepts [-]digits in range", text,
                           "expected " + std::to_string(int64_t(ref.value)) + range +
                               ", refused: " + message);
        if (*got != int64_t(ref.value))
            fuzz::violated("the value is exact", text,
                           "parsed " + std::to_string(*got) + ", expected " +
                               std::to_string(int64_t(ref.value)));
        return;
    }
    if (got)
        fuzz::violated("refuses what is not [-]digits in range", text,
                       "accepted as " + std::to_string(*got) + range);
    const char* reason = ref.verdict == fuzz::Verdict::BadValue ? "out of range (must be "
                                                                : "not an integer (expected ";
    if (message.find(reason) == std::string::npos)
        fuzz::violated("the refusal names its reason", text,
                       "expected \"" + std::string(reason) + "\"" + range + ", got: " + message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    std::string_view text(reinterpret_cast<const char*>(data), size);
    check(text, INT64_MIN, INT64_MAX);
    check(text, -64, 256);                 // --overhead
    check(text, 1, UINT32_MAX);            // class ids, fq limits
    check(text, 0, UINT32_MAX);            // --parent
    check(text, 2, 1 << 20);               // --max-classes
    int64_t a = int64_t(fuzz::value_from(data, size)), b = a >> (size % 64);
    check(text, std::min(a, b), std::max(a, b));
    return 0;
}
