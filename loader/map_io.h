// Syscalls on pinned maps with one-line errors naming what failed: the class maps (maps.cpp)
// and the rule maps (maps_rules.cpp) both go through these.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "loader/fd.h"

namespace shaperctl {

inline Fd open_pin(const std::string& path)
{
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0)
        throw Error(errno_message("cannot open pinned map " + path, errno));
    return Fd(fd);
}

inline bpf_map_info map_info(int fd)
{
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len))
        throw Error(errno_message("cannot read map info", errno));
    return info;
}

inline uint32_t max_entries(int fd)
{
    return map_info(fd).max_entries;
}

inline void lookup(int fd, uint32_t key, void* value, const char* what)
{
    if (bpf_map_lookup_elem(fd, &key, value))
        throw Error(errno_message(std::string("cannot read ") + what + " " + std::to_string(key),
                                  errno));
}

inline void update(int fd, uint32_t key, const void* value, const char* what)
{
    if (bpf_map_update_elem(fd, &key, value, BPF_ANY))
        throw Error(errno_message(std::string("cannot write ") + what + " " + std::to_string(key),
                                  errno));
}

}  // namespace shaperctl
