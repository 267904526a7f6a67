// See server.h.
#include "workbench/service/server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/data/corpus.h"
#include "engine/error.h"
#include "engine/experiment.h"
#include "engine/home.h"
#include "engine/registry.h"
#include "engine/train/schedule.h"
#include "storage/store.h"
#include "workbench/common/records_json.h"
#include "workbench/service/protocol.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using nlohmann::json;
namespace fs = std::filesystem;

namespace tfw::service {

namespace {

using Line = std::shared_ptr<const std::string>;

Line make_line(const json& message) { return std::make_shared<const std::string>(message.dump() + "\n"); }

}  // namespace

// ---------------------------------------------------------------------------------------
// A client connection: reads one line at a time, replies in order; every write goes
// through a bounded queue.

struct Connection;

struct Service::Impl {
  ServiceOptions options;
  std::string home;
  std::string token;  // "" when the service has none (loopback only)
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::unique_ptr<Store> store;  // io thread: requests
  int lock_fd = -1;              // TFW_HOME/service.lock, held while serving
  std::atomic<bool> stopping{false};

  // Live feeds, io thread only.
  struct Feed {
    std::vector<Line> history;
    bool loaded = false;
    std::string status;
    std::set<std::shared_ptr<Connection>> subscribers;
  };
  std::map<std::int64_t, Feed> feeds;
  std::set<std::shared_ptr<Connection>> connections;

  // Watched runs: io thread -> poller.
  std::mutex watched_mutex;
  std::set<std::int64_t> watched;
  std::thread poller;

  // Jobs: io thread -> workers.
  std::mutex jobs_mutex;
  std::condition_variable jobs_wake;
  std::deque<std::int64_t> queue;
  std::map<std::int64_t, pid_t> running;      // job -> child pid (its process group)
  std::set<std::int64_t> cancel_requested;
  std::vector<std::thread> workers;

  void accept();
  void handle(const std::shared_ptr<Connection>& connection, const json& message);
  json submit(const json& message, const std::string& client);
  json cancel(std::int64_t job);
  void subscribe(const std::shared_ptr<Connection>& connection, std::int64_t run);
  void publish(std::int64_t run, std::vector<Line> lines, std::string status, bool initial);
  void drop(const std::shared_ptr<Connection>& connection);
  void poll_loop();
  void worker_loop(int slot);
  int run_job(const JobRow& job, int threads);
};

struct Connection : std::enable_shared_from_this<Connection> {
  Connection(Service::Impl& service, tcp::socket socket)
      : service(service), socket(std::move(socket)), input(kMaxLine + 1), timer(service.io), write_timer(service.io) {
    boost::system::error_code error;
    auto endpoint = this->socket.remote_endpoint(error);
    peer = error ? "?" : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  }

  Service::Impl& service;
  tcp::socket socket;
  asio::streambuf input;
  asio::steady_timer timer, write_timer;
  std::deque<Line> output;
  std::size_t pending = 0;
  bool writing = false, greeted = false, closing = false, closed = false;
  std::set<std::int64_t> subscriptions;
  std::string peer;

  void start() {
    arm(service.options.handshake_timeout, "no hello within {:g} s");
    read();
  }

  void arm(double seconds, const char* why) {
    timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
    std::string reason = fmt::format(fmt::runtime(why), seconds);
    timer.async_wait([self = shared_from_this(), reason, seconds](const boost::system::error_code& error) {
      if (error || self->closed) return;
      if (!self->subscriptions.empty()) {  // a subscriber may stay quiet: it is listening
        self->arm(seconds, "idle for {:g} s");
        return;
      }
      self->fail(reason);
    });
  }

  void read() {
    asio::async_read_until(socket, input, '\n', [self = shared_from_this()](const boost::system::error_code& error, std::size_t n) {
      if (self->closed) return;
      if (error == asio::error::not_found) {
        self->fail(fmt::format("message longer than {} bytes", kMaxLine));
        return;
      }
      if (error) {  // disconnect (possibly mid-message): forget it
        self->service.drop(self);
        return;
      }
      std::string line(asio::buffers_begin(self->input.data()), asio::buffers_begin(self->input.data()) + n);
      self->input.consume(n);
      json message = json::parse(line, nullptr, false);
      if (message.is_discarded() || !message.is_object() || !message.contains("type") || !message["type"].is_string()) {
        self->fail("malformed message: expected one JSON object with a string \"type\" per line");
        return;
      }
      self->arm(self->service.options.idle_timeout, "idle for {:g} s");
      self->service.handle(self, message);
      if (!self->closing) self->read();
    });
  }

  void send(Line line) {
    if (closed) return;
    pending += line->size();
    if (pending > service.options.max_pending) {
      closing = true;  // too slow: drop it rather than buffer without bound
      service.drop(shared_from_this());
      return;
    }
    output.push_back(std::move(line));
    if (!writing) write();
  }

  void write() {
    writing = true;
    write_timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(service.options.write_timeout)));
    write_timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error && self->writing) self->service.drop(self);  // the client stopped reading
    });
    asio::async_write(socket, asio::buffer(*output.front()),
                      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
                        self->write_timer.cancel();
                        if (error || self->closed) {
                          self->service.drop(self);
                          return;
                        }
                        self->pending -= self->output.front()->size();
                        self->output.pop_front();
                        self->writing = false;
                        if (!self->output.empty()) self->write();
                        else if (self->closing) self->service.drop(self);
                      });
  }

  // An error reply, then the connection closes once it is written.
  void fail(const std::string& error) {
    if (closing || closed) return;
    send(make_line({{"type", "error"}, {"error", error}, {"fatal", true}}));
    closing = true;
    if (!writing) service.drop(shared_from_this());
  }
};

void Service::Impl::drop(const std::shared_ptr<Connection>& connection) {
  if (connection->closed) return;
  connection->closed = true;
  boost::system::error_code ignored;
  connection->timer.cancel();
  connection->write_timer.cancel();
  connection->socket.shutdown(tcp::socket::shutdown_both, ignored);
  connection->socket.close(ignored);
  for (std::int64_t run : connection->subscriptions) {
    auto feed = feeds.find(run);
    if (feed == feeds.end()) continue;
    feed->second.subscribers.erase(connection);
    if (feed->second.subscribers.empty()) {  // nobody listens: stop polling it
      feeds.erase(feed);
      std::lock_guard<std::mutex> lock(watched_mutex);
      watched.erase(run);
    }
  }
  connections.erase(connection);
}

void Service::Impl::accept() {
  acceptor.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
    if (error) {
      if (!stopping) accept();
      return;
    }
    auto connection = std::make_shared<Connection>(*this, std::move(socket));
    connections.insert(connection);
    if (connections.size() > options.max_connections) {
      // Over the cap: one error line, then closed (each connection holds a descriptor).
      connection->fail(fmt::format("too many connections ({} open); try again later", options.max_connections));
    } else {
      connection->start();
    }
    accept();
  });
}

void Service::Impl::handle(const std::shared_ptr<Connection>& c, const json& message) {
  const std::string type = message["type"];
  auto reply = [&](json body) {
    if (message.contains("id")) body["reply_to"] = message["id"];
    c->send(make_line(body));
  };
  auto error = [&](const std::string& text) { reply({{"type", "error"}, {"error", text}, {"fatal", false}}); };
  if (!c->greeted) {
    if (type != "hello") return c->fail("the first message must be {\"type\":\"hello\",\"version\":1}");
    if (!message.contains("version") || !message["version"].is_number_integer() ||
        message["version"].get<int>() != kProtocolVersion) {
      return c->fail(fmt::format("protocol version mismatch: this service speaks version {}", kProtocolVersion));
    }
    if (!token.empty()) {
      const std::string given = message.contains("token") && message["token"].is_string() ? message["token"].get<std::string>() : "";
      if (!token_equal(given, token)) {
        return c->fail(given.empty() ? "this service needs a token: pass --token-file FILE"
                                     : "wrong token: check --token-file");
      }
    }
    c->greeted = true;
    return reply({{"type", "hello"}, {"version", kProtocolVersion}, {"server", std::string("tfw ") + TFW_VERSION},
                  {"home", home}, {"jobs", options.jobs}});
  }
  try {
    if (type == "submit") return reply(submit(message, c->peer));
    if (type == "jobs") {
      json list = json::array();
      for (const JobRow& job : store->jobs()) list.push_back(job_json(job));
      return reply({{"type", "jobs"}, {"jobs", list}});
    }
    if (type == "cancel") {
      if (!message.contains("job") || !message["job"].is_number_integer()) return c->fail("cancel needs \"job\": ID");
      return reply(cancel(message["job"].get<std::int64_t>()));
    }
    if (type == "watch" || type == "summary") {
      if (!message.contains("run") || !(message["run"].is_string() || message["run"].is_number_integer())) {
        return c->fail(fmt::format("{} needs \"run\": an id or a name", type));
      }
      const std::string wanted = message["run"].is_string() ? message["run"].get<std::string>()
                                                            : std::to_string(message["run"].get<std::int64_t>());
      std::optional<RunRecord> run = store->run_find(wanted);
      if (!run) return error(fmt::format("no run '{}' (yet) in the store", wanted));
      if (type == "summary") return reply({{"type", "summary"}, {"run", run_json(*run)}});
      reply({{"type", "watching"}, {"run", run_json(*run)}});
      return subscribe(c, run->id);
    }
    return c->fail(fmt::format("unknown message type '{}': use hello, submit, jobs, cancel, watch or summary", type));
  } catch (const std::exception& e) {
    error(e.what());
  }
}

// Validates a submission and queues it. The TOML is written under TFW_HOME/jobs/ID/; every
// file path in it must stay inside TFW_HOME.
json Service::Impl::submit(const json& message, const std::string& client) {
  const bool experiment = message.contains("experiment");
  if (experiment == message.contains("run") || !(experiment ? message["experiment"] : message["run"]).is_string()) {
    throw UsageError("submit needs exactly one of \"experiment\" (experiment TOML text) or \"run\" (run config TOML text)");
  }
  const std::string text = experiment ? message["experiment"] : message["run"];
  std::string name = message.contains("name") && message["name"].is_string() ? message["name"].get<std::string>() : "";
  toml::table table;
  try {
    table = toml::parse(text, std::string("submitted"));
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("submitted TOML does not parse: {} at line {}", e.description(), e.source().begin.line));
  }
  if (experiment && name.empty()) name = table["experiment"]["name"].value_or(std::string());
  if (!experiment && name.empty()) name = table["name"].value_or(std::string());
  if (name.empty()) throw UsageError("give the job a name: \"name\", or experiment.name in the TOML");
  if (!name_ok(name)) {
    throw UsageError(fmt::format("'{}' is not a usable name: letters, digits and '_', '-', '.', '+', '=', starting "
                                 "with a letter or digit", name));
  }
  std::mt19937_64 random(std::random_device{}());
  const fs::path staging = fs::path(home) / "jobs" / fmt::format("incoming-{:016x}", random());
  fs::create_directories(staging);
  // Files the TOML names resolve against the job folder and must stay in TFW_HOME: the ones
  // read while planning (extends, config) are checked here; the corpora of the planned runs
  // below; and the job itself runs confined to TFW_HOME (TFW_CONFINE), in its job folder.
  std::vector<std::pair<std::string, std::string>> paths;
  if (experiment) {
    if (auto extends = table["experiment"]["extends"].value<std::string>()) paths.emplace_back("experiment.extends", *extends);
    if (toml::table* runs = table["runs"].as_table()) {
      for (auto&& [run, node] : *runs) {
        if (!node.is_table()) continue;
        const std::string where = "runs." + std::string(run.str());
        if (auto config = node.as_table()->get_as<std::string>("config")) paths.emplace_back(where + ".config", config->get());
      }
    }
  }
  auto escapes = [&](const std::string& key, const std::string& path) {
    if (path_inside(fs::path(path).is_absolute() ? path : (staging / path).string(), home)) return;
    fs::remove_all(staging);
    throw UsageError(fmt::format("{} = '{}' escapes TFW_HOME ({}): a submission may only name files inside it "
                                 "(`tfw submit` inlines config files for you)",
                                 key, path, home));
  };
  for (const auto& [key, path] : paths) escapes(key, path);
  std::string file = (staging / "experiment.toml").string();
  if (experiment) {
    std::ofstream(file) << text;
  } else {
    std::ofstream(staging / "run.toml") << text;
    std::ofstream(file) << fmt::format("[experiment]\nname = \"{}\"\n\n[runs.\"{}\"]\nconfig = \"run.toml\"\n", name, name);
  }
  Experiment plan;
  try {
    plan = experiment_load(registry(), file);
  } catch (const std::exception& e) {
    fs::remove_all(staging);
    std::string what = e.what();
    for (std::size_t at; (at = what.find(staging.string() + "/")) != std::string::npos;) what.erase(at, staging.string().size() + 1);
    throw UsageError(what);
  }
  if (experiment && plan.name != name) {
    fs::remove_all(staging);
    throw UsageError("the experiment's name and \"name\" differ");
  }
  for (const ExperimentRun& run : plan.runs) {
    const std::string& corpus = run.config.data.corpus;
    const bool builtin = std::any_of(corpora_builtin().begin(), corpora_builtin().end(),
                                     [&](const CorpusInfo& info) { return info.name == corpus; });
    if (!builtin) {
      const std::string key = fmt::format("runs.{}: data.corpus", run.name);
      escapes(key, corpus);
      if (!fs::exists(fs::path(corpus).is_absolute() ? fs::path(corpus) : staging / corpus)) {
        fs::remove_all(staging);
        throw UsageError(with_hint(fmt::format("{} = '{}' is neither a built-in corpus nor a file in TFW_HOME", key,
                                               corpus),
                                   "relative paths resolve against the job's folder, TFW_HOME/jobs/ID/ (so "
                                   "'../../FILE' is TFW_HOME/FILE); copy the text into TFW_HOME first"));
      }
    }
    try {
      train_memory_check(run.config, run.plan);  // an absurd model is refused now, not in a worker
    } catch (const UsageError&) {
      fs::remove_all(staging);
      throw;
    }
  }
  JobRow job;
  job.kind = experiment ? "experiment" : "run";
  job.name = name;
  job.client = client;
  job.id = store->job_create(job);
  const fs::path folder = fs::path(home) / "jobs" / std::to_string(job.id);
  fs::remove_all(folder);
  fs::rename(staging, folder);
  store->job_set_file(job.id, (folder / "experiment.toml").string());
  {
    std::lock_guard<std::mutex> lock(jobs_mutex);
    queue.push_back(job.id);
  }
  jobs_wake.notify_one();
  json runs = json::array();
  for (const ExperimentRun& run : plan.runs) runs.push_back(run.name);
  return {{"type", "submitted"}, {"job", job.id}, {"name", name}, {"runs", runs}};
}

json Service::Impl::cancel(std::int64_t id) {
  std::optional<JobRow> job = store->job_get(id);
  if (!job) throw UsageError(fmt::format("no job {}", id));
  std::lock_guard<std::mutex> lock(jobs_mutex);
  if (auto queued = std::find(queue.begin(), queue.end(), id); queued != queue.end()) {
    queue.erase(queued);
    store->job_set_status(id, "cancelled", -1, "cancelled before it started");
    return {{"type", "cancelled"}, {"job", id}, {"was", "queued"}};
  }
  if (auto found = running.find(id); found != running.end()) {
    cancel_requested.insert(id);
    kill(-found->second, SIGINT);  // the runs checkpoint and end as killed
    return {{"type", "cancelled"}, {"job", id}, {"was", "running"}};
  }
  throw UsageError(fmt::format("job {} is {}: nothing to cancel", id, job->status));
}

void Service::Impl::subscribe(const std::shared_ptr<Connection>& c, std::int64_t run) {
  Feed& feed = feeds[run];
  if (c->subscriptions.count(run)) return;
  c->subscriptions.insert(run);
  feed.subscribers.insert(c);
  for (const Line& line : feed.history) c->send(line);  // catch-up
  if (feed.loaded) c->send(make_line({{"type", "caught_up"}, {"run", run}, {"status", feed.status}}));
  std::lock_guard<std::mutex> lock(watched_mutex);
  watched.insert(run);
}

// On the io thread: new lines of a run from the poller.
void Service::Impl::publish(std::int64_t run, std::vector<Line> lines, std::string status, bool initial) {
  auto found = feeds.find(run);
  if (found == feeds.end()) return;  // every subscriber left
  Feed& feed = found->second;
  if (initial && feed.loaded) return;
  if (!status.empty() && status != feed.status) {
    feed.status = status;
    lines.push_back(make_line({{"type", "status"}, {"run", run}, {"status", status}}));
  }
  for (const Line& line : lines) {
    feed.history.push_back(line);
    for (const auto& c : std::vector<std::shared_ptr<Connection>>(feed.subscribers.begin(), feed.subscribers.end())) {
      c->send(line);
    }
  }
  if (initial) {
    feed.loaded = true;
    const Line caught_up = make_line({{"type", "caught_up"}, {"run", run}, {"status", feed.status}});
    for (const auto& c : std::vector<std::shared_ptr<Connection>>(feed.subscribers.begin(), feed.subscribers.end())) {
      c->send(caught_up);
    }
  }
}

// Reads new points, events and status of the watched runs; a run seen for the first time is
// read whole (the catch-up), later only what is new.
void Service::Impl::poll_loop() {
  std::unique_ptr<Store> reader;
  struct Cursor {
    RunCursor read;  // points and events seen
    std::string status;
  };
  std::map<std::int64_t, Cursor> cursors;
  while (!stopping) {
    std::set<std::int64_t> runs;
    {
      std::lock_guard<std::mutex> lock(watched_mutex);
      runs = watched;
    }
    for (auto it = cursors.begin(); it != cursors.end();) it = runs.count(it->first) ? std::next(it) : cursors.erase(it);
    try {
      if (!reader && !runs.empty()) reader = Store::open_readonly(home + "/runs.db");
      for (std::int64_t run : runs) {
        const bool initial = !cursors.count(run);
        Cursor& cursor = cursors[run];
        RunNews news = reader->news(run, cursor.read);
        std::stable_sort(news.points.begin(), news.points.end(),
                         [](const MetricPoint& a, const MetricPoint& b) { return a.step < b.step; });
        std::vector<Line> lines;
        for (const MetricPoint& p : news.points) {
          lines.push_back(make_line({{"type", "metric"}, {"run", run}, {"key", p.key}, {"step", p.step},
                                     {"tokens", p.tokens}, {"flops", p.flops}, {"wall", p.wall},
                                     {"value", std::isfinite(p.value) ? json(p.value) : json(nullptr)}}));
        }
        for (const EventRow& event : news.events) {
          json payload = json::parse(event.payload, nullptr, false);
          lines.push_back(make_line({{"type", "event"}, {"run", run}, {"kind", event.kind}, {"step", event.step},
                                     {"payload", payload.is_discarded() ? json(event.payload) : payload}}));
        }
        std::optional<RunRecord> record = reader->run_get(run);
        const std::string status = record ? record->status : "";
        const bool status_changed = status != cursor.status;
        cursor.status = status;
        if (lines.empty() && !status_changed && !initial) continue;
        asio::post(io, [this, run, lines = std::move(lines), status, initial]() mutable {
          publish(run, std::move(lines), status, initial);
        });
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "tfw serve: reading the store: {}\n", e.what());
      reader.reset();
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_interval));
  }
}

// Runs `tfw --threads K run FILE --home HOME` in its own process group; it dies with the
// service (SIGTERM on our death: the runs checkpoint and the job resumes at the next start).
int Service::Impl::run_job(const JobRow& job, int threads) {
  const fs::path folder = fs::path(job.file).parent_path();
  const std::string log = (folder / "job.log").string();
  std::vector<std::string> args = {options.tfw, "--threads", std::to_string(threads), "run", job.file, "--home", home};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child's environment, built before fork (setenv is not safe between fork and exec in
  // a threaded process): ours, with TFW_CONFINE set to the home.
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TFW_CONFINE=", 12) != 0) environment.emplace_back(*e);
  }
  environment.push_back("TFW_CONFINE=" + home);
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string folder_text = folder.string();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(130);  // the service died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Relative paths in the job resolve in its folder, and every file it reads must lie in
    // TFW_HOME: the engine refuses any other (engine/home.h, confine_check).
    if (chdir(folder_text.c_str()) != 0) _exit(126);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) return -1;
  {
    std::lock_guard<std::mutex> lock(jobs_mutex);
    running[job.id] = pid;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard<std::mutex> lock(jobs_mutex);
    running.erase(job.id);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void Service::Impl::worker_loop(int slot) {
  auto writer = Store::open(home + "/runs.db");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / std::max(1, options.jobs));
  while (true) {
    std::int64_t id = 0;
    {
      std::unique_lock<std::mutex> lock(jobs_mutex);
      jobs_wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      id = queue.front();
      queue.pop_front();
    }
    std::optional<JobRow> job = writer->job_get(id);
    if (!job) continue;
    writer->job_set_status(id, "running");
    const int code = run_job(*job, threads);
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(jobs_mutex);
      cancelled = cancel_requested.erase(id) > 0;
    }
    if (cancelled) {
      writer->job_set_status(id, "cancelled", code, "cancelled while running: its runs checkpointed and ended as killed");
    } else if (stopping) {
      writer->job_set_status(id, "queued", -1, "interrupted by the service stopping: resumes at the next start");
    } else if (code == 0) {
      writer->job_set_status(id, "finished", code);
    } else {
      std::ifstream in(fs::path(job->file).parent_path() / "job.log");
      std::string text((std::istreambuf_iterator<char>(in)), {});
      if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
      writer->job_set_status(id, "failed", code, text);
    }
  }
}

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  s.home = fs::absolute(s.options.home).lexically_normal().string();
  if (s.options.tfw.empty()) s.options.tfw = executable_dir() + "/tfw";
  if (s.options.jobs < 1) throw UsageError(with_hint("--jobs must be at least 1", "e.g. --jobs 2"));
  const auto [host, port] = address_parse(s.options.listen);
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(host, error);
  if (error) throw UsageError(with_hint(fmt::format("'{}' is not an IP address", host), "e.g. 127.0.0.1 or 0.0.0.0"));
  if (!s.options.token_file.empty()) s.token = token_read(s.options.token_file);
  if (!address.is_loopback() && s.token.empty()) {
    throw UsageError(with_hint(fmt::format("refusing to listen on {} without a token: anyone who reaches it could run jobs",
                                           s.options.listen),
                               "pass --token-file FILE (clients then need the same file), or listen on 127.0.0.1"));
  }
  fs::create_directories(fs::path(s.home) / "jobs");
  // One service per TFW_HOME: two would run the same queued jobs. The lock file names the
  // holder's address, so a GUI can connect to it instead of starting its own.
  const std::string lock_path = s.home + "/service.lock";
  s.lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (s.lock_fd < 0 || flock(s.lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = service_address_of(s.home);
    if (s.lock_fd >= 0) ::close(s.lock_fd);
    throw UsageError(with_hint(fmt::format("another tfw serve already serves {}{}", s.home,
                                           holder.empty() ? "" : " (listening on " + holder + ")"),
                               "connect to it (--connect ADDRESS), or use another --home"));
  }
  s.store = Store::open(s.home + "/runs.db");
  tcp::endpoint endpoint(address, port);
  s.acceptor.open(endpoint.protocol());
  s.acceptor.set_option(tcp::acceptor::reuse_address(true));
  s.acceptor.bind(endpoint, error);
  if (error) {
    throw UsageError(with_hint(fmt::format("cannot listen on {}: {}", s.options.listen, error.message()),
                               "is another `tfw serve` running there? choose another port with --listen"));
  }
  s.acceptor.listen(asio::socket_base::max_listen_connections);
  const std::string bound = this->address();
  if (ftruncate(s.lock_fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = pwrite(s.lock_fd, bound.data(), bound.size(), 0);
  }
  // Jobs that were running when the service last stopped resume; queued ones stay queued.
  for (const JobRow& job : s.store->jobs("running")) {
    s.store->job_set_status(job.id, "queued", -1, "resumed after a service restart");
  }
  for (const JobRow& job : s.store->jobs("queued")) s.queue.push_back(job.id);
}

Service::~Service() {
  stop();
  Impl& s = *impl_;
  if (s.poller.joinable()) s.poller.join();
  for (std::thread& worker : s.workers) {
    if (worker.joinable()) worker.join();
  }
  if (s.lock_fd >= 0) ::close(s.lock_fd);  // releases the lock
}

std::string service_address_of(const std::string& home) {
  const std::string path = home + "/service.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0;  // a live service holds it exclusively
  std::string address;
  if (held) {
    char buffer[256] = {0};
    const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
    if (n > 0) address.assign(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return address;
}

unsigned short Service::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string Service::address() const {
  const tcp::endpoint endpoint = impl_->acceptor.local_endpoint();
  return fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
}

void Service::run() {
  Impl& s = *impl_;
  for (int slot = 0; slot < s.options.jobs; ++slot) s.workers.emplace_back([&s, slot] { s.worker_loop(slot); });
  s.poller = std::thread([&s] { s.poll_loop(); });
  s.accept();
  s.io.run();
  // Stopping: interrupt the running jobs (they checkpoint; the workers queue them again).
  {
    std::lock_guard<std::mutex> lock(s.jobs_mutex);
    for (const auto& [job, pid] : s.running) kill(-pid, SIGTERM);
  }
  s.jobs_wake.notify_all();
  for (std::thread& worker : s.workers) {
    if (worker.joinable()) worker.join();
  }
  if (s.poller.joinable()) s.poller.join();
}

void Service::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  s.jobs_wake.notify_all();
  asio::post(s.io, [&s] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    for (const auto& c : std::vector<std::shared_ptr<Connection>>(s.connections.begin(), s.connections.end())) s.drop(c);
    s.io.stop();
  });
}

}  // namespace tfw::service
