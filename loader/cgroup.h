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

// The cgroup v2 path (relative to the cgroup2 mount, "/a/b") of a cgroup id at a level, "" when
// none is found.
std::string cgroup_path_of(uint64_t id, uint32_t level);

// How files and rules name cgroups: by path, each one mapped to the id and level the rules match on.
// host_cgroups() looks them up on this machine's cgroup2 hierarchy; a test or the fuzzer passes
// its own so that parsing never touches the filesystem.
class CgroupNames {
public:
    virtual ~CgroupNames() = default;
    // Error when there is no such cgroup.
    virtual CgroupRef resolve(const std::string& path) const = 0;
    // The path of a cgroup id at a level, "" when none is found.
    virtual std::string path_of(uint64_t id, uint32_t level) const = 0;
};
const CgroupNames& host_cgroups();  // resolve_cgroup() and cgroup_path_of()

}  // namespace shaperctl
