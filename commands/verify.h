// `minrepro verify repro.tar.gz`: runs a reproducer archive the way a
// maintainer would (engine/archive/run_archive.h) and prints how many runs went as
// expected.
#pragma once

#include <iosfwd>

#include "engine/archive/run_archive.h"

namespace minrepro {

// The command: exit 0 every run as expected, 1 not every run; bad input
// throws BadInputError (exit 2 through commands/run_command.h).
int runVerify(const VerifyOptions& options, std::ostream& out, std::ostream& err);

}  // namespace minrepro
