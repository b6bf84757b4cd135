#include "core/flags.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace kbv {
namespace {

using S = Severity;

// Ordered as docs/result.md lists them. Keep the meanings to one line: the docs say more.
constexpr std::array kFlags = {
    FlagInfo{"inputs_mutated", S::Reject, {}, "the forward changed an input in place"},
    FlagInfo{"output_aliases_input",
             S::Reject,
             {},
             "an output shares storage with an input (the reference's does not)"},
    FlagInfo{"output_not_plain_tensor", S::Reject, {}, "an output is a torch.Tensor subclass"},
    FlagInfo{"numerics_flags_changed",
             S::Warn,
             {},
             "the candidate changed global numerics flags (put back after every call)"},
    FlagInfo{"params_unmatched",
             S::Warn,
             {},
             "reference state without a counterpart in ModelNew (not re-drawn)"},
    FlagInfo{
        "params_matched_by_shape", S::Info, {}, "state matched by unique shape rather than name"},
    FlagInfo{"family_replaced",
             S::Info,
             {},
             "a hidden draw was replaced because the reference was non-finite on it"},
    FlagInfo{"forward_synchronizes",
             S::Info,
             {},
             "the forward waits for the device; timed without the blocking kernel"},
    FlagInfo{"evaluated_alone",
             S::Info,
             {},
             "evaluated with the device alone (a failure while shared), or with its memory to "
             "itself (a problem whose peak exceeds what evaluations may reserve together)"},
    FlagInfo{
        "problem_degenerate", S::Warn, {}, "the reference output does not depend on the inputs"},
    FlagInfo{"reference_fails_float64",
             S::Warn,
             {},
             "the TF32 reference is far from its own float64 run"},
    FlagInfo{"harness_tampered",
             S::Reject,
             {},
             "a timing or harness entry point or a sys.modules entry was replaced"},
    FlagInfo{"output_changed_after_return",
             S::Reject,
             {},
             "an output changed after the forward returned"},
    FlagInfo{"background_thread", S::Reject, S::Warn,
             "the forward returned with a thread it started still running"},
    FlagInfo{"output_cached",
             S::Reject,
             {},
             "a re-check with new values in the same buffers, or the same values in new ones, "
             "failed"},
    FlagInfo{"nondeterministic", S::Reject, {}, "a case that passed fails when run again"},
    FlagInfo{"timed_output_wrong", S::Reject, {}, "the output of a timed call is wrong"},
    FlagInfo{"library_main_op", S::Reject, S::Warn,
             "the reference's heavy operators ran as PyTorch operators, no extension ran"},
    FlagInfo{"kernel_never_called", S::Reject, S::Warn,
             "the candidate built extension functions and the forward ran none of them"},
    FlagInfo{"no_custom_kernel", S::Reject, S::Warn,
             "none of the candidate's own code computed: every operator or GPU kernel of the "
             "forward is PyTorch's or a library's"},
    FlagInfo{"precision_flags_changed",
             S::Reject,
             {},
             "the forward keeps lowering a precision flag below the TF32 baseline"},
    FlagInfo{"run_dir_tampered",
             S::Reject,
             {},
             "files of the run directory outside the candidate's space were changed"},
    FlagInfo{"channel_forged",
             S::Reject,
             {},
             "an answer on the candidate's channel that its worker did not send for the request"},
    FlagInfo{"build_cache_tampered",
             S::Reject,
             {},
             "a library in the build cache changed after it was loaded, or start-up hooks were "
             "planted there"},
    FlagInfo{"harness_fault_beside_tampering",
             S::Info,
             {},
             "a fault of kbv's also ended the evaluation early; the tampering decided"},
    FlagInfo{"scan_threads", S::Warn, {}, "static scan: starts threads or processes"},
    FlagInfo{"scan_streams", S::Warn, {}, "static scan: creates CUDA streams or graphs"},
    FlagInfo{"scan_monkey_patch",
             S::Warn,
             {},
             "static scan: assigns attributes of a module it did not define"},
    FlagInfo{"scan_introspection", S::Warn, {}, "static scan: introspects the process"},
    FlagInfo{"scan_io", S::Warn, {}, "static scan: files, processes or the network"},
    FlagInfo{"scan_seed", S::Warn, {}, "static scan: seeds a random generator"},
    FlagInfo{"scan_numerics_flags", S::Warn, {}, "static scan: sets global numerics flags"},
    FlagInfo{"scan_cpp_library_compute",
             S::Warn,
             {},
             "static scan: C++ source calls an ATen/torch compute function"},
    FlagInfo{"scan_low_precision", S::Info, {}, "static scan: casts to half or bfloat16"},
    FlagInfo{
        "scan_library_compute", S::Info, {}, "static scan: calls a library matmul/conv/softmax"},
    FlagInfo{"scan_cpp_low_precision",
             S::Info,
             {},
             "static scan: C++ source uses half or bfloat16 types"},
    FlagInfo{"scan_error", S::Warn, {}, "the static scan could not parse or scan the file"},
    FlagInfo{"timing_escapes_events",
             S::Reject,
             {},
             "GPU work on another stream ended after the forward's work on the current one"},
    FlagInfo{
        "side_stream_work", S::Info, {}, "the forward ran work on other streams, all joined back"},
    FlagInfo{"below_roofline",
             S::Reject,
             {},
             "the median time is below 0.8 x the roofline floor of the reference's work"},
    FlagInfo{"roofline_skipped", S::Info, {}, "the roofline floor was not checked"},
    FlagInfo{"plans_under_pressure",
             S::Info,
             {},
             "the candidate's forward chose a library plan while device memory ran out"},
    FlagInfo{"l2_persisting_changed",
             S::Warn,
             {},
             "the candidate set a persisting-L2 set-aside or access-policy window"},
    FlagInfo{"scan_cpp_ghost_kernel",
             S::Warn,
             {},
             "static scan: a __global__ kernel defined and never named again"},
    FlagInfo{"scan_cpp_blas", S::Warn, {}, "static scan: cuBLAS/cuDNN called directly"},
    FlagInfo{"scan_cpp_streams", S::Warn, {}, "static scan: C++ source creates streams"},
    FlagInfo{"scan_cpp_graphs", S::Warn, {}, "static scan: C++ source uses CUDA graphs"},
    FlagInfo{"scan_cpp_l2_persist",
             S::Warn,
             {},
             "static scan: C++ source sets persisting-L2 windows or limits"},
};

}  // namespace

std::span<const FlagInfo> flag_catalogue() { return kFlags; }

const FlagInfo* find_flag(std::string_view id) {
  for (const auto& f : kFlags) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

void require_catalogued(std::string_view id, Severity severity) {
  const FlagInfo* info = find_flag(id);
  if (!info || !info->allows(severity)) {
    throw std::logic_error(fmt::format("flag {} ({}) is not in the flag catalogue (core/flags.cpp)",
                                       id, to_string(severity)));
  }
}

}  // namespace kbv
