#include "engine/archive/report_html.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/text_lines.h"
#include "engine/archive/scrub.h"
#include "engine/format_list.h"

namespace minrepro {

namespace fs = std::filesystem;

namespace {

std::string esc(const std::string& raw) {
  std::string out;
  for (const char c : text::printable(raw)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Escaped text whose `quoted` parts are shown as code (REPORT.md's markdown).
std::string escWithCode(const std::string& raw) {
  std::string out;
  bool open = false;
  for (const char c : esc(raw)) {
    if (c != '`') {
      out += c;
      continue;
    }
    out += open ? "</code>" : "<code>";
    open = !open;
  }
  return open ? out + "</code>" : out;
}

std::string num(double x, int digits = 4) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", digits, x);
  return text;
}

const char* const kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1040px;color:#1d1d1f;padding:0 16px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.verdict{border:2px solid #b00020;border-radius:8px;padding:12px 16px;background:#fff5f6}
.verdict.live{border-color:#0060a8;background:#f3f8fd}
.first{font-family:ui-monospace,monospace;white-space:pre-wrap;background:#fff;padding:6px;border-radius:4px}
.k{color:#555;min-width:12em;display:inline-block}
svg text{font:11px system-ui,sans-serif;fill:#333}
.same{fill:#c62828;background:#c62828}.passed{fill:#2e7d32;background:#2e7d32}.different{fill:#ef6c00;background:#ef6c00}
.timed-out{fill:#6a1b9a;background:#6a1b9a}.cached{fill:#9e9e9e;background:#9e9e9e}
.band{fill:#f2f2f2}.band.odd{fill:#e6eef7}.accepted{fill:none;stroke:#111;stroke-width:1.5}
.legend span{display:inline-block;margin-right:14px}.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 6px;font-family:ui-monospace,monospace;font-size:12px}
th{background:#f6f6f6;text-align:left}tr.kept th{background:#ffe9ec}td.outlier{background:#ffcc80;font-weight:bold;outline:2px solid #b00020}
.panel{margin:14px 0}.meta{color:#555;font-size:12px}.images{display:flex;gap:14px;flex-wrap:wrap}
.images figure{margin:0}.images figcaption{font-size:12px;text-align:center}
details{margin:10px 0}summary{cursor:pointer;font-weight:600}
)";

const MarkOutcome kOutcomes[] = {MarkOutcome::Same, MarkOutcome::Passed, MarkOutcome::Different, MarkOutcome::TimedOut,
                                 MarkOutcome::Cached};

const char* outcomeWords(MarkOutcome o) {
  switch (o) {
    case MarkOutcome::Same:
      return "failed the same way";
    case MarkOutcome::Passed:
      return "passed";
    case MarkOutcome::Different:
      return "failed differently";
    case MarkOutcome::TimedOut:
      return "timed out";
    case MarkOutcome::Cached:
      return "answered from cache or journal";
  }
  return "";
}

// ---------------------------------------------------------------- verdict

void writeVerdict(std::ostream& out, const CaseConfig& config, const HtmlReportInput& in, const ScrubContext& scrub) {
  const ReductionSummary* s = in.summary;
  out << "<section class=\"verdict" << (s ? "" : " live") << "\" id=\"verdict\">";
  if (!s) {
    out << "<h1>minrepro is reducing " << esc(config.case_file.filename().string()) << "</h1><p>" << esc(in.live_status)
        << "</p><p>This page is rewritten every few seconds while the run goes on; reload it.</p></section>";
    return;
  }
  out << "<h1>" << esc(familyName(s->signature.family))
      << (s->signature.op.empty() ? "" : " in " + esc(s->signature.op)) << "</h1>"
      << "<div class=\"first\">" << esc(scrubText(s->signature.message, scrub)) << "</div><p>"
      << "<span class=\"k\">minimal case</span><b id=\"minimal\">" << esc(in.size_line) << "</b><br>"
      << "<span class=\"k\">kept sample ids</span>" << esc(formatList(s->kept_ids, 16)) << "<br>"
      << "<span class=\"k\">reproduces alone</span>" << esc(scrubText(s->self_check.describe(), scrub)) << "<br>";
  if (s->op.status == OpStepStatus::Made) {
    const OpCall& call = s->op.reduced ? *s->op.reduced : *s->op.found;
    out << "<span class=\"k\">the call alone</span><code>" << esc(call.op) << "</code> in <code>op/repro_op.py</code>, "
        << esc(s->op.alone) << "<br>";
  }
  if (!s->incomplete.empty())
    out << "<b>Stopped early (" << esc(s->incomplete) << "): the best case so far, possibly not minimal.</b><br>";
  for (const auto& w : s->warnings) out << "<b>Warning:</b> " << esc(w) << "<br>";
  const std::string torch = madeWithTorch(*s);
  out << "<span class=\"k\">run it</span><code>python repro.py</code> (a Python with PyTorch"
      << (torch.empty() ? "" : " " + esc(torch) + ", the version it was made with") << ")</p></section>";
}

// ---------------------------------------------------------------- the reduction drawn

struct Axis {
  double lo, hi, px0, px1;
  bool log;
  double at(double v) const {
    const double a = log ? std::log10(std::max(v, 1.0)) : v, l = log ? std::log10(std::max(lo, 1.0)) : lo,
                 h = log ? std::log10(std::max(hi, 1.0)) : hi;
    return h <= l ? px0 : px0 + (a - l) / (h - l) * (px1 - px0);
  }
};

void writeBands(std::ostream& out, const Timeline& t, const Axis& x, bool by_time) {
  std::size_t i = 0;
  for (const PassBand& p : t.passes()) {
    const double a = by_time ? x.at(p.start_seconds) : x.at(static_cast<double>(p.first_mark));
    const double b = by_time ? x.at(p.end_seconds) : x.at(static_cast<double>(p.end_mark));
    out << "<rect class=\"band" << (i++ % 2 ? " odd" : "") << "\" x=\"" << num(a, 6) << "\" y=\"20\" width=\""
        << num(std::max(b - a, 1.0), 6) << "\" height=\"200\"><title>" << esc(p.name) << "</title></rect>";
    if (b - a > 7.0 * static_cast<double>(p.name.size()) + 6)
      out << "<text x=\"" << num(a + 3, 6) << "\" y=\"32\">" << esc(p.name) << "</text>";
  }
}

void writeMarks(std::ostream& out, const Timeline& t, const Axis& x, const Axis& y, bool by_time) {
  const auto& marks = t.marks();
  for (std::size_t i = 0; i < marks.size(); ++i) {
    const TrialMark& m = marks[i];
    out << "<circle class=\"mark " << markOutcomeName(m.outcome) << "\" data-trial=\"" << m.number << "\" cx=\""
        << num(x.at(by_time ? m.seconds : static_cast<double>(i)), 6) << "\" cy=\"" << num(y.at(m.size), 6)
        << "\" r=\"2.6\"><title>" << (m.number ? "trial " + std::to_string(m.number) : std::string("cached answer"))
        << ": " << m.samples << " samples, size " << num(m.size) << ", " << outcomeWords(m.outcome)
        << "</title></circle>";
  }
}

void writeAccepted(std::ostream& out, const Timeline& t, const Axis& x, const Axis& y, bool by_time, double first) {
  out << "<polyline class=\"accepted\" points=\"" << num(x.px0, 6) << "," << num(y.at(first), 6);
  double last = first;
  for (const AcceptedStep& s : t.steps()) {
    const double px = x.at(by_time ? s.seconds : static_cast<double>(s.mark));
    out << " " << num(px, 6) << "," << num(y.at(last), 6) << " " << num(px, 6) << "," << num(y.at(s.size), 6);
    last = s.size;
  }
  out << " " << num(x.px1, 6) << "," << num(y.at(last), 6) << "\"/>";
}

void writeChart(std::ostream& out, const Timeline& t, bool by_time) {
  const auto& marks = t.marks();
  double top = 1, end = 1;
  for (const TrialMark& m : marks) top = std::max(top, m.size);
  end = by_time ? std::max(1.0, marks.empty() ? 1.0 : marks.back().seconds)
                : std::max(1.0, static_cast<double>(marks.size()));
  const Axis x{0, end, 60, 1000, false}, y{1, top, 220, 20, true};
  out << "<svg id=\"" << (by_time ? "by-time" : "by-trial") << "\" data-marks=\"" << marks.size()
      << "\" viewBox=\"0 0 1010 250\" width=\"100%\" role=\"img\">";
  writeBands(out, t, x, by_time);
  out << "<line x1=\"60\" y1=\"220\" x2=\"1000\" y2=\"220\" stroke=\"#888\"/><line x1=\"60\" y1=\"20\" x2=\"60\" "
         "y2=\"220\" stroke=\"#888\"/>"
      << "<text x=\"54\" y=\"24\" text-anchor=\"end\">" << num(top, 3)
      << "</text><text x=\"54\" y=\"220\" "
         "text-anchor=\"end\">1</text>"
      << "<text x=\"60\" y=\"240\">" << (by_time ? "0 s" : "first answer")
      << "</text><text x=\"1000\" y=\"240\" text-anchor=\"end\">"
      << (by_time ? "last answer, " + num(end, 3) + " s" : std::to_string(marks.size()) + " answers") << "</text>";
  writeMarks(out, t, x, y, by_time);
  if (!marks.empty()) writeAccepted(out, t, x, y, by_time, marks.front().size);
  out << "</svg>";
}

// Wilson's 90% interval for a rate seen as `k` of `n`.
std::pair<double, double> wilson(double k, double n) {
  if (n <= 0) return {0, 1};
  const double z = 1.645, p = k / n, d = 1 + z * z / n;
  const double centre = (p + z * z / (2 * n)) / d, half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d;
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

void writeFlakyRates(std::ostream& out, const Timeline& t) {
  std::map<double, std::pair<double, double>> at_size;  // size -> (same, same + passed)
  for (const AcceptedStep& s : t.steps()) at_size[s.size];
  for (const TrialMark& m : t.marks())
    if (auto it = at_size.find(m.size);
        it != at_size.end() && (m.outcome == MarkOutcome::Same || m.outcome == MarkOutcome::Passed)) {
      it->second.first += m.outcome == MarkOutcome::Same;
      it->second.second += 1;
    }
  out << "<table id=\"rates\"><tr><th>size</th><th>failed alike / trials at that size</th><th>rate (90% interval)"
         "</th></tr>";
  for (const auto& [size, counts] : at_size) {
    const auto [lo, hi] = wilson(counts.first, counts.second);
    out << "<tr><td>" << num(size) << "</td><td>" << counts.first << " / " << counts.second << "</td><td>"
        << num(counts.second > 0 ? counts.first / counts.second : 0, 2) << " (" << num(lo, 2) << " .. " << num(hi, 2)
        << ")</td></tr>";
  }
  out << "</table>";
}

void writeReduction(std::ostream& out, const Timeline& t, bool flaky) {
  out << "<section id=\"reduction\"><h2>The reduction</h2><p class=\"legend\">";
  for (MarkOutcome o : kOutcomes)
    out << "<span><i class=\"dot " << markOutcomeName(o) << "\"></i>" << outcomeWords(o) << ": " << t.count(o)
        << "</span>";
  out << "</p><p class=\"meta\">Each mark is one answer about a candidate: its size (samples &times; length &times; "
         "branches on &times; non-trivial values, log scale) and how it ended. The line is the accepted case; the "
         "bands are the passes."
      << (t.thinned() ? " " + std::to_string(t.thinned()) + " older marks are not drawn (thinned)." : "")
      << "</p><h3>Against the answers, in order</h3>";
  writeChart(out, t, false);
  out << "<h3>Against time</h3>";
  writeChart(out, t, true);
  if (flaky && !t.steps().empty()) {
    out << "<h3>The failure's rate at each accepted size</h3>";
    writeFlakyRates(out, t);
  }
  out << "</section>";
}

// ---------------------------------------------------------------- the kept samples

// The range of a row's finite values, and how many are NaN or inf (a NaN
// would make every comparison false, and the range "nan .. nan").
struct FiniteRange {
  double lo = 0, hi = 0;
  std::size_t non_finite = 0;
  std::string caption() const {
    return num(lo) + " .. " + num(hi) +
           (non_finite ? "<br><b>" + std::to_string(non_finite) + " NaN or inf</b> (drawn magenta)" : "");
  }
};
FiniteRange finiteRange(const std::vector<double>& values) {
  FiniteRange r;
  bool any = false;
  for (double v : values) {
    if (!std::isfinite(v)) {
      ++r.non_finite;
      continue;
    }
    r.lo = any ? std::min(r.lo, v) : v;
    r.hi = any ? std::max(r.hi, v) : v;
    any = true;
  }
  return r;
}

void writeImage(std::ostream& out, const SamplePanel& p, const SampleRow& row) {
  const auto& sh = p.sample_shape;
  const std::int64_t c = sh.size() == 3 ? sh[0] : 1, h = sh[sh.size() - 2], w = sh[sh.size() - 1];
  if (static_cast<std::int64_t>(row.values.size()) < c * h * w) {
    out << "<figure><figcaption>" << esc(row.label) << ": too large to draw</figcaption></figure>";
    return;
  }
  const std::int64_t step = std::max<std::int64_t>(1, std::max(h, w) / 32);
  const FiniteRange range = finiteRange(row.values);
  const double lo = range.lo, span = std::max(range.hi - lo, 1e-12);
  const std::int64_t gh = (h + step - 1) / step, gw = (w + step - 1) / step;
  out << "<figure><svg class=\"thumb\" viewBox=\"0 0 " << gw << " " << gh << "\" width=\"128\" height=\""
      << 128 * gh / std::max<std::int64_t>(gw, 1) << "\" shape-rendering=\"crispEdges\">";
  for (std::int64_t y = 0; y < h; y += step)
    for (std::int64_t x = 0; x < w; x += step) {
      int rgb[3];
      bool finite = true;
      for (int k = 0; k < 3; ++k) {
        const std::int64_t ch = c == 3 ? k : 0;
        const double v = row.values[static_cast<std::size_t>((ch * h + y) * w + x)];
        finite = finite && std::isfinite(v);
        rgb[k] = std::isfinite(v) ? static_cast<int>(255 * (v - lo) / span) : 0;
      }
      if (!finite) rgb[0] = 255, rgb[1] = 0, rgb[2] = 255;  // a NaN or inf: magenta, never black
      out << "<rect x=\"" << x / step << "\" y=\"" << y / step << "\" width=\"1\" height=\"1\" fill=\"rgb(" << rgb[0]
          << "," << rgb[1] << "," << rgb[2] << ")\"/>";
    }
  // The pixels outside what the rest of the batch spans, outlined over the picture.
  for (std::size_t i : row.outliers) {
    const auto x = static_cast<std::int64_t>(i) % w, y = static_cast<std::int64_t>(i) / w % h;
    if (x % step == 0 && y % step == 0)
      out << "<rect class=\"outlier\" x=\"" << x / step << "\" y=\"" << y / step
          << "\" width=\"1\" height=\"1\" fill=\"none\" stroke=\"#ff1744\" stroke-width=\"0.3\"/>";
  }
  out << "</svg><figcaption>" << esc(row.label) << "<br>" << range.caption()
      << (row.outliers.empty() ? ""
                               : "<br>" + std::to_string(row.outliers.size()) + " value(s) outside the rest's range")
      << "</figcaption></figure>";
}

void writeSignal(std::ostream& out, const SampleRow& row) {
  const FiniteRange range = finiteRange(row.values);
  const double lo = range.lo, span = std::max(range.hi - lo, 1e-12);
  const std::size_t n = row.values.size(), step = std::max<std::size_t>(1, n / 600);
  out << "<figure><svg class=\"wave\" viewBox=\"0 0 600 80\" width=\"600\" height=\"80\"><polyline fill=\"none\" "
         "stroke=\""
      << (row.kept ? "#b00020" : "#2e7d32") << "\" points=\"";
  for (std::size_t i = 0; i < n; i += step)
    if (std::isfinite(row.values[i]))
      out << num(600.0 * static_cast<double>(i) / static_cast<double>(std::max<std::size_t>(n, 1)), 5) << ","
          << num(78 - 76 * (row.values[i] - lo) / span, 5) << " ";
  out << "\"/></svg><figcaption>" << esc(row.label) << ": " << n << " values, " << range.caption()
      << "</figcaption></figure>";
}

void writeValueTable(std::ostream& out, const SamplePanel& p) {
  double top = 1;
  if (p.kind == SampleKind::Lengths)
    for (const auto& row : p.rows)
      for (double v : row.values) top = std::max(top, v);
  out << "<table class=\"values\" data-tensor=\"" << esc(p.tensor) << "\">";
  for (const auto& row : p.rows) {
    out << "<tr class=\"" << (row.kept ? "kept" : "cut") << "\"><th>" << esc(row.label) << "</th>";
    for (std::size_t i = 0; i < row.values.size(); ++i) {
      const bool outlier = std::find(row.outliers.begin(), row.outliers.end(), i) != row.outliers.end();
      out << "<td" << (outlier ? " class=\"outlier\"" : "") << ">" << num(row.values[i], p.integral ? 12 : 4);
      if (p.kind == SampleKind::Lengths)
        out << " <svg width=\"120\" height=\"10\"><rect width=\"" << num(120 * row.values[i] / top, 4)
            << "\" height=\"10\" fill=\"#0060a8\"/></svg>";
      out << "</td>";
    }
    out << "</tr>";
  }
  out << "</table>";
}

void writePanel(std::ostream& out, const SamplePanel& p) {
  std::string storage = "offset " + std::to_string(p.info.storage_offset);
  const auto& others = p.info.shares_storage_with;
  for (std::size_t i = 0; i < others.size() && i < 3; ++i)
    storage += (i ? ", " : ", shares its storage with ") + others[i];
  if (others.size() > 3) storage += " and " + std::to_string(others.size() - 3) + " more";
  out << "<div class=\"panel\" data-kind=\"" << sampleKindName(p.kind) << "\"><h3><code>" << esc(p.tensor)
      << "</code> <span class=\"meta\">" << sampleKindName(p.kind) << "; " << esc(p.info.dtype) << ", shape "
      << esc(formatList(p.info.shape)) << ", strides " << esc(formatList(p.info.strides)) << ", " << esc(p.info.layout)
      << ", " << esc(storage) << "; one sample " << esc(formatList(p.sample_shape)) << "</span></h3>";
  if (!p.range.empty()) out << "<p class=\"meta\">" << esc(p.range) << "</p>";
  if (p.kind == SampleKind::Image || p.kind == SampleKind::Signal) {
    out << "<div class=\"images\">";
    for (const auto& row : p.rows) p.kind == SampleKind::Image ? writeImage(out, p, row) : writeSignal(out, row);
    out << "</div>";
  } else {
    writeValueTable(out, p);
  }
  out << "</div>";
}

// The names a panel shows (its tensor's, those sharing its storage, its
// rows'), scrubbed as REPORT.md's are: a tensor's name may hold a token.
SamplePanel scrubbed(SamplePanel p, const ScrubContext& scrub) {
  p.tensor = scrubText(p.tensor, scrub);
  for (auto& other : p.info.shares_storage_with) other = scrubText(other, scrub);
  p.range = scrubText(p.range, scrub);
  for (auto& row : p.rows) row.label = scrubText(row.label, scrub);
  return p;
}

void writeSamples(std::ostream& out, const HtmlReportInput& in, const ScrubContext& scrub) {
  if (in.panels.empty()) return;
  out << "<section id=\"samples\"><h2>The kept samples</h2><p class=\"meta\">The minimal case's samples as its "
         "batch holds them, beside samples of the original batch that the reduction cut.</p>";
  for (const auto& p : in.panels) writePanel(out, scrubbed(p, scrub));
  if (in.summary && !in.summary->apart.empty()) {
    out << "<h3>What sets the minimal batch apart</h3><p class=\"meta\">The kept samples as the original batch "
           "held them, against the samples that were cut.</p><ul>";
    for (const auto& line : in.summary->apart) out << "<li>" << escWithCode(scrubText(line, scrub)) << "</li>";
    out << "</ul>";
  }
  out << "</section>";
}

// ---------------------------------------------------------------- collapsed

void writeCollapsed(std::ostream& out, const CaseConfig& config, const HtmlReportInput& in, const ScrubContext& scrub) {
  if (in.summary) {
    out << "<details id=\"environment\"><summary>Environment</summary><table>";
    for (const auto& [key, value] : in.summary->environment)
      out << "<tr><th>" << esc(key) << "</th><td>" << esc(scrubText(value, scrub)) << "</td></tr>";
    for (const auto& [key, value] : config.context)
      out << "<tr><th>" << esc(scrubText(key, scrub)) << "</th><td>" << esc(scrubContextValue(key, value, scrub))
          << "</td></tr>";
    out << "</table></details>";
  }
  const auto& marks = in.timeline->marks();
  constexpr std::size_t kRows = 2000;
  const std::size_t first = marks.size() > kRows ? marks.size() - kRows : 0;
  out << "<details id=\"trials\"><summary>Trial log (" << marks.size() << " answers"
      << (first ? ", the last " + std::to_string(kRows) + " listed" : "") << ")</summary><table><tr><th>trial</th>"
      << "<th>at</th><th>took</th><th>samples</th><th>size</th><th>outcome</th></tr>";
  for (std::size_t i = first; i < marks.size(); ++i) {
    const TrialMark& m = marks[i];
    out << "<tr><td>" << (m.number ? std::to_string(m.number) : "-") << "</td><td>" << num(m.seconds, 4)
        << " s</td><td>" << num(m.duration, 3) << " s</td><td>" << m.samples << "</td><td>" << num(m.size)
        << "</td><td>" << outcomeWords(m.outcome) << "</td></tr>";
  }
  out << "</table></details>";
}

}  // namespace

std::string renderReportHtml(const CaseConfig& config, const HtmlReportInput& in) {
  const ScrubContext scrub = scrubContextFor(config);
  std::ostringstream out;
  FailureSignature shown = in.summary ? in.summary->signature : FailureSignature{};
  shown.message = scrubText(shown.message, scrub);  // before summary() cuts it (report.cc says why)
  const std::string title =
      in.summary ? "minrepro: " + shown.summary() : "minrepro: reducing " + config.case_file.filename().string();
  out << "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
      << "<meta name=\"viewport\" content=\"width=device-width\"><title>" << esc(scrubText(title, scrub))
      << "</title><style>" << kStyle << "</style></head><body>";
  writeVerdict(out, config, in, scrub);
  // The rates drawn only where the original failed some of the time.
  if (in.timeline) writeReduction(out, *in.timeline, in.summary && in.summary->rate.passes() > 0);
  writeSamples(out, in, scrub);
  if (in.timeline) writeCollapsed(out, config, in, scrub);
  out << "<p class=\"meta\">Made by minrepro " << MINREPRO_VERSION
      << ". REPORT.md says the same in text, with the tensors' tables and the run's details.</p></body></html>\n";
  return out.str();
}

bool writeFileAtomically(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  bool written = false;
  std::error_code gone;
  fs::remove(temporary, gone);  // a link left at the name is removed, not written through
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    written = file.write(text.data(), static_cast<std::streamsize>(text.size())) && file.flush();
    file.close();
    written = written && !file.fail();
  }
  std::error_code renamed, removed;
  if (written) fs::rename(temporary, path, renamed);
  if (!written || renamed) fs::remove(temporary, removed);  // a full disk leaves no empty REPORT.html.tmp
  return written && !renamed;
}

std::string liveStatus(std::int64_t samples, std::int64_t total, std::size_t trials_run, std::size_t trials,
                       double seconds, const PassEstimate& estimate) {
  std::ostringstream status;
  status << std::fixed << std::setprecision(0) << samples << " of " << total << " samples kept after " << trials
         << " trials in " << seconds << " s (" << 60.0 * static_cast<double>(trials_run) / std::max(seconds, 1.0)
         << " trials per minute). ";
  if (!estimate.pass.empty())
    status << "Pass " << estimate.pass << ": about " << estimate.trials_left << " trials (~" << estimate.seconds_left
           << " s) left by its search's count; an estimate at the last trial's pace, "
           << "before later passes and rounds, which depend on what this one finds.";
  return status.str();
}

}  // namespace minrepro
