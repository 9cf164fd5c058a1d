#include "loader/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace shaperctl {

std::string cgroup2_root()
{
    std::ifstream mounts("/proc/self/mounts");
    std::string line;
    while (std::getline(mounts, line)) {
        std::istringstream fields(line);
        std::string source, target, type;
        fields >> source >> target >> type;
        if (type == "cgroup2")
            return target;
    }
    return "";
}

CgroupRef resolve_cgroup(const std::string& path)
{
    const std::string root = cgroup2_root();
    if (root.empty())
        throw Error("no cgroup v2 hierarchy is mounted (--cgroup needs one)");
    if (path.find("..") != std::string::npos)
        throw Error("bad cgroup path \"" + path + "\": no .. allowed");
    std::string full = path;
    if (!(path.starts_with(root + "/") || path == root))
        full = root + (path.starts_with("/") ? "" : "/") + path;
    while (full.size() > root.size() && full.back() == '/')
        full.pop_back();
    struct statfs fs {};
    struct stat st {};
    if (statfs(full.c_str(), &fs) || stat(full.c_str(), &st) || !S_ISDIR(st.st_mode))
        throw Error("cgroup \"" + path + "\" does not exist (looked for " + full + ")");
    if (fs.f_type != CGROUP2_SUPER_MAGIC)
        throw Error("cgroup \"" + path + "\" is not on the cgroup v2 hierarchy");
    CgroupRef ref;
    ref.id = st.st_ino;  // cgroup2's inode number is the cgroup id on 64-bit kernels
    ref.path = full;
    for (size_t i = root.size(); i < full.size(); i++)
        if (full[i] == '/')
            ref.level++;
    return ref;
}

std::string cgroup_path_of(uint64_t id, uint32_t level)
{
    namespace fs = std::filesystem;
    const std::string root = cgroup2_root();
    if (root.empty())
        return "";
    struct stat st {};
    if (level == 0)
        return stat(root.c_str(), &st) == 0 && st.st_ino == id ? "/" : "";
    std::error_code ec;
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        if (!it->is_directory(ec))
            continue;
        const uint32_t depth = uint32_t(it.depth()) + 1;
        if (depth >= level)
            it.disable_recursion_pending();
        if (depth == level && stat(it->path().c_str(), &st) == 0 && st.st_ino == id)
            return it->path().string().substr(root.size());
    }
    return "";
}

const CgroupNames& host_cgroups()
{
    struct Host : CgroupNames {
        CgroupRef resolve(const std::string& path) const override { return resolve_cgroup(path); }
        std::string path_of(uint64_t id, uint32_t level) const override { return cgroup_path_of(id, level); }
    };
    static const Host host;
    return host;
}

}  // namespace shaperctl
