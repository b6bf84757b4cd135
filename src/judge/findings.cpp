#include "judge/findings.hpp"

#include "core/flags.hpp"

namespace kbv::judge {

void Findings::add(std::string id, Severity severity, std::string detail) {
  add_flag(flags_, std::move(id), severity, std::move(detail));
}

void Findings::raise(std::string id, Severity severity, std::string detail) {
  for (auto& f : flags_) {
    if (f.id != id) continue;
    if (severity == Severity::Reject && f.severity != Severity::Reject) {
      require_catalogued(id, severity);
      f.severity = Severity::Reject;
      f.detail = std::move(detail);
    }
    return;
  }
  add(std::move(id), severity, std::move(detail));
}

bool Findings::has(std::string_view id) const { return has_flag(flags_, id); }

bool Findings::has_reject() const { return has_reject_flag(flags_); }

void Findings::into(Result& result) const {
  for (const auto& f : flags_) result.add_flag(f.id, f.severity, f.detail);
}

}  // namespace kbv::judge
