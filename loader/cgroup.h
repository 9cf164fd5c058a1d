// cgroup v2 paths as rules name them.
#pragma once

#include <cstdint>
#include <string>

namespace shaperctl {

struct CgroupRef {
    uint64_t id = 0;     // what bpf_skb_ancestor_cgroup_id() returns for it
    uint32_t level = 0;  // depth below the cgroup2 root (the root is 0)
    std::string path;    // absolute filesystem path
};

// PATH is a directory on the cgroup2 hierarchy, absolute ("/sys/fs/cgroup/a/b") or relative to
// its mount point ("/a/b", "a/b"). Error when it does not exist.
CgroupRef resolve_cgroup(const std::string& path);

// The cgroup2 mount point, "" when none is mounted.
std::string cgroup2_root();

}  // namespace shaperctl
