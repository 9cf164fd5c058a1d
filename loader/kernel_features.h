// The BPF features the datapath needs that not every kernel in use has, each probed by loading
// a program of a few instructions that uses it: what the kernel accepts, not what its version
// string suggests (distributions backport). A kernel lacking one is refused in a sentence naming
// the features and the first kernel version that has them, before the real program is loaded.
#pragma once

#include <string>
#include <vector>

namespace shaperctl {

struct KernelFeature {
    const char* name;   // "BPF atomic fetch-and-add"
    const char* since;  // the first Linux version that has it: "5.12"
    // 1: present, 0: missing (the kernel refused the probe as invalid), negative errno: the probe
    // could not tell (no privileges, say); the real load then speaks for itself.
    int (*probe)();
};

// What shaper.bpf.c uses beyond what every kernel with BPF, BTF and tc clsact has.
const std::vector<KernelFeature>& datapath_features();

// The features whose probe says missing.
std::vector<const KernelFeature*> missing_features(const std::vector<KernelFeature>& features);

// "this kernel (RELEASE) lacks A and B (5.12+)": grouped by the version that brought them,
// oldest first. "" when nothing is missing.
std::string lacking_sentence(const std::string& release, const std::vector<const KernelFeature*>& missing);

// The newest of the versions the missing features need ("" when none is missing).
std::string version_needed(const std::vector<const KernelFeature*>& missing);

// uname's release.
std::string kernel_release();

// Probes the datapath's features; throws Error(lacking_sentence) when one is missing.
void require_datapath_features();

}  // namespace shaperctl
