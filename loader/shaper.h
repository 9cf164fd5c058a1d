// The library's front door: one device's shaper, its classes and its status. Every call is
// complete in itself (each CLI command is its own process); the state lives in pinned maps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loader/attach_record.h"
#include "core/class_config.h"
#include "core/config_check.h"
#include "core/plan.h"
#include "loader/device.h"
#include "loader/fd.h"
#include "loader/maps.h"
#include "core/mode.h"
#include "loader/qdisc.h"

namespace shaperctl {

// Which fq options the operator gave: attaching a device already attached (edt mode) changes
// those in place and keeps the others.
struct FqOptionsGiven {
    bool horizon = false, flow_limit = false, limit = false;
    bool any() const { return horizon || flow_limit || limit; }
};

// Whether two sets of fq options configure sch_fq alike.
bool same_fq(const FqOptions& a, const FqOptions& b);

struct AttachOptions {
    uint32_t mode = SHAPER_MODE_EDT;
    FqOptions fq;
    FqOptionsGiven fq_given;
    uint32_t max_classes = 0;  // 0: SHAPER_DEFAULT_MAX_CLASSES, or what the device has
    Direction direction = Direction::Egress;  // ingress: police mode, no fq, verdicts by CoDel
    // Ingress: the device's send side too, in edt mode with no class, where it is not attached
    // and sch_fq exists, so that the receiver's ACKs are paced (bpf/ack_pace.h). Off: the
    // receive side polices alone (--no-ack-pacing).
    bool ack_pacing = true;
    bool for_ack_pacing = false;  // this is that send side (AttachRecord::for_ack_pacing)
};

// What an ingress attach did for ACK pacing.
enum class AckPacing {
    NotAsked,          // an egress attach, or --no-ack-pacing
    SendSideAttached,  // the send side attached now, for it
    SendSideThere,     // the send side was attached already, in edt mode: it paces
    Unavailable,       // nothing can pace here: AttachResult::ack_pacing_why says why
};

// Moved: from tc clsact to TCX (a newer kernel, or SHAPERCTL_ATTACH), or to our filter's
// current tc priority (an older build's attach).
enum class AttachOutcome { Attached, Upgraded, Moved, AlreadyAttached };

struct AttachResult {
    AttachOutcome outcome;
    bool fq_changed = false;  // attached already: the given fq options were applied in place
    Hook hook = Hook::TcClsact;  // where the program runs now
    AckPacing ack_pacing = AckPacing::NotAsked;
    std::string ack_pacing_why;  // Unavailable: a sentence
};

// What a detach of a receive side did to the send side it had attached for ACK pacing.
enum class PacingSideAfterDetach { None, Detached, KeptWithClasses, Failed };

struct ClassStatus {
    ClassSpec spec;
    ClassCounters counters;
    int64_t backlog_ns = 0;          // how far the class clock runs ahead of now (0 when idle)
    uint64_t rate_estimate_bps = 0;  // charged bits over the sampling interval
    // As a parent that lent in the last second: what it left its borrowing children in its
    // last lending epoch (bpf/borrow.h).
    std::optional<uint64_t> spare_bps;
};

struct RuleStatus {
    uint32_t slot = 0;
    RuleSpec rule;
    shaper_rule_stats counters{};
};

struct DeviceStatus {
    Device device;  // device.direction: the side shown
    bool present = true;  // false: the device was deleted while attached
    uint32_t mode = 0;
    Hook hook = Hook::TcClsact;
    uint32_t program_id = 0;
    std::string program_tag;  // hex hash of its instructions: which build runs ("" if none)
    bool uses_set_tstamp = false;
    PacingSetup pacing;
    // Receive side: the send side held an ACK of its flows within the last second (the test the
    // datapath makes before pacing's marks, steps and boxes, bpf/ack_pace.h).
    bool acks_paced = false;
    // Receive side: its send side is attached in edt mode, so its ACKs can be paced, and its
    // classes' CoDel defaults are the paced ones (class_defaults()).
    bool send_side_paces = false;
    uint32_t default_class = 0;
    uint32_t max_classes = 0;
    ClassCounters unclassified;
    uint64_t sample_ns = 0;
    std::vector<ClassStatus> classes;
    std::vector<RuleStatus> rules;  // in match order (pref ascending)
};

struct ManagedDevice {
    std::string name;  // current name, or the name at attach time when the device is gone
    int ifindex = 0;
    uint64_t netns = 0;
    uint32_t mode = 0;
    bool present = false;
    bool gone = false;  // the device is known gone with our program (hook_gone): detach_gone's
    HookAttachment attachment;
    Direction direction = Direction::Egress;
    bool for_ack_pacing = false;  // a send side its receive side's attach brought (AttachRecord)
};

class Shaper {
public:
    static AttachResult attach(const std::string& dev, const AttachOptions& options);
    // Each side of a device is attached, opened and detached on its own, but for the send side
    // a receive side's attach brings for ACK pacing (AttachOptions::ack_pacing): its detach takes
    // that side away too, unless classes, rules or a default class were given to it since.
    static PacingSideAfterDetach detach(const std::string& dev, Direction side = Direction::Egress);
    static std::vector<ManagedDevice> list();  // one entry per side attached
    // Removes the pins and records of every side whose device is gone (ManagedDevice::gone),
    // in any network namespace: a namespace deleted with a shaped device in it leaves them, and
    // no --dev can name that device any more. Returns what it removed.
    static std::vector<ManagedDevice> detach_gone();

    // An attached device, locked for changes; Error when it is not attached, or was deleted
    // since (a device gone is only for status and detach).
    static Shaper open(const std::string& dev, Direction side = Direction::Egress);
    // The same without taking the device's lock, for readers that must never hold up a change
    // (exporter, status --watch): only read through it.
    static Shaper open_unlocked(const std::string& dev, Direction side = Direction::Egress);
    // Whether the device's side has an attach record (Error for an unknown device).
    static bool is_attached(const std::string& dev, Direction side = Direction::Egress);
    // Whether the device's send side is attached in edt mode: sch_fq there can hold the ACKs of
    // its receive side's flows (bpf/ack_pace.h).
    static bool paces_acks(const std::string& dev);
    static bool paces_acks(const Device& device);

    // One command's change each: a one-item plan, checked by the checks check_config() makes
    // of a whole configuration against what the device holds, reading only what the item
    // touches (shaper_items.cpp), and run by apply() as apply -f's steps are. A horizon of 0 is
    // the side's default. Rules are compiled into the inactive generation, then switched to.
    void add_class(const ClassSpec& spec) const;
    void change_class(const ClassSpec& spec) const;  // a full spec: read class_spec() first
    void del_class(uint32_t id) const;
    // A class as change-class starts from: its horizon 0 where it is the default for its rate
    // (horizon_is_default()), so that a new rate brings its own default.
    ClassSpec class_spec(uint32_t id) const;
    void set_default(uint32_t id) const;  // 0: none
    void add_rule(const RuleSpec& rule) const;
    void del_rule(uint32_t pref) const;
    std::vector<RuleStatus> rules() const;
    // Counters are read twice, `sample` apart, for the rate estimate.
    DeviceStatus status(std::chrono::nanoseconds sample) const;
    // The same as it is read, for printing 100,000 classes without holding them: `head` first
    // (classes empty, rules in), then `each_class` for every class in id order, read a batch of
    // the class map at a time.
    void status(std::chrono::nanoseconds sample, const std::function<void(const DeviceStatus&)>& head,
                const std::function<void(const ClassStatus&)>& each_class) const;

    // The whole configuration, as apply and dump see it (max_classes: the maps' capacity).
    AttachOptions attach_options() const;
    ShaperConfig config() const;
    // What a configuration of this device must fit beside itself (check_config()).
    ConfigLimits limits() const;
    // Runs plan_config()'s steps, in order, straight on the maps: the caller has checked the
    // desired configuration as a whole (check_config(), whose compiled rules are what is
    // written and published), so no step re-reads the class table (an apply of thousands of
    // classes costs a few syscalls per class). A step that throws (the kernel refused a write)
    // leaves the device as it was before the call: the steps made are undone in reverse order,
    // through valid states as they were made, and the error is rethrown; an undo that fails
    // too is added to its text. A class deleted and put back starts idle, and a rule written
    // again has its hits counted afresh. `before_step`, when given, is called with each step's
    // index before it runs (tests throw from it).
    void apply(const std::vector<ConfigStep>& steps, const CheckedRules& rules,
               const std::function<void(size_t)>& before_step = {}) const;
    // The side's classes, rules and default class made to match `desired`'s (horizons of 0 are
    // the side's defaults): checked whole, planned and run by apply() as a file's are. Reads the
    // whole configuration: for small sides (a container's). Returns the steps run.
    std::vector<ConfigStep> converge(ShaperConfig desired) const;
    // Changes the fq options in place (edt mode: install_fq again) and records them.
    void set_fq_options(const FqOptions& fq);

    const Device& device() const { return device_; }
    const ShaperMaps& maps() const { return maps_; }

private:
    Shaper(Device device, AttachRecord record, ShaperMaps maps, Fd lock)
        : device_(std::move(device)), record_(std::move(record)), maps_(std::move(maps)),
          lock_(std::move(lock)) {}
    // One command's change: `plan` checks it and returns its steps (filling in the rules they
    // publish, if any), which apply() runs; a fault is one line in the command's terms.
    void change(const std::function<std::vector<ConfigStep>(CheckedRules&)>& plan) const;
    std::string fault_text(const ConfigFault& fault) const;
    std::string no_class(uint32_t id) const;  // "no class N", and whether the other side has N

    Device device_;
    AttachRecord record_;
    ShaperMaps maps_;
    Fd lock_;  // held for the object's life: one shaperctl at a time changes a device
};

// Error when the process lacks CAP_BPF/CAP_SYS_ADMIN or CAP_NET_ADMIN, or, when it will load the
// datapath, CAP_PERFMON/CAP_SYS_ADMIN.
void require_privileges(bool loading = false);

}  // namespace shaperctl
