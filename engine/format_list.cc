#include "engine/format_list.h"

#include <iomanip>
#include <sstream>

namespace minrepro {

std::string formatList(const std::vector<std::int64_t>& values, std::size_t max_items) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size() && i < max_items; ++i) out << (i ? ", " : "") << values[i];
  if (values.size() > max_items) out << ", ... (" << values.size() << " in all)";
  out << "]";
  return out.str();
}

std::string formatMegabytes(std::uint64_t bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(bytes < 10'000'000 ? 1 : 0) << static_cast<double>(bytes) / 1e6 << " MB";
  return text.str();
}

}  // namespace minrepro
