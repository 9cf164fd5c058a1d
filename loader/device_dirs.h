// A managed device side's two directories, its record under /run/shaperctl and its pins under
// bpffs: the lock that serializes commands on the side, and their removal with the side.
#pragma once

#include <functional>
#include <optional>

#include "loader/device.h"
#include "loader/fd.h"

namespace shaperctl {

// The side's lock (flock on <run dir>/lock), held for the whole of a command's change.
Fd lock_device(const Device& device);

// The side's lock, or none when `still_there` says its directories went while this process
// waited (another detach was first); any other failure to lock is an Error.
std::optional<Fd> lock_unless_removed(const Device& device, const std::function<bool()>& still_there);

// The side's pins and record, then the namespace's and the root directories once empty, and
// the ACK pacing table both sides share as the last side leaves it.
void remove_device_dirs(const Device& device);

}  // namespace shaperctl
