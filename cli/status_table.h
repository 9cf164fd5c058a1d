// `status` without --json: the device in two lines, then the classes and the rules as aligned
// columns; written while the classes are read. A class's settings beyond its rate, burst, parent
// and horizon are one column of what differs from the side's defaults, from the field table.
#pragma once

#include <string>

#include "columns.h"
#include "loader/shaper.h"
#include "text_sink.h"

namespace shaperctl {

std::string status_table(const DeviceStatus& status);

// status_table a class at a time: head() (its classes ignored), add() for each class, end().
class StatusTableWriter {
public:
    explicit StatusTableWriter(TextSink& out) : out_(out) {}
    void head(const DeviceStatus& status);
    void add(const ClassStatus& c);
    void end();

private:
    std::string options(const ClassStatus& c) const;
    TextSink& out_;
    Columns classes_, rules_;
    ClassSpec defaults_;  // the side's: a class's options column lists what differs
};

}  // namespace shaperctl
