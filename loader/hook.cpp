#include "loader/hook.h"

#include <sys/utsname.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "loader/tcx_link.h"

namespace shaperctl {
namespace {

std::string link_pin(const Device& device)
{
    return device.pin_dir() + "/tcx_" + direction_name(device.direction);
}

}  // namespace

const char* attach_point_name(Hook hook, Direction side)
{
    if (side == Direction::Ingress)
        return hook == Hook::Tcx ? "tcx ingress" : "tc clsact ingress";
    return hook == Hook::Tcx ? "tcx egress" : "tc clsact egress";
}

const char* hook_key(Hook hook)
{
    return hook == Hook::Tcx ? "tcx" : "tc";
}

Hook chosen_hook()
{
    const char* env = std::getenv("SHAPERCTL_ATTACH");
    const std::string choice = env ? env : "";
    if (choice == "tc")
        return Hook::TcClsact;
    if (!choice.empty() && choice != "tcx")
        throw Error("bad SHAPERCTL_ATTACH \"" + choice + "\" (use tc or tcx, or leave it unset)");
    if (kernel_has_tcx())
        return Hook::Tcx;
    if (choice == "tcx") {
        utsname uts{};
        uname(&uts);
        throw Error(std::string("SHAPERCTL_ATTACH=tcx: this kernel (") + uts.release +
                    ") has no TCX (6.6+); unset it to attach on tc clsact");
    }
    return Hook::TcClsact;
}

bool is_current(const HookAttachment& current, Hook hook)
{
    return current.hook == hook &&
           (hook == Hook::Tcx || current.tc_priority == kTcFilterPriority);
}

HookAttachment attach_hook(const Device& device, Hook hook, int prog_fd)
{
    HookAttachment attachment;
    attachment.hook = hook;
    attachment.tc_priority = kTcFilterPriority;
    if (hook == Hook::Tcx)
        attach_tcx(device.ifindex, prog_fd, link_pin(device), device.direction);
    else
        attachment.created_clsact =
            attach_filter(device.ifindex, prog_fd, kTcFilterPriority, device.direction);
    return attachment;
}

HookAttachment move_hook(const Device& device, const HookAttachment& from, Hook to,
                             int prog_fd)
{
    HookAttachment next = attach_hook(device, to, prog_fd);
    try {
        bool removed_clsact = false;
        if (from.hook == Hook::Tcx)
            detach_tcx(link_pin(device));
        else
            removed_clsact = detach_filter(device.ifindex, from.tc_priority,
                                                  from.created_clsact, device.direction);
        // A clsact we created that still holds others' filters stays ours to remove later.
        next.created_clsact = next.created_clsact || (from.created_clsact && !removed_clsact);
    } catch (...) {
        // Back to the old attachment alone: no packet charged twice.
        if (to == Hook::Tcx)
            detach_tcx(link_pin(device));
        else
            detach_filter(device.ifindex, next.tc_priority, next.created_clsact,
                                 device.direction);
        throw;
    }
    return next;
}

uint32_t hook_prog_id(const Device& device, const HookAttachment& attachment)
{
    if (attachment.hook == Hook::Tcx)
        return tcx_prog_id(link_pin(device), device.ifindex, device.direction);
    return filter_prog_id(device.ifindex, attachment.tc_priority, device.direction);
}

bool hook_gone(const Device& device, const HookAttachment& attachment, uint64_t here)
{
    const bool free_here = device.netns == here && device.current_name().empty();
    if (attachment.hook == Hook::Tcx)
        return tcx_link_defunct(link_pin(device)) && (device.netns != here || free_here);
    return free_here;
}

bool detach_hook(const Device& device, const HookAttachment& attachment)
{
    // Both kinds, whatever the record says: a move cut short may have left the other in place.
    detach_tcx(link_pin(device));
    return detach_filter(device.ifindex, attachment.tc_priority, attachment.created_clsact,
                                device.direction);
}

}  // namespace shaperctl
