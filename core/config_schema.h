// The JSON Schema of apply's configuration file, made from the class table: `shaperctl schema`
// prints it, and packaging/shaperctl-config.schema.json is its output.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace shaperctl {

nlohmann::ordered_json config_schema();
std::string config_schema_text();  // as the packaged file holds it

}  // namespace shaperctl
