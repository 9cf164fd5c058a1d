#include "loader/tcx_link.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"
#include "loader/fd.h"

namespace shaperctl {
namespace {

// linux/bpf.h of 6.6+ (Debian 12's uapi headers predate them); the numbers are kernel ABI.
constexpr auto kTcxIngress = static_cast<bpf_attach_type>(46);  // BPF_TCX_INGRESS
constexpr auto kTcxEgress = static_cast<bpf_attach_type>(47);   // BPF_TCX_EGRESS
constexpr uint32_t kLinkTypeTcx = 11;                          // BPF_LINK_TYPE_TCX

// The head of struct bpf_link_info and its `tcx` member, as 6.6+ fill them for a TCX link.
struct TcxLinkInfo {
    uint32_t type, id, prog_id;
    uint32_t pad;  // the union that follows is 8-byte aligned
    uint32_t ifindex, attach_type;
};

Fd open_link(const std::string& pin_path)
{
    return Fd(bpf_obj_get(pin_path.c_str()));
}

// Where the link runs: a detached link reports ifindex 0.
TcxLinkInfo link_info(int link_fd)
{
    TcxLinkInfo info{};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(link_fd, &info, &len) || info.type != kLinkTypeTcx)
        return TcxLinkInfo{};
    return info;
}

bpf_attach_type tcx_attach_type(Direction side)
{
    return side == Direction::Ingress ? kTcxIngress : kTcxEgress;
}

bool on_device(const TcxLinkInfo& info, int ifindex, Direction side)
{
    return info.prog_id && info.ifindex == uint32_t(ifindex) &&
           info.attach_type == uint32_t(tcx_attach_type(side));
}

}  // namespace

bool kernel_has_tcx()
{
    static const bool has = [] {
        // r0 = -1; exit: the smallest tc program.
        const bpf_insn insns[] = {
            {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, -1},
            {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
        };
        Fd prog(bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "tcx_probe", "GPL", insns, 2, nullptr));
        if (!prog)
            return false;
        // No device has ifindex 0: a kernel with TCX gets as far as looking it up (ENODEV),
        // an older one refuses the attach type first (EINVAL). Nothing is attached either way.
        Fd link(bpf_link_create(prog.get(), 0, kTcxEgress, nullptr));
        return !link && errno == ENODEV;
    }();
    return has;
}

void attach_tcx(int ifindex, int prog_fd, const std::string& pin_path, Direction side)
{
    if (Fd old = open_link(pin_path)) {
        if (on_device(link_info(old.get()), ifindex, side)) {
            replace_tcx_program(pin_path, prog_fd);
            return;
        }
        unlink(pin_path.c_str());  // a link someone detached: it runs nowhere
    }
    // No flags, no anchor: appended, after the programs attached before us (which keep their
    // place); we end no chain, so those attached after us run too.
    Fd link(bpf_link_create(prog_fd, ifindex, tcx_attach_type(side), nullptr));
    if (!link)
        throw Error(errno_message(std::string("cannot attach the program on tcx ") +
                                      direction_name(side), errno));
    if (bpf_obj_pin(link.get(), pin_path.c_str()))
        throw Error(errno_message("cannot pin the tcx link at " + pin_path, errno));
}

void replace_tcx_program(const std::string& pin_path, int prog_fd)
{
    Fd link = open_link(pin_path);
    if (!link)
        throw Error(errno_message("cannot open the tcx link " + pin_path, errno));
    if (bpf_link_update(link.get(), prog_fd, nullptr))
        throw Error(errno_message("cannot replace the program of the tcx link " + pin_path, errno));
}

uint32_t tcx_prog_id(const std::string& pin_path, int ifindex, Direction side)
{
    Fd link = open_link(pin_path);
    if (!link)
        return 0;
    const TcxLinkInfo info = link_info(link.get());
    return on_device(info, ifindex, side) ? info.prog_id : 0;
}

bool tcx_link_defunct(const std::string& pin_path)
{
    Fd link = open_link(pin_path);
    if (!link)
        return false;
    const TcxLinkInfo info = link_info(link.get());  // all zeros when it cannot be read
    return info.type == kLinkTypeTcx && info.ifindex == 0;
}

void detach_tcx(const std::string& pin_path)
{
    Fd link = open_link(pin_path);
    if (!link)
        return;
    // Detached first: whoever else holds the link (a crashed command's fd, say) holds it off
    // the device.
    if (bpf_link_detach(link.get()) && errno != ENOLINK && errno != EINVAL)
        throw Error(errno_message("cannot detach the tcx link " + pin_path, errno));
    unlink(pin_path.c_str());
}

}  // namespace shaperctl
