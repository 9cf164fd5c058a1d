// How files and rules name cgroups: a path on the cgroup2 hierarchy, mapped to the id and level
// the datapath matches on. The model only asks; loader/cgroup.h answers from this machine's
// hierarchy (host_cgroups()), and a test or the fuzzer passes its own, so that parsing never
// touches the filesystem.
#pragma once

#include <cstdint>
#include <string>

namespace shaperctl {

struct CgroupRef {
    uint64_t id = 0;     // what bpf_skb_ancestor_cgroup_id() returns for it
    uint32_t level = 0;  // depth below the cgroup2 root (the root is 0)
    std::string path;    // absolute filesystem path
};

class CgroupNames {
public:
    virtual ~CgroupNames() = default;
    // Error when there is no such cgroup.
    virtual CgroupRef resolve(const std::string& path) const = 0;
    // The path of a cgroup id at a level, "" when none is found.
    virtual std::string path_of(uint64_t id, uint32_t level) const = 0;
};

}  // namespace shaperctl
