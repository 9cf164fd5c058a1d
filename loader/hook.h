// Where shaperctl's program runs on one side of a device (its egress or its ingress hook): a
// TCX link where the kernel has TCX (6.6+), else a filter on tc clsact. Either way the program
// ends no chain: programs attached before or after ours keep running. What attach did is kept in the attach record, so that
// detach undoes exactly that and an attach over an older attachment moves it.
#pragma once

#include <cstdint>

#include "loader/device.h"
#include "loader/tc_filter.h"

namespace shaperctl {

enum class Hook { TcClsact, Tcx };

struct HookAttachment {
    Hook hook = Hook::TcClsact;
    uint32_t tc_priority = kTcFilterPriority;  // our tc filter's (in records of older builds: 1)
    bool created_clsact = false;  // we created clsact: detach removes it once nothing else is on it
};

// As status names it: "tcx egress" or "tc clsact egress" (ingress for that side).
const char* attach_point_name(Hook hook, Direction side = Direction::Egress);
const char* hook_key(Hook hook);  // "tcx" or "tc", as the attach record keeps it

// The hook an attach uses: TCX where the kernel has it, else tc clsact; SHAPERCTL_ATTACH=tc or
// =tcx chooses instead. Error: another value, or tcx on a kernel without it.
Hook chosen_hook();

// Whether `current` is where an attach choosing `hook` would put the program now.
bool is_current(const HookAttachment& current, Hook hook);

// Every call below acts on the side device.direction names.
// Puts the program on the hook (a pinned TCX link or our filter already there gets it in place).
HookAttachment attach_hook(const Device& device, Hook hook, int prog_fd);

// Moves the program from `from` to `to`, keeping everything the maps hold: the new attachment
// goes in first, then the old comes out, so no packet leaves unshaped. A packet that passes
// both in the microseconds between is charged twice (TCX runs before clsact): late, never early.
HookAttachment move_hook(const Device& device, const HookAttachment& from, Hook to,
                             int prog_fd);

// The program id our attachment runs; 0 when it is gone.
uint32_t hook_prog_id(const Device& device, const HookAttachment& attachment);

// Takes our program off the device (the TCX link if one is pinned, the tc filter), and clsact
// when we created it and nothing else is on it. Returns whether it removed clsact.
bool detach_hook(const Device& device, const HookAttachment& attachment);

// Whether the device is known to be gone with our program: in this network namespace its
// ifindex is free (a device deleted or moved out takes its clsact and filters with it; a TCX
// link must have gone off it too), in another its TCX link is on no device (deleted, or its
// namespace with it). A tc filter in another namespace cannot be told from here: false.
bool hook_gone(const Device& device, const HookAttachment& attachment, uint64_t here);

}  // namespace shaperctl
