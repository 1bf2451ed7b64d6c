#include <string_view>

#include "harness/fork_server_main.h"
#include "harness/trial_main.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--serve") return minrepro::forkServerMain(argc, argv);
  return minrepro::trialMain(argc, argv);
}
