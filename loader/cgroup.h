// cgroup v2 paths as rules name them, looked up on this machine's cgroup2 hierarchy.
#pragma once

#include <cstdint>
#include <string>

#include "core/cgroup_names.h"

namespace shaperctl {

// PATH is a directory on the cgroup2 hierarchy, absolute ("/sys/fs/cgroup/a/b") or relative to
// its mount point ("/a/b", "a/b"). Error when it does not exist.
CgroupRef resolve_cgroup(const std::string& path);

// The cgroup2 mount point, "" when none is mounted.
std::string cgroup2_root();

// The cgroup v2 path (relative to the cgroup2 mount, "/a/b") of a cgroup id at a level, "" when
// none is found.
std::string cgroup_path_of(uint64_t id, uint32_t level);

const CgroupNames& host_cgroups();  // resolve_cgroup() and cgroup_path_of()

}  // namespace shaperctl
