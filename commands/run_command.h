// The one place where an error becomes an exit status. Every command runs
// through runCommand: the typed errors of core/errors.h end with their own
// status and one line on stderr ("minrepro verify: error: ..."); anything
// else is a bug of minrepro's, reported as an internal error (exit 1) with
// a request to report it. No command can end in std::terminate.
#pragma once

#include <exception>
#include <functional>
#include <iosfwd>
#include <string>

#include "core/errors.h"

namespace minrepro {

// Runs `body` (which returns the command's own status) and maps whatever it
// throws, printing the error after "minrepro COMMAND: ".
int runCommand(const std::string& command, std::ostream& err, const std::function<int()>& body);

}  // namespace minrepro
