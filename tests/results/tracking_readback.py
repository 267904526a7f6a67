"""`tfw export --tensorboard DIR --mlflow DIR` read back with the real readers.

Usage: python tracking_readback.py TFW BUNDLE EXPERIMENT

Exports EXPERIMENT's runs from BUNDLE (a run bundle, docs/store.md) twice, and checks:
- the two exports are byte-identical (deterministic);
- TensorBoard's Python data provider returns, for every run and every recorded metric, the
  bundle's steps and wall times exactly and its values rounded to float32 (TensorBoard's
  scalars are float32), and the axis tags axis/tokens and axis/cumulative_flops (inherited
  FLOPs + the step's own);
- the TensorBoard server itself, with its default (Rust) data server, on a real socket, serves
  every tag of one run with the same values, as its web page reads them;
- MLflow's client, on the file store, returns the experiment, every run with its name, status,
  start and end times, every config value as a parameter, every metric point exactly, and the
  lineage: mlflow.parentRunId names the run that the bundle says it was grown from.

The expected values come from the bundle itself, parsed here with Python's gzip, json and
tomllib, independently of tfw's reader. Exit 0 when all match; 1 with the first mismatches.
"""
import filecmp
import gzip
import socket
import time
import urllib.parse
import urllib.request
import json
import math
import os
import subprocess
import sys
import tempfile
import tomllib

import numpy as np

os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps the file store in maintenance mode

from mlflow.tracking import MlflowClient  # noqa: E402
from tensorboard import context  # noqa: E402
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer  # noqa: E402

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
        if len(failures) <= 20:
            print("MISMATCH:", message)


def same(a, b):
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        nan = lambda x: x is None or (isinstance(x, float) and math.isnan(x))  # noqa: E731
        return nan(a) and nan(b)
    return a == b


def millis(seconds):
    """Unix seconds to MLflow's milliseconds, halves rounded up (as tfw writes them)."""
    return math.floor(seconds * 1000 + 0.5)


def f32(x):
    """The float32 TensorBoard stores for x (NaN for a missing value)."""
    return float(np.float32(float("nan") if x is None else x))


def read_bundle(path):
    runs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        header = json.loads(f.readline())
        assert header["format"] == "tfw-bundle", header
        for line in f:
            entry = json.loads(line)
            if "end" in entry:
                break
            assert not entry["files"], "this test reads bundles without checkpoint files"
            runs.append(entry["run"])
    return runs


def flatten(table, prefix=""):
    out = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def axes(run):
    """(step, wall, tokens, cumulative flops) at each step with points, from the first point logged at that step."""
    inherited = max(0.0, run["inherited_flops"])
    first = {}
    for key in sorted(run["metrics"]):
        for step, tokens, flops, wall, _ in run["metrics"][key]:
            if step not in first:
                first[step] = (wall, tokens, inherited + flops)
    return first


def check_tensorboard(runs, root, experiment):
    logdir = os.path.join(root, experiment)
    # Every point (TensorBoard's own default keeps a reservoir of 1000 per scalar tag).
    mux = plugin_event_multiplexer.EventMultiplexer(size_guidance={"tensors": 0}, tensor_size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, logdir)
    scalars = provider.read_scalars(context.RequestContext(), experiment_id="", plugin_name="scalars",
                                    downsample=10**9)
    check(sorted(scalars) == sorted(r["name"] for r in runs if r["metrics"]),
          f"TensorBoard runs {sorted(scalars)}")
    points = 0
    for run in runs:
        if not run["metrics"]:
            continue
        tags = scalars.get(run["name"], {})
        check(sorted(tags) == sorted(list(run["metrics"]) + ["axis/cumulative_flops", "axis/tokens"]),
              f"{run['name']}: TensorBoard tags {sorted(tags)}")
        for key, rows in run["metrics"].items():
            got = tags.get(key, [])
            check(len(got) == len(rows), f"{run['name']} {key}: {len(got)} points, bundle has {len(rows)}")
            for datum, (step, tokens, flops, wall, value) in zip(got, rows):
                check(datum.step == step and same(datum.value, f32(value)) and datum.wall_time == run["started"] + wall,
                      f"{run['name']} {key} step {step}: TensorBoard ({datum.step}, {datum.value!r}, {datum.wall_time!r}), "
                      f"bundle ({step}, {value!r}, {run['started'] + wall!r})")
                points += 1
        want = axes(run)
        for tag, index in (("axis/tokens", 1), ("axis/cumulative_flops", 2)):
            got = tags.get(tag, [])
            check([d.step for d in got] == sorted(want), f"{run['name']} {tag}: steps differ")
            for d in got:
                check(d.value == f32(want[d.step][index]), f"{run['name']} {tag} step {d.step}: {d.value!r} "
                      f"against {want[d.step][index]!r}")
                points += 1
    return points


def check_tensorboard_server(runs, root, experiment):
    """The real server (default loader: the Rust data server) over HTTP: every tag of the first run with points."""
    tensorboard = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([tensorboard, "--logdir", root, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = next(r for r in runs if r["metrics"])
    name = f"{experiment}/{run['name']}"
    want_tags = sorted(list(run["metrics"]) + ["axis/cumulative_flops", "axis/tokens"])

    def get(path, **query):
        url = f"http://127.0.0.1:{port}/data/plugin/scalars/{path}?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    checked = 0
    try:
        deadline = time.time() + 120
        tags = {}
        while time.time() < deadline:
            try:
                tags = get("tags").get(name, {})
                if sorted(tags) == want_tags:
                    break
            except OSError:
                pass
            time.sleep(1)
        check(sorted(tags) == want_tags, f"the TensorBoard server lists {sorted(tags)} for {name}")
        for key, rows in run["metrics"].items():
            series = get("scalars", run=name, tag=key)  # [[wall_time, step, value], ...]
            check([p[1] for p in series] == [r[0] for r in rows], f"server {name} {key}: steps differ")
            for (wall_time, step, value), row in zip(series, rows):
                check(same(value, f32(row[4])) and abs(wall_time - (run["started"] + row[3])) < 1e-3,
                      f"server {name} {key} step {step}: {value!r} at {wall_time!r}")
                checked += 1
    finally:
        server.terminate()
        server.wait(timeout=30)
    return checked


def check_mlflow(runs, root, experiment):
    client = MlflowClient(tracking_uri="file://" + root)
    exp = client.get_experiment_by_name(experiment)
    check(exp is not None, f"MLflow has no experiment {experiment}")
    if exp is None:
        return 0
    found = {r.info.run_name: r for r in client.search_runs([exp.experiment_id], max_results=10000)}
    check(sorted(found) == sorted(r["name"] for r in runs), f"MLflow runs {sorted(found)}")
    by_key = {(r["experiment"], r["name"]): r for r in runs}
    statuses = {"finished": "FINISHED", "failed": "FAILED", "crashed": "FAILED", "killed": "KILLED"}
    values = 0
    for run in runs:
        got = found.get(run["name"])
        if got is None:
            continue
        info, data = got.info, got.data
        check(info.status == statuses[run["status"]], f"{run['name']}: status {info.status}")
        check(info.start_time == millis(run["started"]), f"{run['name']}: start_time {info.start_time}")
        check(info.end_time == millis(run["ended"]), f"{run['name']}: end_time {info.end_time}")
        check(data.tags.get("tfw.seed") == str(run["seed"]), f"{run['name']}: tfw.seed {data.tags.get('tfw.seed')}")
        check(data.tags.get("tfw.family") == run["family"], f"{run['name']}: tfw.family")
        # Lineage: the parent's MLflow run, by the name the bundle gives.
        parent = run["parent"]
        if parent is None:
            check("mlflow.parentRunId" not in data.tags, f"{run['name']}: a parent it does not have")
        else:
            check(data.tags.get("tfw.parent") == f"{parent['experiment']}/{parent['name']}", f"{run['name']}: tfw.parent")
            check(data.tags.get("tfw.growth_method") == run["growth_method"], f"{run['name']}: tfw.growth_method")
            if parent["experiment"] == experiment:
                check(data.tags.get("mlflow.parentRunId") == found[parent["name"]].info.run_id,
                      f"{run['name']}: mlflow.parentRunId {data.tags.get('mlflow.parentRunId')} is not "
                      f"{parent['name']}'s run")
            check(float(data.tags.get("tfw.inherited_flops", "nan")) == run["inherited_flops"],
                  f"{run['name']}: tfw.inherited_flops")
        # Every config value is a parameter, and reads back as the same TOML value.
        params = flatten(tomllib.loads(run["config"]))
        check(sorted(data.params) == sorted(params), f"{run['name']}: parameters {sorted(set(data.params) ^ set(params))}")
        for key, value in params.items():
            text = data.params.get(key)
            if text is None:
                continue
            back = text if isinstance(value, str) else tomllib.loads("x = " + text)["x"]
            check(back == value, f"{run['name']} param {key}: {text!r} against {value!r}")
            values += 1
        # Every metric point, exactly.
        for key, rows in run["metrics"].items():
            history = client.get_metric_history(info.run_id, key.replace("@", "_at_"))
            check(len(history) == len(rows), f"{run['name']} {key}: MLflow {len(history)} points, bundle {len(rows)}")
            for m, (step, tokens, flops, wall, value) in zip(history, rows):
                check(m.step == step and same(m.value, value) and m.timestamp == millis(run["started"] + wall),
                      f"{run['name']} {key} step {step}: MLflow ({m.step}, {m.value!r}, {m.timestamp}), bundle ({step}, "
                      f"{value!r}, {millis(run['started'] + wall)})")
                values += 1
        want = axes(run)
        for tag, index in (("axis/tokens", 1), ("axis/cumulative_flops", 2)):
            history = client.get_metric_history(info.run_id, tag)
            check([m.step for m in history] == sorted(want), f"{run['name']} MLflow {tag}: steps differ")
            for m in history:
                check(m.value == float(want[m.step][index]), f"{run['name']} MLflow {tag} step {m.step}")
                values += 1
    del by_key
    return values


def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def main():
    tfw, bundle, experiment = sys.argv[1:4]
    runs = read_bundle(bundle)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for i in range(2):
            tb, ml = os.path.join(tmp, f"tb{i}"), os.path.join(tmp, "ml")
            if i == 1:  # the same MLflow folder again: a re-export replaces, it does not add
                os.rename(ml, os.path.join(tmp, "ml0"))
                subprocess.run(["cp", "-a", os.path.join(tmp, "ml0"), ml], check=True)
            subprocess.run([tfw, "export", experiment, "--bundle", bundle, "--tensorboard", tb, "--mlflow", ml],
                           check=True, stdout=subprocess.DEVNULL)
            dirs.append(tb)
        check(same_tree(dirs[0], dirs[1]), "two TensorBoard exports of the same runs differ")
        check(same_tree(os.path.join(tmp, "ml0"), os.path.join(tmp, "ml")), "an MLflow re-export changed the store")
        points = check_tensorboard(runs, dirs[0], experiment)
        points += check_tensorboard_server(runs, dirs[0], experiment)
        values = check_mlflow(runs, os.path.join(tmp, "ml"), experiment)
    print(f"{experiment}: {len(runs)} runs; TensorBoard {points} scalars, MLflow {values} values and parameters checked; "
          f"{len(failures)} mismatches")
    return 1 if failures or points == 0 or values == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
