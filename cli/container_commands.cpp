// The containers shaperctl-cni shapes (loader/containers.h): `containers` lists them with their
// rates, `change-container` changes a running container's rates in place (what Kubernetes users
// otherwise get only by restarting the pod with new annotations).
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "columns.h"
#include "command.h"
#include "core/class_spec.h"
#include "core/error.h"
#include "loader/containers.h"
#include "loader/device.h"
#include "loader/shaper.h"

namespace shaperctl {
namespace {

const ClassField& rate_field()
{
    return *find_class_field("rate");
}

// The rate a direction of the container is shaped at now (its device side's default class),
// nullopt when that direction is not shaped or the device is gone.
std::optional<uint64_t> rate_now(const ContainerRecord& r, Direction container_direction)
{
    const Direction side = device_side(container_direction);
    try {
        if (!Shaper::is_attached(r.device, side))
            return std::nullopt;
        const Shaper shaper = Shaper::open_unlocked(r.device, side);
        const uint32_t id = shaper.config().default_class;
        if (!id)
            return std::nullopt;
        return shaper.class_spec(id).rate_bps;
    } catch (const Error&) {
        return std::nullopt;  // the device was deleted: DEL removes the record
    }
}

std::string rate_text(std::optional<uint64_t> bps)
{
    return bps ? field_text(rate_field(), int64_t(*bps)) : "-";
}

std::vector<ContainerRecord> here()
{
    const uint64_t ns = current_netns();
    std::vector<ContainerRecord> records;
    for (ContainerRecord& r : list_containers())
        if (r.netns == 0 || r.netns == ns)
            records.push_back(std::move(r));
    return records;
}

}  // namespace

Run containers(CLI::App* cmd, Common& c)
{
    cmd->add_flag("--json", c.json, "print JSON");
    return [&c] {
        const std::vector<ContainerRecord> records = here();
        if (c.json) {
            nlohmann::ordered_json list = nlohmann::ordered_json::array();
            for (const ContainerRecord& r : records) {
                nlohmann::ordered_json j = {{"container", r.container_id}, {"ifname", r.ifname},
                                            {"device", r.device}, {"ifindex", r.ifindex}};
                for (Direction d : {Direction::Ingress, Direction::Egress}) {
                    const std::optional<uint64_t> bps = rate_now(r, d);
                    const uint64_t live = d == Direction::Ingress ? r.ingress_bps : r.egress_bps;
                    j[std::string(direction_name(d)) + "_rate_bps"] = bps ? nlohmann::ordered_json(*bps) : nullptr;
                    j[std::string(direction_name(d)) + "_changed"] = live != 0;
                }
                list.push_back(j);
            }
            std::cout << list.dump(2) << std::endl;
            return 0;
        }
        Columns rows;
        rows.row({"container", "ifname", "device", "ingress", "egress"});
        for (const ContainerRecord& r : records) {
            auto cell = [&](Direction d, uint64_t live) { return rate_text(rate_now(r, d)) + (live ? " (changed)" : ""); };
            rows.row({r.container_id.substr(0, 12), r.ifname, r.device, cell(Direction::Ingress, r.ingress_bps),
                      cell(Direction::Egress, r.egress_bps)});
        }
        std::cout << rows.text();
        return 0;
    };
}

Run change_container(CLI::App* cmd, Common&)
{
    struct Opts { std::string id, ifname, ingress, egress; };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--id", o->id, "the container (its id, or 4 or more of its first characters)")->required();
    cmd->add_option("--ifname", o->ifname, "its interface, when it has several (CNI_IFNAME)");
    cmd->add_option("--ingress", o->ingress, "its download's rate: the host veth's egress class");
    cmd->add_option("--egress", o->egress, "its upload's rate: the host veth's ingress class");
    return [o] {
        if (o->ingress.empty() && o->egress.empty())
            throw Error("change-container needs --ingress RATE, --egress RATE or both");
        // Both rates read before anything changes.
        std::optional<uint64_t> ingress, egress;
        if (!o->ingress.empty())
            ingress = uint64_t(parse_field(rate_field(), o->ingress));
        if (!o->egress.empty())
            egress = uint64_t(parse_field(rate_field(), o->egress));
        find_container(o->id, o->ifname);  // a container not found changes nothing, not even the lock's directory
        const Fd lock = lock_containers();
        ContainerRecord r = find_container(o->id, o->ifname);  // again, under the lock
        for (auto [d, bps] : {std::pair{Direction::Ingress, ingress}, std::pair{Direction::Egress, egress}}) {
            if (!bps)
                continue;
            const std::optional<uint64_t> before = rate_now(r, d);
            try {
                set_container_rate(r, d, *bps);
            } catch (const Error& e) {
                throw Error("container " + r.container_id.substr(0, 12) + " " + direction_name(d) + ": " + e.what());
            }
            std::printf("container %s (%s): %s %s -> %s\n", r.container_id.substr(0, 12).c_str(), r.device.c_str(),
                        direction_name(d), rate_text(before).c_str(), rate_text(*bps).c_str());
        }
        return 0;
    };
}

}  // namespace shaperctl
