// A run that records to an engine service instead of a local store (`tfw train --record-to
// HOST:PORT`, or TFW_RECORD_TO): the runner's RunBook (runner/run_book.h) over the service's
// socket. Every record goes through one queue, in order, sent by a background thread in
// batches (metric points and events together, at most 2000 a message), each with a sequence
// number so that a batch resent after a lost reply is not applied twice.
//
// While the service is unreachable the queue keeps everything and the thread reconnects
// (every 0.5 s to 5 s) for up to `timeout_seconds` (TFW_RECORD_TIMEOUT, default 600). Training
// goes on meanwhile, but a checkpoint waits until the service holds every point before it,
// so the store never lacks a point of a step the run could resume after. When the thread
// gives up it says how much was not recorded; the waiting call throws, the training stops
// with that error, and `tfw train --resume` continues from the last checkpoint the service
// has all the points of. docs/cluster.md, "Recording to a service"; the service's side is
// record.cpp.
#pragma once

#include <memory>
#include <string>

#include "runner/run_book.h"

namespace tfw::service {

// Connects and says hello (an unreachable service is an Error, a refused token a
// UsageError), then returns the book.
std::shared_ptr<runner::RunBook> remote_run_book(const std::string& address, const std::string& token_file,
                                                 double timeout_seconds);

// Where to record: the flags when given, else TFW_RECORD_TO and TFW_TOKEN_FILE ("" : none).
struct RecordTarget {
  std::string address, token_file;
};
RecordTarget record_target(const std::string& address_flag, const std::string& token_flag);

// TFW_RECORD_TIMEOUT in seconds (default 600); UsageError when it is not a number > 0.
double record_timeout_from_environment();

}  // namespace tfw::service
