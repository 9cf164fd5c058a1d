// A class as operators describe it, and the one table of its fields from which the command
// line, the configuration file, dump, the diff of apply, status and the file's JSON Schema are
// all made. A new class option is an entry in class_fields() (and its member here) plus its use
// by the datapath.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shaper_abi.h"

namespace shaperctl {

struct ClassSpec {
    uint32_t id = 0;
    uint64_t rate_bps = 0;     // the cap; with a ceil, the guarantee
    uint64_t ceil_bps = 0;     // 0: none; else the most it sends, borrowing above the rate
    uint64_t burst_bytes = 0;  // 0: pure pacing, one packet at a time
    uint32_t parent = 0;       // 0: top level
    uint32_t prio = 0;         // among borrowing siblings, 0 is offered the spare first
    int32_t overhead = 0;      // bytes per segment; 24 is Ethernet's preamble, FCS and gap
    uint32_t mpu = 0;
    uint64_t horizon_ns = 0;   // 0: the mode's default
    bool aqm = false;          // CoDel on the class's virtual backlog (edt mode): opt in
    bool ecn = true;           // mark ECN-capable packets instead of dropping them
    bool sparse = true;        // sparse flows leave ahead of the class backlog (edt mode)
    bool fair = true;          // bulk flows above their fair share are marked or dropped (edt)
    uint64_t aqm_target_ns = SHAPER_DEFAULT_AQM_TARGET_NS;
    uint64_t aqm_interval_ns = SHAPER_DEFAULT_AQM_INTERVAL_NS;
    uint32_t fair_tolerance = SHAPER_FAIR_TOLERANCE_DEFAULT_PM;  // per mille of the fair share

    bool operator==(const ClassSpec&) const = default;
};

// How a field is written: ids (a parent of 0 is "none", null in files), rates ("20mbit"; a rate
// whose minimum is 0 is "none", null in files, at 0), sizes
// ("64kb", or a number of bytes in files), times ("5ms"), plain integers, and switches (two
// words, or a boolean in files).
enum class FieldKind { ClassId, Rate, Size, Time, Int, Switch };

struct ClassField {
    const char* name;        // the file's key and the diff's word; the option is --NAME with - for _
    const char* status_key;  // its key in status --json
    FieldKind kind;
    int64_t min, max;        // in stored units (bit/s, bytes, ns)
    const char* help;        // --help, the man page and the schema's description
    int64_t (*get)(const ClassSpec&);
    void (*set)(ClassSpec&, int64_t);
    const char* noun;        // names the value in errors ("class id", "aqm target")
    const char* on = "on";   // a switch's words
    const char* off = "off";
    bool required = false;   // in every file entry, and on add-class
    bool mode_default = false;  // absent means the mode's default (mode_horizon)
    bool listed_when_set = false;  // dump lists it only away from its default
};

// Every field, in the order files, dump and diffs list them; the first is the id.
const std::vector<ClassField>& class_fields();

// The field of that name; nullptr when there is none.
const ClassField* find_class_field(std::string_view name);

// A value as the command line writes it ("20mbit", "none", "codel").
std::string field_text(const ClassField& field, int64_t value);

// Parses a value as the command line writes it; one-line Error naming `what` (or the field's
// noun) and the bad text. Only what the text can say is checked here (the unit, a size's or an
// integer's range); validate_class() checks the rest.
int64_t parse_field(const ClassField& field, std::string_view text);

// The default of a field in a mode.
int64_t field_default(const ClassField& field, uint32_t mode);

// "rate 20mbit -> 30mbit, aqm off -> codel": what changed from a to b, "" when nothing did.
std::string class_changes(const ClassSpec& a, const ClassSpec& b);

// "rate 5mbit parent 1 aqm codel": a new class's rate, then whatever differs from `defaults`
// (its side's and mode's: class_defaults()).
std::string class_summary(const ClassSpec& c, const ClassSpec& defaults);

}  // namespace shaperctl
