#include "shaping.h"


#include <chrono>
#include <optional>
#include <utility>

#include "cni_error.h"
#include "core/direction.h"
#include "core/error.h"
#include "loader/containers.h"
#include "loader/device.h"
#include "loader/shaper.h"

namespace shaperctl::cni {
namespace {

// The host-side device's two sides and the class each gets (absent: not shaped).
std::pair<Direction, const std::optional<ClassSpec>*> sides(const NetConf& conf, int i)
{
    return i == 0 ? std::pair{Direction::Egress, &conf.container_ingress}
                  : std::pair{Direction::Ingress, &conf.container_egress};
}

std::string side_text(const HostDevice& host, Direction side)
{
    return std::string(side == Direction::Egress ? "the container's ingress" : "the container's egress") +
           " (" + host.name + " " + direction_name(side) + ")";
}

// Holds the lock on containers' shaping: runtimes start pods in parallel, and the library's
// lock is per device while attaches and detaches of different devices share directories.
Fd lock_plugin()
{
    try {
        return lock_containers();
    } catch (const Error& e) {
        throw CniError(kTryAgainLater, e.what());
    }
}

// A side attached only to pace ACKs: the container's egress asked for, its ingress not.
bool pacing_only(const NetConf& conf, const Shaper& shaper)
{
    return conf.container_egress && !conf.container_ingress && shaper.config().classes.empty() &&
           shaper.attach_options().mode == SHAPER_MODE_EDT;
}

// The configuration with the rates `shaperctl container set` gave since ADD: what CHECK expects.
// A direction it added has the class set_container_rate() made: the other direction's options.
NetConf with_live_rates(NetConf conf, const ContainerRecord& record)
{
    auto live = [](uint64_t bps, std::optional<ClassSpec>& spec, const std::optional<ClassSpec>& other, Direction side) {
        if (!bps)
            return;
        if (!spec) {
            spec = class_defaults(side);
            spec->id = 1;
            if (other) {
                spec->overhead = other->overhead;
                spec->sparse = other->sparse;
                spec->fair = other->fair;
                spec->aqm = other->aqm;
            }
        }
        spec->rate_bps = bps;
    };
    live(record.ingress_bps, conf.container_ingress, conf.container_egress, Direction::Egress);
    live(record.egress_bps, conf.container_egress, conf.container_ingress, Direction::Ingress);
    return conf;
}

}  // namespace

void add_shaping(const NetConf& conf, const HostDevice& host, const Attachment& attachment)
{
    if (!conf.container_ingress && !conf.container_egress)
        return;  // no bandwidth asked for: the reference plugin passes through too
    const Fd lock = lock_plugin();
    ContainerRecord record;
    record.container_id = attachment.container_id;
    record.ifname = attachment.ifname;
    record.device = host.name;
    record.ifindex = host.ifindex;
    record.netns = current_netns();
    try {
        save_container(record);  // first: a DEL after a failed ADD finds what to remove
        for (int i = 0; i < 2; i++) {
            const auto [side, spec] = sides(conf, i);
            if (!*spec) {
                if (side == Direction::Egress && conf.container_egress)
                    pace_container_acks(host.name);
                continue;
            }
            shape_container_side(host.name, side, **spec);
        }
    } catch (const Error& e) {
        try {
            unshape_container(record);
            remove_container(record);
        } catch (...) {
            // The ADD's error is the one to report; the record lets DEL finish the cleanup.
        }
        throw CniError(kOther, host.name + ": " + e.what());
    }
}

void check_shaping(const NetConf& given, const HostDevice& host, const Attachment& attachment)
{
    const std::optional<ContainerRecord> record = load_container(attachment.container_id, attachment.ifname);
    const NetConf conf = record ? with_live_rates(given, *record) : given;
    try {
        for (int i = 0; i < 2; i++) {
            const auto [side, spec] = sides(conf, i);
            const bool attached = Shaper::is_attached(host.name, side);
            if (!*spec) {
                if (attached && !pacing_only(conf, Shaper::open_unlocked(host.name, side)))
                    throw CniError(kOther, side_text(host, side) + " is shaped, and the configuration asks for no shaping");
                continue;
            }
            if (!attached)
                throw CniError(kOther, side_text(host, side) + " is not shaped");
            const Shaper shaper = Shaper::open_unlocked(host.name, side);
            const DeviceStatus status = shaper.status(std::chrono::nanoseconds(0));
            if (!status.program_id)
                throw CniError(kOther, side_text(host, side) + ": shaperctl's program was removed from the device");
            if (status.mode == SHAPER_MODE_EDT && !status.pacing.fq_everywhere)
                throw CniError(kOther, side_text(host, side) + ": sch_fq was removed (root qdisc " +
                                           status.pacing.root_kind + "): departure times are not enforced");
            const ShaperConfig config = shaper.config();
            ClassSpec want = container_side_class(host.name, side, **spec);
            if (config.classes.size() != 1 || config.default_class != want.id)
                throw CniError(kOther, side_text(host, side) + ": the classes were changed (expected class " +
                                           std::to_string(want.id) + " alone, as the default)");
            resolve_horizon(want, side, shaper.attach_options().mode);
            const std::string changes = class_changes(config.classes[0], want);
            if (!changes.empty())
                throw CniError(kOther, side_text(host, side) + ": the class differs from the configuration: " + changes);
        }
    } catch (const Error& e) {
        throw CniError(kOther, host.name + ": " + e.what());
    }
}

void del_shaping(const Attachment& attachment)
{
    const Fd lock = lock_plugin();
    const std::optional<ContainerRecord> record = load_container(attachment.container_id, attachment.ifname);
    if (!record)
        return;  // never shaped, or deleted already
    try {
        unshape_container(*record);
    } catch (const Error& e) {
        throw CniError(kOther, record->device + ": " + e.what());  // the record stays: DEL again finishes
    }
    remove_container(*record);
}

}  // namespace shaperctl::cni
