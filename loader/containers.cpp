#include "loader/containers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "loader/bpffs.h"
#include "loader/device.h"
#include "loader/shaper.h"

namespace shaperctl {
namespace {

constexpr const char* kStateDir = "/run/shaperctl-cni";

std::string record_path(const std::string& container_id, const std::string& ifname)
{
    return std::string(kStateDir) + "/" + container_id + "-" + ifname;
}

// A record's text: JSON, or the first plugins' "DEVICE IFINDEX", whose attachment is only in its
// file name ("ID-IFNAME": an interface name seldom has a '-', a container id often does).
std::optional<ContainerRecord> parse_record(const std::string& text, const std::string& file_name)
{
    ContainerRecord r;
    if (!text.empty() && text[0] == '{') {
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_object())
            return std::nullopt;
        r.container_id = j.value("container", "");
        r.ifname = j.value("ifname", "");
        r.device = j.value("device", "");
        r.ifindex = j.value("ifindex", 0);
        r.netns = j.value("netns", uint64_t(0));
        r.ingress_bps = j.value("ingress_bps", uint64_t(0));
        r.egress_bps = j.value("egress_bps", uint64_t(0));
    } else {
        std::istringstream in(text);
        if (!(in >> r.device >> r.ifindex))
            return std::nullopt;
        const size_t dash = file_name.rfind('-');
        if (dash == std::string::npos)
            return std::nullopt;
        r.container_id = file_name.substr(0, dash);
        r.ifname = file_name.substr(dash + 1);
    }
    if (r.container_id.empty() || r.ifname.empty() || r.device.empty())
        return std::nullopt;
    return r;
}

std::optional<ContainerRecord> read_record(const std::string& path, const std::string& file_name)
{
    std::ifstream in(path);
    if (!in)
        return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    return parse_record(text.str(), file_name);
}

// Attaches a side; the host's egress paces with sch_fq, or polices where the kernel has none (an
// egress attached before keeps its mode).
void attach_side(const std::string& device, Direction side)
{
    AttachOptions options;
    options.direction = side;
    if (side == Direction::Egress && Shaper::is_attached(device, side))
        options.mode = Shaper::open_unlocked(device, side).attach_options().mode;
    try {
        Shaper::attach(device, options);
    } catch (const QdiscUnavailable&) {
        if (side != Direction::Egress)
            throw;
        options.mode = SHAPER_MODE_POLICE;
        Shaper::attach(device, options);
    }
}

}  // namespace

Fd lock_containers()
{
    make_private_dir(kStateDir, kStateDir);
    const std::string path = std::string(kStateDir) + "/lock";
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd || flock(fd.get(), LOCK_EX))
        throw Error(errno_message("cannot lock " + path, errno));
    return fd;
}

void save_container(const ContainerRecord& r)
{
    nlohmann::ordered_json j = {{"container", r.container_id}, {"ifname", r.ifname}, {"device", r.device},
                                {"ifindex", r.ifindex}, {"netns", r.netns}};
    if (r.ingress_bps)
        j["ingress_bps"] = r.ingress_bps;
    if (r.egress_bps)
        j["egress_bps"] = r.egress_bps;
    const std::string path = record_path(r.container_id, r.ifname), tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << j.dump() << "\n";
        if (!out.flush())
            throw Error("cannot write " + tmp);
    }
    if (rename(tmp.c_str(), path.c_str()))
        throw Error(errno_message("cannot write " + path, errno));
}

std::optional<ContainerRecord> load_container(const std::string& container_id, const std::string& ifname)
{
    std::optional<ContainerRecord> r = read_record(record_path(container_id, ifname), container_id + "-" + ifname);
    if (r) {  // the runtime's names win over a guess from the file name
        r->container_id = container_id;
        r->ifname = ifname;
    }
    return r;
}

void remove_container(const ContainerRecord& r)
{
    unlink(record_path(r.container_id, r.ifname).c_str());
}

std::vector<ContainerRecord> list_containers()
{
    std::vector<std::string> names;
    if (DIR* dir = opendir(kStateDir)) {
        while (const dirent* e = readdir(dir)) {
            const std::string name = e->d_name;
            if (name != "." && name != ".." && name != "lock" && !name.ends_with(".tmp"))
                names.push_back(name);
        }
        closedir(dir);
    }
    std::sort(names.begin(), names.end());
    std::vector<ContainerRecord> records;
    for (const std::string& name : names)
        if (auto r = read_record(std::string(kStateDir) + "/" + name, name))
            records.push_back(std::move(*r));
    return records;
}

ContainerRecord find_container(const std::string& id, const std::string& ifname)
{
    if (id.size() < 4)
        throw Error("container id \"" + id + "\" is too short: give 4 characters or more");
    const uint64_t here = current_netns();
    std::vector<ContainerRecord> found;
    for (ContainerRecord& r : list_containers())
        if (r.container_id.starts_with(id) && (ifname.empty() || r.ifname == ifname) &&
            (r.netns == 0 || r.netns == here))
            found.push_back(std::move(r));
    // A whole id names its container even where it is the prefix of another's.
    if (std::any_of(found.begin(), found.end(), [&](const ContainerRecord& r) { return r.container_id == id; }))
        std::erase_if(found, [&](const ContainerRecord& r) { return r.container_id != id; });
    const std::string named = "container " + id + (ifname.empty() ? "" : " interface " + ifname);
    if (found.empty())
        throw Error("no " + named + " shaped by shaperctl-cni in this network namespace (shaperctl containers lists them)");
    for (const ContainerRecord& r : found)
        if (r.container_id != found[0].container_id)
            throw Error(named + " is ambiguous: " + std::to_string(found.size()) + " containers start so; give more of the id");
    if (found.size() > 1)
        throw Error(named + " has " + std::to_string(found.size()) + " interfaces: name one with --ifname");
    return found[0];
}

Direction device_side(Direction container_direction)
{
    return container_direction == Direction::Ingress ? Direction::Egress : Direction::Ingress;
}

ClassSpec container_side_class(const std::string& device, Direction side, ClassSpec spec)
{
    if (side == Direction::Ingress && spec.aqm && Shaper::paces_acks(device)) {
        spec.aqm_target_ns = kIngressPacedTargetNs;
        spec.aqm_interval_ns = kIngressPacedIntervalNs;
    }
    return spec;
}

void shape_container_side(const std::string& device, Direction side, const ClassSpec& given)
{
    attach_side(device, side);
    ShaperConfig want;
    want.classes = {container_side_class(device, side, given)};
    want.default_class = want.classes[0].id;
    Shaper::open(device, side).converge(want);  // the class and the default, or neither
}

void pace_container_acks(const std::string& device)
{
    if (Shaper::is_attached(device, Direction::Egress)) {
        if (!Shaper::paces_acks(device)) {
            Shaper::detach(device, Direction::Egress);
            return;
        }
        Shaper::open(device, Direction::Egress).converge({});  // no class, no rule, no default
        return;
    }
    AttachOptions options;
    options.direction = Direction::Egress;
    try {
        Shaper::attach(device, options);
    } catch (const QdiscUnavailable&) {
        // Police mode delays nothing: no side to attach.
    }
}

void unshape_container(const ContainerRecord& record)
{
    const uint64_t here = current_netns();
    // Listed again after each detach: a receive side's takes the send side it brought with it.
    for (;;) {
        const std::vector<ManagedDevice> managed = Shaper::list();
        const auto m = std::find_if(managed.begin(), managed.end(), [&](const ManagedDevice& d) {
            return d.netns == here && d.ifindex == record.ifindex && d.name == record.device;
        });
        if (m == managed.end())
            return;
        Shaper::detach(m->name, m->direction);
    }
}

void set_container_rate(ContainerRecord& record, Direction container_direction, uint64_t rate_bps)
{
    const Direction side = device_side(container_direction), other = device_side(opposite(container_direction));
    const auto class_of = [&](Direction s) -> std::optional<ClassSpec> {
        if (!Shaper::is_attached(record.device, s))
            return std::nullopt;
        const Shaper shaper = Shaper::open_unlocked(record.device, s);
        const ShaperConfig config = shaper.config();
        if (!config.default_class)
            return std::nullopt;
        return shaper.class_spec(config.default_class);
    };
    if (std::optional<ClassSpec> now = class_of(side)) {
        now->rate_bps = rate_bps;
        Shaper::open(record.device, side).change_class(*now);
    } else {
        ClassSpec spec = class_defaults(side);
        if (const std::optional<ClassSpec> o = class_of(other)) {
            spec.overhead = o->overhead;
            spec.sparse = o->sparse;
            spec.fair = o->fair;
            spec.aqm = o->aqm;
        }
        spec.id = 1;
        spec.rate_bps = rate_bps;
        shape_container_side(record.device, side, spec);
    }
    (container_direction == Direction::Ingress ? record.ingress_bps : record.egress_bps) = rate_bps;
    save_container(record);
}

}  // namespace shaperctl
