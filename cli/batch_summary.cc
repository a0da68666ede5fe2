// Summary of a batch run: summary.json, summary.svg and the printed table.
#include "cli/batch_summary.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bench/svg_plot.h"
#include "cli/batch_jobs.h"
#include "cli/batch_runner.h"
#include "io/base/atomic_file.h"
#include "io/report.h"

namespace tiepoint::cli {
namespace {

using json = nlohmann::json;

bool ReadJson(const std::string& path, json* out) {
  std::ifstream in(path);
  if (!in) return false;
  try {
    *out = json::parse(in);
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

double Number(const json& j, const char* key, double fallback = 0.0) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string BaseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::string ProblemName(const std::string& path) {
  std::string base = BaseName(path);
  for (const char* ext : {".bz2", ".txt", ".bal"}) {
    const std::string e = ext;
    if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) {
      base.resize(base.size() - e.size());
    }
  }
  return base;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Shard files of the run, newest plan first.
std::vector<json> ReadShards(const std::string& run_dir) {
  std::vector<json> shards;
  if (DIR* d = ::opendir((run_dir + "/shards").c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
      json s;
      if (ReadJson(run_dir + "/shards/" + name, &s) && s.contains("jobs")) shards.push_back(s);
    }
    ::closedir(d);
  }
  std::sort(shards.begin(), shards.end(), [](const json& a, const json& b) {
    return a.value("started_unix_ns", 0LL) > b.value("started_unix_ns", 0LL);
  });
  return shards;
}

// A shard still at work: its file says running and, on this machine, its process lives.
bool ShardLive(const json& shard, const std::string& host) {
  if (shard.value("state", "") != "running") return false;
  if (shard.value("host", "") == host) return ProcessAlive(shard.value("pid", 0L));
  return true;
}

const char* StatusColor(const std::string& status) {
  if (status == "done") return "#009E73";
  if (status == "failed") return "#D55E00";
  if (status == "running") return "#E69F00";
  return "#999999";
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string BarsSvg(const json& summary, int width, int* height) {
  const json& jobs = summary["jobs"];
  const size_t shown = std::min<size_t>(jobs.size(), 500);
  const int row = 16, top = 44, label_w = 300, right = 140;
  double max_wall = 0;
  for (size_t i = 0; i < shown; ++i) max_wall = std::max(max_wall, Number(jobs[i], "wall_s"));
  if (max_wall <= 0) max_wall = 1;
  *height = top + static_cast<int>(shown) * row + (shown < jobs.size() ? 24 : 10);
  std::ostringstream s;
  s << "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">Jobs: wall time, coloured by status</text>\n";
  int x = 10;
  for (const char* st : {"done", "failed", "running", "pending"}) {
    s << "<rect x=\"" << x << "\" y=\"28\" width=\"10\" height=\"10\" fill=\"" << StatusColor(st) << "\"/>"
      << "<text x=\"" << x + 14 << "\" y=\"37\" font-size=\"11\">" << st << "</text>\n";
    x += 80;
  }
  const double scale = (width - label_w - right) / max_wall;
  for (size_t i = 0; i < shown; ++i) {
    const json& j = jobs[i];
    const std::string status = j.value("status", "pending");
    const int y = top + static_cast<int>(i) * row;
    std::string name = j.value("name", "");
    if (name.size() > 46) name = name.substr(0, 43) + "...";
    s << "<text x=\"" << label_w - 6 << "\" y=\"" << y + 11 << "\" font-size=\"11\" text-anchor=\"end\">"
      << XmlEscape(name) << "</text>";
    const double wall = Number(j, "wall_s");
    const double w = std::max(wall * scale, status == "pending" ? 0.0 : 1.0);
    s << "<rect x=\"" << label_w << "\" y=\"" << y + 2 << "\" width=\"" << Fixed(w, 1)
      << "\" height=\"" << row - 4 << "\" fill=\"" << StatusColor(status) << "\"><title>"
      << XmlEscape(j.value("name", "") + ": " + status) << "</title></rect>";
    const std::string label = status == "pending" ? "pending" : Fixed(wall, 2) + " s" + (status == "done" ? "" : " " + status);
    s << "<text x=\"" << label_w + w + 4 << "\" y=\"" << y + 11 << "\" font-size=\"10\">" << XmlEscape(label)
      << "</text>\n";
  }
  if (shown < jobs.size()) {
    s << "<text x=\"10\" y=\"" << top + static_cast<int>(shown) * row + 14 << "\" font-size=\"11\">("
      << jobs.size() - shown << " more jobs in summary.json)</text>\n";
  }
  return s.str();
}

// Cost against time per solver, one panel per problem, from ba reports and bench results.
std::vector<LogLogPanel> CostPanels(const std::string& run_dir, const json& summary) {
  std::map<std::string, LogLogPanel> panels;
  std::vector<std::string> order;
  std::map<std::string, int> color_of;
  auto panel = [&](const std::string& title) -> LogLogPanel& {
    if (panels.count(title) == 0) {
      order.push_back(title);
      LogLogPanel& p = panels[title];
      p.title = title;
      p.x_label = "time (s)";
      p.y_label = "cost";
    }
    return panels[title];
  };
  auto add_series = [&](LogLogPanel& p, const std::string& name, const json& trace) {
    PlotSeries series;
    series.name = name;
    for (const json& t : trace) {
      if (t.contains("time_s") && t.contains("cost") && t["time_s"].is_number() && t["cost"].is_number()) {
        series.xy.emplace_back(t["time_s"].get<double>(), t["cost"].get<double>());
      }
    }
    if (series.xy.empty()) return;
    if (color_of.count(name) == 0) color_of[name] = static_cast<int>(color_of.size());
    series.color_index = color_of[name];
    p.series.push_back(std::move(series));
  };
  for (const json& j : summary["jobs"]) {
    if (j.value("status", "") != "done") continue;
    const std::string dir = JobDirectory(run_dir, j.value("name", ""));
    const std::string kind = j.value("kind", "");
    if (kind == "ba") {
      json report;
      if (!ReadJson(dir + "/report.json", &report)) continue;
      LogLogPanel& p = panel(ProblemName(report.value("input", "?")));
      // One curve per solver; the job's name where two jobs of a problem share a solver.
      std::string series = report.value("solver", j.value("name", ""));
      for (const PlotSeries& other : p.series) {
        if (other.name == series) series = j.value("name", "");
      }
      add_series(p, series, report.value("trace", json::array()));
    } else if (kind == "bench") {
      json bench;
      if (!ReadJson(dir + "/bench.json", &bench)) continue;
      for (const json& problem : bench.value("problems", json::array())) {
        LogLogPanel& p = panel(problem.value("name", "?") + " (" + j.value("name", "") + ")");
        for (const json& run : problem.value("solvers", json::array())) {
          add_series(p, run.value("solver", "?"), run.value("trace", json::array()));
        }
      }
    }
  }
  std::vector<LogLogPanel> out;
  for (const std::string& title : order) {
    if (!panels[title].series.empty()) out.push_back(panels[title]);
    if (out.size() == 24) break;
  }
  return out;
}

}  // namespace

json ReadJobResult(const std::string& job_dir, const std::string& kind) {
  json result = json::object();
  if (kind == "ba") {
    json report;
    if (!ReadJson(job_dir + "/report.json", &report)) return result;
    for (const char* key : {"input", "solver", "num_observations", "initial_cost", "final_cost", "iterations",
                            "termination", "total_time_s", "final_rms_px"}) {
      if (report.contains(key)) result[key] = report[key];
    }
  } else if (kind == "bench") {
    json bench;
    if (!ReadJson(job_dir + "/bench.json", &bench)) return result;
    json runs = json::array();
    for (const json& problem : bench.value("problems", json::array())) {
      for (const json& run : problem.value("solvers", json::array())) {
        json r = {{"problem", problem.value("name", "")}, {"solver", run.value("solver", "")},
                  {"ok", run.value("ok", false)}};
        for (const char* key : {"final_cost", "iterations", "total_time_s", "time_to_tau", "peak_rss_bytes"}) {
          if (run.contains(key)) r[key] = run[key];
        }
        runs.push_back(r);
      }
    }
    result["runs"] = runs;
  } else if (kind == "reconstruct") {
    json report;
    if (!ReadJson(job_dir + "/model/report.json", &report)) return result;
    int best = -1;
    for (const json& m : report.value("models", json::array())) best = std::max(best, m.value("registered_images", -1));
    if (best >= 0) result["registered_images"] = best;
    if (report.contains("images")) result["images"] = report["images"];
    if (report.contains("models")) result["models"] = report["models"].size();
  }
  return result;
}

Status CollectRunSummary(const std::string& run_dir, json* summary) {
  const std::vector<json> shards = ReadShards(run_dir);
  if (shards.empty()) {
    return Status::InvalidInput(run_dir + ": no batch has run here (no shards/*.json)");
  }
  const json& plan = shards.front();
  const std::string host = HostName();
  // Shards that belong to the newest plan: the same job list.
  json shard_list = json::array();
  std::set<std::string> live_owners;  // "<host>-<pid>" of live shards
  for (const json& s : shards) {
    const bool live = ShardLive(s, host);
    std::string state = s.value("state", "");
    if (state == "running" && !live) state = "died";
    shard_list.push_back({{"shard", s.value("shard", "")}, {"state", state}, {"host", s.value("host", "")},
                          {"pid", s.value("pid", 0L)}, {"started_utc", s.value("started_utc", "")},
                          {"updated_utc", s.value("updated_utc", "")}});
    if (live) live_owners.insert(s.value("host", "") + "-" + std::to_string(s.value("pid", 0L)));
  }
  // Temporaries present now: name -> owner.
  std::map<std::string, std::string> tmp_owner;
  if (DIR* d = ::opendir((run_dir + "/jobs").c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string entry = e->d_name;
      const size_t cut = entry.rfind(".tmp-");
      if (entry.empty() || entry[0] != '.' || cut == std::string::npos || cut < 1) continue;
      tmp_owner[entry.substr(1, cut - 1)] = entry.substr(cut + 5);
    }
    ::closedir(d);
  }
  json jobs = json::array();
  json totals = {{"jobs", 0}, {"done", 0}, {"failed", 0}, {"running", 0}, {"pending", 0},
                 {"wall_s", 0.0}, {"cpu_s", 0.0}, {"peak_rss_bytes_max", 0}};
  for (const json& pj : plan["jobs"]) {
    const std::string name = pj.value("name", "");
    json j = {{"name", name}, {"kind", pj.value("kind", "")}, {"index", pj.value("index", 0)}};
    json rec;
    const std::string dir = JobDirectory(run_dir, name);
    const bool has_record = ReadJson(dir + "/job.json", &rec);
    const bool current = has_record && (rec.value("key", "") == pj.value("key", "") ||
                                        (pj.contains("key_content") && rec.value("key_content", "") == pj["key_content"]));
    std::string status = "pending";
    if (current) {
      status = rec.value("status", "failed");
      for (const char* key : {"exit_code", "signal", "error", "wall_s", "cpu_s", "peak_rss_bytes", "host", "shard",
                              "gpu", "started_utc", "finished_utc"}) {
        if (rec.contains(key)) j[key] = rec[key];
      }
      if (status == "done") j["result"] = ReadJobResult(dir, j["kind"]);
      totals["wall_s"] = totals["wall_s"].get<double>() + Number(rec, "wall_s");
      totals["cpu_s"] = totals["cpu_s"].get<double>() + Number(rec, "cpu_s");
      totals["peak_rss_bytes_max"] =
          std::max<long long>(totals["peak_rss_bytes_max"].get<long long>(), rec.value("peak_rss_bytes", 0LL));
    } else if (tmp_owner.count(name) != 0 && live_owners.count(tmp_owner[name]) != 0) {
      status = "running";
      j["running_on"] = tmp_owner[name];
      struct stat st;
      if (::stat((run_dir + "/jobs/." + name + ".tmp-" + tmp_owner[name]).c_str(), &st) == 0) {
        j["wall_s"] = std::max(0.0, static_cast<double>(std::time(nullptr) - st.st_mtime));
      }
    } else if (has_record) {
      j["note"] = "record is from other options, inputs or build";
    }
    j["status"] = status;
    totals["jobs"] = totals["jobs"].get<int>() + 1;
    totals[status] = totals[status].get<int>() + 1;
    jobs.push_back(j);
  }
  *summary = {
      {"run", run_dir},
      {"generated_utc", UtcNow()},
      {"job_file", plan.value("job_file", "")},
      {"build", BuildIdentity()},
      {"machine", DescribeMachine()},
      {"totals", totals},
      {"shards", shard_list},
      {"jobs", jobs},
  };
  return Status::Ok();
}

Status WriteRunSummary(const std::string& run_dir, const json& summary) {
  TIEPOINT_RETURN_IF_ERROR(WriteJson(run_dir + "/summary.json", summary));
  const int width = 960;
  int bars_height = 0;
  const std::string bars = BarsSvg(summary, width, &bars_height);
  std::string curves;
  int curves_height = 0;
  const std::vector<LogLogPanel> panels = CostPanels(run_dir, summary);
  if (!panels.empty()) {
    LogLogFigureOptions fo;
    fo.title = "Cost against time per solver";
    fo.width_px = width;
    fo.panel_height_px = 360;
    curves = RenderLogLogSvg(panels, fo, nullptr);
    const size_t prolog = curves.find("<svg");
    if (prolog != std::string::npos) curves = curves.substr(prolog);
    const size_t h = curves.find("height=\"");
    if (h != std::string::npos) curves_height = std::atoi(curves.c_str() + h + 8);
  }
  const int height = bars_height + curves_height + 10;
  AtomicFile file(run_dir + "/summary.svg");
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  file.stream() << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << width
                << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height
                << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
                << "<title>tiepoint batch: " << XmlEscape(run_dir) << "</title>\n"
                << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
                << bars;
  if (!curves.empty()) {
    file.stream() << "<g transform=\"translate(0," << bars_height << ")\">\n" << curves << "</g>\n";
  }
  file.stream() << "</svg>\n";
  return file.Commit();
}

std::string FormatSummaryTable(const json& summary) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-34s %-11s %-8s %9s %9s %9s  %s\n", "job", "kind", "status", "wall s",
                "cpu s", "peak MB", "result");
  out << line;
  for (const json& j : summary["jobs"]) {
    std::string result;
    const std::string status = j.value("status", "");
    if (status == "failed") {
      result = j.value("error", std::string("failed"));
      if (result.size() > 90) result = result.substr(0, 87) + "...";
    } else if (j.contains("result")) {
      const json& r = j["result"];
      char buf[160];
      if (r.contains("final_cost") && r["final_cost"].is_number()) {
        std::snprintf(buf, sizeof(buf), "final cost %.6e, %d iterations", r["final_cost"].get<double>(),
                      r.value("iterations", 0));
        result = buf;
      } else if (r.contains("runs")) {
        int ok = 0;
        for (const json& run : r["runs"]) ok += run.value("ok", false);
        std::snprintf(buf, sizeof(buf), "%d of %zu solves ok", ok, r["runs"].size());
        result = buf;
      } else if (r.contains("registered_images")) {
        result = std::to_string(r["registered_images"].get<int>()) + " images registered";
      }
    }
    std::string name = j.value("name", "");
    if (name.size() > 34) name = name.substr(0, 31) + "...";
    const bool has_times = j.contains("wall_s");
    std::snprintf(line, sizeof(line), "%-34s %-11s %-8s %9s %9s %9s  %s\n", name.c_str(),
                  j.value("kind", "").c_str(), status.c_str(),
                  has_times ? Fixed(Number(j, "wall_s"), 2).c_str() : "-",
                  j.contains("cpu_s") ? Fixed(Number(j, "cpu_s"), 2).c_str() : "-",
                  j.contains("peak_rss_bytes") ? Fixed(Number(j, "peak_rss_bytes") / 1048576.0, 1).c_str() : "-",
                  result.c_str());
    out << line;
  }
  const json& t = summary["totals"];
  std::snprintf(line, sizeof(line),
                "%d jobs: %d done, %d failed, %d running, %d pending; job time %.2f s wall, %.2f s cpu; "
                "largest peak memory %.1f MB\n",
                t.value("jobs", 0), t.value("done", 0), t.value("failed", 0), t.value("running", 0),
                t.value("pending", 0), Number(t, "wall_s"), Number(t, "cpu_s"),
                Number(t, "peak_rss_bytes_max") / 1048576.0);
  out << line;
  return out.str();
}

int SummaryExitCode(const json& summary) {
  const json& t = summary["totals"];
  bool live = false;  // pending jobs of a run still going are only waiting their turn
  for (const json& s : summary["shards"]) live = live || s.value("state", "") == "running";
  return t.value("failed", 0) > 0 || (t.value("pending", 0) > 0 && !live) ? 1 : 0;
}

}  // namespace tiepoint::cli
