#include "serve/job_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "eval/protocol.hpp"

namespace kbv::serve {

using nlohmann::json;

namespace {

const std::set<std::string>& known_fields() {
  static const std::set<std::string> fields = {
      "problem", "candidate",      "problem_name", "run",       "protocol", "draws",
      "profile", "samples",        "rounds",       "no_timing", "size",     "allow_library",
      "timeout", "compile_timeout"};
  return fields;
}

std::string field_list() {
  std::string out;
  for (const auto& f : known_fields()) out += (out.empty() ? "" : ", ") + f;
  return out;
}

void check_source(const json& body, const char* field, const RequestPolicy& policy) {
  if (!body.contains(field)) {
    throw BadRequest(fmt::format("'{}' is missing: the {}'s Python source", field, field));
  }
  const auto& value = body.at(field);
  if (!value.is_string()) {
    throw BadRequest(fmt::format("'{}' must be a string (the file's Python source), not {}", field,
                                 value.type_name()));
  }
  const auto& text = value.get_ref<const std::string&>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw BadRequest(fmt::format("'{}' is empty", field));
  }
  if (text.size() > policy.max_source_bytes) {
    throw BadRequest(fmt::format("'{}' is {} bytes, over this server's limit of {} per source",
                                 field, text.size(), policy.max_source_bytes));
  }
  if (text.find('\0') != std::string::npos) {
    throw BadRequest(fmt::format("'{}' contains a NUL byte: not Python source", field));
  }
}

// A KernelBench problem defines these at module level; without them the reference cannot load
// it, and the client should hear so now rather than as a failed job later.
void check_problem_shape(const std::string& source) {
  static const std::regex model(R"((^|\n)class\s+Model\b)");
  static const std::regex inputs(R"((^|\n)def\s+get_inputs\s*\()");
  static const std::regex init(R"((^|\n)def\s+get_init_inputs\s*\()");
  for (const auto& [re, what] :
       {std::pair{&model, "class Model"}, std::pair{&inputs, "def get_inputs()"},
        std::pair{&init, "def get_init_inputs()"}}) {
    if (!std::regex_search(source, *re)) {
      throw BadRequest(fmt::format(
          "'problem' is not a KernelBench problem: it defines no module-level `{}`", what));
    }
  }
}

// A name that becomes part of a file path and a store row: no path tricks, printable.
std::string checked_name(const json& value, const char* field) {
  static const std::regex allowed(
      R"([A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*)");
  if (!value.is_string()) throw BadRequest(fmt::format("'{}' must be a string", field));
  const auto& name = value.get_ref<const std::string&>();
  if (name.empty() || name.size() > 128 || !std::regex_match(name, allowed) ||
      name.find("..") != std::string::npos) {
    throw BadRequest(fmt::format(
        "'{}' must be 1 to 128 characters of letters, digits, '_', '-', '.' and '/' (no '..')",
        field));
  }
  return name;
}

int checked_int(const json& value, const char* field, long long low, long long high) {
  if (!value.is_number_integer()) {
    throw BadRequest(fmt::format("'{}' must be an integer, not {}", field, value.type_name()));
  }
  const auto n = value.get<long long>();
  if (n < low || n > high) {
    throw BadRequest(fmt::format("'{}' must be between {} and {}, not {}", field, low, high, n));
  }
  return static_cast<int>(n);
}

bool checked_bool(const json& value, const char* field) {
  if (!value.is_boolean()) {
    throw BadRequest(fmt::format("'{}' must be true or false, not {}", field, value.type_name()));
  }
  return value.get<bool>();
}

std::string checked_choice(const json& value, const char* field,
                           const std::vector<std::string>& choices) {
  std::string all;
  for (const auto& c : choices) all += (all.empty() ? "" : ", ") + c;
  if (!value.is_string() ||
      std::find(choices.begin(), choices.end(), value.get<std::string>()) == choices.end()) {
    throw BadRequest(fmt::format("'{}' must be one of {}, not {}", field, all, value.dump()));
  }
  return value.get<std::string>();
}

// The options of a request (or of a queued job read back) over the policy's defaults.
void apply_options(const json& body, const RequestPolicy& policy, JobSpec& spec) {
  spec.settings = policy.defaults;
  spec.limits = policy.limits;
  if (body.contains("problem_name"))
    spec.problem_name = checked_name(body["problem_name"], "problem_name");
  if (body.contains("run")) spec.run = checked_name(body["run"], "run");
  if (body.contains("protocol"))
    spec.settings.protocol = checked_choice(body["protocol"], "protocol", eval::protocol_names());
  if (body.contains("draws"))
    spec.settings.hidden_draws = checked_int(body["draws"], "draws", 1, 100);
  if (body.contains("profile")) {
    spec.settings.timing_profile =
        checked_choice(body["profile"], "profile", {"quick", "standard", "precise"});
  }
  if (body.contains("samples"))
    spec.settings.timing_samples = checked_int(body["samples"], "samples", 0, 100000);
  if (body.contains("rounds"))
    spec.settings.timing_rounds = checked_int(body["rounds"], "rounds", 0, 1000);
  if (body.contains("no_timing"))
    spec.settings.measure = !checked_bool(body["no_timing"], "no_timing");
  if (body.contains("allow_library"))
    spec.settings.allow_library = checked_bool(body["allow_library"], "allow_library");
  if (body.contains("size"))
    spec.settings.size = checked_choice(body["size"], "size", {"small", "large"});
  // At most the server's own limits: the operator sized the devices' time by them.
  if (body.contains("timeout")) {
    spec.limits.call_timeout = std::chrono::seconds(checked_int(
        body["timeout"], "timeout", 1, static_cast<long long>(policy.limits.call_timeout.count())));
  }
  if (body.contains("compile_timeout")) {
    spec.limits.compile_timeout = std::chrono::seconds(
        checked_int(body["compile_timeout"], "compile_timeout", 1,
                    static_cast<long long>(policy.limits.compile_timeout.count())));
  }
}

}  // namespace

json JobSpec::options_json() const {
  json options = {{"problem_name", problem_name},
                  {"run", run},
                  {"protocol", settings.protocol},
                  {"draws", settings.hidden_draws},
                  {"profile", settings.timing_profile},
                  {"samples", settings.timing_samples},
                  {"rounds", settings.timing_rounds},
                  {"no_timing", !settings.measure},
                  {"allow_library", settings.allow_library},
                  {"size", settings.size},
                  {"timeout", limits.call_timeout.count()},
                  {"compile_timeout", limits.compile_timeout.count()}};
  return options;
}

JobSpec JobSpec::from_options(const json& options, const RequestPolicy& policy) {
  JobSpec spec;
  // A restarted server may run under lower limits than the one that accepted the job: the job
  // runs under the lower ones rather than being refused after it was accepted.
  RequestPolicy generous = policy;
  generous.limits.call_timeout = std::chrono::seconds(86400);
  generous.limits.compile_timeout = std::chrono::seconds(86400);
  apply_options(options, generous, spec);
  spec.limits.call_timeout = std::min(spec.limits.call_timeout, policy.limits.call_timeout);
  spec.limits.compile_timeout =
      std::min(spec.limits.compile_timeout, policy.limits.compile_timeout);
  return spec;
}

JobSpec parse_job(const json& body, const RequestPolicy& policy) {
  if (!body.is_object()) {
    throw BadRequest(fmt::format("the request must be a JSON object, not {}", body.type_name()));
  }
  for (const auto& [field, value] : body.items()) {
    if (!known_fields().contains(field)) {
      throw BadRequest(fmt::format("unknown field '{}' (known: {})", field, field_list()));
    }
  }
  check_source(body, "problem", policy);
  check_source(body, "candidate", policy);
  check_problem_shape(body["problem"].get_ref<const std::string&>());
  JobSpec spec;
  apply_options(body, policy, spec);
  spec.problem_source = body["problem"].get<std::string>();
  spec.candidate_source = body["candidate"].get<std::string>();
  return spec;
}

namespace {

json parse_body(const std::string& body) {
  try {
    return json::parse(body);
  } catch (const json::parse_error& error) {
    throw BadRequest(fmt::format("the body is not JSON: {}", error.what()));
  }
}

}  // namespace

JobSpec parse_job_text(const std::string& body, const RequestPolicy& policy) {
  return parse_job(parse_body(body), policy);
}

std::vector<BatchItem> parse_batch_text(const std::string& body, const RequestPolicy& policy,
                                        size_t max_items) {
  json parsed = parse_body(body);
  if (parsed.is_object() && parsed.contains("evaluations") && parsed.size() == 1) {
    parsed = parsed["evaluations"];
  }
  if (!parsed.is_array()) {
    throw BadRequest(
        "a batch must be a JSON list of requests or {\"evaluations\": [<request>, ...]}");
  }
  if (parsed.empty()) throw BadRequest("the batch is empty");
  if (parsed.size() > max_items) {
    throw BadRequest(fmt::format("the batch has {} requests, over this server's limit of {}",
                                 parsed.size(), max_items));
  }
  std::vector<BatchItem> items(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    try {
      items[i].spec = parse_job(parsed[i], policy);
    } catch (const BadRequest& error) {
      items[i].refused = error.what();
    }
  }
  return items;
}

}  // namespace kbv::serve
