// kbv generate's HTTP in a kbv built without libcurl's headers (a machine where neither
// libcurl4-openssl-dev nor the headers staged by scripts/stage_deps.sh were there at configure
// time): the rest of kbv builds and runs, and kbv generate says what to install.
#include "eval/eval_request.hpp"
#include "generate/http.hpp"

namespace kbv::generate {

void http_global_init() {
  throw eval::UsageError(
      "this kbv was built without libcurl, so kbv generate cannot send requests: install "
      "libcurl4-openssl-dev (scripts/setup.sh does) or stage its headers with "
      "scripts/stage_deps.sh, then configure and build again");
}

HttpResponse http_post(const HttpRequest&, std::chrono::milliseconds) {
  http_global_init();
  return {};
}

}  // namespace kbv::generate
