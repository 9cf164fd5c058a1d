// shaperctl's program on the device's TCX egress (or ingress) hook (kernels 6.6+): a bpf_link, pinned beside
// the maps so that it outlives the command that made it. Debian 12's libbpf (1.1) predates TCX:
// the link is made with bpf_link_create and the attach type's number.
#pragma once

#include <cstdint>
#include <string>

#include "core/direction.h"

namespace shaperctl {

// Whether the running kernel has TCX (probed once: a link create that reaches the device lookup).
bool kernel_has_tcx();

// Links the program at the end of the device's TCX egress chain and pins the link at
// `pin_path`. A pinned link still on the device gets the program instead (in place).
void attach_tcx(int ifindex, int prog_fd, const std::string& pin_path,
                       Direction side = Direction::Egress);

// Swaps the pinned link's program in place (bpf_link_update): each packet sees one or the other.
void replace_tcx_program(const std::string& pin_path, int prog_fd);

// The program id the pinned link runs while it is on `ifindex`'s TCX egress; 0 when there is
// no such link (never made, unpinned, or detached by someone else).
uint32_t tcx_prog_id(const std::string& pin_path, int ifindex,
                            Direction side = Direction::Egress);

// Whether the pinned link is on no device any more: its device was unregistered (deleted, or
// its network namespace with it) or the link detached. False when there is no such pin.
bool tcx_link_defunct(const std::string& pin_path);

// Takes the pinned link off its device and removes the pin (nothing to do if there is none).
void detach_tcx(const std::string& pin_path);

}  // namespace shaperctl
