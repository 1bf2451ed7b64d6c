#include "commands/verify.h"

#include <ostream>

#include "core/disk_space.h"
#include "core/errors.h"
#include "engine/archive/run_archive.h"

namespace minrepro {

namespace {

// A failure that did not show under another torch than the archive's is no
// evidence of a fix: the torch's difference may hide it (exit 4).
int verdict(const VerifyOptions& o, const VerifyResult& r, int status, std::ostream& out) {
  if (status != 1 || o.expect != Expect::Fail || r.torch.matches) return status;
  out << "not reproduced under PyTorch " << r.torch.running_torch << ", while the archive was made with PyTorch "
      << r.manifest.torch << ": inconclusive (run it with a Python with that torch: --python)\n";
  return 4;
}

int judge(const VerifyOptions& o, const VerifyResult& r, std::ostream& out);

}  // namespace

int runVerify(const VerifyOptions& o, std::ostream& out, std::ostream&) {
  requireUsableTmpdir();
  const VerifyResult r = verifyArchive(o, &out);
  if (o.cancelled())  // no verdict on runs that were stopped
    throw RunStopped(RunStopped::Reason::Interrupted,
                     "interrupted: the running repro.py was stopped, so there is no verdict; nothing of the archive "
                     "is left extracted");
  return verdict(o, r, judge(o, r, out), out);
}

namespace {

int judge(const VerifyOptions& o, const VerifyResult& r, std::ostream& out) {
  const Manifest& m = r.manifest;
  const int n = static_cast<int>(r.runs.size()), ok = r.asExpected();
  if (o.expect == Expect::Fail) {
    out << "recorded failure: " << m.signature.summary() << "\nreproduced in " << ok << " of " << n << " runs ("
        << 100 * ok / n << "%)\n";
  } else {
    out << "expected: exit 0" << (m.processed ? " and processed=" + std::to_string(*m.processed) : std::string())
        << "\npassed in " << ok << " of " << n << " runs (" << 100 * ok / n << "%)\n";
    if (!r.neighbour_runs.empty())
      out << "neighbours passed: " << r.neighboursAsExpected() << " of " << r.neighbour_runs.size() << "\n";
  }
  if (!r.op_runs.empty())
    out << m.op_repro << " " << (o.expect == Expect::Fail ? "failed alike" : "passed (not judged)") << " in "
        << r.opAsExpected() << " of " << r.op_runs.size() << " runs\n";
  if (o.expect == Expect::Fail && m.flaky_rate) {
    // The self-check's rule (engine/archive/run_archive.h): judged by the recorded rate, not by "every run fails".
    const FlakyJudgement j = judgeFlakyRuns(r.runs, *m.flaky_rate);
    const FlakyJudgement op = judgeFlakyRuns(r.op_runs, *m.flaky_rate);
    out << j.describe(*m.flaky_rate) << "\n";
    if (!j.conclusive) return 3;
    return j.reproduces && (r.op_runs.empty() || op.other == 0) ? 0 : 1;
  }
  if (!r.allAsExpected()) return 1;
  if (o.expect == Expect::Fail && !m.not_alone.empty()) {
    // shrink's self-check saw this archive fail to reproduce on its own: a
    // run here that reproduces it may be reading what the archive lacks
    // (a file at its place on the machine that made it), not vouching for it.
    out << "inconclusive: when it was made, this archive did not reproduce on its own (" << m.not_alone
        << "); runs on the machine that made it may read what it lacks. Fix what REPORT.md's self-check line "
           "names and shrink again\n";
    return 3;
  }
  return 0;
}

}  // namespace

}  // namespace minrepro
