#include "exporter_privileges.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace shaperctl {

bool kernel_knows_capability(int cap)
{
    return prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0;
}

void keep_only_capabilities(const std::vector<int>& keep)
{
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data))
        throw Error(errno_message("cannot read the process capabilities", errno));
    const uint64_t permitted = data[0].permitted | uint64_t(data[1].permitted) << 32;
    uint64_t kept = 0;
    for (int cap : keep)
        kept |= uint64_t(1) << cap;
    kept &= permitted;

    // The bounding set first: changing it takes CAP_SETPCAP, dropped below.
    if (permitted >> CAP_SETPCAP & 1)
        for (int cap = 0; kernel_knows_capability(cap); cap++)
            if (!(kept >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
                throw Error(errno_message("cannot drop capability " + std::to_string(cap) + " from the bounding set", errno));
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0))
        throw Error(errno_message("cannot clear the ambient capabilities", errno));
    for (int i = 0; i < 2; i++) {
        data[i].effective = data[i].permitted = uint32_t(kept >> (32 * i));
        data[i].inheritable = 0;
    }
    if (syscall(SYS_capset, &header, data))
        throw Error(errno_message("cannot drop capabilities", errno));
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        throw Error(errno_message("cannot set no_new_privs", errno));
}

}  // namespace shaperctl
