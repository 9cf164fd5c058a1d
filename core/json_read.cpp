#include "core/json_read.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/units.h"

namespace shaperctl {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& message)
{
    throw Error(path + ": " + message);
}

// The path of an object's member: "devices[0].rate", or ["a key"] where the key is not a plain
// word (empty, a dot, a bracket, ...), so that any message's path ends at its ": ".
std::string member_path(const std::string& parent, const std::string& key)
{
    const bool word = !key.empty() && !std::isdigit(uint8_t(key[0])) &&
                      std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(uint8_t(c)) || c == '_'; });
    if (!word)
        return parent + "[" + json(key).dump() + "]";
    return parent.empty() ? key : parent + "." + key;
}

namespace {

// Builds the JSON value (nlohmann's own SAX-to-DOM builder underneath) and refuses a key
// repeated in one object (the plain parser keeps the last one silently), naming its path. One
// pass: nlohmann's callback parser rescans the enclosing array after every object, quadratic in
// a file of 100,000 classes, and a separate check pass costs a second parse.
class DuplicateKeyCheck {
public:
    explicit DuplicateKeyCheck(json& out) : dom_(out, true) {}
    bool null() { return element() && dom_.null(); }
    bool boolean(bool v) { return element() && dom_.boolean(v); }
    bool number_integer(json::number_integer_t v) { return element() && dom_.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return element() && dom_.number_unsigned(v); }
    bool number_float(json::number_float_t v, const std::string& s) { return element() && dom_.number_float(v, s); }
    bool string(std::string& v) { return element() && dom_.string(v); }
    bool binary(json::binary_t& v) { return element() && dom_.binary(v); }
    bool start_object(size_t n) { return open(false) && dom_.start_object(n); }
    bool start_array(size_t n) { return open(true) && dom_.start_array(n); }
    bool end_object() { return close() && dom_.end_object(); }
    bool end_array() { return close() && dom_.end_array(); }
    bool key(std::string& key)
    {
        Frame& f = frames_.back();
        f.key = key;
        if (!f.keys.insert(key).second)
            fail(member_path(path_to(frames_.size() - 1), key), "key given twice");
        return dom_.key(key);
    }
    // Throws the parse error, as json::parse does.
    bool parse_error(size_t at, const std::string& token, const json::exception& e)
    {
        return dom_.parse_error(at, token, e);
    }

private:
    struct Frame {
        bool array = false;
        long index = -1;
        std::string key;
        std::set<std::string> keys;
    };
    bool element()
    {
        if (!frames_.empty() && frames_.back().array)
            frames_.back().index++;
        return true;
    }
    bool open(bool array)
    {
        element();
        frames_.push_back({array});
        return true;
    }
    bool close()
    {
        frames_.pop_back();
        return true;
    }
    std::string path_to(size_t frames_used) const
    {
        std::string path;
        for (size_t i = 0; i < frames_used; i++) {
            const Frame& f = frames_[i];
            path = f.array ? path + "[" + std::to_string(f.index) + "]" : member_path(path, f.key);
        }
        return path;
    }
    std::vector<Frame> frames_;
    nlohmann::detail::json_sax_dom_parser<json> dom_;
};

}  // namespace

// JSON text into a value, refusing a key repeated in one object. Parse errors keep nlohmann's
// line and column.
json parse_json(const std::string& text)
{
    try {
        json value;
        DuplicateKeyCheck builder(value);
        json::sax_parse(text, &builder);
        return value;
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
        std::string what = e.what();
        if (auto bracket = what.find("] "); what.starts_with("[json.exception") && bracket != std::string::npos)
            what = what.substr(bracket + 2);
        std::replace(what.begin(), what.end(), '\n', ' ');
        // The token it stopped at is quoted whole, 8 bytes for each control character: keep its
        // start, so that a long run of garbage gives a short message.
        constexpr size_t kTokenShown = 40;
        if (auto token = what.find("; last read: '"); token != std::string::npos) {
            token += std::strlen("; last read: '");
            if (what.size() > token + kTokenShown + 1)
                what = what.substr(0, token + kTokenShown) + "...'";
        }
        throw Error("not valid JSON: " + what);
    }
}

std::string get_string(const json& v, const std::string& path, const std::string& example)
{
    if (!v.is_string())
        fail(path, std::string("expected a string such as ") + example + ", not " +
                       (v.is_number() ? "the number " + v.dump() : std::string("a ") + v.type_name()));
    return v.get<std::string>();
}

int64_t get_int(const json& v, const std::string& path, int64_t min, int64_t max)
{
    const std::string range = std::to_string(min) + " to " + std::to_string(max);
    if (!v.is_number_integer())
        fail(path, "expected an integer (" + range + "), not " +
                       (v.is_number() ? v.dump() : std::string("a ") + v.type_name()));
    const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX);
    if (too_big || v.get<int64_t>() > max || v.get<int64_t>() < min)
        fail(path, v.dump() + " is out of range (" + range + ")");
    return v.get<int64_t>();
}

uint64_t get_rate(const json& v, const std::string& path)
{
    const std::string text = get_string(v, path, "\"20mbit\"");
    return at(path, [&] { return parse_rate(text); });
}

uint64_t get_time(const json& v, const std::string& path)
{
    const std::string text = get_string(v, path, "\"5ms\"");
    return at(path, [&] { return parse_time(text); });
}

// A size as the CLI takes it ("64kb", "1500b") or a number of bytes.
uint64_t get_size(const json& v, const std::string& path, uint64_t max)
{
    if (v.is_number_integer())
        return uint64_t(get_int(v, path, 0, int64_t(max)));
    const std::string text = get_string(v, path, "\"64kb\"");
    return at(path, [&] { return parse_size(text, max); });
}

bool get_switch(const json& v, const std::string& path, const char* on, const char* off)
{
    if (v.is_boolean())
        return v.get<bool>();
    const std::string text = get_string(v, path, std::string("\"") + on + "\" or \"" + off + "\"");
    if (text == on)
        return true;
    if (text == off)
        return false;
    fail(path, "bad value \"" + text + "\" (use " + on + " or " + off + ")");
}

// A number or its text: ports ("80", "80-90", 80), marks, priorities, protocols.
std::string text_or_number(const json& v, const std::string& path, const std::string& example)
{
    if (v.is_number_integer())
        return v.dump();
    return get_string(v, path, example);
}

}  // namespace shaperctl
