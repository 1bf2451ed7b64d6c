// The keys of case.yaml's `executor:` section, one reader per executor kind
// (core/executor_kinds.def names each kind's): a new kind brings its own
// keys and how to read them, and the case loader only dispatches. Every
// kind's keys are read whatever `kind` says, so that `--executor slurm` can
// use the Slurm keys of a case that runs locally by default.
#pragma once

#include <string>
#include <vector>

#include "core/case_yaml.h"
#include "core/executor_config.h"

namespace minrepro {

struct ExecutorKeys {
  std::vector<std::string> names;  // the keys this kind reads, beside `kind`
  // Reads those of `names` that the section holds into `e` (whose kind is
  // already read); a wrong value is a BadInputError at its place.
  void (*read)(const case_yaml::Loader&, const case_yaml::MapView&, ExecutorConfig& e);
};

#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) \
  const ExecutorKeys& keys();
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND

// Every kind's keys, in the order of core/executor_kinds.def.
std::vector<const ExecutorKeys*> allExecutorKeys();

}  // namespace minrepro
