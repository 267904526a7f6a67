// An experiment's runs written in the formats of the trackers researchers already use, so
// that TensorBoard and MLflow open them as they are (`tfw export --tensorboard DIR`,
// `--mlflow DIR`; docs/cli.md). Written by our own code from the formats' specifications;
// the tests read them back with the real readers (tests/results/tracking_readback.py).
//
// Both writers are deterministic: the same runs give the same bytes, so a folder exported
// twice does not change. Run names are used as folder names only when they are plain
// ([A-Za-z0-9._-], not starting with a dot); any other name is refused, so that a hostile
// bundle cannot write outside DIR.
#pragma once

#include <string>
#include <vector>

#include "workbench/results/results.h"

namespace tfw::results {

// TensorBoard event files: DIR/EXPERIMENT/RUN/events.out.tfevents.STARTED.tfw, one per run
// with points. Every recorded metric is a scalar of its own tag with the run's step, as a
// float32 (TensorBoard's scalars are float32 in every reader; the exact doubles are in the
// MLflow export and `--curves`); the event's wall time is the run's start plus the point's elapsed seconds. Two axis
// tags carry what TensorBoard's x axis cannot: `axis/tokens` (the run's own training tokens at that step) and
// `axis/cumulative_flops` (the lineage's FLOPs, inherited included). Returns the files written.
std::vector<std::string> tensorboard_write(const ExperimentResults& set, const std::string& dir);

// MLflow's file store (the `mlruns` layout; MLflow 3 reads it with
// MLFLOW_ALLOW_FILE_STORE=true): DIR/ID/meta.yaml for the experiment and DIR/ID/RUN_ID/ for
// each run, with
//   params:  every key of the resolved config, flattened with dots (model.d = 128);
//   metrics: every recorded metric at its step, time = start + elapsed (ms), values written
//            in the shortest form that reads back to the same double; `@` in a key becomes
//            `_at_` (MLflow keys allow [A-Za-z0-9_ ./:-]); plus `axis/tokens` and
//            `axis/cumulative_flops` as above;
//   tags:    mlflow.runName, mlflow.parentRunId (the run it was grown from: lineage), and
//            tfw.* (family, seed, status, growth method and options, FLOPs, provenance).
// IDs are derived from names (SHA-256), so a re-export overwrites the same run folders. The
// Default experiment (0) is written when DIR has none, as MLflow expects. Returns the run
// folders written.
std::vector<std::string> mlflow_write(const ExperimentResults& set, const std::string& dir);

// The MLflow key of a tfw metric key ("val/loss@kjv" -> "val/loss_at_kjv").
std::string mlflow_metric_key(const std::string& key);

// CRC-32C (Castagnoli), as TensorBoard's record framing uses it, before masking.
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);

}  // namespace tfw::results
