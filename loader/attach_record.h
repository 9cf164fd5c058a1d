// What attach did to a device, kept under /run so that detach can undo exactly that.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loader/hook.h"
#include "loader/qdisc.h"

namespace shaperctl {

// The record's file name in a device side's run directory (Device::run_dir).
inline constexpr const char* kRecordFile = "attach.json";

struct AttachRecord {
    std::string device;  // the name at attach time
    int ifindex = 0;
    uint64_t netns = 0;
    uint32_t mode = 0;   // enum shaper_mode
    FqOptions fq;
    bool installed_fq = false;
    std::optional<Qdisc> prior_root;  // the root qdisc before attach
    HookAttachment attachment;          // where the program runs, and whether we created clsact
    Direction direction = Direction::Egress;  // the side it shapes
    // A send side attached by its receive side's attach, to pace that side's ACKs (no class):
    // the receive side's detach takes it away again. An attach of the side itself clears it.
    bool for_ack_pacing = false;

    void save(const std::string& path) const;
    static std::optional<AttachRecord> load(const std::string& path);  // nullopt: none
};

}  // namespace shaperctl
