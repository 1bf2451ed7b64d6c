#include "engine/format_list.h"

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

}  // namespace minrepro
