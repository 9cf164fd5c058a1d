#include "loader/kernel_features.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <linux/bpf.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <memory>
#include <utility>

#include "core/error.h"
#include "loader/fd.h"

namespace shaperctl {
namespace {

constexpr bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
    return bpf_insn{.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}
constexpr bpf_insn mov(uint8_t dst, int32_t imm) { return insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
constexpr bpf_insn exit_insn() { return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
// *(u64 *)(r10 - 8) = src
constexpr bpf_insn spill(uint8_t src) { return insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, src, -8, 0); }
// The atomic `op` on the u64 at r10 - 8, with r1.
constexpr bpf_insn atomic(int32_t op) { return insn(BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_10, BPF_REG_1, -8, op); }

// 1 when the kernel loads the program, 0 when it refuses it as invalid, else -errno.
int loads(const bpf_insn* insns, size_t count, const bpf_prog_load_opts* opts = nullptr)
{
    const int fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, nullptr, "GPL", insns, count, opts);
    if (fd < 0)
        return fd == -EINVAL ? 0 : fd;
    Fd owned(fd);
    return 1;
}

// r0 = 0; r1 = 1; *(u64 *)(fp - 8) = r0; the atomic; r0 = 0; exit. cmpxchg compares with r0.
int atomic_loads(int32_t op)
{
    const bpf_insn prog[] = {mov(BPF_REG_0, 0), mov(BPF_REG_1, 1), spill(BPF_REG_0), atomic(op),
                             mov(BPF_REG_0, 0), exit_insn()};
    return loads(prog, std::size(prog));
}

int probe_fetch_add() { return atomic_loads(BPF_ADD | BPF_FETCH); }
int probe_cmpxchg() { return atomic_loads(BPF_CMPXCHG); }
int probe_xchg() { return atomic_loads(BPF_XCHG); }

// A global function `int f(int *p)` called with a pointer to the caller's stack: the kernel
// checks such a function once, on its own, knowing only its BTF signature.
int probe_global_pointer_argument()
{
    std::unique_ptr<btf, decltype(&btf__free)> types(btf__new_empty(), btf__free);
    if (!types)
        return -ENOMEM;
    btf* t = types.get();
    const int int_id = btf__add_int(t, "int", 4, BTF_INT_SIGNED);
    const int ptr_id = btf__add_ptr(t, int_id);
    const int main_proto = btf__add_func_proto(t, int_id);
    const int main_id = btf__add_func(t, "probe_main", BTF_FUNC_GLOBAL, main_proto);
    const int callee_proto = btf__add_func_proto(t, int_id);
    const int param = btf__add_func_param(t, "p", ptr_id);
    const int callee_id = btf__add_func(t, "probe_callee", BTF_FUNC_GLOBAL, callee_proto);
    if (int_id < 0 || ptr_id < 0 || main_proto < 0 || main_id < 0 || callee_proto < 0 || param < 0 ||
        callee_id < 0)
        return -EINVAL;
    if (int err = btf__load_into_kernel(t))
        return err < 0 ? err : -err;  // no BTF here: the real load will say so

    const bpf_insn prog[] = {
        mov(BPF_REG_1, 0), spill(BPF_REG_1),
        insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_10, 0, 0),
        insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, -8),
        insn(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, 2),  // probe_callee, at 7
        mov(BPF_REG_0, 0), exit_insn(),
        mov(BPF_REG_0, 0), exit_insn(),
    };
    const bpf_func_info funcs[] = {{0, static_cast<uint32_t>(main_id)}, {7, static_cast<uint32_t>(callee_id)}};
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_btf_fd = static_cast<uint32_t>(btf__fd(t)),
                .func_info = funcs, .func_info_cnt = std::size(funcs),
                .func_info_rec_size = sizeof(bpf_func_info));
    return loads(prog, std::size(prog), &opts);
}

// "5.12" -> 5012, for ordering.
int version_key(const char* version)
{
    int major = 0, minor = 0;
    std::sscanf(version, "%d.%d", &major, &minor);
    return major * 1000 + minor;
}

}  // namespace

const std::vector<KernelFeature>& datapath_features()
{
    // The class clocks move by these (edt.h, sparse.h, fair.h); the parser and the rule search
    // are global functions taking the packet's fields by pointer (parse.h, classify.h).
    static const std::vector<KernelFeature> features = {
        {"BPF atomic fetch-and-add", "5.12", probe_fetch_add},
        {"BPF atomic compare-and-exchange", "5.12", probe_cmpxchg},
        {"BPF atomic exchange", "5.12", probe_xchg},
        {"pointer arguments to BPF global functions", "5.12", probe_global_pointer_argument},
    };
    return features;
}

std::vector<const KernelFeature*> missing_features(const std::vector<KernelFeature>& features)
{
    std::vector<const KernelFeature*> missing;
    for (const KernelFeature& f : features)
        if (f.probe() == 0)
            missing.push_back(&f);
    return missing;
}

std::string lacking_sentence(const std::string& release, const std::vector<const KernelFeature*>& missing)
{
    if (missing.empty())
        return {};
    // Names grouped by the version that brought them, oldest first: "A, B and C (5.12+)".
    std::vector<std::pair<int, std::vector<const KernelFeature*>>> groups;
    for (const KernelFeature* f : missing) {
        auto group = std::find_if(groups.begin(), groups.end(),
                                  [&](const auto& g) { return g.first == version_key(f->since); });
        if (group == groups.end())
            group = groups.insert(groups.end(), {version_key(f->since), {}});
        group->second.push_back(f);
    }
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string out = "this kernel (" + release + ") lacks ";
    for (size_t g = 0; g < groups.size(); g++) {
        const auto& names = groups[g].second;
        for (size_t i = 0; i < names.size(); i++)
            out += std::string(i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i]->name;
        out += std::string(" (") + names.front()->since + "+)" + (g + 1 < groups.size() ? ", " : "");
    }
    return out;
}

std::string version_needed(const std::vector<const KernelFeature*>& missing)
{
    const KernelFeature* newest = nullptr;
    for (const KernelFeature* f : missing)
        if (!newest || version_key(f->since) > version_key(newest->since))
            newest = f;
    return newest ? newest->since : "";
}

std::string kernel_release()
{
    utsname uts{};
    uname(&uts);
    return uts.release;
}

void require_datapath_features()
{
    // One kernel per process: probe once.
    static const std::vector<const KernelFeature*> missing = missing_features(datapath_features());
    if (!missing.empty())
        throw Error(lacking_sentence(kernel_release(), missing));
}

}  // namespace shaperctl
