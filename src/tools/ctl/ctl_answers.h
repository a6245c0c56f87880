// sluice-ctl's reading of the admin plane's answers: from one answer (HTTP
// status and body bytes) to what the command prints and its exit code. No
// socket and no process state here, so unit tests and the fuzzer
// (test/fuzz/fuzz_ctl_answer.cc) drive it directly; sluice_ctl_main.cc sends
// the request and writes the Outcome out.
#pragma once

#include <string>
#include <string_view>

namespace sluice::ctl {

// sluice-ctl's exit codes (README, "sluice-ctl").
inline constexpr int kExitDone = 0;
inline constexpr int kExitRefused = 1;      // the server refused: its status and message
inline constexpr int kExitUsage = 2;        // the command line is wrong
inline constexpr int kExitUnreachable = 3;  // no connection, or no HTTP answer
// The admin plane answered (2xx) with what sluice-ctl cannot read: not JSON,
// or JSON of another shape (another service on that port, another version).
inline constexpr int kExitUnreadable = 4;

// The commands that read an answer; each names the request it answers.
enum class Command {
  kFlows,        // GET /admin/v1/flows
  kFlow,         // GET /admin/v1/flows/ID
  kFlowSet,      // PUT /admin/v1/flows/ID
  kFlowReset,    // DELETE /admin/v1/flows/ID
  kBands,        // GET /admin/v1/bands
  kBandSet,      // PUT /admin/v1/bands/PRIORITY
  kBandDelete,   // DELETE /admin/v1/bands/PRIORITY
  kEndpoints,    // GET /admin/v1/endpoints
  kReload,       // POST /admin/v1/reload
  kDrain,        // POST /admin/v1/drain (200 drained, 202 draining)
  kDrainWait,    // GET /admin/v1/drain, each poll of drain --wait
  kDrainStatus,  // GET /admin/v1/drain
  kDrainCancel,  // DELETE /admin/v1/drain
  kKeys,         // GET /admin/v1/keys
  kKey,          // GET /admin/v1/keys/ID
  kKeyCreate,    // POST /admin/v1/keys (201, with the key: shown this once)
  kKeyDisable,   // PUT /admin/v1/keys/ID {"disabled":true}
  kKeyEnable,    // PUT /admin/v1/keys/ID {"disabled":false}
  kKeyRevoke,    // DELETE /admin/v1/keys/ID
  kQuotas,       // GET /admin/v1/quotas[?tenant=ID]
  kQuotaReset,   // POST /admin/v1/quotas/TENANT/reset
  kMetrics,      // GET /metrics (Prometheus text, printed as it came)
};
inline constexpr int kCommandCount = static_cast<int>(Command::kMetrics) + 1;

struct Request {
  Command command = Command::kFlows;
  // The flow ID, band PRIORITY, key ID or TENANT the command names; "" for
  // the others.
  std::string subject;
  bool as_json = false;  // --json: the answer as indented JSON instead of a table or a line
};

// What sluice-ctl does with one answer.
struct Outcome {
  int exit_code = kExitDone;
  std::string out;  // for stdout
  // For stderr: whole lines, each starting with "sluice-ctl: ". Empty when
  // the command is done, but for key create's line saying the key is shown
  // once (its stdout is the key alone, for KEY=$(sluice-ctl key create ...)).
  std::string err;
};

// Reads one answer to `request`. Any status and any body bytes give an
// Outcome: nothing throws, and what is printed of the answer is escaped
// (control bytes, invalid UTF-8) and, in messages, cut short. Well-formed
// answers print as they always did. The one value printed as it came is
// key create's key (escaped, it would not be the key): an answer whose key
// is not printable ASCII without spaces is unreadable (exit 4).
Outcome read_answer(const Request& request, int status, std::string_view body);

// One answer of a drain (kDrain, kDrainWait, kDrainStatus, kDrainCancel)
// read for drain --wait, which polls until the state is "drained".
struct DrainProgress {
  Outcome outcome;     // what to print if this answer is the last one
  std::string state;   // "serving", "draining" or "drained"; "" unless outcome.exit_code is 0
  std::string counts;  // "N queued, M in flight"
};
DrainProgress read_drain(const Request& request, int status, std::string_view body);

// How the command is named in messages: "flows", "flow set tenant-a", "drain status".
std::string command_name(const Request& request);

}  // namespace sluice::ctl
