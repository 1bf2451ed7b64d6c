#include "commands/run_command.h"

#include <boost/program_options/errors.hpp>

#include <filesystem>
#include <new>
#include <ostream>

#include "core/text_lines.h"
#include "engine/archive/scrub.h"

namespace minrepro {

namespace {

// What the user reads for an error, and its status.
std::pair<ExitStatus, std::string> describeError(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.status(), std::string("error: ") + e.what()};
  } catch (const boost::program_options::error& e) {
    return {ExitStatus::BadInput, std::string("error: ") + e.what() + " (see --help)"};
  } catch (const std::bad_alloc&) {
    return {ExitStatus::InternalError,
            "error: out of memory in minrepro itself (not in a trial); give it more memory or a smaller batch"};
  } catch (const std::filesystem::filesystem_error& e) {
    // A path minrepro was given or made that the system refused: nothing
    // we can decide for the user, but not a crash either.
    return {ExitStatus::InternalError, std::string("internal error: ") + e.what() +
                                           " (a file operation failed; if the paths above are yours, check their "
                                           "permissions and free space, else please report this)"};
  } catch (const std::exception& e) {
    return {ExitStatus::InternalError, std::string("internal error: ") + e.what() +
                                           " (a bug in minrepro: please report it with the command line)"};
  } catch (...) {
    return {ExitStatus::InternalError, "internal error: an unknown exception (a bug in minrepro: please report it)"};
  }
}

}  // namespace

int runCommand(const std::string& command, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (...) {
    const auto [status, line] = describeError(std::current_exception());
    // An error names paths and entries the user gave or an archive holds: a
    // token in a file's name is scrubbed here as in every other line (probe 30).
    err << "minrepro " << command << ": " << scrubSecretsOnly(text::printable(line), machineScrubContext()) << "\n";
    return static_cast<int>(status);
  }
}

}  // namespace minrepro
