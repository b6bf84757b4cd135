// The HTTP face of kbv serve (cpp-httplib): the token check before anything else is read, the
// routes onto the Service, JSON error bodies for every error status (the library's own 404 and
// 413 included), and Retry-After where the service gives one.
#pragma once

#include <string>

namespace httplib {
class Server;
}

namespace kbv::serve {

class Service;

//   POST /v1/evaluations[?wait=1]   one request
//   POST /v1/batches                a list of requests
//   GET  /v1/evaluations/{id}       a job's status, result and reward
//   GET  /v1/health                 devices, queue, workers
// Every route needs `Authorization: Bearer <token>` (401 otherwise).
void install_routes(httplib::Server& http, Service& service, const std::string& token,
                    size_t max_body_bytes);

}  // namespace kbv::serve
