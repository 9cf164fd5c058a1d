// Reading the configuration file's JSON: the text into a value (refusing a key given twice), and
// typed values out of it, each error one line that starts with the value's JSON path.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace shaperctl {

// Error "PATH: MESSAGE".
[[noreturn]] void fail(const std::string& path, const std::string& message);

// Runs a parser of the CLI's; its one-line error gets the JSON path in front.
template <class F>
auto at(const std::string& path, F&& parse)
{
    try {
        return parse();
    } catch (const Error& e) {
        fail(path, e.what());
    }
}

// The path of an object's member: "devices[0].rate", or ["a key"] where the key is not a plain
// word (empty, a dot, a bracket, ...), so that any message's path ends at its ": ".
std::string member_path(const std::string& parent, const std::string& key);

// JSON text into a value, refusing a key repeated in one object. Parse errors keep nlohmann's
// line and column.
nlohmann::json parse_json(const std::string& text);

// Typed values; the example shows the expected form in a type error ("\"20mbit\"").
std::string get_string(const nlohmann::json& v, const std::string& path, const std::string& example);
int64_t get_int(const nlohmann::json& v, const std::string& path, int64_t min, int64_t max);
uint64_t get_rate(const nlohmann::json& v, const std::string& path);
uint64_t get_time(const nlohmann::json& v, const std::string& path);
// A size as the CLI takes it ("64kb", "1500b") or a number of bytes.
uint64_t get_size(const nlohmann::json& v, const std::string& path, uint64_t max);
// One of two words, or a boolean.
bool get_switch(const nlohmann::json& v, const std::string& path, const char* on, const char* off);
// A number or its text: ports ("80", "80-90", 80), marks, priorities, protocols.
std::string text_or_number(const nlohmann::json& v, const std::string& path, const std::string& example);

}  // namespace shaperctl
