// The list of every executor kind's keys, made from core/executor_kinds.def.
#include "core/executor_keys/executor_keys.h"

namespace minrepro {

std::vector<const ExecutorKeys*> allExecutorKeys() {
  return {
#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) &keys(),
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND
  };
}

}  // namespace minrepro
