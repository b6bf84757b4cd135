#include "serve/http_routes.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "serve/auth.hpp"
#include "serve/service.hpp"

namespace kbv::serve {

using nlohmann::json;

namespace {

void send(httplib::Response& res, const Answer& answer) {
  res.status = answer.status;
  if (answer.retry_after_s > 0) res.set_header("Retry-After", std::to_string(answer.retry_after_s));
  // Sources and reasons may quote a candidate's bytes: invalid UTF-8 is replaced, not thrown.
  res.set_content(answer.body.dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

bool wants_wait(const httplib::Request& req) {
  if (!req.has_param("wait")) return false;
  const auto value = req.get_param_value("wait");
  return value == "1" || value == "true" || value == "yes";
}

}  // namespace

void install_routes(httplib::Server& http, Service& service, const std::string& token,
                    size_t max_body_bytes) {
  // Before routing, so nothing of an unauthenticated request's body is read (httplib reads the
  // body after this handler) and nothing about the service is told to it.
  http.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (authorized(token, req.get_header_value("Authorization"))) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.set_header("WWW-Authenticate", "Bearer");
    send(res, {401, {{"error", "missing or wrong bearer token"}}});
    return httplib::Server::HandlerResponse::Handled;
  });
  http.Post("/v1/evaluations", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.submit(req.body, wants_wait(req)));
  });
  http.Post("/v1/batches", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.submit_batch(req.body));
  });
  http.Get(R"(/v1/evaluations/([0-9a-f]{1,64}))",
           [&service](const httplib::Request& req, httplib::Response& res) {
             send(res, service.status(req.matches[1]));
           });
  http.Get("/v1/health", [&service](const httplib::Request&, httplib::Response& res) {
    send(res, service.health());
  });
  // The library's own errors (no route, a body over the limit) get a JSON body like ours.
  using ErrorHandler = httplib::Server::HandlerWithResponse;
  http.set_error_handler(
      ErrorHandler([max_body_bytes](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = fmt::format("HTTP {}", res.status);
        if (res.status == 404) message = "no such route or evaluation";
        if (res.status == 413) {
          message = fmt::format("the body is over this server's limit of {} bytes", max_body_bytes);
        }
        res.set_content(json{{"error", message}}.dump(), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown error";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send(res, {500, {{"error", "internal error (a fault of kbv): " + what}}});
      });
}

}  // namespace kbv::serve
