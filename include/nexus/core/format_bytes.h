// A byte count for people: "1.50 GiB", "12.00 MiB", "640 B" (the largest binary unit that keeps
// the number >= 1). Used by messages and reports across the tree.
#pragma once

#include <cstdint>
#include <string>

namespace nexus {

std::string format_bytes(uint64_t bytes);

}  // namespace nexus
