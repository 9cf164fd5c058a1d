// The BPF filesystem and shaperctl's private directories (pins under bpffs, records under /run).
#pragma once

#include <string>
#include <vector>

namespace shaperctl {

// Mounts bpffs at /sys/fs/bpf when nothing is mounted there (as Cilium does).
void ensure_bpffs();

// mkdir -p with mode 0700 for every component it creates; refuses a symlink anywhere below
// `trusted_root` (an attacker's link must not redirect pins or records).
void make_private_dir(const std::string& path, const std::string& trusted_root);

// Removes a directory and what it holds (one level of files or pins and empty subdirectories).
void remove_tree(const std::string& path);

// Subdirectories' names, sorted; empty when the directory does not exist.
std::vector<std::string> list_dir(const std::string& path);

bool path_exists(const std::string& path);

}  // namespace shaperctl
