#include "loader/program.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "loader/fd.h"
#include "loader/kernel_features.h"
#include "loader/libbpf_log.h"
#include "shaper.skel.h"
#include "shaper_abi.h"

namespace shaperctl {
namespace {

// The info of the map pinned at `path`; all zeros where there is none.
bpf_map_info pinned_map_info(const std::string& path)
{
    bpf_map_info info{};
    const int fd = path.empty() ? -1 : bpf_obj_get(path.c_str());
    if (fd < 0)
        return info;
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len))
        info = bpf_map_info{};
    ::close(fd);
    return info;
}

// Existing pinned maps fix the class capacity: libbpf only reuses a pin of identical shape.
uint32_t pinned_max_entries(const std::string& pin_dir, const char* map_name)
{
    return pin_dir.empty() ? 0 : pinned_map_info(pin_dir + "/" + map_name).max_entries;
}

// Pinned maps of another map format (an older shaperctl) cannot be reused: say so plainly
// instead of libbpf's "parameter mismatch". Settings keep one layout across versions.
void check_pinned_abi(const std::string& pin_dir)
{
    if (pin_dir.empty())
        return;
    int fd = bpf_obj_get((pin_dir + "/shaper_settings").c_str());
    if (fd < 0)
        return;
    shaper_settings settings{};
    const uint32_t key = 0;
    const int err = bpf_map_lookup_elem(fd, &key, &settings);
    ::close(fd);
    if (!err && settings.abi_version && settings.abi_version != SHAPER_ABI_VERSION)
        throw Error("the device was attached by a shaperctl with map format " +
                    std::to_string(settings.abi_version) + "; this one uses format " +
                    std::to_string(SHAPER_ABI_VERSION) +
                    ": save it with `shaperctl dump`, detach it, then attach (or apply) again");
}

// The ACK pacing table the device's other side made: of this build's format, or say which side
// to attach again (its record grew with the format: bpf/ack_pace.h).
void check_pinned_ack_pace(const std::string& pin)
{
    const uint32_t value_size = pinned_map_info(pin).value_size;
    if (value_size && value_size != sizeof(shaper_ack_pace))
        throw Error("the device's other side was attached by a shaperctl with another map format: "
                    "save it with `shaperctl dump`, detach it, then attach (or apply) both sides again");
}

std::string load_failure(int err)
{
    if (err == -EPERM)
        return "loading the BPF program was refused: run as root (CAP_BPF, CAP_NET_ADMIN)";
    std::string msg = errno_message("loading the BPF program failed", err);
    if (std::string verifier = verifier_log_summary(); !verifier.empty())
        return msg + verifier;
    std::string detail = last_libbpf_message();
    return detail.empty() ? msg : msg + " (libbpf: " + detail + ")";
}

}  // namespace

Program Program::load(const ProgramOptions& options)
{
    quiet_libbpf();
    // A kernel without a feature the program needs is named in a sentence, not an errno.
    require_datapath_features();
    forget_verifier_log();
    LIBBPF_OPTS(bpf_object_open_opts, open_opts);
    if (!options.pin_dir.empty())
        open_opts.pin_root_path = options.pin_dir.c_str();

    check_pinned_abi(options.pin_dir);
    check_pinned_ack_pace(options.ack_pace_pin);
    shaper_bpf* skel = shaper_bpf__open_opts(&open_opts);
    if (!skel)
        throw Error(load_failure(-errno));
    Program program(skel);

    uint32_t classes = pinned_max_entries(options.pin_dir, "shaper_class_config");
    if (!classes)
        classes = options.max_classes ? options.max_classes : SHAPER_DEFAULT_MAX_CLASSES;
    for (bpf_map* map : {skel->maps.shaper_class_config, skel->maps.shaper_classes,
                         skel->maps.shaper_class_aqm})
        bpf_map__set_max_entries(map, classes);
    // Each CPU's counters of every class (bpf/stats.h).
    const uint64_t counter_sets = uint64_t(classes) * uint64_t(libbpf_num_possible_cpus());
    if (counter_sets > UINT32_MAX)
        throw Error(std::to_string(classes) + " classes on " + std::to_string(libbpf_num_possible_cpus()) +
                    " CPUs need more counter sets than a map holds: use fewer --max-classes");
    bpf_map__set_max_entries(skel->maps.shaper_class_stats, uint32_t(counter_sets));
    skel->rodata->stats_classes = classes;
    if (options.pin_dir.empty()) {
        bpf_map* map;
        bpf_object__for_each_map(map, skel->obj)
            if (!bpf_map__is_internal(map))
                bpf_map__set_pin_path(map, nullptr);
    }
    if (!options.ack_pace_pin.empty())
        bpf_map__set_pin_path(skel->maps.shaper_ack_pace, options.ack_pace_pin.c_str());
    if (options.ack_pace_fd >= 0 && bpf_map__reuse_fd(skel->maps.shaper_ack_pace, options.ack_pace_fd))
        throw Error(errno_message("cannot share the ACK pacing table", errno));
    skel->rodata->l2_header_len = options.l2_header_len;
    skel->rodata->ingress = options.ingress;
    skel->rodata->every_packet_local = options.every_packet_local;
    skel->rodata->every_packet_forwarded = options.every_packet_forwarded;
    skel->rodata->every_packet_kept = options.every_packet_kept;
    // Probe, don't assume: bpf_skb_set_tstamp arrived in 5.18.
    skel->rodata->have_set_tstamp =
        libbpf_probe_bpf_helper(BPF_PROG_TYPE_SCHED_CLS, BPF_FUNC_skb_set_tstamp, nullptr) == 1;

    if (int err = shaper_bpf__load(skel))
        throw Error(load_failure(err));
    return program;
}

Program::Program(Program&& other) noexcept : skel_(std::exchange(other.skel_, nullptr)) {}

Program& Program::operator=(Program&& other) noexcept
{
    if (this != &other) {
        if (skel_)
            shaper_bpf__destroy(skel_);
        skel_ = std::exchange(other.skel_, nullptr);
    }
    return *this;
}

Program::~Program()
{
    if (skel_)
        shaper_bpf__destroy(skel_);
}

int Program::prog_fd() const { return bpf_program__fd(skel_->progs.shaper); }
int Program::settings_fd() const { return bpf_map__fd(skel_->maps.shaper_settings); }
int Program::class_config_fd() const { return bpf_map__fd(skel_->maps.shaper_class_config); }
int Program::class_entries_fd() const { return bpf_map__fd(skel_->maps.shaper_classes); }
int Program::class_stats_fd() const { return bpf_map__fd(skel_->maps.shaper_class_stats); }
int Program::map_fd(const char* name) const
{
    return bpf_object__find_map_fd_by_name(skel_->obj, name);
}

void Program::for_each_writable_map(const std::function<void(int fd)>& fn) const
{
    bpf_map* map;
    bpf_object__for_each_map(map, skel_->obj)
        if (!(bpf_map__map_flags(map) & BPF_F_RDONLY_PROG))
            fn(bpf_map__fd(map));
}

bool Program::uses_set_tstamp() const { return skel_->rodata->have_set_tstamp; }

void Program::set_ack_pacing(bool on) const
{
    const uint32_t gate = 0;
    shaper_ack_pace value{};
    value.until_ns = on ? 1u : 0u;
    if (bpf_map_update_elem(map_fd("shaper_ack_pace"), &gate, &value, BPF_ANY))
        throw Error(errno_message("cannot update the ACK pacing table", errno));
}

uint32_t pinned_max_classes(const std::string& pin_dir)
{
    return pinned_max_entries(pin_dir, "shaper_class_config");
}

namespace {

std::array<uint8_t, BPF_TAG_SIZE> prog_tag(int prog_fd)
{
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    std::array<uint8_t, BPF_TAG_SIZE> tag{};
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0)
        std::memcpy(tag.data(), info.tag, tag.size());
    return tag;
}

}  // namespace

bool runs_same_program(uint32_t running_id, int prog_fd)
{
    Fd running(bpf_prog_get_fd_by_id(running_id));
    return running && prog_tag(running.get()) == prog_tag(prog_fd);
}

// As bpftool prints it; "" if the program is gone.
std::string prog_tag_hex(uint32_t prog_id)
{
    Fd prog(bpf_prog_get_fd_by_id(prog_id));
    if (!prog)
        return "";
    std::string hex;
    for (uint8_t byte : prog_tag(prog.get())) {
        hex += "0123456789abcdef"[byte >> 4];
        hex += "0123456789abcdef"[byte & 15];
    }
    return hex;
}

void pin_program(int prog_fd, const std::string& pin_dir)
{
    const std::string path = pin_dir + "/" + kProgramPin;
    unlink(path.c_str());
    unlink((pin_dir + "/" + kOlderProgramPin).c_str());
    if (bpf_obj_pin(prog_fd, path.c_str()))
        throw Error(errno_message("cannot pin the program at " + path, errno));
}

uint32_t pinned_prog_id(const std::string& pin_dir)
{
    for (const char* name : {kProgramPin, kOlderProgramPin}) {
        Fd prog(bpf_obj_get((pin_dir + "/" + name).c_str()));
        if (!prog)
            continue;
        bpf_prog_info info{};
        uint32_t len = sizeof info;
        return bpf_obj_get_info_by_fd(prog.get(), &info, &len) ? 0 : info.id;
    }
    return 0;
}

}  // namespace shaperctl
