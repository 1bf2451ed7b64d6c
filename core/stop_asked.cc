#include "core/stop_asked.h"

namespace minrepro {

std::atomic<bool>& stopAsked() {
  static std::atomic<bool> asked{false};
  return asked;
}

}  // namespace minrepro
