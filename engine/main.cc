// minrepro: the command line. Thin: parses options and calls the library.
#include <boost/program_options.hpp>
#include <iostream>

#include "engine/shrink.h"
#include "reducers/reducer.h"

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: minrepro <command> [options]\n\n"
    "commands:\n"
    "  shrink --config case.yaml   reduce a failing batch to a minimal reproducer archive\n"
    "  reducers                    list the reducer passes\n"
    "  --version                   print the version\n\n"
    "exit status: 0 reduced, 1 internal error, 2 bad input, 3 the original does not reproduce,\n"
    "             4 trials cannot start\n";

int shrinkCommand(const std::vector<std::string>& args) {
  po::options_description opts("minrepro shrink options");
  std::string config, output, work_dir, trial_binary, python = "/usr/bin/python3";
  opts.add_options()("help,h", "show this help")
      ("config,c", po::value(&config)->required(), "the case file (case.yaml)")
      ("output,o", po::value(&output), "archive to write (default: case.yaml's output)")
      ("work-dir", po::value(&work_dir), "directory for trials and the log (default: case.yaml's work_dir)")
      ("trial-binary", po::value(&trial_binary), "minrepro-trial to use (default: next to minrepro)")
      ("python", po::value(&python), "Python with PyTorch, for the environment record (default /usr/bin/python3)")
      ("quiet,q", "only print errors");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "minrepro shrink: " << e.what() << "\n" << opts << "\n";
    return static_cast<int>(minrepro::ExitStatus::BadInput);
  }
  minrepro::ShrinkOptions options;
  options.config = config;
  if (!output.empty()) options.output = output;
  if (!work_dir.empty()) options.work_dir = work_dir;
  options.trial_binary = trial_binary;
  options.python = python;
  options.quiet = vm.count("quiet") > 0;
  return static_cast<int>(minrepro::runShrink(options));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  if (command == "shrink") return shrinkCommand(rest);
  if (command == "reducers") {
    for (const auto& r : minrepro::reducerRegistry()) std::cout << r.name << "\t" << r.description << "\n";
    return 0;
  }
  if (command == "--version" || command == "version") {
    std::cout << "minrepro " << MINREPRO_VERSION << "\n";
    return 0;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "minrepro: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
