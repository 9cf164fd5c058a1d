// Why: ADD, CHECK and DEL are each a few library calls (Shaper::attach, add_class, set_default,
// detach) on the two sides of the host-side device, plus what a runtime expects around them:
// one plugin changes shaperctl's state at a time (runtimes start pods in parallel), a record of
// which device a container got (so DEL still knows after the namespace and the veth are gone),
// an ADD that fails half-way undone, and a DEL that succeeds when there is nothing left to undo.
#pragma once

#include <string>

#include "host_device.h"
#include "netconf.h"

namespace shaperctl::cni {

// The container's attachment as the runtime names it (CNI_CONTAINERID, CNI_IFNAME).
// Shapes the host-side device as the configuration asks: the container's ingress on its egress
// (edt with sch_fq, police where the kernel has no sch_fq), the container's egress on its
// ingress (marks by CoDel, ECN). Undone on failure.
void add_shaping(const NetConf& conf, const HostDevice& host, const Attachment& attachment);

// CniError when the shaping of the host-side device differs from the configuration's.
void check_shaping(const NetConf& conf, const HostDevice& host);

// Removes what ADD made for this attachment; nothing to do is success.
void del_shaping(const Attachment& attachment);

}  // namespace shaperctl::cni
