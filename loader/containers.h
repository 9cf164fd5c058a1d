// The containers shaperctl-cni shapes, as the plugin and `shaperctl container` both see them.
//
// Why here: a container's shaping outlives the plugin's process (it runs once per ADD or DEL)
// and must be found again by a DEL after the veth is gone, by a CHECK, and by an operator who
// changes a running container's rates. So the plugin keeps a record per attachment (the runtime's
// container id and interface name, the host-side device it shaped, the rates changed since) in
// /run/shaperctl-cni, and every change to containers' shaping holds one lock there: runtimes start
// pods in parallel, and an operator's change must not interleave with an ADD or a DEL.
//
// The record is JSON and a newer plugin reads every older form (the first plugins wrote "DEVICE
// IFINDEX" alone), so an upgrade of the plugin on a node keeps every running container's record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/class_spec.h"
#include "core/direction.h"
#include "loader/fd.h"

namespace shaperctl {

struct ContainerRecord {
    std::string container_id, ifname;  // CNI_CONTAINERID, CNI_IFNAME
    std::string device;                // the host-side device shaped
    int ifindex = 0;
    uint64_t netns = 0;  // the network namespace the plugin ran in (0: not recorded)
    // Rates changed in place since ADD (`shaperctl container set`), which CHECK expects in place
    // of the configuration's; 0: the configuration's.
    uint64_t ingress_bps = 0, egress_bps = 0;
};

// Holds the lock on containers' shaping until the Fd is closed (Error when it cannot be had).
Fd lock_containers();

void save_container(const ContainerRecord& record);
// nullopt when the attachment has no record (never shaped, or DEL done).
std::optional<ContainerRecord> load_container(const std::string& container_id, const std::string& ifname);
void remove_container(const ContainerRecord& record);
// Every record, in file name order; unreadable ones are skipped.
std::vector<ContainerRecord> list_containers();
// The record of a container of this network namespace named by its whole id or a unique prefix
// of it (at least 4 characters), and by its interface when it has several; one-line Error
// otherwise.
ContainerRecord find_container(const std::string& id, const std::string& ifname);

// The host-side device's side that shapes a direction of the container: its ingress is the
// device's egress, its egress the device's ingress.
Direction device_side(Direction container_direction);

// The class a side gets from `spec`: on the device's receive side, CoDel's paced target and
// interval when the send side paces its ACKs, unless the class has CoDel off.
ClassSpec container_side_class(const std::string& device, Direction side, ClassSpec spec);

// Shapes one side of the host-side device with class `spec` (id 1, the default class),
// attaching the side first: the device's egress paces with sch_fq, or polices where the kernel
// has none (an egress already attached keeps its mode); its ingress polices, with CoDel's paced
// target and interval when the send side paces its ACKs (unless the class has CoDel off).
void shape_container_side(const std::string& device, Direction side, const ClassSpec& spec);

// The container's egress alone: the device's send side attached in edt mode with no class, so
// that the host's ACKs of the container's flows wait for the ingress class's clock. Where the
// kernel has no sch_fq nothing can pace, and that side is left alone. A side shaped before keeps
// only that role (or is detached, in police mode).
void pace_container_acks(const std::string& device);

// Detaches every side of the recorded device, present or deleted since (then only its pins and
// records are left to remove). A device of that name with another ifindex is not the one.
void unshape_container(const ContainerRecord& record);

// `shaperctl container set`: a direction's rate changed in place, its clock carrying on. A
// direction not shaped before gets a class like the plugin's: the other direction's options
// (overhead, sparse, fair, CoDel), else the defaults. The record keeps the rate for CHECK.
void set_container_rate(ContainerRecord& record, Direction container_direction, uint64_t rate_bps);

}  // namespace shaperctl
