#include "loader/error.h"

#include <cstdlib>
#include <cstring>

namespace shaperctl {

std::string errno_message(const std::string& what, int err)
{
    return what + ": " + std::strerror(std::abs(err));
}

}  // namespace shaperctl
