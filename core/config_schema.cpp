// The JSON Schema of apply's configuration file (packaging/shaperctl-config.schema.json is this
// function's output, and a test keeps it so): the file's frame as written here, the class's
// properties and the rule's matches from their tables.
#include "core/config_schema.h"

#include "core/class_spec.h"
#include "core/direction.h"
#include "core/rule_spec.h"

namespace shaperctl {
namespace {

using ojson = nlohmann::ordered_json;

// Everything but the class's properties and the rule's matches, which the class and rule tables
// give.
constexpr const char* kFrame = R"json({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://github.com/shaperctl/shaperctl/packaging/shaperctl-config.schema.json",
  "title": "shaperctl configuration",
  "description": "What `shaperctl apply -f FILE` makes the kernel match and `shaperctl dump` prints. Values are written as the command line takes them (rates \"20mbit\", sizes \"64kb\", times \"5ms\"). Within a listed device, the file is the whole truth: classes, rules and a default class it does not list are removed; absent class fields take their defaults. Devices not listed are left alone. shaperctl checks more than this schema can say: parents exist and form a tree at most 8 levels deep, rules and the default class name classes of their device, the rule set fits the datapath, class ids are below max_classes.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "devices"
  ],
  "properties": {
    "version": {
      "const": 1,
      "description": "Format version; 1 when given."
    },
    "devices": {
      "type": "array",
      "items": {
        "$ref": "#/$defs/device"
      }
    }
  },
  "$defs": {
    "rate": {
      "type": "string",
      "description": "Bits per second with a unit: bit kbit mbit gbit tbit (x1000), kibit mibit gibit tibit (x1024), bps kbps mbps gbps tbps (BYTES per second); 8kbit to 400gbit.",
      "pattern": "^[0-9]+(\\.[0-9]+)?[A-Za-z]+$",
      "examples": [
        "20mbit",
        "1.5gbit",
        "10mbps"
      ]
    },
    "time": {
      "type": "string",
      "description": "A time with a unit: ns us ms s.",
      "pattern": "^[0-9]+(\\.[0-9]+)?[A-Za-z]+$",
      "examples": [
        "5ms",
        "2s",
        "250us"
      ]
    },
    "size": {
      "description": "Bytes: a number, or with a unit b, k kb kib, m mb mib, g gb gib (x1024).",
      "oneOf": [
        {
          "type": "integer",
          "minimum": 0
        },
        {
          "type": "string",
          "pattern": "^[0-9]+(\\.[0-9]+)?[A-Za-z]*$"
        }
      ],
      "examples": [
        "64kb",
        "1500b",
        0
      ]
    },
    "class_id": {
      "type": "integer",
      "minimum": 1,
      "maximum": 1048575
    },
    "port": {
      "description": "A port or a range P-Q, 1 to 65535.",
      "oneOf": [
        {
          "type": "integer",
          "minimum": 1,
          "maximum": 65535
        },
        {
          "type": "string",
          "pattern": "^[0-9]+(-[0-9]+)?$"
        }
      ]
    },
    "device": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "device"
      ],
      "properties": {
        "device": {
          "type": "string",
          "minLength": 1,
          "maxLength": 15,
          "description": "Network device name (in the namespace of `-n NS`, if given)."
        },
        "mode": {
          "enum": [
            "edt",
            "police"
          ],
          "default": "edt",
          "description": "Fixed while attached: a different mode is refused (detach first)."
        },
        "fq": {
          "type": "object",
          "description": "sch_fq options, edt mode only.",
          "additionalProperties": false,
          "properties": {
            "horizon": {
              "$ref": "#/$defs/time",
              "default": "10s"
            },
            "flow_limit": {
              "type": "integer",
              "minimum": 0,
              "maximum": 4294967295,
              "description": "Packets per flow; absent: attach's default; 0: the kernel's (100)."
            },
            "limit": {
              "type": "integer",
              "minimum": 0,
              "maximum": 4294967295,
              "description": "Packets in all; absent: attach's default; 0: the kernel's (10000)."
            }
          }
        },
        "max_classes": {
          "type": "integer",
          "minimum": 2,
          "maximum": 1048576,
          "description": "Class-id capacity, fixed at first attach (default 16384). Absent: whatever the attached device has."
        },
        "default_class": {
          "description": "Class of the packets no rule matches; null or absent: they pass unshaped.",
          "oneOf": [
            {
              "$ref": "#/$defs/class_id"
            },
            {
              "type": "null"
            }
          ]
        },
        "classes": {
          "type": "array",
          "items": {
            "$ref": "#/$defs/class"
          }
        },
        "rules": {
          "type": "array",
          "maxItems": 16384,
          "items": {
            "$ref": "#/$defs/rule"
          }
        }
      }
    },
    "class": {
      "type": "object",
      "additionalProperties": false
    },
    "rule": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "pref",
        "class"
      ],
      "minProperties": 3,
      "description": "The conjunction of its matches (at least one); the lowest pref wins.",
      "properties": {
        "pref": {
          "type": "integer",
          "minimum": 1,
          "maximum": 4294967294
        },
        "class": {
          "$ref": "#/$defs/class_id"
        }
      }
    }
  }
})json";

ojson class_property(const ClassField& f)
{
    ojson p;
    const int64_t default_value = field_default(f, SHAPER_MODE_EDT);
    switch (f.kind) {
    case FieldKind::ClassId:
        if (f.required)
            p["$ref"] = "#/$defs/class_id";
        else
            p["oneOf"] = {{{"type", "integer"}, {"minimum", f.min}, {"maximum", f.max}}, {{"type", "null"}}};
        break;
    case FieldKind::Rate:
        if (f.min == 0)
            p["oneOf"] = {{{"$ref", "#/$defs/rate"}}, {{"type", "null"}}};
        else
            p["$ref"] = "#/$defs/rate";
        break;
    case FieldKind::Size: p["$ref"] = "#/$defs/size"; break;
    case FieldKind::Time: p["$ref"] = "#/$defs/time"; break;
    case FieldKind::Int:
        p["type"] = "integer";
        p["minimum"] = f.min;
        p["maximum"] = f.max;
        break;
    case FieldKind::Switch:
        p["oneOf"] = {{{"enum", {f.on, f.off}}}, {{"type", "boolean"}}};
        break;
    }
    if (!f.required && !f.mode_default && f.kind != FieldKind::ClassId)
        p["default"] = f.kind == FieldKind::Int               ? ojson(default_value)
                       : f.kind == FieldKind::Rate && !f.min ? ojson(nullptr)
                                                              : ojson(field_text(f, default_value));
    p["description"] = f.help;
    return p;
}

// A match as the file writes it: as the command line does, or as a number where that is plain.
ojson rule_property(const RuleField& f)
{
    const ojson u32 = {{"type", "integer"}, {"minimum", 0}, {"maximum", UINT32_MAX}};
    ojson p;
    switch (f.kind) {
    case MatchKind::Cidr: p["type"] = "string"; break;
    case MatchKind::Ports: p["$ref"] = "#/$defs/port"; break;
    case MatchKind::Proto: {
        ojson names = ojson::array();
        for (const ProtocolName& n : protocol_names())
            names.push_back(n.name);
        p["oneOf"] = {{{"enum", names}},
                      {{"type", "integer"}, {"minimum", 0}, {"maximum", 255}},
                      {{"type", "string"}, {"pattern", "^[0-9]+$"}}};
        break;
    }
    case MatchKind::Mark:
    case MatchKind::Priority: p["oneOf"] = {u32, {{"type", "string"}}}; break;
    case MatchKind::Cgroup:
        p["oneOf"] = {{{"type", "string"}, {"minLength", 1}},
                      {{"type", "object"},
                       {"additionalProperties", false},
                       {"required", {"id", "level"}},
                       {"properties",
                        {{"id", {{"type", "integer"}, {"minimum", 1}}},
                         {"level", {{"type", "integer"}, {"minimum", 0}}}}}}};
        break;
    case MatchKind::Int:
        p["type"] = "integer";
        p["minimum"] = f.min;
        p["maximum"] = f.max;
        break;
    }
    p["description"] = f.help;
    return p;
}

}  // namespace

nlohmann::ordered_json config_schema()
{
    ojson schema = ojson::parse(kFrame);
    ojson& klass = schema["$defs"]["class"];
    ojson required = ojson::array(), properties = ojson::object();
    for (const ClassField& f : class_fields()) {
        if (f.required)
            required.push_back(f.name);
        properties[f.name] = class_property(f);
    }
    klass["required"] = required;
    klass["properties"] = properties;
    ojson& rule = schema["$defs"]["rule"]["properties"];
    for (const RuleField& f : rule_fields())
        rule[f.name] = rule_property(f);
    ojson& device = schema["$defs"]["device"]["properties"];
    ojson sides = ojson::array();
    for (Direction side : {Direction::Egress, Direction::Ingress})
        sides.push_back(direction_name(side));
    ojson direction = {{"enum", sides},
                       {"default", direction_name(Direction::Egress)},
                       {"description", "The device's side: egress (sent packets, paced or policed) or "
                                       "ingress (received packets, policed: marked or dropped; no mode "
                                       "but police, no fq, a cgroup rule never matches)."}};
    // After "device", in the order dump writes the keys.
    ojson reordered = ojson::object();
    for (auto& [key, value] : device.items()) {
        reordered[key] = value;
        if (key == "device")
            reordered["direction"] = direction;
    }
    device = reordered;
    return schema;
}

std::string config_schema_text()
{
    return config_schema().dump(2) + "\n";
}

}  // namespace shaperctl
