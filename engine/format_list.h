// Lists of ids and values as reports and logs print them: "[3, 7, 9]", cut
// after `max_items` with the count ("[1, 2, ... (40 in all)]"); sizes in
// bytes as "130 MB".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minrepro {

std::string formatList(const std::vector<std::int64_t>& values, std::size_t max_items = 32);
// Decimal megabytes: one decimal under 10 MB ("0.3 MB", "130 MB").
std::string formatMegabytes(std::uint64_t bytes);

}  // namespace minrepro
