// Lists of ids and values as reports and logs print them: "[3, 7, 9]", cut
// after `max_items` with the count ("[1, 2, ... (40 in all)]").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minrepro {

std::string formatList(const std::vector<std::int64_t>& values, std::size_t max_items = 32);

}  // namespace minrepro
