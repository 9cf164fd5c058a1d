// Why: ADD, CHECK and DEL are each a few library calls (loader/containers.h: a side shaped, ACKs
// paced, the device unshaped, the container's record) on the two sides of the host-side device,
// plus what a runtime expects around them: one plugin changes containers' shaping at a time
// (runtimes start pods in parallel), an ADD that fails half-way undone, a CHECK that knows the
// rates an operator changed since, and a DEL that succeeds when there is nothing left to undo.
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

// CniError when the shaping of the host-side device differs from the configuration's, with the
// rates `shaperctl container set` changed since in place of the configuration's.
void check_shaping(const NetConf& conf, const HostDevice& host, const Attachment& attachment);

// Removes what ADD made for this attachment; nothing to do is success.
void del_shaping(const Attachment& attachment);

}  // namespace shaperctl::cni
