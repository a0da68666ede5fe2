// `tiepoint batch summarize RUN/`: one view of a run, whatever its shards have done so far.
//
// The job list is the most recent plan in RUN/shards/*.json (every shard writes the full
// expanded list). Each job's status: "done" or "failed" from its completion record
// (jobs/<name>/job.json, when its key is the plan's), "running" when a live shard is running
// it, "pending" otherwise (never started, stopped, or its record is from other options).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "io/base/status.h"

namespace tiepoint::cli {

// summary.json's content: {"run", "generated_utc", "build", "totals": {jobs, done, failed,
// running, pending, wall_s, cpu_s, peak_rss_bytes_max}, "shards": [...], "jobs": [{"name",
// "kind", "index", "status", "exit_code", "error", "wall_s", "cpu_s", "peak_rss_bytes",
// "host", "shard", "started_utc", "finished_utc", "result": {final_cost, initial_cost,
// iterations, solver, input | runs per solver for bench | registered_images}}]}.
Status CollectRunSummary(const std::string& run_dir, nlohmann::json* summary);

// Writes RUN/summary.json and RUN/summary.svg (per-job time bars coloured by status; for ba
// and bench jobs, cost against time per solver, one panel per problem). Atomic writes.
Status WriteRunSummary(const std::string& run_dir, const nlohmann::json& summary);

// A printed table, one row per job, and a totals line.
std::string FormatSummaryTable(const nlohmann::json& summary);

// 1 when a job failed, or jobs are pending and no shard is running any more; else 0.
int SummaryExitCode(const nlohmann::json& summary);

// What a finished job produced, read from its outputs in `job_dir`: for ba the report's
// final and initial cost, iterations and solver; for bench each solver's final cost; for
// reconstruct the registered images when its report says so. Empty object when unknown.
nlohmann::json ReadJobResult(const std::string& job_dir, const std::string& kind);

}  // namespace tiepoint::cli
