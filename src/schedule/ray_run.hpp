// `kbv run --ray ADDRESS`: a suite evaluated across a Ray cluster, into this machine's database.
//
// The split of work: this process (C++) discovers the suite, decides what is left against its
// database (as `kbv run` resumes), groups it into shards of one problem each and owns the
// database; a Python driver (python/kbv/ray_run.py: Ray's supported client is Python) submits
// one Ray task per shard and relays what comes back. Each task runs `kbv run` on its node, over
// the shard's problem and candidate files shipped to it, with a node-local database and build
// cache, and streams each row back as that database stores it; this process stores each row as
// it arrives (store/ingest.hpp: idempotent by content key, kbv merge's rule on a conflict).
//
// The driver's interface is a process protocol, so that anything that holds a queue of tasks
// (a later `kbv serve`) can hand its shards to the same cluster: a plan file in (the shards,
// their files and keys, the node's kbv run options), JSON lines out on its standard output (one
// per row stored on a node, one per shard that ended without all of its rows), progress on its
// standard error. See docs/distributed.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedule/suite.hpp"
#include "schedule/work_list.hpp"

namespace kbv::schedule {

struct RayRunRequest {
  std::string address;  // the cluster: host:port of its head, or "auto"
  // The `kbv run` options each node's run gets as given here: the evaluation settings and
  // limits (not the trees, the database, --device or --shard: the driver sets those per task).
  std::vector<std::string> node_arguments;
  int attempts = 3;  // per shard: a shard whose node was lost is submitted again, this often
};

// The plan the Python driver reads: per problem with work left, its file and its candidates'
// files (absolute, and relative to their roots: the layout recreated on a node) and keys.
nlohmann::json ray_plan(const WorkList& work, const SuiteRequest& suite, const RayRunRequest& ray);

// The run: discovery, resume, the plan, the driver, and each row stored as it arrives.
// Progress goes to `suite.settings.placement.progress`, as kbv run's does.
SuiteSummary run_on_ray(const SuiteRequest& suite, const RayRunRequest& ray);

}  // namespace kbv::schedule
