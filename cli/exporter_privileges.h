// The exporter's capabilities, cut down once it holds what only start-up opens (the listening
// socket, the network namespace of -n).
#pragma once

#include <vector>

namespace shaperctl {

// Keeps those of `keep` the process has, in its effective and permitted sets, and clears every
// other capability: effective, permitted, inheritable, ambient, and the bounding set when the
// process may change it (CAP_SETPCAP); then sets no_new_privs, so that no exec gains any back.
// Capabilities belong to threads: call it before the process starts any. Error if the kernel
// refuses.
void keep_only_capabilities(const std::vector<int>& keep);

// Whether this kernel knows capability `cap` (CAP_BPF arrived in Linux 5.8).
bool kernel_knows_capability(int cap);

}  // namespace shaperctl
