#include "loader/bpffs.h"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"

namespace shaperctl {

void ensure_bpffs()
{
    struct statfs fs {};
    if (statfs("/sys/fs/bpf", &fs) == 0 && fs.f_type == BPF_FS_MAGIC)
        return;
    // `ip netns exec` gives its command a private mount namespace with a fresh /sys: a bpffs
    // mounted there would vanish, and the pins with it, when the command exits.
    struct stat self_ns {}, init_ns {};
    if (stat("/proc/self/ns/mnt", &self_ns) == 0 && stat("/proc/1/ns/mnt", &init_ns) == 0 &&
        self_ns.st_ino != init_ns.st_ino)
        throw Error("/sys/fs/bpf is not a BPF filesystem in this mount namespace (under `ip netns "
                    "exec`, use shaperctl --netns NAME instead)");
    mkdir("/sys/fs/bpf", 0700);
    if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
        throw Error(errno_message("cannot mount the BPF filesystem at /sys/fs/bpf", errno));
}

void make_private_dir(const std::string& path, const std::string& trusted_root)
{
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        partial = path.substr(0, pos);
        struct stat st {};
        if (lstat(partial.c_str(), &st) == 0) {
            if (S_ISLNK(st.st_mode) && partial.size() >= trusted_root.size())
                throw Error("refusing symlink in state path: " + partial);
            continue;
        }
        if (mkdir(partial.c_str(), 0700) && errno != EEXIST)
            throw Error(errno_message("cannot create " + partial, errno));
    }
}

void remove_tree(const std::string& path)
{
    for (const std::string& name : list_dir(path)) {
        std::string child = path + "/" + name;
        struct stat st {};
        if (lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(child);
        else
            unlink(child.c_str());
    }
    rmdir(path.c_str());
}

std::vector<std::string> list_dir(const std::string& path)
{
    std::vector<std::string> names;
    DIR* dir = opendir(path.c_str());
    if (!dir)
        return names;
    while (dirent* entry = readdir(dir)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..")
            names.push_back(name);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
}

bool path_exists(const std::string& path)
{
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
}

}  // namespace shaperctl
