// signature.txt, the archive's manifest: the failure repro.py must show
// before a fix, and what a correct run must print after it. Written by
// shrink, read by verify, compare and regress.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/failure_signature.h"
#include "engine/archive/neighbours.h"

namespace minrepro {

struct Manifest {
  FailureSignature signature;
  // The operator is compared only when repro.py runs the very program the
  // trials ran (a trial command). For the built-in harness the trials ran
  // LibTorch, which names the kernel (nll_loss), while repro.py's Python
  // traceback names the functional (cross_entropy): one bug, two names.
  bool compare_operator = false;
  // Likewise the way the process ended (failure.ending): only when repro.py
  // runs the program the trials ran and the case did not say `ending: any`.
  // The built-in harness dies of an uncaught C++ error (SIGABRT) where
  // repro.py's Python raises it.
  bool compare_ending = false;
  // case.yaml's failure.message: when the trials matched messages by this
  // pattern, so does verify (else by the message with its numbers masked).
  std::string message_pattern;
  // Samples a correct run must process (targets that are not ignore_index);
  // absent when the archive cannot know (a trial command, no target).
  std::optional<std::int64_t> processed;
  // The op-level reproducer (engine/op_step/op_step.h), "op/repro_op.py",
  // when the archive has one: it must fail like the case too, the operator
  // aside (it is called directly, not from the program).
  std::string op_repro;
  // The failure rate of a flaky case (its self-check needed only one
  // failing run): verify then judges by the rule of judgeFlakyRuns
  // (engine/archive/run_archive.h), not by "every run fails".
  std::optional<double> flaky_rate;
  // Neighbour batches (docs/method.md, "Neighbour cases") that --expect pass also runs, each with
  // its own expected count; and the neighbours that could not be made, why.
  std::vector<NeighbourCase> neighbours;
  std::vector<std::string> neighbours_skipped;
  // The seal of this user's minrepro over the archive's files
  // (engine/archive/seal.h), written last by sealEntries; kept here only to
  // be written back. Archives made before seals said `made-on:`, which is
  // read and ignored: such an archive counts as made elsewhere.
  std::string seal;
  // The Python whose PyTorch made the case and ran the self-check
  // (`--python`, else the trial's), and that PyTorch's version: verify,
  // regress and compare run the archive with it when it is on this machine
  // (engine/torch_versions.h, chooseArchiveTorch), and say so when not.
  std::string python;
  std::string torch;
  // A timeout's trial limit (trial.timeout), past which a run counts as the
  // recorded hang: verify gives each run that long unless --timeout says
  // otherwise (its 600 s made three runs of a 4 s hang take 30 minutes).
  std::optional<double> trial_timeout_s;
  // Why shrink's self-check found that the archive does not reproduce on
  // its own (exit 6), in words without this machine's paths; empty when it
  // did. A run that reproduces it where it was made may be reading what it
  // lacks (a file at its place), so verify calls such a pass inconclusive.
  std::string not_alone;
};

std::string renderManifest(const Manifest& manifest);
// Throws BadInputError naming `source` when a line is not understood.
// An archive's signature.txt, read when it is at most 1 MiB (minrepro
// writes a few KB; a 900 MB message took verify to 4.7 GB: probe 27), else
// BadInputError.
Manifest readManifestFile(const std::filesystem::path& file, const std::string& source);

Manifest parseManifest(const std::string& text, const std::string& source);

}  // namespace minrepro
