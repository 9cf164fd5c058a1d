// The class tree's one rule: parents exist, never loop, and stack at most SHAPER_MAX_DEPTH
// levels deep (a packet is charged at every level). Files, add-class, change-class and the
// order apply changes classes in all read the tree through here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shaperctl {

using ClassParents = std::map<uint32_t, uint32_t>;  // class id -> parent id (0: top level)

struct TreeFault {
    enum Kind { None, MissingParent, Cycle, TooDeep } kind = None;
    uint32_t id = 0;              // the class whose chain of parents is at fault
    std::vector<uint32_t> chain;  // from id upwards, as far as it was followed
    explicit operator bool() const { return kind != None; }
    std::string describe() const;  // "parents form a cycle (1 -> 2 -> 1)", ...
};

// The first class (ascending id) whose chain of parents is at fault; none when the tree is sound.
TreeFault check_class_tree(const ClassParents& parents);

// Levels above each class (0 for a top-level class); a cycle counts as deep.
std::map<uint32_t, unsigned> class_depths(const ClassParents& parents);

}  // namespace shaperctl
