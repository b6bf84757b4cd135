#include "eval/measurement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "orchestrate/worker_protocol.hpp"
#include "stats/summary.hpp"

namespace kbv::eval {
using nlohmann::json;

nlohmann::json TimingPlan::to_json() const {
  json out = {{"profile", profile.to_json()},
              {"adaptive", adaptive},
              {"calls_per_round", per_round},
              {"secondary_calls", secondary_calls},
              {"audit_calls", audit_calls}};
  if (!adaptive) out["rounds"] = rounds;
  return out;
}

TimingPlan plan_timing(const std::string& profile, int samples, int rounds, bool cuda) {
  TimingPlan plan;
  plan.profile = stats::profile_by_name(profile);
  plan.secondary_calls = cuda ? 20 : 10;
  plan.audit_calls = cuda ? 5 : 0;
  if (samples > 0 || rounds > 0) {
    plan.adaptive = false;
    int n = samples > 0 ? samples : (cuda ? 60 : 15);
    int r = rounds > 0 ? rounds : (cuda ? 6 : 3);
    plan.rounds = std::max(1, std::min(r, n));
    plan.per_round = std::max(1, n / plan.rounds);
  } else {
    plan.per_round = plan.profile.round_size;
  }
  return plan;
}

const std::vector<std::string>& timing_sides() {
  static const std::vector<std::string> sides = {"tf32", "cand", "fp32"};
  return sides;
}

std::string side_key(const std::string& who) {
  return who == "cand" ? "candidate" : "baseline_" + who;
}

namespace {

void add_counts(json& into, const json& counts) {
  if (!counts.is_object()) return;
  for (const auto& [name, n] : counts.items()) {
    into[name] = into.value(name, 0) + n.get<int>();
  }
}

json summary_json(const std::vector<double>& v) { return stats::summarize(v).to_json(); }

}  // namespace

json merge_throttle(const std::vector<json>& reports) {
  json out = {{"status", "unavailable"},
              {"samples", 0},
              {"discarded", 0},
              {"power_capped", 0},
              {"reasons", json::object()},
              {"discarded_reasons", json::object()},
              {"retries_exhausted", false},
              {"sm_clock_mhz", nullptr}};
  std::vector<double> clocks;
  std::string why;
  bool any_ok = false, any_cpu = false;
  for (const auto& r : reports) {
    if (!r.is_object()) continue;
    std::string status = r.value("status", "unavailable");
    any_ok = any_ok || status == "ok";
    any_cpu = any_cpu || status == "not_applicable";
    if (status != "ok" && why.empty()) why = r.value("why", "");
    out["samples"] = out["samples"].get<int>() + r.value("kept", 0);
    out["discarded"] = out["discarded"].get<int>() + r.value("discarded", 0);
    out["power_capped"] = out["power_capped"].get<int>() + r.value("power_capped", 0);
    add_counts(out["reasons"], r.value("reasons", json::object()));
    add_counts(out["discarded_reasons"], r.value("discarded_reasons", json::object()));
    if (r.value("retries_exhausted", false)) out["retries_exhausted"] = true;
    for (const auto& c : r.value("sm_clock_mhz", json::array())) {
      if (c.is_number()) clocks.push_back(c.get<double>());
    }
  }
  out["status"] = any_ok ? "ok" : (any_cpu ? "not_applicable" : "unavailable");
  if (!any_ok && !why.empty()) out["why"] = why;
  if (!clocks.empty()) {
    auto s = stats::summarize(clocks);
    out["sm_clock_mhz"] = {{"min", s.min}, {"median", s.median}, {"max", s.max}};
  }
  return out;
}

TimingRun run_timing(const TimingPlan& plan, const SideCall& call, bool cuda,
                     const std::function<void(const std::string&)>& progress,
                     std::function<double()> now_seconds) {
  if (!now_seconds) {
    auto origin = std::chrono::steady_clock::now();
    now_seconds = [origin] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    };
  }
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const auto& sides = timing_sides();
  const double started = now_seconds();
  TimingRun run;
  std::map<std::string, std::vector<json>> throttle;
  json methods = json::object(), warmups = json::object();
  stats::StopReason reason = stats::StopReason::Continue;
  int round = 0;
  for (;; ++round) {
    if (plan.adaptive) {
      say(fmt::format("timing round {} ({} profile, {} samples per side so far)", round + 1,
                      plan.profile.name, run.samples["cand"].size()));
    } else {
      say(fmt::format("timing round {}/{}", round + 1, plan.rounds));
    }
    for (int index : stats::round_order(static_cast<int>(sides.size()), round)) {
      const std::string& who = sides[static_cast<size_t>(index)];
      json request =
          orchestrate::worker_request(orchestrate::cmd::kTime, {{"calls", plan.per_round},
                                                                {"warmup", round == 0 ? 3 : 1},
                                                                {"steady_warmup", round == 0}});
      auto response = call(who, request);
      if (!response) return run;
      auto& into = run.samples[who];
      for (double v : response->value("samples_ms", json::array())) into.push_back(v);
      methods[who] = response->value("method", "");
      if (response->contains("throttle")) throttle[who].push_back((*response)["throttle"]);
      if (response->contains("warmup")) warmups[side_key(who)] = (*response)["warmup"];
    }
    if (!plan.adaptive) {
      if (round + 1 >= plan.rounds) {
        reason = stats::StopReason::MaxSamples;
        break;
      }
      continue;
    }
    reason = stats::should_stop_speedup(plan.profile, run.samples["cand"],
                                        {run.samples["tf32"], run.samples["fp32"]},
                                        now_seconds() - started);
    if (reason != stats::StopReason::Continue) break;
  }

  json timing = json::object();
  for (const auto& who : sides) {
    json side = summary_json(run.samples[who]);
    side["throttle"] = cuda ? merge_throttle(throttle[who])
                            : json{{"status", "not_applicable"},
                                   {"why", "no clocks or throttle reasons on the CPU"}};
    timing[side_key(who)] = side;
  }

  // Secondary figures, one interleaved pass.
  if (plan.secondary_calls > 0) {
    say("timing the secondary figures (host-inclusive, hot back-to-back)");
    for (const auto& who : sides) {
      auto response = call(who, orchestrate::worker_request(orchestrate::cmd::kTimeSecondary,
                                                            {{"calls", plan.secondary_calls}}));
      if (!response) return run;
      json& side = timing[side_key(who)];
      for (const char* figure : {"host_inclusive", "hot"}) {
        std::vector<double> v;
        for (double x : response->value(std::string(figure) + "_ms", json::array())) {
          v.push_back(x);
        }
        side[figure] = summary_json(v);
        side[figure]["method"] = response->value(std::string(figure) + "_method", "");
      }
    }
  }
  // Kernel-activity audit: the span of the kernels a call ran against its event time.
  if (plan.audit_calls > 0) {
    say("kernel-activity audit");
    for (const std::string who : {"cand", "tf32"}) {
      auto response = call(who, orchestrate::worker_request(orchestrate::cmd::kKernelAudit,
                                                            {{"calls", plan.audit_calls}}));
      if (!response) return run;
      timing[side_key(who)]["kernel_audit"] = *response;
    }
  }

  timing["rounds"] = round + 1;
  timing["method"] = methods;
  timing["plan"] = plan.to_json();
  timing["stop_reason"] = std::string(stats::to_string(reason));
  timing["elapsed_s"] = now_seconds() - started;
  timing["warmup"] = warmups;
  if (plan.adaptive) {
    json widths = json::object();
    for (const std::string b : {"tf32", "fp32"}) {
      widths["vs_" + b] = stats::relative_half_width(
          stats::speedup(run.samples[b], run.samples["cand"], 0.02, 0.95, 500));
    }
    timing["speedup_relative_half_width"] = widths;
  }
  run.timing = std::move(timing);
  run.ok = true;
  return run;
}

}  // namespace kbv::eval
