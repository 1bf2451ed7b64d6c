#include "engine/pipeline.h"

#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "core/case_yaml.h"
#include "core/delta.h"
#include "core/errors.h"
#include "core/setting_search.h"
#include "engine/format_list.h"
namespace minrepro {

void checkPassNames(const CaseConfig& config) {
  std::vector<std::string> known;
  for (const ReducerInfo& info : reducerRegistry()) known.push_back(info.name);
  for (std::size_t i = 0; i < config.reducers.size(); ++i) {
    const std::string& name = config.reducers[i];
    if (findReducer(name)) continue;
    const std::string place = i < config.reducer_places.size() ? config.reducer_places[i] + ": " : "";
    const std::string hint = case_yaml::suggestion(name, known);
    throw BadInputError(place + "expected one of the reducers " + case_yaml::joinNames(known) + ", found " +
                        case_yaml::inQuotes(name) + (hint.empty() ? "" : "; " + hint));
  }
}

namespace {

// The state a pass shares with its searches: where it reports.
struct PassContext {
  const CaseConfig& config;
  TrialOracle& oracle;
  Log& log;
  const CaseView& view;
  const CaseSize original;
  CaseSize size;  // of the current case
  // One pass alone runs one round: the end of its search is the end of the
  // run, so speculation may include the final confirmation (when one runs
  // after the passes: not when the self-check is the confirmation).
  bool single_pass;
  // Setting ("lengths end") -> the value its last search ended at. A later
  // round finding it there again checks one value below instead of
  // searching the whole range again.
  std::map<std::string, std::int64_t> setting_results;
  // The pass under way and its search's estimate of the trials it has left.
  std::string pass;
  std::size_t trials_left = 0;
  bool plain_check_follows = false;  // runPipeline's
};

// Where a long pass stands: the candidate's size on disk, how fast
// candidates are written, and the time the pass's search has left at the
// last trial's pace (an estimate: candidates shrink as it goes).
std::string passProgress(const PassContext& pc) {
  const OracleStats& s = pc.oracle.stats();
  std::ostringstream line;
  line << std::fixed << std::setprecision(0);
  if (s.last_candidate_bytes > 0) line << " | candidate " << formatMegabytes(s.last_candidate_bytes);
  if (s.write_seconds > 0.05)
    line << ", written at " << static_cast<double>(s.bytes_written) / 1e6 / s.write_seconds << " MB/s";
  const double per_trial = s.last_trial_seconds + (s.bytes_written && s.write_seconds > 0
                                                       ? static_cast<double>(s.last_candidate_bytes) /
                                                             (static_cast<double>(s.bytes_written) / s.write_seconds)
                                                       : 0);
  if (Timeline* t = pc.oracle.timeline(); t && !pc.pass.empty())
    t->setEstimate({pc.pass, pc.trials_left, per_trial * static_cast<double>(pc.trials_left)});
  if (!pc.pass.empty())
    line << " | pass " << pc.pass << ": ~" << pc.trials_left << " trials left (~"
         << per_trial * static_cast<double>(pc.trials_left) << " s)";
  return line.str();
}

std::string progressLine(const PassContext& pc) {
  const OracleStats& s = pc.oracle.stats();
  std::ostringstream line;
  // "trials 47 (24 run, 23 replayed from the journal; 5 answers reused)":
  // replayed trials are a resumed run's earlier ones, reused answers a
  // candidate asked again, which costs no trial.
  line << pc.size.describe() << " (was " << pc.original.samples << " samples) | trials " << s.trials + s.replayed
       << " (" << s.trials << " run, " << s.replayed << " replayed from the journal; " << s.reused
       << " answers reused) fail " << s.same_failure << " pass " << s.passed << " other " << s.different_failure
       << " timeout " << s.timeouts << " invariant " << s.rejected_by_invariant << " | " << std::fixed
       << std::setprecision(2)
       << (pc.oracle.decidesOnOneRun() ? std::string("deterministic so far")
                                       : "p~" + std::to_string(pc.oracle.rate().estimate()).substr(0, 4))
       << " | " << std::setprecision(0) << pc.log.elapsedSeconds() << "s, " << std::setprecision(1)
       << 60.0 * static_cast<double>(s.trials) / std::max(pc.log.elapsedSeconds(), 1.0) << " trials/min"
       << std::setprecision(0) << passProgress(pc);
  return line.str();
}

// Asks the oracle; on acceptance logs the new size of the case.
bool failsTheSameWay(PassContext& pc, const Reducer& reducer, const Selection& candidate, const Speculation& next,
                     bool recheck = false) {
  const bool failing = pc.oracle.interesting(candidate, next, recheck);
  if (failing) {
    pc.size = measureSize(candidate, pc.view);
    pc.log.detail("accepted (" + reducer.name() + "): " + pc.size.describe());
    if (Timeline* t = pc.oracle.timeline()) t->accept(pc.size.samples, pc.size.product(), pc.log.elapsedSeconds());
  }
  pc.log.status(progressLine(pc));
  return failing;
}

// The likeliest next candidates, for speculative trials in free job slots:
// what the search asks after the current query is answered `accepted`, then
// after each later query if it is accepted. When that chain ends the search
// and `confirm_at_end`, the final confirmation of its result comes last.
template <typename Search, typename Make, typename Finish>
std::vector<Speculated> likelyNext(const Search& search, const Make& make, const Finish& finish, std::size_t max,
                                   bool accepted, bool confirm_at_end) {
  Search ahead = search;
  ahead.answer(accepted);
  std::vector<Speculated> chain;
  for (; !ahead.done() && chain.size() < max; ahead.answer(true)) chain.push_back({make(ahead)});
  if (ahead.done() && confirm_at_end && chain.size() < max) chain.push_back({finish(ahead), true});
  return chain;
}

// The search's settings: flakiness handling off, plain bisection; on, as
// the failure-rate model says now (one pass rejects while the failure looks
// deterministic; the final check at full strength either way).
DeltaOptions deltaOptions(const CaseConfig& config, const TrialOracle& oracle) {
  return config.flaky.enabled ? searchOptions(oracle.rate()) : DeltaOptions{};
}

// One search of a set pass from `current`; nullopt when the failure turned
// out flaky during it (core/flaky.h), `best` then holding the last
// candidate that failed.
std::optional<Selection> searchSetPass(PassContext& pc, const SetReducer& reducer, const Selection& current,
                                       Selection& best) {
  const std::size_t units = reducer.unitCount(current);
  if (units == 0) return current;
  if (reducer.allowsEmpty() && failsTheSameWay(pc, reducer, reducer.apply(current, {}), {}))
    return reducer.apply(current, {});
  if (units == 1) return current;
  const bool one_run = pc.oracle.decidesOnOneRun();
  DeltaOptions options = deltaOptions(pc.config, pc.oracle);
  // The plain check after a forked search tests each kept sample and branch
  // again, at full strength: a final check here would ask the same twice.
  if (pc.plain_check_follows && (reducer.name() == "samples" || reducer.name() == "branches"))
    options.final_check = false;
  DeltaSearch search(units, options);
  auto make = [&](const DeltaSearch& s) { return reducer.apply(current, s.query()); };
  auto finish = [&](const DeltaSearch& s) { return reducer.apply(current, s.result()); };
  while (!search.done()) {
    auto next = [&](std::size_t max, bool accepted) {
      return likelyNext(search, make, finish, max, accepted, pc.single_pass);
    };
    pc.trials_left = search.remainingEstimate();
    const Selection candidate = make(search);
    const bool failing = failsTheSameWay(pc, reducer, candidate, next, search.checkingFinal());
    if (failing) best = candidate;
    if (one_run && !pc.oracle.decidesOnOneRun()) return std::nullopt;
    search.answer(failing);
  }
  return reducer.apply(current, search.result());
}

// A search that met evidence of flakiness in the middle starts again from
// its last failing candidate, with streaks: its one-run rejections may have
// kept what the failure does not need.
Selection runSetPass(PassContext& pc, const SetReducer& reducer, Selection current) {
  for (;;) {
    Selection best = current;
    if (auto result = searchSetPass(pc, reducer, current, best)) return *result;
    pc.log.info("the failure is flaky (" + pc.oracle.rate().contradiction() + "): pass " + reducer.name() +
                " searches again from its last failing candidate, rejecting only after a streak of passes");
    current = best;
  }
}

Selection runSettingPass(PassContext& pc, const SettingReducer& reducer, Selection current) {
  // Settings are re-read after each search: shortening the window changes the
  // per-sample settings. Each setting is searched once per pass, by name.
  std::set<std::string> searched;
  for (bool again = true; again;) {
    again = false;
    for (const Setting& setting : reducer.settings(current)) {
      if (!searched.insert(setting.name).second) continue;
      const std::string id = reducer.name() + " " + setting.name;
      std::int64_t top = setting.value;  // known to fail
      if (auto it = pc.setting_results.find(id);
          it != pc.setting_results.end() && it->second == top && setting.min < top) {
        // Minimal last round: one trial says whether it still is.
        if (!failsTheSameWay(pc, reducer, reducer.withSetting(current, setting, top - 1), {})) continue;
        top -= 1;
      }
      SettingSearch search(setting.min, top);
      auto make = [&](const SettingSearch& s) { return reducer.withSetting(current, setting, s.query()); };
      auto finish = [&](const SettingSearch& s) { return reducer.withSetting(current, setting, s.result()); };
      while (!search.done()) {
        // Other settings may follow: no confirmation at the end of this chain.
        auto next = [&](std::size_t max, bool accepted) {
          return likelyNext(search, make, finish, max, accepted, false);
        };
        pc.trials_left = search.remainingEstimate();
        search.answer(failsTheSameWay(pc, reducer, make(search), next));
      }
      if (search.result() != setting.value)
        pc.log.info("  " + reducer.name() + " " + setting.name + ": " + std::to_string(setting.value) + " -> " +
                    std::to_string(search.result()));
      current = reducer.withSetting(current, setting, search.result());
      pc.setting_results[id] = search.result();
      again = true;
      break;
    }
  }
  return current;
}

Selection runPass(PassContext& pc, const Reducer& reducer, const Selection& current) {
  const OracleStats before = pc.oracle.stats();
  const CaseSize size_before = pc.size;
  pc.pass = reducer.name();
  if (Timeline* t = pc.oracle.timeline()) t->startPass(reducer.name(), pc.log.elapsedSeconds());
  const Selection next =
      reducer.asSet() ? runSetPass(pc, *reducer.asSet(), current) : runSettingPass(pc, *reducer.asSettings(), current);
  const OracleStats& after = pc.oracle.stats();
  pc.log.info("pass " + reducer.name() + ": " + size_before.describe() + " -> " + pc.size.describe() + " in " +
              std::to_string(after.trials + after.replayed - before.trials - before.replayed) + " trials (" +
              std::to_string(after.rejected_by_invariant - before.rejected_by_invariant) +
              " candidates rejected by invariants without a trial)");
  return next;
}

}  // namespace

// What runPipeline asks first: the first pass's first query and the ones
// after it if each is accepted (runSetPass / runSettingPass, from a fresh start).
std::vector<Speculated> openingCandidates(const CaseConfig& config, const CaseView& view, const Selection& start,
                                          std::size_t max) {
  if (config.reducers.empty() || max == 0) return {};
  const auto reducer = findReducer(config.reducers.front())->create(view);
  auto opening = [&](const auto& search, const auto& make) {
    std::vector<Speculated> chain;
    if (search.done()) return chain;
    chain.push_back({make(search)});
    for (auto& s : likelyNext(search, make, make, max - 1, true, false)) chain.push_back(std::move(s));
    return chain;
  };
  if (const SettingReducer* setting_pass = reducer->asSettings()) {
    const auto settings = setting_pass->settings(start);
    if (settings.empty()) return {};
    const Setting& setting = settings.front();
    return opening(SettingSearch(setting.min, setting.value),
                   [&](const SettingSearch& s) { return setting_pass->withSetting(start, setting, s.query()); });
  }
  const SetReducer& set = *reducer->asSet();
  const std::size_t units = set.unitCount(start);
  if (units == 0) return {};
  if (set.allowsEmpty()) return {{set.apply(start, {})}};
  if (units == 1) return {};
  return opening(DeltaSearch(units, config.flaky.enabled ? searchOptions(FailureRate{}) : DeltaOptions{}),
                 [&](const DeltaSearch& s) { return set.apply(start, s.query()); });
}

Selection runPipeline(const CaseConfig& config, const CaseView& view, Selection current, TrialOracle& oracle, Log& log,
                      bool confirmation_follows, bool plain_check_follows) {
  const CaseSize original = measureSize(current, view);
  PassContext pc{.config = config,
                 .oracle = oracle,
                 .log = log,
                 .view = view,
                 .original = original,
                 .size = original,
                 .single_pass = config.reducers.size() == 1 && confirmation_follows,
                 .setting_results = {},
                 .pass = {},
                 .trials_left = 0,
                 .plain_check_follows = plain_check_follows};
  std::vector<std::unique_ptr<Reducer>> passes;
  for (const auto& name : config.reducers) passes.push_back(findReducer(name)->create(view));
  for (int round = 1;; ++round) {
    const double before = pc.size.product();
    for (const auto& reducer : passes) current = runPass(pc, *reducer, current);
    if (pc.size.product() >= before) break;
    // One pass alone is done after one round (samples are 1-minimal); with
    // several, one pass's progress can open another's.
    if (passes.size() <= 1) break;
    log.info("round " + std::to_string(round) + " made progress (" + pc.size.describe() +
             "); running the passes again");
  }
  return current;
}

}  // namespace minrepro
