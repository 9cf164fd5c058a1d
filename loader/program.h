// The BPF object: shaper.bpf.c loaded through its bpftool skeleton.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

struct shaper_bpf;

namespace shaperctl {

struct ProgramOptions {
    std::string pin_dir;  // bpffs directory for the maps (reused when already pinned); "" = none
    uint32_t max_classes = 0;  // 0: SHAPER_DEFAULT_MAX_CLASSES (or the pinned maps' size)
    // Bytes before the network header: 14 on Ethernet, 0 on tun-like devices, or
    // SHAPER_L2_AT_NETWORK_HEADER (read from the kernel's network header: any other device).
    uint32_t l2_header_len = 14;
    bool ingress = false;  // the device's receive side: verdicts instead of departure times
    // ACK pacing's table (bpf/ack_pace.h), shared by the device's two sides: reused from this
    // pin when there is one, else made and pinned there ("": the program's own, unpinned), or
    // another program's map by fd (>= 0; tests).
    std::string ack_pace_pin;
    int ack_pace_fd = -1;
    // Tests: every packet is taken for a local socket's, which fair shares may hold rather
    // than drop (BPF_PROG_TEST_RUN's packets have no such socket).
    bool every_packet_local = false;
    bool every_packet_forwarded = false;  // Tests: every packet taken for one no socket sent
    bool every_packet_kept = false;  // Tests: every packet taken for a local TCP socket's on its device
};

class Program {
public:
    // Opens, sizes and loads the skeleton. Throws Error with a one-line reason.
    static Program load(const ProgramOptions& options);

    Program(Program&&) noexcept;
    Program& operator=(Program&&) noexcept;
    ~Program();

    int prog_fd() const;
    int settings_fd() const;
    int class_config_fd() const;
    int class_entries_fd() const;  // shaper_classes
    int class_stats_fd() const;
    int map_fd(const char* name) const;  // any of the object's maps, by name
    // fn(fd) for each map the program writes as it runs (not its read-only constants).
    void for_each_writable_map(const std::function<void(int fd)>& fn) const;
    bool uses_set_tstamp() const;
    // Opens (true) or closes the ACK pacing table's gate: the ingress side is attached.
    void set_ack_pacing(bool on) const;

private:
    explicit Program(shaper_bpf* skel) : skel_(skel) {}
    shaper_bpf* skel_ = nullptr;
};

// The program's pin in a side's pin directory, beside its maps, and the name builds before the
// program served both sides pinned it under (read where no pin of today's name is there).
constexpr const char* kProgramPin = "shaper";
constexpr const char* kOlderProgramPin = "shaper_egress";

// Pins the program in pin_dir under kProgramPin, in place of an older build's pin of either
// name (the hook holds its own reference to the program it runs).
void pin_program(int prog_fd, const std::string& pin_dir);
// The id of the program pinned in pin_dir, under either name; 0 when none is pinned.
uint32_t pinned_prog_id(const std::string& pin_dir);

// The class capacity of the maps pinned in pin_dir (fixed when they were made); 0: none pinned.
uint32_t pinned_max_classes(const std::string& pin_dir);

// Whether the running program `running_id` is the one loaded as `prog_fd` (same instructions).
bool runs_same_program(uint32_t running_id, int prog_fd);
// A program's tag as bpftool prints it (which build runs); "" if the program is gone.
std::string prog_tag_hex(uint32_t prog_id);

}  // namespace shaperctl
