#include "core/error.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shaperctl {

std::string one_line(std::string_view text)
{
    std::string out;
    for (unsigned char c : text) {
        if (c < 0x20 || c == 0x7f) {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        } else {
            out += char(c);
        }
    }
    return out;
}

std::string errno_message(const std::string& what, int err)
{
    return what + ": " + std::strerror(std::abs(err));
}

}  // namespace shaperctl
