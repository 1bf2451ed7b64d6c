// The engine says whether the passes a case names exist (engine/pipeline.h:
// checkPassNames), at the place in case.yaml or the pipeline file where each
// was written; the case loader only keeps the places.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/case_config.h"
#include "core/errors.h"
#include "engine/pipeline.h"
#include "reducers/reducer.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

class PassNames : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("minrepro_pass_names_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    for (const char* name : {"batch.pt", "model.pt"}) std::ofstream(dir_ / name) << "x";
  }
  void TearDown() override { fs::remove_all(dir_); }

  CaseConfig caseWith(const std::string& reducers_line) {
    std::ofstream(dir_ / "case.yaml") << "batch: batch.pt\nsamples:\n  tensors:\n    input: 0\n"
                                         "trial:\n  harness:\n    model: model.pt\n"
                                      << reducers_line;
    return loadCase(dir_ / "case.yaml");
  }

  std::string errorFor(const CaseConfig& c) {
    try {
      checkPassNames(c);
    } catch (const BadInputError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(PassNames, AnUnknownNameIsRefusedWhereItWasWrittenWithTheNearestPass) {
  const std::string error = errorFor(caseWith("reducers: [samples, sample]\n"));
  EXPECT_NE(error.find((dir_ / "case.yaml").string() + ":8:21: reducers[1]: expected one of the reducers samples, "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("found 'sample'; did you mean 'samples'?"), std::string::npos) << error;
}

TEST_F(PassNames, EveryRegisteredPassIsAccepted) {
  std::string names;
  for (const ReducerInfo& info : reducerRegistry()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  EXPECT_EQ(reducerRegistry().front().name, std::string("samples"));
  EXPECT_EQ(errorFor(caseWith("reducers: [" + names + "]\n")), "");
  EXPECT_EQ(errorFor(caseWith("")), "") << "the default pipeline names registered passes only";
}

TEST_F(PassNames, APipelineFilesUnknownPassIsRefusedInThatFile) {
  std::ofstream(dir_ / "mine.yaml") << "passes: [samples, valuez]\n";
  const std::string error = errorFor(caseWith("pipeline: mine.yaml\n"));
  EXPECT_NE(error.find("mine.yaml:1:19: passes[1]: expected one of the reducers"), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean 'values'?"), std::string::npos) << error;
}

// configs/pipelines/default.yaml is the registry's passes in its order,
// written out by hand for users to copy: a pass added to reducers.def and
// not to the default pipeline would never run unless named (#44.4).
TEST(DefaultPipeline, HoldsEveryRegisteredPassInTheRegistrysOrder) {
  const YAML::Node pipeline = YAML::LoadFile(std::string(MINREPRO_SOURCE_DIR) + "/configs/pipelines/default.yaml");
  std::vector<std::string> passes, registered;
  for (const auto& pass : pipeline["passes"]) passes.push_back(pass.as<std::string>());
  for (const ReducerInfo& info : reducerRegistry()) registered.push_back(info.name);
  EXPECT_EQ(passes, registered);
}

}  // namespace
}  // namespace minrepro
