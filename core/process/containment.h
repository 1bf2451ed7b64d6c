// Nothing a trial starts outlives it. A trial runs in its own process group,
// which is killed when the trial ends; but a descendant can leave the group
// (setsid(), setpgid()) and ignore SIGTERM. Three things catch those:
//
//  - every trial process carries MINREPRO_TRIAL_TAG=<scope>/<pid>.<n> in its
//    environment, which its descendants inherit: the tag says which trial,
//    of which run, a process belongs to. A child only forked from a process
//    that set the tag in memory (a fork server's trial) shows the server's
//    environment in /proc instead: a fork server is started with a tag of
//    its own in the run's scope, so those children (and what they fork
//    without exec, even after setsid and chdir /) carry the run's scope;
//    they also have the trial's directory as their working directory
//    unless they moved away, and that says which trial;
//  - minrepro is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a
//    descendant whose parent dies is reparented to minrepro, not to init, so
//    when a trial ends, its escaped descendants are minrepro's children and
//    killTrialOrphans finds them by their tag, kills and reaps them;
//  - a run killed with SIGKILL cannot clean up: the next run in the same
//    work directory (whose lock says no other run holds it) kills every
//    process of this user whose tag has the directory as its scope
//    (killLeftovers), before its first trial.
//
// A descendant that clears its own environment loses its tag; it is still
// reparented here and killed when the run ends (killAllOrphans), but if the
// run is killed with SIGKILL it is found only while it stays in a trial's
// directory.
#pragma once

#include <sys/types.h>
#include <cstddef>

#include <filesystem>
#include <string>

namespace minrepro {

inline constexpr const char* kTrialTagVariable = "MINREPRO_TRIAL_TAG";

// Makes this process the subreaper of its descendants; idempotent.
void adoptOrphans();

// The scope of the tags this process gives from now on: the run's work
// directory. Until set: "pid-<pid>", which no later run looks for.
void setTrialScope(const std::string& scope);
std::string trialScope();  // "" until set

// A tag no other trial has: "<scope>/<pid>.<n>".
std::string newTrialTag();

// Kills with SIGKILL every child of this process (orphans reparented here
// included) whose environment holds `tag` or whose working directory lies
// in `trial_dir`, and reaps it; the children those leave are reparented
// here in turn, so it repeats until none is left. Returns how many.
std::size_t killTrialOrphans(const std::string& tag, const std::filesystem::path& trial_dir);

// After a trial's group was killed: reaps the members that were reparented
// here when its leader exited (a crashed trial's workers), which would
// otherwise stay zombies until the command ends. Waits at most ~1 s.
void reapGroup(pid_t group);

// Kills every process of this user whose tag lies in `scope` or whose
// working directory lies in `trials_dir` (a killed run's trials and what
// they started). Returns how many.
std::size_t killLeftovers(const std::string& scope, const std::filesystem::path& trials_dir);

// When the run ends: kills and reaps every remaining child of this process,
// tagged or not, and reaps orphans that already exited. Only for the end of
// a run, when no trial and no fork server is left. Returns how many it killed.
std::size_t killAllOrphans();

}  // namespace minrepro
