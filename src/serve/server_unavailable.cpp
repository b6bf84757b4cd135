// `kbv serve` in a kbv built without cpp-httplib (a machine where libcpp-httplib-dev, or
// upstream's httplib.h in .deps/include, was missing at configure time): the rest of kbv builds
// and runs, and the command says what to install instead of failing the whole build.
#include "eval/eval_request.hpp"
#include "serve/server.hpp"

namespace kbv::serve {

int serve(const ServeOptions&) {
  throw eval::UsageError(
      "this kbv was built without cpp-httplib, so kbv serve is unavailable: install "
      "libcpp-httplib-dev (scripts/setup.sh does) or put upstream's single-header httplib.h in "
      ".deps/include, then configure and build again");
}

}  // namespace kbv::serve
