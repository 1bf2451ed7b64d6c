// A Selection as one line of text and back: what the journal records of an
// accepted candidate, so that the best case so far can be written from the
// journal (at the end of a run, on SIGUSR1, or by `shrink
// --materialize-best` after a run was killed) instead of at every
// acceptance. Runs of consecutive indices are written as ranges, so the
// line stays short for the candidates the sample pass makes (whole chunks
// of a large batch).
#pragma once

#include <optional>
#include <string>

#include "reducers/reducer.h"

namespace minrepro {

// Fields separated by ';', no spaces or newlines:
//   samples=0-4999,5002;window=0-513;lengths=7:300;off=noise;values.input=3,9-11
// Names are percent-encoded outside [A-Za-z0-9_.-].
std::string selectionText(const Selection& selection);
// nullopt when the text is not one selectionText wrote.
std::optional<Selection> parseSelectionText(const std::string& text);

}  // namespace minrepro
