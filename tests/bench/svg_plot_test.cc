// The log-log SVG writer (well-formed output, mapping, skipped points) and the benchmark's
// tolerance arithmetic (time to reach tau, speed-ups, solver lists), plus one small
// end-to-end benchmark run through child processes.
#include "bench/svg_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/solver_bench.h"
#include "io/bal.h"
#include "solver/synthetic.h"

namespace tiepoint {
namespace {

// Checks that every element is closed in order (a small XML well-formedness test: tags,
// self-closing tags, comments, the declaration, no raw '<' or '&' in text or attributes).
::testing::AssertionResult WellFormed(const std::string& svg) {
  // name, then attributes name="value", then an optional '/' (self-closing).
  static const std::regex kElement(
      "([a-zA-Z][a-zA-Z0-9]*)((\\s+[a-zA-Z_:][a-zA-Z0-9_:.-]*=\"[^\"]*\")*)\\s*(/?)");
  std::vector<std::string> open;
  size_t i = 0;
  int roots = 0;
  while (i < svg.size()) {
    const char c = svg[i];
    if (c == '&') {
      const size_t semi = svg.find(';', i);
      const std::string entity = svg.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (!std::regex_match(entity, std::regex("&(amp|lt|gt|quot|apos);"))) {
        return ::testing::AssertionFailure() << "bad entity at " << i << ": " << entity;
      }
      i = semi + 1;
      continue;
    }
    if (c != '<') {
      if (c == '>') return ::testing::AssertionFailure() << "stray '>' at " << i;
      ++i;
      continue;
    }
    if (svg.compare(i, 2, "<?") == 0) {
      const size_t end = svg.find("?>", i);
      if (end == std::string::npos || i != 0) return ::testing::AssertionFailure() << "bad <?";
      i = end + 2;
      continue;
    }
    if (svg.compare(i, 4, "<!--") == 0) {
      const size_t end = svg.find("-->", i);
      if (end == std::string::npos) return ::testing::AssertionFailure() << "open comment";
      i = end + 3;
      continue;
    }
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unclosed tag at " << i;
    const std::string tag = svg.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) {
      return ::testing::AssertionFailure() << "'<' inside tag at " << i;
    }
    std::smatch m;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return ::testing::AssertionFailure()
               << "</" << name << "> closes " << (open.empty() ? "nothing" : open.back());
      }
      open.pop_back();
    } else if (std::regex_match(tag, m, kElement)) {
      if (open.empty()) ++roots;
      if (m[4].str().empty()) open.push_back(m[1].str());
    } else {
      return ::testing::AssertionFailure() << "malformed tag: <" << tag << ">";
    }
    i = end + 1;
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> not closed";
  if (roots != 1) return ::testing::AssertionFailure() << roots << " root elements";
  return ::testing::AssertionSuccess();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// The points="x,y x,y" lists of all polylines, in document order.
std::vector<std::vector<std::pair<double, double>>> Polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  const std::regex re("<polyline[^>]*points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    std::vector<std::pair<double, double>> pts;
    std::istringstream in((*it)[1].str());
    std::string pair;
    while (in >> pair) {
      const size_t comma = pair.find(',');
      pts.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    }
    out.push_back(pts);
  }
  return out;
}

LogLogPanel ThreeSeriesPanel() {
  LogLogPanel panel;
  panel.title = "problem-49-7776";
  panel.x_label = "solve time [s]";
  panel.y_label = "cost";
  const char* names[] = {"cholmod", "ceres-sparse", "ceres-iterative"};
  for (int s = 0; s < 3; ++s) {
    PlotSeries series;
    series.name = names[s];
    for (int i = 0; i < 20; ++i) {
      series.xy.emplace_back(0.05 * (s + 1) * (i + 1), 1e6 * std::pow(0.6 + 0.1 * s, i) + 1e4);
    }
    panel.series.push_back(series);
  }
  panel.reference_lines.push_back({2e4, "tau = 0.01"});
  return panel;
}

TEST(LogAxisTest, MapsDecadesToEqualSteps) {
  const LogAxis x{1e-2, 1e2, 100.0, 500.0};
  EXPECT_DOUBLE_EQ(x.Map(1e-2), 100.0);
  EXPECT_DOUBLE_EQ(x.Map(1e2), 500.0);
  EXPECT_NEAR(x.Map(1.0), 300.0, 1e-9);
  EXPECT_NEAR(x.Map(10.0) - x.Map(1.0), x.Map(1.0) - x.Map(0.1), 1e-9);
  // A y axis runs upwards: larger values map to smaller pixel rows.
  const LogAxis y{10.0, 1e6, 400.0, 50.0};
  double last = std::numeric_limits<double>::infinity();
  for (double v = 10.0; v <= 1e6; v *= 1.7) {
    EXPECT_LT(y.Map(v), last) << v;
    last = y.Map(v);
  }
}

TEST(SvgPlotTest, WellFormedWithOnePolylinePerSeries) {
  std::vector<std::string> notes;
  const std::string svg = RenderLogLogSvg({ThreeSeriesPanel()}, {"Cost & time <test>"}, &notes);
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(Count(svg, "<polyline"), 3);
  EXPECT_EQ(Count(svg, "class=\"reference\""), 1);
  EXPECT_NE(svg.find("Cost &amp; time &lt;test&gt;"), std::string::npos);
  for (const char* name : {"cholmod", "ceres-sparse", "ceres-iterative"}) {
    EXPECT_NE(svg.find(name), std::string::npos) << name << " missing from the legend";
  }
  // Distinct colours for the three series.
  EXPECT_NE(svg.find(PlotColor(0)), std::string::npos);
  EXPECT_NE(svg.find(PlotColor(1)), std::string::npos);
  EXPECT_NE(svg.find(PlotColor(2)), std::string::npos);
  EXPECT_STRNE(PlotColor(0), PlotColor(1));
  EXPECT_STRNE(PlotColor(1), PlotColor(2));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgPlotTest, PointsMapMonotonicallyOnLogAxes) {
  const std::string svg = RenderLogLogSvg({ThreeSeriesPanel()}, {}, nullptr);
  const auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& pts : lines) {
    ASSERT_EQ(pts.size(), 20u);
    for (size_t i = 1; i < pts.size(); ++i) {
      EXPECT_GT(pts[i].first, pts[i - 1].first);    // time grows to the right
      EXPECT_GT(pts[i].second, pts[i - 1].second);  // cost falls: rows grow downwards
    }
  }
  // Log x: the data x are 0.05 (s + 1) (i + 1), so x(2i+1) / x(i) is constant.
  const auto& p = lines[0];
  EXPECT_NEAR(p[3].first - p[1].first, p[7].first - p[3].first, 0.15);
}

TEST(SvgPlotTest, MultiplePanelsStackVertically) {
  LogLogPanel second = ThreeSeriesPanel();
  second.title = "problem-16-22106";
  second.series.pop_back();
  const std::string svg = RenderLogLogSvg({ThreeSeriesPanel(), second}, {"two"}, nullptr);
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_EQ(Count(svg, "class=\"panel\""), 2);
  const auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 5u);
  // Every point of the second panel lies below every point of the first.
  double lowest_first = 0, highest_second = 1e9;
  for (int i = 0; i < 5; ++i) {
    for (const auto& q : lines[i]) {
      if (i < 3) lowest_first = std::max(lowest_first, q.second);
      if (i >= 3) highest_second = std::min(highest_second, q.second);
    }
  }
  EXPECT_LT(lowest_first, highest_second);
}

TEST(SvgPlotTest, SinglePointIsDrawn) {
  LogLogPanel panel;
  panel.title = "one";
  panel.series.push_back({"lonely", {{2.0, 300.0}}, -1});
  std::vector<std::string> notes;
  const std::string svg = RenderLogLogSvg({panel}, {}, &notes);
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_TRUE(notes.empty());
  const auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_EQ(lines[0].size(), 1u);
  EXPECT_TRUE(std::isfinite(lines[0][0].first) && std::isfinite(lines[0][0].second));
  EXPECT_EQ(Count(svg, "<circle"), 2);  // the point's marker and the legend's
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgPlotTest, NonPositiveAndNonFiniteValuesAreSkippedWithANote) {
  LogLogPanel panel;
  panel.title = "p";
  const double nan = std::nan("");
  panel.series.push_back(
      {"mixed", {{0.0, 5.0}, {1.0, -2.0}, {2.0, 30.0}, {nan, 1.0}, {4.0, 20.0}}, -1});
  panel.series.push_back({"empty", {{-1.0, 1.0}, {0.0, 0.0}}, -1});
  std::vector<std::string> notes;
  const std::string svg = RenderLogLogSvg({panel}, {}, &notes);
  EXPECT_TRUE(WellFormed(svg));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("'mixed'"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("skipped 3 points"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("'empty'"), std::string::npos) << notes[1];
  EXPECT_NE(notes[1].find("nothing to draw"), std::string::npos) << notes[1];
  const auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 1u);  // the empty series draws no line
  EXPECT_EQ(lines[0].size(), 2u);
  EXPECT_NE(svg.find("skipped 3 points"), std::string::npos) << "the note is also in the SVG";
}

TEST(SvgPlotTest, WriteNamesThePathAndLeavesNoFile) {
  const std::string path = "/nonexistent-dir/plot.svg";
  const Status s = WriteLogLogSvg(path, {ThreeSeriesPanel()}, {}, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

// ---- Benchmark arithmetic ----------------------------------------------------------------

std::vector<TracePoint> HandTrace() {
  // iteration, cost, time_s
  return {{0, 1000.0, 0.5}, {1, 400.0, 1.0}, {2, 120.0, 1.5}, {3, 101.0, 2.0},
          {4, 101.0, 2.5}, {5, 100.5, 3.0}};
}

TEST(TimeToReachTest, HandMadeTrace) {
  // initial 1000, best 100: thresholds 190 (0.1), 109 (0.01), 100.9 (0.001).
  EXPECT_DOUBLE_EQ(CostThreshold(1000.0, 100.0, 0.1), 190.0);
  EXPECT_DOUBLE_EQ(CostThreshold(1000.0, 100.0, 0.01), 109.0);
  const auto trace = HandTrace();
  EXPECT_EQ(TimeToReach(trace, CostThreshold(1000.0, 100.0, 0.1)), 1.5);
  EXPECT_EQ(TimeToReach(trace, CostThreshold(1000.0, 100.0, 0.01)), 2.0);
  EXPECT_EQ(TimeToReach(trace, CostThreshold(1000.0, 100.0, 0.001)), 3.0);
  EXPECT_EQ(TimeToReach(trace, 100.0), std::nullopt);    // never reached
  EXPECT_EQ(TimeToReach(trace, 1000.0), 0.5);            // reached at the start
  EXPECT_EQ(TimeToReach(trace, 101.0), 2.0);             // <=, not <
  EXPECT_EQ(TimeToReach({}, 1e30), std::nullopt);
  EXPECT_EQ(TimeToReach({{0, std::nan(""), 0.1}}, 1e30), std::nullopt);
}

TEST(TimeToReachTest, SpeedUpIsTheOtherTimeOverThisTime) {
  ProblemBench p;
  p.runs.resize(3);
  p.runs[0].time_to_tau = {1.0, 2.0};
  p.runs[1].time_to_tau = {3.0, std::nullopt};
  p.runs[2].status = Status::Internal("crashed");
  p.runs[2].time_to_tau = {std::nullopt, std::nullopt};
  EXPECT_EQ(p.SpeedUp(0, 1, 0), 3.0);  // run 0 is three times faster than run 1
  EXPECT_NEAR(*p.SpeedUp(1, 0, 0), 1.0 / 3.0, 1e-15);
  EXPECT_EQ(p.SpeedUp(0, 1, 1), std::nullopt);
  EXPECT_EQ(p.SpeedUp(0, 2, 0), std::nullopt);
  EXPECT_EQ(p.SpeedUp(0, 5, 0), std::nullopt);
}

TEST(SolverListTest, ParsesAndExplains) {
  std::vector<std::string> names;
  ASSERT_TRUE(ParseSolverList("cholmod, ceres-sparse,ceres-iterative", &names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"cholmod", "ceres-sparse", "ceres-iterative"}));
  Status s = ParseSolverList("cholmod,magic", &names);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.message();
  EXPECT_FALSE(ParseSolverList("cholmod,,ceres-sparse", &names).ok());
  EXPECT_FALSE(ParseSolverList("", &names).ok());
  s = ParseSolverList("cholmod,cholmod", &names);
  EXPECT_NE(s.message().find("twice"), std::string::npos) << s.message();
}

TEST(SolverBenchTest, TableShowsNeverAndRatios) {
  SolverBenchResult r;
  r.taus = {0.1, 0.01};
  r.solvers = {"fast", "slow"};
  ProblemBench p;
  p.name = "toy";
  p.num_observations = 10;
  p.runs.resize(2);
  p.runs[0].solver = "fast";
  p.runs[0].usable = true;
  p.runs[0].iterations = 4;
  p.runs[0].total_time_s = 2.0;
  p.runs[0].time_to_tau = {0.5, 1.0};
  p.runs[1].solver = "slow";
  p.runs[1].usable = true;
  p.runs[1].iterations = 4;
  p.runs[1].total_time_s = 8.0;
  p.runs[1].time_to_tau = {1.5, std::nullopt};
  r.problems.push_back(p);
  const std::string table = FormatSolverBenchTable(r, 0);
  EXPECT_NE(table.find("3.00x"), std::string::npos) << table;  // fast vs slow at tau 0.1
  EXPECT_NE(table.find("0.33x"), std::string::npos) << table;
  EXPECT_NE(table.find("never"), std::string::npos) << table;
  EXPECT_NE(table.find("500.0"), std::string::npos) << table;  // ms per iteration
  const nlohmann::json j = SolverBenchToJson(r);
  const auto& pairs = j["problems"][0]["speedups"][0]["pairs"];
  EXPECT_DOUBLE_EQ(pairs["fast_vs_slow"].get<double>(), 3.0);
  EXPECT_TRUE(j["problems"][0]["speedups"][1]["pairs"]["fast_vs_slow"].is_null());
  EXPECT_TRUE(j["problems"][0]["solvers"][1]["time_to_tau"][1]["time_s"].is_null());
}

// ---- End to end through child processes ---------------------------------------------------

class SolverBenchRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir();
    problem_ = dir_ + "/bench_tiny_" + std::to_string(::getpid()) + ".txt";
    SyntheticOptions o;
    o.num_cameras = 6;
    o.num_points = 300;
    o.observations_per_point = 3.0;
    o.num_threads = 1;  // no OpenMP pool in this process: the benchmark forks
    Scene scene;
    ASSERT_TRUE(MakeSyntheticProblem(o, &scene, nullptr).ok());
    ASSERT_TRUE(WriteBal(problem_, scene).ok());
    bad_ = dir_ + "/bench_bad_" + std::to_string(::getpid()) + ".txt";
    std::ofstream(bad_) << "3 2 1\n0 0 1.0\n";  // truncated
  }
  void TearDown() override {
    std::remove(problem_.c_str());
    std::remove(bad_.c_str());
  }
  std::string dir_, problem_, bad_;
};

TEST_F(SolverBenchRunTest, SolvesEachPairInAChildAndMeasuresIt) {
  SolverBenchOptions o;
  o.problems = {problem_, bad_};
  o.solvers = {"cholmod", "ceres-sparse"};
  o.num_threads = 1;
  o.max_iterations = 5;
  int progress_calls = 0;
  o.progress = [&](const BenchProgress&) { ++progress_calls; };
  SolverBenchResult r;
  ASSERT_TRUE(RunSolverBench(o, &r).ok());
  EXPECT_GT(progress_calls, 0);
  ASSERT_EQ(r.problems.size(), 2u);

  const ProblemBench& good = r.problems[0];
  EXPECT_EQ(good.num_cameras, 6);
  EXPECT_EQ(good.num_points, 300);
  ASSERT_TRUE(good.best_cost.has_value());
  EXPECT_LT(*good.best_cost, good.initial_cost);
  for (const SolverRun& run : good.runs) {
    ASSERT_TRUE(run.ok()) << run.solver << ": " << run.status.ToString();
    EXPECT_GT(run.iterations, 0);
    EXPECT_EQ(run.trace.size(), static_cast<size_t>(run.iterations) + 1);
    EXPECT_GT(run.peak_rss_bytes, 0);
    EXPECT_GE(run.peak_rss_bytes, run.baseline_rss_bytes);
    EXPECT_GT(run.TimePerIteration(), 0.0);
    ASSERT_EQ(run.time_to_tau.size(), 3u);
    EXPECT_TRUE(run.time_to_tau[0].has_value()) << run.solver;  // tau = 0.1
  }
  // The best run reaches every tau by its own final cost.
  for (const SolverRun& run : good.runs) {
    if (run.solver == good.best_solver) EXPECT_TRUE(run.time_to_tau[2].has_value());
  }

  // The malformed problem fails once with the reader's message; the next solver is skipped.
  const ProblemBench& bad = r.problems[1];
  ASSERT_EQ(bad.runs.size(), 2u);
  EXPECT_EQ(bad.runs[0].status.code(), StatusCode::kInvalidInput);
  EXPECT_NE(bad.runs[0].status.message().find(bad_), std::string::npos)
      << bad.runs[0].status.message();
  EXPECT_FALSE(bad.runs[1].ok());
  EXPECT_NE(bad.runs[1].status.message().find("not run"), std::string::npos);
  EXPECT_FALSE(bad.best_cost.has_value());
  EXPECT_EQ(r.NumFailedRuns(), 2);

  const std::string svg_path = dir_ + "/bench_plot_" + std::to_string(::getpid()) + ".svg";
  ASSERT_TRUE(WriteSolverBenchPlot(svg_path, r, nullptr).ok());
  std::ifstream in(svg_path);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(svg_path.c_str());
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  EXPECT_EQ(Count(svg, "class=\"panel\""), 2);
}

TEST_F(SolverBenchRunTest, RepetitionsReportTheMedianTime) {
  SolverBenchOptions o;
  o.problems = {problem_};
  o.solvers = {"cholmod"};
  o.num_threads = 1;
  o.max_iterations = 5;
  o.repetitions = 3;
  SolverBenchResult r;
  ASSERT_TRUE(RunSolverBench(o, &r).ok());
  EXPECT_EQ(r.repetitions, 3);
  const SolverRun& run = r.problems.at(0).runs.at(0);
  ASSERT_TRUE(run.ok()) << run.status.ToString();
  ASSERT_EQ(run.repetition_time_to_tau.size(), 3u);
  for (size_t t = 0; t < o.taus.size(); ++t) {
    std::vector<double> times;
    for (const auto& rep : run.repetition_time_to_tau) {
      ASSERT_TRUE(rep.at(t).has_value());  // cholmod is the best: it reaches every tau
      times.push_back(*rep[t]);
    }
    std::sort(times.begin(), times.end());
    ASSERT_TRUE(run.time_to_tau[t].has_value());
    EXPECT_EQ(*run.time_to_tau[t], times[1]) << "tau " << o.taus[t];
  }
  // The reported trace is the median repetition's at the middle tau.
  EXPECT_EQ(TimeToReach(run.trace, CostThreshold(r.problems[0].initial_cost,
                                                 *r.problems[0].best_cost, o.taus[1])),
            run.time_to_tau[1]);
  o.repetitions = 0;
  EXPECT_EQ(o.Check().code(), StatusCode::kInvalidOptions);
}

TEST_F(SolverBenchRunTest, RepetitionsGoRoundTheSolvers) {
  SolverBenchOptions o;
  o.problems = {problem_};
  o.solvers = {"cholmod", "pcg-schur"};
  o.num_threads = 1;
  o.max_iterations = 3;
  o.repetitions = 2;
  std::vector<std::string> started;  // the solver of each run, when it starts
  o.progress = [&](const BenchProgress& p) {
    if (!p.loaded && p.iteration < 0 && (started.empty() || started.back() != p.solver)) {
      started.push_back(p.solver);
    }
  };
  SolverBenchResult r;
  ASSERT_TRUE(RunSolverBench(o, &r).ok());
  EXPECT_EQ(started, (std::vector<std::string>{"cholmod", "pcg-schur", "cholmod", "pcg-schur"}));
  ASSERT_EQ(r.problems.at(0).runs.size(), 2u);
  EXPECT_EQ(r.problems[0].runs[0].solver, "cholmod");
  EXPECT_EQ(r.problems[0].runs[1].solver, "pcg-schur");
  for (const SolverRun& run : r.problems[0].runs) {
    EXPECT_TRUE(run.ok()) << run.status.ToString();
    EXPECT_EQ(run.repetition_time_to_tau.size(), 2u) << run.solver;
  }
}

TEST_F(SolverBenchRunTest, UnreadableProblemIsNamedBeforeAnyRun) {
  SolverBenchOptions o;
  o.problems = {problem_, dir_ + "/does-not-exist.txt"};
  o.solvers = {"cholmod"};
  SolverBenchResult r;
  const Status s = RunSolverBench(o, &r);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("does-not-exist.txt"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tiepoint
