// shaperctl's filter on the device's tc clsact egress hook (through libbpf's tc API).
#pragma once

#include <cstdint>

namespace shaperctl {

struct TcAttachment {
    bool created_clsact = false;  // whether we created the clsact qdisc (and may remove it)
};

// Attaches (or atomically replaces, on upgrade) the program as our filter.
TcAttachment attach_egress_filter(int ifindex, int prog_fd);

// Removes our filter; removes clsact too when we created it and it holds nothing else.
void detach_egress_filter(int ifindex, bool remove_clsact);

// The program id our filter runs, 0 when there is none.
uint32_t egress_filter_prog_id(int ifindex);

// The attach point as status names it.
constexpr const char* kAttachPoint = "tc clsact egress";

}  // namespace shaperctl
