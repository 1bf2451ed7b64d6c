// REPORT.html as people look at it: the real binary on the bundled examples,
// the page read as text (the verdict, a mark per journaled trial, the
// culprit's cell marked) and rendered by a real browser (Debian's chromium,
// headless): no console message, no request (the page's Content-Security-
// Policy refuses every fetch, and a refusal is a console error), and a
// screenshot of each example written to the test output directory
// (build/tests/report-screenshots/). Without chromium the browser half skips,
// except under CI=true, where scripts/install-deps.sh has installed it.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "core/text_lines.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::runCommand;

using ReportHtml = testing::ExampleCases;

std::size_t countOf(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The marks of the chart against trial numbers that stand for a trial (not a cached answer).
std::size_t trialMarks(const std::string& html) {
  const std::size_t begin = html.find("<svg id=\"by-trial\""), end = html.find("</svg>", begin);
  const std::string chart = html.substr(begin, end - begin);
  return countOf(chart, "<circle class=\"mark ") - countOf(chart, "data-trial=\"0\"");
}

std::size_t journaledTrials(const fs::path& work_dir) {
  std::size_t n = 0;
  for (const std::string& line : text::splitLines(readFile(work_dir / "journal.txt")))
    n += line.rfind("trial ", 0) == 0;
  return n;
}

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser"})
    if (runCommand(std::string("command -v ") + name + " >/dev/null 2>&1") == 0) return name;
  return "";
}

// Renders the page headless into build/tests/report-screenshots/NAME.png;
// fails on anything the page said on the browser's console.
void renderInBrowser(const fs::path& html, const std::string& name) {
  const std::string browser = chromium();
  if (browser.empty()) {
    if (const char* ci = std::getenv("CI"); ci && std::string(ci) == "true") FAIL() << "chromium is not installed";
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  }
  const fs::path shots = fs::path(MINREPRO_TEST_OUTPUT) / "report-screenshots";
  fs::create_directories(shots);
  const fs::path png = shots / (name + ".png");
  fs::remove(png);
  testing::TempDir profile("minrepro-chromium");
  std::string log;
  runCommand(browser +
                 " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" + profile.path().string() +
                 " --enable-logging=stderr --v=0 --window-size=1100,2200 --screenshot=" + png.string() + " file://" +
                 html.string() + " 2>&1",
             &log);
  ASSERT_TRUE(fs::exists(png) && fs::file_size(png) > 10000) << log;
  for (const std::string& line : text::splitLines(log))
    EXPECT_EQ(line.find("CONSOLE"), std::string::npos) << "the page said something on the console: " << line;
}

void expectSelfContained(const std::string& html) {
  EXPECT_NE(html.find("content=\"default-src 'none'; style-src 'unsafe-inline'\""), std::string::npos);
  for (const char* outside : {"<script", "http://", "https://", "src=", "@import", "url("})
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
}

TEST_F(ReportHtml, Class4ShowsTheVerdictEveryTrialAndTheCulpritsCell) {
  const testing::ShrunkExample run = testing::shrunkExample("class4");
  ASSERT_EQ(run.status, 0) << run.output;
  const fs::path dir = extract(run.archive);
  const std::string html = readFile(dir / "REPORT.html");
  expectSelfContained(html);
  EXPECT_NE(html.find("<h1>index-error in nll_loss</h1>"), std::string::npos);
  EXPECT_NE(html.find("Target 4 is out of bounds."), std::string::npos);
  EXPECT_TRUE(std::regex_search(
      html, std::regex("id=\"minimal\">512 samples \u2192 1; non-trivial values [0-9]+ \u2192 1</b>")));
  EXPECT_NE(html.find("reproduced on its own in 3 of 3 runs"), std::string::npos);
  // A mark per journaled trial, on both charts.
  const fs::path work_dir = run.archive.parent_path() / "work";
  EXPECT_EQ(trialMarks(html), journaledTrials(work_dir));
  EXPECT_GT(journaledTrials(work_dir), 5u);
  const std::string by_time = html.substr(html.find("<svg id=\"by-time\""));
  EXPECT_EQ(countOf(html, "<circle class=\"mark "), 2 * countOf(by_time.substr(0, by_time.find("</svg>")), "<circle"));
  // The target table: the kept sample's 4 is the one cell marked; the cut samples' targets are not.
  const std::size_t table = html.find("<table class=\"values\" data-tensor=\"target\">");
  ASSERT_NE(table, std::string::npos);
  const std::string target = html.substr(table, html.find("</table>", table) - table);
  EXPECT_NE(target.find("<tr class=\"kept\"><th>kept: id 10313</th><td class=\"outlier\">4</td>"), std::string::npos)
      << target;
  EXPECT_EQ(countOf(target, "outlier"), 1u) << target;
  EXPECT_NE(html.find("the rest of the batch spans -100 .. 3"), std::string::npos);
  // The work directory keeps the same page.
  EXPECT_EQ(readFile(work_dir / "REPORT.html"), html);
  renderInBrowser(dir / "REPORT.html", "class4");
}

TEST_F(ReportHtml, AnImageCaseDrawsTheKeptImageBesideImagesThatWereCut) {
  const testing::ShrunkExample run = testing::shrunkExample("image");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("(ids [90041])"), std::string::npos) << run.output;
  const fs::path dir = extract(run.archive);
  const std::string html = readFile(dir / "REPORT.html");
  expectSelfContained(html);
  EXPECT_NE(html.find("data-kind=\"image\""), std::string::npos);
  EXPECT_EQ(countOf(html, "<svg class=\"thumb\""), 3u) << "the kept image and two that were cut";
  EXPECT_NE(html.find("kept: id 90041"), std::string::npos);
  // The unscaled pixel is what sets it apart, in both reports.
  EXPECT_NE(html.find("<li><code>image</code>: sample id 90041 holds 114 at position"), std::string::npos) << html;
  EXPECT_NE(readFile(dir / "REPORT.md").find("- `image`: sample id 90041 holds 114 at position"), std::string::npos);
  renderInBrowser(dir / "REPORT.html", "image");
}

TEST_F(ReportHtml, AnAudioCaseDrawsTheKeptClipsWaveform) {
  const testing::ShrunkExample run = testing::shrunkExample("audio");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("(ids [95017])"), std::string::npos) << run.output;
  const fs::path dir = extract(run.archive);
  const std::string html = readFile(dir / "REPORT.html");
  expectSelfContained(html);
  EXPECT_NE(html.find("data-kind=\"signal\""), std::string::npos);
  EXPECT_EQ(countOf(html, "<svg class=\"wave\""), 3u);
  renderInBrowser(dir / "REPORT.html", "audio");
}

// While shrink runs, the work directory's REPORT.html says where it stands;
// the finished run replaces it with the final page.
TEST_F(ReportHtml, TheWorkDirectorysPageIsLiveDuringTheRun) {
  const fs::path work_dir = work_.path() / "work", page = work_dir / "REPORT.html";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string case_file = (example("pair") / "case.yaml").string(),
                      archive = (work_.path() / "repro.tar.gz").string(), work = work_dir.string();
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "shrink", "-q", "--config", case_file.c_str(), "--output",
            archive.c_str(), "--work-dir", work.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string live;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (live.empty() && fs::exists(page)) {
      const std::string text = readFile(page);
      if (text.find("minrepro is reducing") != std::string::npos) live = text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_FALSE(live.empty()) << "no live page was seen during the run";
  EXPECT_NE(live.find("samples kept after"), std::string::npos) << live;
  EXPECT_NE(live.find("<svg id=\"by-trial\""), std::string::npos);
  expectSelfContained(live);
  const std::string final_page = readFile(page);
  EXPECT_EQ(final_page.find("minrepro is reducing"), std::string::npos);
  EXPECT_NE(final_page.find("id=\"verdict\""), std::string::npos);
}

}  // namespace
}  // namespace minrepro
