#include "loader/attach_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace shaperctl {
namespace {

std::string to_hex(const std::vector<uint8_t>& bytes)
{
    static const char* digits = "0123456789abcdef";
    std::string hex;
    for (uint8_t b : bytes) {
        hex += digits[b >> 4];
        hex += digits[b & 15];
    }
    return hex;
}

std::vector<uint8_t> from_hex(const std::string& hex)
{
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return bytes;
}

}  // namespace

void AttachRecord::save(const std::string& path) const
{
    nlohmann::json j = {
        {"device", device}, {"ifindex", ifindex}, {"netns", netns}, {"mode", mode},
        {"installed_fq", installed_fq}, {"created_clsact", attachment.created_clsact},
        {"hook", hook_key(attachment.hook)}, {"tc_priority", attachment.tc_priority},
        {"fq", {{"horizon_ns", fq.horizon_ns}, {"horizon_drop", fq.horizon_drop},
                {"flow_limit", fq.flow_limit}, {"limit", fq.limit}}},
        {"prior_root", nullptr}, {"direction", direction_name(direction)},
        {"for_ack_pacing", for_ack_pacing},
    };
    if (prior_root)
        j["prior_root"] = {{"kind", prior_root->kind}, {"handle", prior_root->handle},
                           {"parent", prior_root->parent}, {"options", to_hex(prior_root->options)}};
    // Written whole to a temporary file, then renamed: a reader never sees half a record.
    const std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        throw Error(errno_message("cannot write " + tmp, errno));
    const std::string text = j.dump(2) + "\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = (::fsync(fd) == 0) && ok;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()))
        throw Error(errno_message("cannot write " + path, errno));
}

std::optional<AttachRecord> AttachRecord::load(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        return std::nullopt;
    try {
        nlohmann::json j = nlohmann::json::parse(in);
        AttachRecord r;
        r.device = j.at("device").get<std::string>();
        r.ifindex = j.at("ifindex").get<int>();
        r.netns = j.at("netns").get<uint64_t>();
        r.mode = j.at("mode").get<uint32_t>();
        r.installed_fq = j.at("installed_fq").get<bool>();
        // Records of builds before ingress: egress.
        r.direction = j.value("direction", "egress") == "ingress" ? Direction::Ingress : Direction::Egress;
        r.for_ack_pacing = j.value("for_ack_pacing", false);
        r.attachment.created_clsact = j.at("created_clsact").get<bool>();
        // Records of builds before TCX: a tc filter at priority 1.
        r.attachment.hook = j.value("hook", "tc") == "tcx" ? Hook::Tcx : Hook::TcClsact;
        r.attachment.tc_priority = j.value("tc_priority", kLegacyTcFilterPriority);
        const auto& fq = j.at("fq");
        r.fq.horizon_ns = fq.at("horizon_ns").get<uint64_t>();
        r.fq.horizon_drop = fq.at("horizon_drop").get<bool>();
        r.fq.flow_limit = fq.at("flow_limit").get<uint32_t>();
        r.fq.limit = fq.at("limit").get<uint32_t>();
        if (!j.at("prior_root").is_null()) {
            const auto& p = j.at("prior_root");
            r.prior_root = Qdisc{p.at("kind").get<std::string>(), p.at("handle").get<uint32_t>(),
                                 p.at("parent").get<uint32_t>(),
                                 from_hex(p.at("options").get<std::string>())};
        }
        return r;
    } catch (const std::exception& e) {
        throw Error("corrupt attach record " + path + ": " + e.what());
    }
}

}  // namespace shaperctl
