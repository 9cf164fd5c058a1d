// The class tree's one rule: parents exist, never loop, and stack at most SHAPER_MAX_DEPTH
// levels deep (a packet is charged at every level). Files, add-class, change-class and the
// order apply changes classes in all read the tree through here (check_chain is the rule).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shaper_abi.h"

namespace shaperctl {

// Every class's parent (0: top level), as (id, parent) in ascending id, each id once. apply
// checks the whole tree of 100,000 classes, where a node per class (a std::map) was most of its
// cost: ids are looked up in a table by id where they are compact (class ids are below
// max_classes), else by binary search.
class ClassParents {
public:
    // Any order; where an id repeats, the last one counts.
    explicit ClassParents(std::vector<std::pair<uint32_t, uint32_t>> pairs);

    const std::vector<std::pair<uint32_t, uint32_t>>& ascending() const { return pairs_; }
    // The id's place in ascending(), or size() when it has none.
    size_t index_of(uint32_t id) const;
    bool has(uint32_t id) const { return index_of(id) < size(); }
    uint32_t parent_of(uint32_t id) const;  // 0 for a top-level or unknown class
    size_t size() const { return pairs_.size(); }

private:
    std::vector<std::pair<uint32_t, uint32_t>> pairs_;
    std::vector<uint32_t> place_;  // by id: its index in pairs_ + 1, 0 for none (empty: search)
};

struct TreeFault {
    enum Kind { None, MissingParent, Cycle, TooDeep } kind = None;
    uint32_t id = 0;              // the class whose chain of parents is at fault
    std::vector<uint32_t> chain;  // from id upwards, as far as it was followed
    explicit operator bool() const { return kind != None; }
    std::string describe() const;  // "parents form a cycle (1 -> 2 -> 1)", ...
};

// The chain of parents above class `id` whose parent is `parent`: missing, looping or too deep.
// Parents: has(id) and parent_of(id), a ClassParents or what a device holds. A missing ancestor
// further up is its child's fault, not this class's.
template <class Parents>
TreeFault check_chain(uint32_t id, uint32_t parent, const Parents& parents)
{
    TreeFault fault{TreeFault::None, id, {id}};
    if (!parent)
        return fault;
    if (!parents.has(parent)) {
        fault.kind = TreeFault::MissingParent;
        fault.chain.push_back(parent);
        return fault;
    }
    for (uint32_t up = parent; up; up = parents.parent_of(up)) {
        fault.chain.push_back(up);
        if (up == id) {
            fault.kind = TreeFault::Cycle;
            return fault;
        }
        if (fault.chain.size() > SHAPER_MAX_DEPTH) {
            fault.kind = TreeFault::TooDeep;
            return fault;
        }
    }
    return fault;
}

// The first class (ascending id) whose chain of parents is at fault; none when the tree is sound.
TreeFault check_class_tree(const ClassParents& parents);

// Levels above each class (0 for a top-level class), in the order of parents.ascending(); a
// cycle counts as deep.
std::vector<unsigned> class_depths(const ClassParents& parents);

}  // namespace shaperctl
