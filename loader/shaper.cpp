#include "loader/shaper.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "loader/bpffs.h"
#include "loader/class_tree.h"
#include "loader/egress_hook.h"
#include "loader/libbpf_log.h"
#include "loader/error.h"
#include "loader/program.h"
#include "loader/rules.h"

namespace shaperctl {
namespace {

constexpr const char* kProgPin = "shaper_egress";
constexpr const char* kRecordFile = "attach.json";
constexpr const char* kLockFile = "lock";

// Undo steps of a multi-step change, run in reverse unless the change completes.
class Rollback {
public:
    ~Rollback()
    {
        for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
            try {
                (*it)();
            } catch (...) {
                // Best effort: the original error is the one to report.
            }
        }
    }
    void add(std::function<void()> step) { steps_.push_back(std::move(step)); }
    void commit() { steps_.clear(); }

private:
    std::vector<std::function<void()>> steps_;
};

Fd lock_device(const Device& device)
{
    const std::string path = device.run_dir() + "/" + kLockFile;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        throw Error(errno_message("cannot open lock " + path, errno));
    Fd lock(fd);
    if (flock(fd, LOCK_EX))
        throw Error(errno_message("cannot lock " + path, errno));
    return lock;
}

std::array<uint8_t, BPF_TAG_SIZE> prog_tag(int prog_fd)
{
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    std::array<uint8_t, BPF_TAG_SIZE> tag{};
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0)
        std::memcpy(tag.data(), info.tag, tag.size());
    return tag;
}

bool runs_same_program(uint32_t running_id, int prog_fd)
{
    Fd running(bpf_prog_get_fd_by_id(running_id));
    return running && prog_tag(running.get()) == prog_tag(prog_fd);
}

// As bpftool prints it; "" if the program is gone.
std::string prog_tag_hex(uint32_t prog_id)
{
    Fd prog(bpf_prog_get_fd_by_id(prog_id));
    if (!prog)
        return "";
    std::string hex;
    for (uint8_t byte : prog_tag(prog.get())) {
        hex += "0123456789abcdef"[byte >> 4];
        hex += "0123456789abcdef"[byte & 15];
    }
    return hex;
}

void pin_program(const Program& program, const std::string& pin_dir)
{
    const std::string path = pin_dir + "/" + kProgPin;
    unlink(path.c_str());  // an older build's pin; the filter or link holds its own reference
    if (bpf_obj_pin(program.prog_fd(), path.c_str()))
        throw Error(errno_message("cannot pin the program at " + path, errno));
}

std::string dev_prefix(const Device& device)
{
    return "dev " + device.name + ": ";
}

// Parent of every configured class, for cycle and depth checks.
ClassParents parents_of(const ShaperMaps& maps)
{
    ClassParents parents;
    for (const auto& [id, config] : maps.class_configs())
        parents[id] = config.parent_id;
    return parents;
}

// The device's pins and record, then the namespace's and the root directories once empty
// (rmdir refuses otherwise).
void remove_device_dirs(const Device& device)
{
    for (const std::string& dir : {device.pin_dir(), device.run_dir()}) {
        remove_tree(dir);
        const std::string ns_dir = dir.substr(0, dir.rfind('/'));
        rmdir(ns_dir.c_str());
        rmdir(ns_dir.substr(0, ns_dir.rfind('/')).c_str());
    }
}

// Bytes before the network header on this device, which the datapath's parser must know: 14
// where the kernel builds an Ethernet header (loopback too), 0 where packets start at the
// network header (tun, WireGuard, PPP, IP-in-IP), and for any other type (IPoIB's 24 bytes,
// GRE devices without a remote, which push the outer header before egress) "read from the
// network header" (bpf/parse.h).
uint32_t l2_header_len(const Device& device)
{
    Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, device.name.c_str(), IFNAMSIZ - 1);
    if (!sock || ioctl(sock.get(), SIOCGIFHWADDR, &ifr))
        return SHAPER_L2_AT_NETWORK_HEADER;
    switch (ifr.ifr_hwaddr.sa_family) {
    case ARPHRD_ETHER:
    case ARPHRD_LOOPBACK:
        return 14;
    case ARPHRD_NONE:
    case ARPHRD_RAWIP:
    case ARPHRD_PPP:
    case ARPHRD_TUNNEL:
    case ARPHRD_TUNNEL6:
    case ARPHRD_SIT:
        return 0;
    default:
        return SHAPER_L2_AT_NETWORK_HEADER;
    }
}

}  // namespace

void require_privileges(bool loading)
{
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data))
        throw Error(errno_message("cannot read the process capabilities", errno));
    auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1; };
    const bool bpf = has(CAP_SYS_ADMIN) || has(CAP_BPF);
    if (!bpf || !has(CAP_NET_ADMIN))
        throw Error("permission denied: shaperctl needs root (CAP_BPF and CAP_NET_ADMIN)");
    // The verifier refuses the datapath's pointer arithmetic without CAP_PERFMON, with a bare
    // "Bad address": say what is missing instead.
    if (loading && !has(CAP_SYS_ADMIN) && !has(CAP_PERFMON))
        throw Error("permission denied: loading the datapath needs CAP_PERFMON (or CAP_SYS_ADMIN) "
                    "beside CAP_BPF and CAP_NET_ADMIN");
}

bool same_fq(const FqOptions& a, const FqOptions& b)
{
    return a.horizon_ns == b.horizon_ns && a.horizon_drop == b.horizon_drop &&
           a.flow_limit == b.flow_limit && a.limit == b.limit;
}

namespace {

// What attach asks of a device attached already: its fq options with the given ones replaced.
FqOptions fq_with_given(FqOptions fq, const AttachOptions& options)
{
    if (options.fq_given.horizon)
        fq.horizon_ns = options.fq.horizon_ns;
    if (options.fq_given.flow_limit)
        fq.flow_limit = options.fq.flow_limit;
    if (options.fq_given.limit)
        fq.limit = options.fq.limit;
    return fq;
}

// sch_fq's options changed in place: a horizon lowered below a class's would have fq drop what
// the class has charged. Then fq itself and the record.
void change_fq(const Device& device, const ShaperMaps& maps, AttachRecord& record, const FqOptions& fq)
{
    if (fq.horizon_ns < record.fq.horizon_ns) {
        const FqHorizon bound{fq.horizon_ns, " on " + device.name + " (lower the class's horizon first)"};
        for (const auto& [id, config] : maps.class_configs())
            check_fits_fq_horizon(id, config.horizon_ns, bound);
    }
    install_fq(device.ifindex, fq);
    record.fq = fq;
    record.save(device.run_dir() + "/" + kRecordFile);
}

}  // namespace

AttachResult Shaper::attach(const std::string& dev, const AttachOptions& options)
{
    require_privileges(/*loading=*/true);
    const Device device = Device::resolve(dev);
    if (options.mode != SHAPER_MODE_EDT && options.fq_given.any())
        throw Error(dev_prefix(device) + "fq options apply to edt mode only");
    const EgressHook hook = chosen_egress_hook();
    ensure_bpffs();
    make_private_dir(device.pin_dir(), kPinRoot);
    make_private_dir(device.run_dir(), kRunRoot);
    const Fd lock = lock_device(device);
    const std::string record_path = device.run_dir() + "/" + kRecordFile;

    if (auto record = AttachRecord::load(record_path)) {
        if (record->mode != options.mode)
            throw Error(dev_prefix(device) + "already attached in " + mode_name(record->mode) +
                        " mode; detach first to change the mode");
        const uint32_t capacity = pinned_max_classes(device.pin_dir());
        if (options.max_classes && capacity && options.max_classes != capacity)
            throw Error(dev_prefix(device) + "attached with max classes " + std::to_string(capacity) +
                        ", fixed at first attach; detach first to change it");
        Program program = Program::load({device.pin_dir(), options.max_classes, l2_header_len(device)});
        AttachResult result{AttachOutcome::AlreadyAttached, false, record->egress.hook};
        const FqOptions fq = fq_with_given(record->fq, options);
        if (options.mode == SHAPER_MODE_EDT && !same_fq(fq, record->fq)) {
            change_fq(device, ShaperMaps::of(program), *record, fq);  // in place, as apply -f does
            result.fq_changed = true;
        }
        if (!is_current(record->egress, hook)) {
            // Another hook (or an older build's filter priority): the maps stay as they are.
            record->egress = move_egress(device, record->egress, hook, program.prog_fd());
            record->save(record_path);
            pin_program(program, device.pin_dir());
            result.outcome = AttachOutcome::Moved;
            result.hook = hook;
            return result;
        }
        const uint32_t running = egress_prog_id(device, record->egress);
        if (running && runs_same_program(running, program.prog_fd()))
            return result;
        // A different build: swap the program in place (the link's or the filter's); the maps
        // are the pinned ones. Put back if someone took it off.
        const bool created_clsact = attach_egress(device, hook, program.prog_fd()).created_clsact;
        if (created_clsact && !record->egress.created_clsact) {
            record->egress.created_clsact = true;
            record->save(record_path);
        }
        pin_program(program, device.pin_dir());
        result.outcome = AttachOutcome::Upgraded;
        return result;
    }

    AttachRecord record;
    record.device = device.name;
    record.ifindex = device.ifindex;
    record.netns = device.netns;
    record.mode = options.mode;
    record.fq = options.fq;

    Rollback rollback;
    rollback.add([&] { remove_device_dirs(device); });
    Program program = Program::load({device.pin_dir(), options.max_classes, l2_header_len(device)});
    const ShaperMaps maps = ShaperMaps::of(program);
    shaper_settings settings = maps.settings();
    settings.mode = options.mode;
    settings.abi_version = SHAPER_ABI_VERSION;
    maps.set_settings(settings);

    if (options.mode == SHAPER_MODE_EDT) {
        record.prior_root = root_qdisc(device.ifindex);
        try {
            install_fq(device.ifindex, options.fq);
        } catch (const Error& e) {
            throw Error(std::string(e.what()) + " (attach --mode police shapes by dropping instead)");
        }
        record.installed_fq = true;
        rollback.add([&] { restore_root(device.ifindex, record.prior_root); });
    }
    record.egress = attach_egress(device, hook, program.prog_fd());
    rollback.add([&] { detach_egress(device, record.egress); });
    pin_program(program, device.pin_dir());
    record.save(record_path);
    rollback.commit();
    return {AttachOutcome::Attached, false, hook};
}

void Shaper::detach(const std::string& dev)
{
    require_privileges();
    quiet_libbpf();  // removing a tc filter where there is no clsact (TCX) is no news
    const Device device = Device::resolve_managed(dev);
    if (!path_exists(device.run_dir() + "/" + kRecordFile) && !path_exists(device.pin_dir()))
        throw Error(dev_prefix(device) + "not attached");
    std::optional<AttachRecord> record;
    {
        const Fd lock = lock_device(device);
        record = AttachRecord::load(device.run_dir() + "/" + kRecordFile);
        // A device deleted since attach took its filter and qdiscs with it; its ifindex may
        // name another device by now, which must not be touched. Only the pins are left.
        if (device.current_name() == device.name) {
            detach_egress(device, record ? record->egress : EgressAttachment{});
            if (record && record->installed_fq)
                restore_root(device.ifindex, record->prior_root);
        }
    }
    remove_device_dirs(device);
}

std::vector<ManagedDevice> Shaper::list()
{
    std::vector<ManagedDevice> devices;
    const uint64_t here = current_netns();
    for (const std::string& ns : list_dir(kRunRoot)) {
        for (const std::string& dev : list_dir(std::string(kRunRoot) + "/" + ns)) {
            auto record = AttachRecord::load(std::string(kRunRoot) + "/" + ns + "/" + dev + "/" +
                                             kRecordFile);
            if (!record)
                continue;
            ManagedDevice m{record->device, record->ifindex, record->netns, record->mode, false,
                            record->egress};
            if (record->netns == here) {
                Device d{record->device, record->ifindex, record->netns};
                std::string name = d.current_name();
                m.present = !name.empty();
                if (m.present)
                    m.name = name;
            }
            devices.push_back(m);
        }
    }
    return devices;
}

Shaper Shaper::open(const std::string& dev)
{
    Shaper shaper = open_unlocked(dev);
    if (shaper.device_.current_name() != shaper.device_.name)
        throw Error(dev_prefix(shaper.device_) + "the device was deleted since attach (ifindex " +
                    std::to_string(shaper.device_.ifindex) + "); only status and detach apply");
    shaper.lock_ = lock_device(shaper.device_);
    return shaper;
}

Shaper Shaper::open_unlocked(const std::string& dev)
{
    require_privileges();
    const Device device = Device::resolve_managed(dev);  // also one deleted since attach
    auto record = AttachRecord::load(device.run_dir() + "/" + kRecordFile);
    if (!record)
        throw Error(dev_prefix(device) + "not attached (run shaperctl attach --dev " + dev + ")");
    return Shaper(device, *record, ShaperMaps::open_pinned(device.pin_dir()), Fd());
}

bool Shaper::is_attached(const std::string& dev)
{
    const Device device = Device::resolve(dev);
    return path_exists(device.run_dir() + "/" + kRecordFile);
}

AttachOptions Shaper::attach_options() const
{
    AttachOptions options;
    options.mode = record_.mode;
    options.fq = record_.fq;
    options.max_classes = maps_.max_classes();
    return options;
}

ShaperConfig Shaper::config() const
{
    ShaperConfig config;
    config.mode = record_.mode;
    config.fq = record_.fq;
    config.max_classes = maps_.max_classes();
    config.default_class = maps_.settings().default_class;
    for (const auto& [id, stored] : maps_.class_configs())
        config.classes.push_back(class_spec_from_config(id, stored));
    for (const RuleStatus& r : rules())
        config.rules.push_back(r.rule);
    return config;
}

void Shaper::apply(const std::vector<ConfigStep>& steps) const
{
    using Kind = ConfigStep::Kind;
    // Rule slots as stored: a changed rule keeps its slot, a new one takes the lowest free.
    std::map<uint32_t, uint32_t> slot_of;  // pref -> slot
    std::vector<bool> used(SHAPER_MAX_RULES);
    bool rules_read = false;
    auto read_rules = [&] {
        if (rules_read)
            return;
        for (const auto& [slot, rule] : maps_.rules()) {
            slot_of[rule.pref] = slot;
            used[slot] = true;
        }
        rules_read = true;
    };
    std::vector<std::pair<uint32_t, shaper_class_config>> new_classes;
    for (const ConfigStep& step : steps) {
        switch (step.kind) {
        case Kind::SetDefault: {
            shaper_settings settings = maps_.settings();
            settings.default_class = step.new_default;
            maps_.set_settings(settings);
            break;
        }
        case Kind::AddClass:
            // A new class starts idle, with full credit. Steps in a row are written together.
            new_classes.push_back({step.after.id, class_config(step.after)});
            if (&step == &steps.back() || (&step + 1)->kind != Kind::AddClass) {
                maps_.add_classes(new_classes);
                new_classes.clear();
            }
            break;
        case Kind::ChangeClass:
            // The clock stays (a higher rate rescales its backlog): no free burst, no stall.
            maps_.change_class(step.after.id, class_config(step.after));
            break;
        case Kind::DeleteClass:
            maps_.erase_class(step.before.id);
            break;
        case Kind::PutRule: {
            read_rules();
            const shaper_rule rule = compile_rule(step.new_rule);
            uint32_t slot = 0;
            if (auto it = slot_of.find(step.new_rule.pref); it != slot_of.end()) {
                slot = it->second;
            } else {
                slot = take_free_rule_slot(used);
                slot_of[step.new_rule.pref] = slot;
            }
            maps_.write_rule(slot, rule);
            break;
        }
        case Kind::RemoveRule: {
            read_rules();
            auto it = slot_of.find(step.old_rule.pref);
            if (it == slot_of.end())
                throw Error(dev_prefix(device_) + "no rule with pref " + std::to_string(step.old_rule.pref));
            maps_.write_rule(it->second, shaper_rule{});
            used[it->second] = false;
            slot_of.erase(it);
            break;
        }
        case Kind::PublishRules:
            publish_rules(maps_);
            break;
        }
    }
}

void Shaper::set_fq_options(const FqOptions& fq)
{
    if (record_.mode != SHAPER_MODE_EDT)
        throw Error(dev_prefix(device_) + "fq options apply to edt mode only");
    change_fq(device_, maps_, record_, fq);
}

uint64_t Shaper::default_horizon() const
{
    return mode_horizon(record_.mode);
}

FqHorizon Shaper::fq_horizon() const
{
    if (record_.mode != SHAPER_MODE_EDT)
        return {};
    return {record_.fq.horizon_ns, " on " + device_.name + " (attach --fq-horizon raises it)"};
}

shaper_class_config Shaper::class_config(const ClassSpec& spec) const
{
    return make_class_config(spec, maps_.max_classes(), default_horizon(), fq_horizon());
}

void Shaper::check_parent(uint32_t id, uint32_t parent) const
{
    if (parent == 0)
        return;
    if (!maps_.class_config(parent))
        throw Error(dev_prefix(device_) + "unknown parent class " + std::to_string(parent));
    ClassParents parents = parents_of(maps_);
    parents[id] = parent;
    const TreeFault fault = check_class_tree(parents);
    if (fault.kind == TreeFault::Cycle)
        throw Error(dev_prefix(device_) + "parent " + std::to_string(parent) + " of class " +
                    std::to_string(id) + " would make a cycle");
    if (fault)
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) + " under parent " +
                    std::to_string(parent) + " would be more than " +
                    std::to_string(SHAPER_MAX_DEPTH) + " levels deep");
}

void Shaper::add_class(const ClassSpec& spec) const
{
    const shaper_class_config config = class_config(spec);
    if (maps_.class_config(spec.id))
        throw Error(dev_prefix(device_) + "class " + std::to_string(spec.id) +
                    " already exists (use change-class)");
    check_parent(spec.id, spec.parent);
    maps_.reset_class_state(spec.id);  // a new class starts idle, with full credit
    maps_.write_class_config(spec.id, config);
}

ClassSpec Shaper::class_spec(uint32_t id) const
{
    auto config = maps_.class_config(id);
    if (!config)
        throw Error(dev_prefix(device_) + "no class " + std::to_string(id));
    return class_spec_from_config(id, *config);
}

void Shaper::change_class(const ClassSpec& spec) const
{
    class_spec(spec.id);  // must exist
    const shaper_class_config config = class_config(spec);
    check_parent(spec.id, spec.parent);
    maps_.change_class(spec.id, config);  // the clock stays: no free burst, no stall
}

void Shaper::del_class(uint32_t id) const
{
    class_spec(id);
    std::string children;
    for (const auto& [child, parent] : parents_of(maps_))
        if (parent == id)
            children += (children.empty() ? "" : ", ") + std::to_string(child);
    if (!children.empty())
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) + " has children (" +
                    children + "): delete them first");
    if (maps_.settings().default_class == id)
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) +
                    " is the default class (set-default --none or another class first)");
    std::string prefs;
    for (const auto& [slot, rule] : maps_.rules())
        if (rule.class_id == id)
            prefs += (prefs.empty() ? "" : ", ") + std::to_string(rule.pref);
    if (!prefs.empty())
        throw Error(dev_prefix(device_) + "class " + std::to_string(id) + " has rules (pref " +
                    prefs + "): delete them first");
    maps_.erase_class(id);
}

void Shaper::add_rule(const RuleSpec& rule) const
{
    if (!maps_.class_config(rule.class_id))
        throw Error(dev_prefix(device_) + "rule " + std::to_string(rule.pref) + ": no class " +
                    std::to_string(rule.class_id));
    shaperctl::add_rule(maps_, rule);
}

void Shaper::del_rule(uint32_t pref) const
{
    shaperctl::del_rule(maps_, pref);
}

std::vector<RuleStatus> Shaper::rules() const
{
    std::vector<RuleStatus> out;
    for (const auto& [slot, rule] : maps_.rules())
        out.push_back({slot, rule_spec_of(rule), maps_.rule_counters(slot)});
    std::sort(out.begin(), out.end(),
              [](const RuleStatus& a, const RuleStatus& b) { return a.rule.pref < b.rule.pref; });
    return out;
}

void Shaper::set_default(uint32_t id) const
{
    if (id)
        class_spec(id);
    shaper_settings settings = maps_.settings();
    settings.default_class = id;
    maps_.set_settings(settings);
}

DeviceStatus Shaper::status(std::chrono::nanoseconds sample) const
{
    DeviceStatus st;
    st.device = device_;
    st.present = device_.current_name() == device_.name;
    st.mode = record_.mode;
    st.hook = record_.egress.hook;
    const shaper_settings settings = maps_.settings();
    st.default_class = settings.default_class;
    st.max_classes = maps_.max_classes();
    if (st.present) {
        st.program_id = egress_prog_id(device_, record_.egress);
        if (st.program_id)
            st.program_tag = prog_tag_hex(st.program_id);
        st.pacing = inspect_pacing(device_.ifindex);
    }

    const auto configs = maps_.class_configs();
    std::vector<ClassCounters> first;
    if (sample.count() > 0) {  // the rate estimate's first reading; nothing to compare without one
        first.reserve(configs.size());
        for (const auto& [id, config] : configs)
            first.push_back(maps_.counters(id));
    }
    const uint64_t t0 = monotonic_ns();
    if (sample.count() > 0)
        std::this_thread::sleep_for(sample);
    st.unclassified = maps_.counters(0);
    const uint64_t now = monotonic_ns();
    st.sample_ns = sample.count() > 0 ? now - t0 : 0;
    for (size_t i = 0; i < configs.size(); i++) {
        const uint32_t id = configs[i].first;
        ClassStatus cs;
        cs.spec = class_spec_from_config(id, configs[i].second);
        cs.counters = maps_.counters(id);
        const uint64_t tat = maps_.clock(id).tat_ns;
        cs.backlog_ns = tat > now ? int64_t(tat - now) : 0;
        if (st.sample_ns)
            cs.rate_estimate_bps = uint64_t((unsigned __int128)(cs.counters.bytes - first[i].bytes) *
                                            8 * 1'000'000'000ull / st.sample_ns);
        st.classes.push_back(cs);
    }
    st.rules = rules();
    return st;
}

}  // namespace shaperctl
