// libFuzzer target: the failure classifier (a trial's output -> its
// signature) and the triage reader built on it, on any text. Both must end,
// without a crash, on whatever a program or a stranger's log holds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "commands/triage.h"
#include "core/failure_signature.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const minrepro::FailureSignature signature = minrepro::classifyText(text);
  (void)signature.summary();
  const minrepro::Triage triage = minrepro::triageText(text);
  (void)minrepro::renderTriage(triage, "fuzz.log");
  return 0;
}
