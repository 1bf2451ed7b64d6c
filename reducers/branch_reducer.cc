// Branches: each optional branch still on is a unit (a harness transform or
// a command switch declared in case.yaml). Dropping a unit switches it off;
// the oracle then runs the trial without that transform, or with the
// switch's "off" arguments and environment.
#include "reducers/reducer.h"

namespace minrepro {
namespace {

class BranchReducer : public SetReducer {
 public:
  explicit BranchReducer(const CaseView& view) : view_(view) {}
  std::string name() const override { return "branches"; }
  bool allowsEmpty() const override { return true; }

  std::size_t unitCount(const Selection& current) const override { return on(current).size(); }

  std::vector<std::string> describe(const Selection& minimal, const std::vector<std::int64_t>&) const override {
    const std::vector<std::string> branches = view_.optionalBranches();
    if (branches.empty()) return {};
    std::string on, off;
    for (const auto& b : branches) (minimal.branches_off.count(b) ? off : on) += (std::string(", ") + b);
    return {"Branches needed: " + (on.empty() ? std::string("none") : on.substr(2)) +
            (off.empty() ? "" : "; switched off without losing the failure: " + off.substr(2))};
  }

  Selection apply(const Selection& current, const std::vector<std::size_t>& keep) const override {
    const std::vector<std::string> branches = on(current);
    Selection next = current;
    std::size_t k = 0;
    for (std::size_t unit = 0; unit < branches.size(); ++unit) {
      if (k < keep.size() && keep[k] == unit)
        ++k;
      else
        next.branches_off.insert(branches[unit]);
    }
    return next;
  }

 private:
  std::vector<std::string> on(const Selection& current) const {
    std::vector<std::string> names;
    for (const auto& b : view_.optionalBranches())
      if (!current.branches_off.count(b)) names.push_back(b);
    return names;
  }

  const CaseView& view_;
};

}  // namespace

std::unique_ptr<Reducer> createBranchReducer(const CaseView& view) { return std::make_unique<BranchReducer>(view); }

void writeBranchesKey(const Selection& selection, std::string& key) {
  for (const auto& branch : selection.branches_off) key += "|off " + branch;
}

}  // namespace minrepro
