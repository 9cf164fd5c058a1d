// status --json: the schema (docs/status-schema.md; keep it stable) as a JSON value, and as text
// written while the classes are read, so 100,000 classes never sit in memory at once.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "loader/shaper.h"
#include "text_sink.h"

namespace shaperctl {

nlohmann::ordered_json status_json(const DeviceStatus& status);
// status_json(status).dump(2), without building a JSON value per class.
std::string status_json_text(const DeviceStatus& status);

// status_json_text a class at a time: head() (its classes ignored), add() for each class, end().
// `compact`: as status_json(status).dump() prints it instead, on one line.
class StatusJsonWriter {
public:
    explicit StatusJsonWriter(TextSink& out, bool compact = false) : out_(out), compact_(compact) {}
    void head(const DeviceStatus& status);
    void add(const ClassStatus& c);
    void end();

private:
    TextSink& out_;
    std::string rest_;  // what follows the classes: the rules, the closing brace
    size_t classes_ = 0;
    bool compact_ = false;
};

}  // namespace shaperctl
