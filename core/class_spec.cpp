#include "core/class_spec.h"

#include "core/units.h"
#include "core/error.h"
#include "core/mode.h"

namespace shaperctl {

// The accessors of a member, as the table stores them.
#define CLASS_MEMBER(member)                                                   \
    [](const ClassSpec& s) { return int64_t(s.member); },                     \
        [](ClassSpec& s, int64_t v) { s.member = decltype(ClassSpec::member)(v); }

const std::vector<ClassField>& class_fields()
{
    constexpr int64_t kMaxId = SHAPER_LIMIT_MAX_CLASSES - 1;
    using K = FieldKind;
    static const std::vector<ClassField> fields = {
        {"id", "id", K::ClassId, 1, kMaxId, "class id (1 to max-classes - 1)", CLASS_MEMBER(id),
         "class id", "on", "off", true},
        {"rate", "rate_bps", K::Rate, SHAPER_RATE_MIN_BPS, SHAPER_RATE_MAX_BPS,
         "wire rate: 100kbit, 20mbit, 1.5gbit, 10mbps (bytes/s); 8kbit to 400gbit",
         CLASS_MEMBER(rate_bps), "rate", "on", "off", true},
        {"ceil", "ceil_bps", K::Rate, 0, SHAPER_RATE_MAX_BPS,
         "the most the class may send, borrowing above its rate from its parent's spare; the rate is "
         "then guaranteed (default none: the rate is the class's cap)",
         CLASS_MEMBER(ceil_bps), "ceil", "on", "off", false, false, true},
        {"burst", "burst_bytes", K::Size, 0, SHAPER_BURST_MAX_BYTES,
         "bytes sent at once after idle: 64kb, 1500b; at most 1gb and an hour of credit (default 0: pure pacing)",
         CLASS_MEMBER(burst_bytes), "burst"},
        {"parent", "parent", K::ClassId, 0, kMaxId, "parent class id; 0 (null in files) for top level",
         CLASS_MEMBER(parent), "parent id"},
        {"prio", "prio", K::Int, 0, SHAPER_PRIO_MAX,
         "0 (default) to 7: among siblings that borrow, a lower prio is offered the parent's spare first",
         CLASS_MEMBER(prio), "prio", "on", "off", false, false, true},
        {"overhead", "overhead", K::Int, SHAPER_OVERHEAD_MIN, SHAPER_OVERHEAD_MAX,
         "bytes added per segment, -64 to 256 (24: Ethernet's preamble, FCS and gap)",
         CLASS_MEMBER(overhead), "overhead"},
        {"mpu", "mpu", K::Size, 0, SHAPER_MPU_MAX, "minimum bytes charged per segment, at most 65535",
         CLASS_MEMBER(mpu), "mpu"},
        {"horizon", "horizon_ns", K::Time, SHAPER_HORIZON_MIN_NS, SHAPER_HORIZON_MAX_NS,
         "largest queueing delay accepted, 1us to 60s: 2s, 50ms (default 2s in edt mode, at most "
         "the fq horizon; 5ms in police mode; on ingress 150ms, or 100 full frames at the rate if longer)",
         CLASS_MEMBER(horizon_ns), "horizon", "on", "off", false, true},
        {"aqm", "aqm", K::Switch, 0, 1, "off (default) or codel: CoDel on the class's backlog (edt mode)",
         CLASS_MEMBER(aqm), "aqm", "codel", "off"},
        {"target", "aqm_target_ns", K::Time, 1000, 1'000'000'000, "CoDel target delay, 1us to 1s (default 5ms)",
         CLASS_MEMBER(aqm_target_ns), "aqm target"},
        {"interval", "aqm_interval_ns", K::Time, 1000, 10'000'000'000, "CoDel interval, 1us to 10s (default 100ms)",
         CLASS_MEMBER(aqm_interval_ns), "aqm interval"},
        {"ecn", "ecn", K::Switch, 0, 1, "on (default): mark ECN-capable packets instead of dropping them; off",
         CLASS_MEMBER(ecn), "ecn"},
        {"sparse", "sparse_flows", K::Switch, 0, 1,
         "on (default): sparse flows leave ahead of a backlogged class (edt mode); off",
         CLASS_MEMBER(sparse), "sparse"},
        {"fair", "fair_shares", K::Switch, 0, 1,
         "on (default): bulk flows above their fair share of the class are marked or dropped (edt mode); off",
         CLASS_MEMBER(fair), "fair"},
        {"fair_tolerance", "fair_tolerance_permille", K::Int, 1, SHAPER_FAIR_TOLERANCE_MAX_PM,
         "how far a bulk flow may go past its fair share before it is marked or dropped, per mille "
         "of the share, 1 to 1000 (default 125: an eighth)",
         CLASS_MEMBER(fair_tolerance), "fair tolerance"},
    };
    return fields;
}

#undef CLASS_MEMBER

const ClassField* find_class_field(std::string_view name)
{
    for (const ClassField& f : class_fields())
        if (name == f.name)
            return &f;
    return nullptr;
}

std::string field_text(const ClassField& field, int64_t value)
{
    switch (field.kind) {
    case FieldKind::ClassId: return value ? std::to_string(value) : "none";
    case FieldKind::Rate: return value || field.min ? format_rate(uint64_t(value)) : "none";
    case FieldKind::Size: return format_size(uint64_t(value));
    case FieldKind::Time: return format_time(uint64_t(value));
    case FieldKind::Int: return std::to_string(value);
    case FieldKind::Switch: return value ? field.on : field.off;
    }
    return "";
}

int64_t parse_field(const ClassField& field, std::string_view text)
{
    switch (field.kind) {
    case FieldKind::ClassId:
    case FieldKind::Int: return parse_int(text, field.min, field.max, field.noun);
    case FieldKind::Rate: return field.min == 0 && text == "none" ? 0 : int64_t(parse_rate(text));
    case FieldKind::Size: return int64_t(parse_size(text, uint64_t(field.max)));
    case FieldKind::Time: return int64_t(parse_time(text));
    case FieldKind::Switch:
        if (text == field.on)
            return 1;
        if (text == field.off)
            return 0;
        throw Error("bad " + std::string(field.noun) + " \"" + std::string(text) + "\" (use " + field.on +
                    " or " + field.off + ")");
    }
    return 0;
}

int64_t field_default(const ClassField& field, uint32_t mode)
{
    return field.mode_default ? int64_t(mode_horizon(mode)) : field.get(ClassSpec{});
}

std::string class_changes(const ClassSpec& a, const ClassSpec& b)
{
    std::string out;
    for (const ClassField& f : class_fields()) {
        if (f.kind == FieldKind::ClassId && f.required)
            continue;  // the id names the class
        const std::string from = field_text(f, f.get(a)), to = field_text(f, f.get(b));
        if (from != to)
            out += (out.empty() ? "" : ", ") + std::string(f.name) + " " + from + " -> " + to;
    }
    return out;
}

std::string class_summary(const ClassSpec& c, const ClassSpec& defaults)
{
    std::string out;
    for (const ClassField& f : class_fields()) {
        if (f.kind == FieldKind::ClassId && f.required)
            continue;
        if (f.required || f.get(c) != f.get(defaults))
            out += (out.empty() ? "" : " ") + std::string(f.name) + " " + field_text(f, f.get(c));
    }
    return out;
}

}  // namespace shaperctl
