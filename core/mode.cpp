#include "core/mode.h"

#include "core/error.h"

namespace shaperctl {

const char* mode_name(uint32_t mode)
{
    return mode == SHAPER_MODE_POLICE ? "police" : "edt";
}

uint32_t mode_from_name(const std::string& name)
{
    if (name == "edt")
        return SHAPER_MODE_EDT;
    if (name == "police")
        return SHAPER_MODE_POLICE;
    throw Error("bad mode \"" + name + "\" (use edt or police)");
}

uint64_t mode_horizon(uint32_t mode)
{
    return mode == SHAPER_MODE_POLICE ? SHAPER_DEFAULT_POLICE_HORIZON_NS : SHAPER_DEFAULT_HORIZON_NS;
}

}  // namespace shaperctl
