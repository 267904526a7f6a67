// See status.h.
#include "storage/status.h"

#include "storage/status_names.h"

namespace tfw {

namespace {

constexpr detail::StatusNames<RunStatus, 6> kRunNames = {{{RunStatus::queued, "queued"},
                                                          {RunStatus::running, "running"},
                                                          {RunStatus::finished, "finished"},
                                                          {RunStatus::failed, "failed"},
                                                          {RunStatus::killed, "killed"},
                                                          {RunStatus::crashed, "crashed"}}};

}  // namespace

const char* status_name(RunStatus status) { return detail::status_name_of(kRunNames, status); }
std::optional<RunStatus> run_status_parse(std::string_view text) { return detail::status_parse(kRunNames, text); }
std::string run_status_choices() { return detail::status_choices(kRunNames); }

bool status_final(RunStatus status) { return status != RunStatus::queued && status != RunStatus::running; }

}  // namespace tfw
