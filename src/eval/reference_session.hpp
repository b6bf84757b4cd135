// The reference side of one problem on one device, shared by every candidate of that problem
// that `kbv run` evaluates there in a row: one reference worker kept alive (problem loaded,
// model warm) holding the drawn cases resident within its memory plan (inputs, re-drawn state,
// golden outputs with the float64 truth: docs/case-path.md), a private run directory for its
// log, the audit of those cases and the baseline's memory.
// What stays per candidate: the candidate's own worker, outputs and scratch space, the static
// scan, the operator trace, and the baseline timings, which are interleaved with each
// candidate's own (ABBA rounds) by the same live reference worker.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "eval/memory_ledger.hpp"
#include "eval/memory_plan.hpp"
#include "eval/workspace.hpp"
#include "judge/audit.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::eval {

// Everything the shared reference work depends on. A session is reused only while its key
// still matches; anything else (new problem content, device, protocol or its version, draws,
// size, kbv, torch/CUDA/driver, a new secret seed) means new reference work.
struct ReferenceKey {
  std::string problem_sha256;
  std::string device;  // as given: cpu, cuda:0 ...
  std::string protocol;
  int protocol_version = 0;
  int draws = 0;
  std::string size;
  std::string kbv_version;
  nlohmann::json software = nlohmann::json::object();  // torch, CUDA, driver, python, GPU name
  std::string secret_sha256;

  nlohmann::json to_json() const;
  std::string digest() const;  // SHA-256 of to_json()
  // The part known before a reference worker starts; the software and secret belong to the
  // session itself and cannot change under a live worker.
  bool same_request(const ReferenceKey& other) const;
};

// The software fields of a reference worker's environment report that the key keeps.
nlohmann::json software_of(const nlohmann::json& environment);

struct ReferenceSession {
  ReferenceKey key;
  std::filesystem::path problem;  // absolute path: the result's name and path come from it
  std::filesystem::path run_dir;  // private: the candidate sees only inputs/ and state/
  FolderOwner run_dir_owner;      // marks run_dir in use (a killed run's is reclaimed)
  std::string secret;
  // What a session started ahead holds of its device's ahead share (permit_ahead) until an
  // evaluation takes it over; released after its worker has stopped.
  std::optional<MemoryLedger::Reservation> ahead_memory;
  std::unique_ptr<orchestrate::WorkerProcess> worker;
  nlohmann::json loaded;  // the load_problem answer
  // The cases (`prepared["cases"]`: id, family, draw, redraw, and their figures once drawn) and
  // the parameter names they are drawn with (`redraw`): a candidate whose parameters match
  // differently needs other cases (the values depend on the set).
  nlohmann::json prepared;
  nlohmann::json prepared_redraw;
  std::optional<MemoryPlan> plan;  // from the first case drawn; sets the reference's budget
  std::optional<judge::ProblemAudit> audit;  // of `prepared`, once computed
  nlohmann::json memory;                     // the baseline's memory answer, null until measured
  nlohmann::json roofline;  // the baseline's cost (roofline answer), null until counted
  int preparations = 0;     // prepare calls made by this session
  int candidates = 0;       // candidates that used it
  bool keep_run_dir = false;
  // A session started ahead (start_reference_session) loads the problem and draws its cases on
  // this thread while the device thread's current evaluation runs; whoever uses or destroys
  // the session joins it first. `ahead_error` says why that preparation failed.
  std::thread preparing;
  std::string ahead_error;
  bool prepared_ahead = false;
  // Set on `preparing` once the problem is loaded, for kbv run's device thread to read while
  // the preparation goes on: 1 where one evaluation of the problem needs the device's memory to
  // itself (loaded_needs_whole_device), 0 where not, -1 until known, -2 where the load failed
  // (never known). Notified on every change (await_needs_whole_device waits on it).
  std::atomic<int> needs_whole_device{-1};
  std::string ahead_note;     // what it did ahead and why (drawn, loaded only), in words
  bool ahead_capped = false;  // its allocations were capped for the draw ahead (cap_memory)
  bool from_spare = false;    // its worker was the slot's spare, started before it was needed
  // Its worker's pid when start_reference_session started it, read while `preparing` runs.
  int started_pid = 0;

  ReferenceSession() = default;
  ReferenceSession(const ReferenceSession&) = delete;
  ReferenceSession& operator=(const ReferenceSession&) = delete;
  ~ReferenceSession();
  nlohmann::json record(bool reused) const;  // what a result stores under problem.reference
};

// One per device thread of `kbv run`: the session of the problem it evaluated last.
struct ReferenceSlot {
  std::unique_ptr<ReferenceSession> session;
  int sessions_started = 0;
  // A session with nothing but a started worker and its run directory, for the next session
  // that needs one (placement.spare_reference): a worker's start (the process, its sandbox,
  // torch's and CUDA's libraries) is seconds, and a session started when an evaluation needs
  // it waits for all of it (session 24's H100 audit: a load took 6.2 s at the median, for the
  // smallest problems too, and 333 s of 1,001 passed with nothing but loads in flight). Its
  // worker makes no CUDA context before its first command (session 25's H100 run).
  // `spare_settings`: what it was started for; it is taken only for the same.
  std::unique_ptr<ReferenceSession> spare;
  std::string spare_settings;
  // Sessions started ahead (start_reference_session) for problems this thread evaluates next,
  // by the problem's absolute path: their worker is started (and imports torch), loads the
  // problem and draws its cases while the thread's current evaluation runs.
  std::map<std::filesystem::path, std::unique_ptr<ReferenceSession>> ahead;
};

}  // namespace kbv::eval
