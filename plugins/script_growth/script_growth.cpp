// The `script` growth method: a growth operator written as a Python script (docs/growth.md,
// "Growth by script"). For each growth, tfw writes into a fresh temporary folder
//   parent.safetensors  the parent model's tensors (the `tfw export-model` layout: the model's
//                       own names, no optimiser);
//   from.json, to.json  the parent's and the target's family, [model] table and tensors (name,
//                       dtype, shape): to.json says exactly what the script must write;
//   options.json        the script's own options (every option but script, script_sha256 and
//                       timeout_seconds, which tfw reads);
// runs `PYTHON SCRIPT --parent P --from F --to T --options O --out G --seed S` (TFW_PYTHON, else
// the Python tfw was built with, else python3), shows its output as it comes, stops it at its
// time limit, and reads G back with tfw's own bounded safetensors parser: every tensor of the
// target model, with its dtype and shape, and nothing else. The script's last JSON line on
// stdout declares {"exact": true|false}; an exact claim is checked on a batch (the parent's and
// the grown model's logits) and a false one refused. The script is pinned by its SHA-256
// (engine/config/growth_script.h): a growth never runs a script other than the planned one.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/config/growth_script.h"
#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/core/json_bounded.h"
#include "engine/core/process.h"
#include "engine/interop/model_export.h"
#include "engine/nn/growth.h"

#ifndef TFW_GROWTH_PYTHON
#define TFW_GROWTH_PYTHON "python3"
#endif

namespace tfw {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A model's family, [model] table and tensors, as from.json and to.json hold them.
json model_json(const ModelSpec& spec, Model& model) {
  json tensors = json::object();
  for (const auto& [name, tensor] : checkpoint_model_tensors(model)) {
    tensors[name] = {{"dtype", checkpoint_dtype_name(tensor.scalar_type())}, {"shape", tensor.sizes().vec()}};
  }
  return {{"family", spec.family()},
          {"model", toml_to_json(spec.to_toml())},
          {"parameters", spec.parameter_count()},
          {"tensors", std::move(tensors)}};
}

// A fresh folder under TMPDIR (or /tmp), kept when the growth fails so that its inputs can be
// looked at, removed when it succeeds.
struct WorkFolder {
  fs::path path;
  bool keep = true;
  WorkFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "tfw-grow-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error(with_hint(fmt::format("cannot create a temporary folder for the growth script ({})", pattern),
                            "set TMPDIR to a writable folder"));
    }
    path = pattern;
  }
  ~WorkFolder() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
  std::string file(const char* name) const { return (path / name).string(); }
};

// Copies what a growing log file gained since `offset` to our stderr, each line led by `tag`.
void echo_new(const std::string& path, std::uintmax_t& offset, const std::string& tag, bool& at_line_start) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(offset));
  char buffer[4096];
  std::string out;
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      if (at_line_start) out += tag;
      out += buffer[i];
      at_line_start = buffer[i] == '\n';
    }
    offset += static_cast<std::uintmax_t>(in.gcount());
  }
  std::cerr << out << std::flush;
}

std::string python_program() {
  const char* chosen = std::getenv("TFW_PYTHON");
  const std::string python = chosen != nullptr && *chosen != '\0' ? chosen : TFW_GROWTH_PYTHON;
  std::string found = program_path(python);
  if (found.empty() && python != "python3") found = chosen == nullptr ? program_path("python3") : "";
  if (found.empty()) {
    throw UsageError(with_hint(fmt::format("no Python to run the growth script: '{}' is not a program{}", python,
                                           chosen != nullptr ? " (TFW_PYTHON)" : ""),
                               "set TFW_PYTHON to a Python with the modules the script imports (numpy, torch, "
                               "safetensors)"));
  }
  return found;
}

// The declaration is the last JSON line: the end of stdout is enough, however much came before.
constexpr std::streamoff kStdoutTail = 64 * 1024;

// Runs the script (`copy`, the checked bytes of keys.script) to its end or its time limit,
// showing its output; returns the end of its stdout. The script runs in tfw's own process group:
// a Ctrl-C, or a cancel that signals tfw's group, stops it with tfw.
std::string run_script(const GrowthScriptKeys& keys, const std::string& copy, const WorkFolder& work,
                       std::uint64_t seed) {
  ProcessSpec spec;
  spec.own_group = false;
  spec.argv = {python_program(), copy,
               "--parent",       work.file("parent.safetensors"),
               "--from",         work.file("from.json"),
               "--to",           work.file("to.json"),
               "--options",      work.file("options.json"),
               "--out",          work.file("grown.safetensors"),
               "--seed",         std::to_string(seed)};
  spec.log_path = work.file("stdout.txt");
  spec.error_path = work.file("stderr.txt");
  spec.cwd = work.path.string();
  // Modules beside the script stay importable (they are not pinned: docs/growth.md).
  const char* path = std::getenv("PYTHONPATH");
  const std::string folder = fs::path(keys.script).parent_path().string();
  spec.environment = {"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
                      "PYTHONPATH=" + folder + (path != nullptr && *path != '\0' ? std::string(":") + path : "")};
  const std::string tag = fmt::format("  [{}] ", fs::path(keys.script).filename().string());
  std::uintmax_t out_offset = 0, err_offset = 0;
  bool out_line = true, err_line = true;
  const auto start = std::chrono::steady_clock::now();
  const auto limit = start + std::chrono::seconds(keys.timeout_seconds);
  Process process = Process::spawn(spec);
  bool timed_out = false;
  std::optional<int> code;
  while (!(code = process.poll())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    echo_new(spec.log_path, out_offset, tag, out_line);
    echo_new(spec.error_path, err_offset, tag, err_line);
    if (!timed_out && std::chrono::steady_clock::now() > limit) {
      timed_out = true;
      process.signal(SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      process.signal(SIGKILL);
    }
  }
  echo_new(spec.log_path, out_offset, tag, out_line);
  echo_new(spec.error_path, err_offset, tag, err_line);
  if (!out_line || !err_line) std::cerr << "\n";
  const std::string kept = fmt::format("its inputs and output are kept in {}", work.path.string());
  if (timed_out) {
    throw UsageError(with_hint(fmt::format("growth script {} ran past its time limit of {} s and was stopped; {}",
                                           keys.script, keys.timeout_seconds, kept),
                               "raise it with the option timeout_seconds, or make the script faster"));
  }
  if (*code != 0) {
    throw UsageError(with_hint(
        fmt::format("growth script {} failed: exit code {} (its output is above); {}", keys.script, *code, kept),
        fmt::format("rerun it by hand: cd {} && {}", work.path.string(), fmt::join(spec.argv, " "))));
  }
  std::ifstream in(spec.log_path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kStdoutTail));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The script's declaration: its last stdout line that is a JSON object with "exact".
struct Declaration {
  bool exact = false;
  std::vector<std::string> changes;
};

Declaration declaration_of(const std::string& out, const std::string& script, const std::string& folder) {
  std::optional<Declaration> found;
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line.front() != '{' || line.size() > 65536) continue;
    json object;
    if (!json_parse_bounded(line, JsonBounds{4, 64, 4096}, object).empty() || !object.is_object()) continue;
    if (!object.contains("exact")) continue;
    if (!object["exact"].is_boolean()) {
      throw UsageError(fmt::format("growth script {} declared \"exact\": {}, which is not true or false", script,
                                   object["exact"].dump()));
    }
    Declaration d;
    d.exact = object["exact"].get<bool>();
    if (object.contains("changes") && object["changes"].is_array()) {
      for (const json& change : object["changes"]) {
        if (change.is_string() && d.changes.size() < 20) d.changes.push_back(change.get<std::string>().substr(0, 300));
      }
    }
    found = d;
  }
  if (!found) {
    throw UsageError(with_hint(fmt::format("growth script {} printed no declaration of exactness; its inputs and "
                                           "output are kept in {}",
                                           script, folder),
                               "print one JSON line on stdout before exiting, e.g. print(json.dumps({\"exact\": "
                               "True})) (docs/growth.md, \"Growth by script\")"));
  }
  return *found;
}

// A batch the parent and the grown model both read: random token ids, or random images.
torch::Tensor check_batch(const ModelShape& shape, const torch::Device& device, std::uint64_t seed) {
  torch::Generator generator = at::detail::createCPUGenerator(seed + 1);
  if (shape.image_size > 0) {
    return torch::randn({2, shape.channels, shape.image_size, shape.image_size}, generator, torch::kFloat32).to(device);
  }
  const std::int64_t T = std::min<std::int64_t>(shape.seq_len > 0 ? shape.seq_len : 32, 32);
  return torch::randint(0, shape.vocab, {2, T}, generator, torch::kInt64).to(device);
}

// The largest |logit difference| between the parent and the grown model, in evaluation mode,
// and the largest |logit| of the parent (the scale a tolerance is relative to).
std::pair<double, double> logit_difference(Model& parent, Model& grown, const torch::Tensor& batch) {
  const bool parent_training = parent.is_training(), grown_training = grown.is_training();
  parent.eval();
  grown.eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor a = parent.forward(batch).to(torch::kFloat64), b = grown.forward(batch).to(torch::kFloat64);
  parent.train(parent_training);
  grown.train(grown_training);
  const double scale = a.abs().max().item<double>();
  if (a.sizes() != b.sizes()) return {std::numeric_limits<double>::infinity(), scale};
  return {(a - b).abs().max().item<double>(), scale};
}

class ScriptGrowth : public GrowthMethod {
 public:
  std::string name() const override { return kScriptGrowthMethod; }
  std::string version() const override { return TFW_VERSION; }
  std::string family() const override { return "any"; }
  bool grows(const std::string& family) const override { return !family.empty(); }
  bool in_place() const override { return false; }
  bool declared_exact(const toml::table& options) const override {
    growth_script_keys(options);
    return false;  // the script declares it when it runs
  }

  GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& options) const override {
    const GrowthScriptKeys keys = growth_script_keys(options);
    if (from.family() != to.family()) {
      throw UsageError(fmt::format("the script growth method grows a model within its family, not {} -> {}",
                                   from.family(), to.family()));
    }
    const std::string digest = growth_script_verify(keys);
    GrowthPlan plan;
    plan.changes.push_back(fmt::format("run {} (SHA-256 {}...) with {} option{}, at most {} s ({} -> {} parameters)",
                                       keys.script, digest.substr(0, 12), keys.script_options.size(),
                                       keys.script_options.size() == 1 ? "" : "s", keys.timeout_seconds,
                                       from.parameter_count(), to.parameter_count()));
    plan.changes.push_back("exact or not: the script declares it when it runs, and tfw checks an exact claim then");
    return plan;
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from, const ModelSpec& to,
                               const toml::table& options, std::uint64_t seed) const override {
    const GrowthScriptKeys keys = growth_script_keys(options);
    const std::string text = growth_script_read(keys);  // checked against its recorded digest
    WorkFolder work;
    // The checked bytes run, not the file again: it cannot change between the check and the run.
    const std::string copy = work.file(fs::path(keys.script).filename().string().c_str());
    text_file_write(copy, text, "grow");
    std::shared_ptr<Model> grown = family.build(to, seed);  // float32, on the CPU: what G must fill
    model_weights_save(work.file("parent.safetensors"), model, {{"format", "pt"}, {"tfw_format", kModelExportFormat}});
    text_file_write(work.file("from.json"), model_json(from, model).dump(2) + "\n", "grow");
    text_file_write(work.file("to.json"), model_json(to, *grown).dump(2) + "\n", "grow");
    text_file_write(work.file("options.json"), toml_to_json(keys.script_options).dump(2) + "\n", "grow");
    const Declaration declared = declaration_of(run_script(keys, copy, work, seed), keys.script, work.path.string());
    const std::string out = work.file("grown.safetensors");
    std::error_code ec;
    if (!fs::is_regular_file(out, ec)) {
      throw UsageError(with_hint(fmt::format("growth script {} exited without writing the grown model ({}); its "
                                             "inputs are kept in {}",
                                             keys.script, out, work.path.string()),
                                 "write every tensor that to.json lists to the path given as --out"));
    }
    try {
      model_weights_load(out, *grown);
    } catch (const TensorMismatch& e) {  // the problem alone: G is no checkpoint, its reader's hint is not ours
      throw UsageError(with_hint(fmt::format("growth script {} wrote a model that is not the target: {}; its inputs "
                                             "and output are kept in {}",
                                             keys.script, e.problem(), work.path.string()),
                                 "to.json lists every tensor the target model has, with its dtype and shape"));
    }
    // A NaN or an infinity trains into NaN: refused, by name, whatever the script declared.
    for (const auto& [name, tensor] : checkpoint_model_tensors(*grown)) {
      if (!tensor.is_floating_point()) continue;
      const std::int64_t bad = tensor.numel() - torch::isfinite(tensor).sum().item<std::int64_t>();
      if (bad > 0) {
        throw UsageError(
            with_hint(fmt::format("growth script {} wrote {} non-finite value{} (NaN or infinite) in {}; its "
                                  "inputs and output are kept in {}",
                                  keys.script, bad, bad == 1 ? "" : "s", name, work.path.string()),
                      "every value of the grown model must be a finite number"));
      }
    }
    const torch::Tensor first = model.parameters().front();
    grown->to(first.device());  // where the parent lives (a GPU too)
    if (first.scalar_type() != torch::kFloat32) {
      // The parent's parameter type (a float64 check); buffers keep theirs (tau is float64).
      torch::NoGradGuard no_grad;
      for (torch::Tensor& parameter : grown->parameters()) parameter.set_data(parameter.to(first.scalar_type()));
    }
    const std::string script = fs::path(keys.script).filename().string();
    for (const std::string& change : declared.changes) std::cerr << fmt::format("  {}: {}\n", script, change);
    if (declared.exact) {
      // Inputs both models read: the smaller vocabulary and context of the two.
      ModelShape shape = to.shape();
      shape.vocab = std::min(shape.vocab, from.shape().vocab);
      shape.seq_len = std::min(shape.seq_len, from.shape().seq_len);
      const torch::Tensor batch = check_batch(shape, first.device(), seed);
      const auto [difference, scale] = logit_difference(model, *grown, batch);
      // The built-in methods' tests hold exact growths to 1e-4 relative in float32 (1e-10 in float64).
      const double tolerance = (first.scalar_type() == torch::kFloat64 ? 1e-9 : 1e-4) * std::max(1.0, scale);
      if (!(difference <= tolerance)) {
        throw UsageError(with_hint(
            fmt::format("growth script {} declared the growth exact, but the grown model's "
                        "logits differ from the parent's by up to {:.3e} (tolerance {:.1e}) on "
                        "a batch of {} random inputs; its inputs and output are kept in {}",
                        keys.script, difference, tolerance, fmt::join(batch.sizes(), " x "), work.path.string()),
            "fix the script, or declare {\"exact\": false}"));
      }
      std::cerr << fmt::format("  {}: declared exact; checked: max |logit difference| {:.3e} <= {:.1e} on {}\n", script,
                               difference, tolerance, fmt::join(batch.sizes(), " x "));
    } else {
      std::cerr << fmt::format("  {}: declared not exact\n", script);
    }
    work.keep = false;
    return grown;
  }
};

}  // namespace
}  // namespace tfw

TFW_PLUGIN(registrar) { registrar.add_growth_method(std::make_shared<tfw::ScriptGrowth>()); }
