#include "loader/egress_hook.h"

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

const char* attach_point_name(EgressHook hook, Direction side)
{
    if (side == Direction::Ingress)
        return hook == EgressHook::Tcx ? "tcx ingress" : "tc clsact ingress";
    return hook == EgressHook::Tcx ? "tcx egress" : "tc clsact egress";
}

const char* hook_key(EgressHook hook)
{
    return hook == EgressHook::Tcx ? "tcx" : "tc";
}

EgressHook chosen_egress_hook()
{
    const char* env = std::getenv("SHAPERCTL_ATTACH");
    const std::string choice = env ? env : "";
    if (choice == "tc")
        return EgressHook::TcClsact;
    if (!choice.empty() && choice != "tcx")
        throw Error("bad SHAPERCTL_ATTACH \"" + choice + "\" (use tc or tcx, or leave it unset)");
    if (kernel_has_tcx())
        return EgressHook::Tcx;
    if (choice == "tcx") {
        utsname uts{};
        uname(&uts);
        throw Error(std::string("SHAPERCTL_ATTACH=tcx: this kernel (") + uts.release +
                    ") has no TCX (6.6+); unset it to attach on tc clsact");
    }
    return EgressHook::TcClsact;
}

bool is_current(const EgressAttachment& current, EgressHook hook)
{
    return current.hook == hook &&
           (hook == EgressHook::Tcx || current.tc_priority == kTcFilterPriority);
}

EgressAttachment attach_egress(const Device& device, EgressHook hook, int prog_fd)
{
    EgressAttachment attachment;
    attachment.hook = hook;
    attachment.tc_priority = kTcFilterPriority;
    if (hook == EgressHook::Tcx)
        attach_tcx_egress(device.ifindex, prog_fd, link_pin(device), device.direction);
    else
        attachment.created_clsact =
            attach_egress_filter(device.ifindex, prog_fd, kTcFilterPriority, device.direction);
    return attachment;
}

EgressAttachment move_egress(const Device& device, const EgressAttachment& from, EgressHook to,
                             int prog_fd)
{
    EgressAttachment next = attach_egress(device, to, prog_fd);
    try {
        bool removed_clsact = false;
        if (from.hook == EgressHook::Tcx)
            detach_tcx_egress(link_pin(device));
        else
            removed_clsact = detach_egress_filter(device.ifindex, from.tc_priority,
                                                  from.created_clsact, device.direction);
        // A clsact we created that still holds others' filters stays ours to remove later.
        next.created_clsact = next.created_clsact || (from.created_clsact && !removed_clsact);
    } catch (...) {
        // Back to the old attachment alone: no packet charged twice.
        if (to == EgressHook::Tcx)
            detach_tcx_egress(link_pin(device));
        else
            detach_egress_filter(device.ifindex, next.tc_priority, next.created_clsact,
                                 device.direction);
        throw;
    }
    return next;
}

uint32_t egress_prog_id(const Device& device, const EgressAttachment& attachment)
{
    if (attachment.hook == EgressHook::Tcx)
        return tcx_egress_prog_id(link_pin(device), device.ifindex, device.direction);
    return egress_filter_prog_id(device.ifindex, attachment.tc_priority, device.direction);
}

bool egress_gone(const Device& device, const EgressAttachment& attachment, uint64_t here)
{
    const bool free_here = device.netns == here && device.current_name().empty();
    if (attachment.hook == EgressHook::Tcx)
        return tcx_link_defunct(link_pin(device)) && (device.netns != here || free_here);
    return free_here;
}

bool detach_egress(const Device& device, const EgressAttachment& attachment)
{
    // Both kinds, whatever the record says: a move cut short may have left the other in place.
    detach_tcx_egress(link_pin(device));
    return detach_egress_filter(device.ifindex, attachment.tc_priority, attachment.created_clsact,
                                device.direction);
}

}  // namespace shaperctl
