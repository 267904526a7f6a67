// The GUI's window and frame loop (GLFW + OpenGL 3 + Dear ImGui 1.86), the tab per panel,
// the status bar, and headless screenshots (one view rendered into a hidden window, read
// back with glReadPixels and written with stb_image_write).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "workbench/gui/app.h"
#include "workbench/gui/gui.h"
#include "workbench/service/remote_source.h"

namespace fs = std::filesystem;

namespace tfw::gui {

bool gui_available() { return true; }

const RunRecord* App::run(std::int64_t id) const {
  if (!snapshot) return nullptr;
  for (const RunRecord& record : snapshot->runs) {
    if (record.id == id) return &record;
  }
  return nullptr;
}

const std::vector<std::string>& App::config_files() {
  if (!config_files_cache.empty()) return config_files_cache;
  std::set<std::string> found;
  std::vector<fs::path> roots = {fs::current_path() / "experiments",
                                 fs::path(executable_dir()).parent_path() / "experiments"};
  for (const fs::path& root : roots) {
    std::error_code error;
    if (!fs::is_directory(root, error)) continue;
    for (auto it = fs::recursive_directory_iterator(root, error); it != fs::recursive_directory_iterator(); ++it) {
      if (it->path().extension() != ".toml") continue;
      try {
        model_config_load(*registry, it->path().string());  // run configs only, not experiment files
      } catch (const std::exception&) {
        continue;
      }
      const std::string text = fs::relative(it->path(), fs::current_path(), error).string();
      found.insert(error || text.empty() ? it->path().string() : text);
    }
  }
  config_files_cache.assign(found.begin(), found.end());
  return config_files_cache;
}

void text_wrapped_at_spaces(const std::string& text) {
  const auto measure = [](const std::string& s) { return static_cast<double>(ImGui::CalcTextSize(s.c_str()).x); };
  for (const std::string& line : wrap_at_spaces(text, ImGui::GetContentRegionAvail().x, measure)) {
    ImGui::TextUnformatted(line.c_str());
  }
}

void help_marker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void empty_state(const char* title, const std::string& detail) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::Dummy(ImVec2(0, avail.y * 0.3f));
  ImGui::Indent(avail.x * 0.2f);
  ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + avail.x * 0.6f);
  ImGui::TextColored(ImVec4(0.9f, 0.8f, 0.4f, 1.0f), "%s", title);
  ImGui::Spacing();
  ImGui::TextUnformatted(detail.c_str());
  ImGui::PopTextWrapPos();
  ImGui::Unindent(avail.x * 0.2f);
}

namespace {

void glfw_error(int code, const char* text) { fmt::print(stderr, "tfw gui: GLFW error {}: {}\n", code, text); }

// Run ids for --select: ids, or names (the newest run of that name).
std::set<std::int64_t> resolve_selection(const StoreSnapshot& snapshot, const std::vector<std::string>& select) {
  std::set<std::int64_t> ids;
  for (const std::string& wanted : select) {
    std::int64_t found = 0;
    for (const RunRecord& record : snapshot.runs) {
      if (std::to_string(record.id) == wanted || record.name == wanted) found = std::max(found, record.id);
    }
    if (found == 0) {
      throw UsageError(with_hint(fmt::format("--select: no run '{}' in the {}", wanted, snapshot.source),
                                 "list the runs with `tfw runs list`"));
    }
    ids.insert(found);
  }
  return ids;
}

void load_font() {
  ImGuiIO& io = ImGui::GetIO();
  for (const char* path : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"}) {
    if (fs::exists(path)) {
      ImFontConfig config;
      config.OversampleH = 2;
      // Latin-1, Greek (Θ in the attention view, τ), dashes and ellipsis, arrows, maths, the
      // visible space ␣ (token labels), box drawing.
      static const ImWchar ranges[] = {0x0020, 0x00FF, 0x0370, 0x03FF, 0x2013, 0x2026, 0x2190, 0x21FF,
                                       0x2200, 0x22FF, 0x2423, 0x2423, 0x2500, 0x257F, 0};
      if (io.Fonts->AddFontFromFileTTF(path, 15.0f, &config, ranges)) return;
    }
  }
  io.Fonts->AddFontDefault();
}

void style() {
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0;
  s.FrameRounding = 3;
  s.TabRounding = 3;
  s.ItemSpacing = ImVec2(8, 5);
}

void status_bar(App& app) {
  const StoreSnapshot& s = *app.snapshot;
  ImGui::Separator();
  if (!s.error.empty()) {
    const std::string first_line = s.error.substr(0, s.error.find('\n'));
    ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "store: %s", first_line.c_str());
    return;
  }
  std::size_t running = 0;
  for (const RunRecord& r : s.runs) running += r.status == RunStatus::running;
  ImGui::TextDisabled("%s  ·  %zu runs, %zu running, %zu selected  ·  read %.1f s ago  ·  %s", s.where().c_str(),
                      s.runs.size(), running, app.selected.size(), std::max(0.0, store_now() - s.read_at),
                      app.service ? app.service->description().c_str() : "no service (screenshot)");
  if (app.service && !app.service->error().empty() && ImGui::IsItemHovered()) {
    ImGui::SetTooltip("%s", app.service->error().c_str());
  }
}

bool write_screenshot(const std::string& path, int width, int height) {
  std::vector<unsigned char> pixels(static_cast<std::size_t>(width) * height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  for (std::size_t i = 3; i < pixels.size(); i += 4) pixels[i] = 255;  // opaque
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
  stbi_flip_vertically_on_write(1);
  const std::string temp = path + ".tmp.png";
  if (!stbi_write_png(temp.c_str(), width, height, 4, pixels.data(), width * 4)) return false;
  fs::rename(temp, path);
  return true;
}

std::vector<std::unique_ptr<Panel>> make_panels() {
  std::vector<std::unique_ptr<Panel>> panels;
  panels.push_back(make_runs_panel());
  panels.push_back(make_curves_panel());
  panels.push_back(make_flops_panel());
  panels.push_back(make_attention_panel());
  panels.push_back(make_designer_panel());
  return panels;
}

// The panel that --view names.
std::size_t panel_index(const std::vector<std::unique_ptr<Panel>>& panels, const std::string& view) {
  std::size_t current = panels.size();
  for (std::size_t i = 0; i < panels.size(); ++i) {
    if (view == panels[i]->name()) current = i;
  }
  if (current == panels.size()) {
    throw UsageError(
        with_hint(fmt::format("unknown view '{}'", view), "use --view runs, curves, flops, attention or designer"));
  }
  return current;
}

// The store watcher, the service link, the selection and the first snapshot.
void open_store(App& app) {
  const GuiOptions& options = app.options;
  // With --connect the runs come from that service (its home need not be readable here);
  // otherwise from this TFW_HOME's store.
  const double interval = app.headless ? 0.0 : 0.5;
  if (options.connect.empty()) {
    app.watcher = std::make_unique<StoreWatcher>(app.home, interval);
  } else {
    app.watcher = std::make_unique<StoreWatcher>(
        std::make_unique<service::RemoteRunSource>(options.connect, options.token_file), interval);
  }
  if (!app.headless) app.service = std::make_unique<ServiceLink>(app.home, options.connect, options.token_file);
  app.snapshot = app.watcher->poll();
  if (app.headless && app.snapshot->remote && !app.snapshot->error.empty()) throw UsageError(app.snapshot->error);
  app.selected = resolve_selection(*app.snapshot, options.select);
  if (app.selected.empty() && app.headless) {
    // Screenshots without --select show the newest runs (at most 10).
    for (auto it = app.snapshot->runs.rbegin(); it != app.snapshot->runs.rend() && app.selected.size() < 10; ++it) {
      app.selected.insert(it->id);
    }
  }
  app.watcher->watch(with_ancestors(*app.snapshot, app.selected));
  app.snapshot = app.watcher->poll();
}

// A window with an OpenGL 3.3 core context, hidden when headless.
GLFWwindow* create_window(const App& app) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    throw UsageError(with_hint("cannot open a window: no X display (GLFW could not initialise)",
                               "set DISPLAY, or run headless under Xvfb: xvfb-run -a tfw gui --screenshot FILE.png "
                               "--view runs"));
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  if (app.headless) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  GLFWwindow* window =
      glfwCreateWindow(app.options.width, app.options.height, "Tokenformer Workbench", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    throw Error("cannot create an OpenGL 3.3 window (is Mesa's libgl1-mesa-dri installed?)");
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(app.headless ? 0 : 1);
  return window;
}

// ImGui in the window: its settings in TFW_HOME/gui.ini (not when headless), our style and font.
void init_imgui(GLFWwindow* window, const App& app) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  static std::string ini_path;
  ini_path = app.home + "/gui.ini";
  ImGui::GetIO().IniFilename = app.headless || !fs::is_directory(app.home) ? nullptr : ini_path.c_str();
  style();
  load_font();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330");
}

void close_window(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// Takes the events and the watcher's latest snapshot, and starts an ImGui frame.
void begin_frame(App& app, int frame) {
  const GuiOptions& options = app.options;
  if (app.headless)
    glfwPollEvents();
  else
    glfwWaitEventsTimeout(0.1);
  app.snapshot = app.watcher->snapshot();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (options.bench_frames > 0) {
    // Sweep the mouse across the window so hover read-outs are part of every frame.
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = ImVec2(80.0f + static_cast<float>((frame * 37) % std::max(1, options.width - 100)),
                         static_cast<float>(options.height) * 0.5f);
    if (options.bench_zoom && frame >= 5) io.MouseWheel = frame % 2 ? 0.5f : -0.5f;
  }
  ImGui::NewFrame();
}

// The full-window workbench: a tab per panel and the status bar. `select` is the panel whose
// tab is selected by force this frame (the initial view on the first frame), if any.
void draw_workbench(App& app, const std::vector<std::unique_ptr<Panel>>& panels, std::size_t select) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  ImGui::Begin("workbench", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoBringToFrontOnFocus |
                   ImGuiWindowFlags_NoSavedSettings);
  if (ImGui::BeginTabBar("views")) {
    for (std::size_t i = 0; i < panels.size(); ++i) {
      const bool force = i == select || app.request_view == panels[i]->name();
      if (ImGui::BeginTabItem(panels[i]->title(), nullptr, force ? ImGuiTabItemFlags_SetSelected : 0)) {
        ImGui::BeginChild("panel", ImVec2(0, -ImGui::GetFrameHeightWithSpacing()), false);
        panels[i]->draw(app);
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
    }
    app.request_view.clear();
    ImGui::EndTabBar();
  }
  status_bar(app);
  ImGui::End();
}

// Renders the frame into the back buffer. Returns the framebuffer's width and height.
std::pair<int, int> render(GLFWwindow* window) {
  ImGui::Render();
  int width = 0, height = 0;
  glfwGetFramebufferSize(window, &width, &height);
  glViewport(0, 0, width, height);
  glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  return {width, height};
}

// After the last headless frame: the benchmark's frame times, and the screenshot. Returns the
// exit status.
int finish_headless(const GuiOptions& options, std::vector<double>& frame_ms, int width, int height) {
  if (!frame_ms.empty()) {
    std::sort(frame_ms.begin(), frame_ms.end());
    const ImDrawData* data = ImGui::GetDrawData();
    fmt::print("frames {}  median {:.2f} ms  p95 {:.2f} ms  max {:.2f} ms  ({} vertices in the last frame, {})\n",
               frame_ms.size(), frame_ms[frame_ms.size() / 2], frame_ms[frame_ms.size() * 95 / 100], frame_ms.back(),
               data->TotalVtxCount, reinterpret_cast<const char*>(glGetString(GL_RENDERER)));
  }
  if (!options.screenshot.empty() && !write_screenshot(options.screenshot, width, height)) {
    fmt::print(stderr, "tfw gui: cannot write {}\n", options.screenshot);
    return 1;
  }
  return 0;
}

// Draws frames until the window closes (headless: until the layout settled or the benchmark's
// frames are done). Returns the exit status.
int frame_loop(App& app, const std::vector<std::unique_ptr<Panel>>& panels, std::size_t initial, GLFWwindow* window) {
  const GuiOptions& options = app.options;
  // Windows and tables settle their layout over a few frames; a benchmark renders more.
  const int last_frame = std::max(4, options.bench_frames + 5) - 1;
  std::vector<double> frame_ms;
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    const auto frame_start = std::chrono::steady_clock::now();
    begin_frame(app, frame);
    draw_workbench(app, panels, frame == 0 ? initial : panels.size());

    // Headless there is no polling thread: read the store when the selection changed.
    if (app.watcher->watch(with_ancestors(*app.snapshot, app.selected)) && app.headless)
      app.snapshot = app.watcher->poll();

    const auto [width, height] = render(window);
    if (options.bench_frames > 0) {
      glFinish();  // include the (software) rasterisation
      if (frame >= 5) {
        frame_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count());
      }
    }
    if (app.headless && frame >= last_frame) return finish_headless(options, frame_ms, width, height);
    glfwSwapBuffers(window);
  }
  return 0;
}

}  // namespace

int gui_run(const GuiOptions& options) {
  App app;
  app.options = options;
  app.home = home_resolve(options.home);
  app.registry = &registry();
  app.headless = !options.screenshot.empty() || options.bench_frames > 0;

  const std::vector<std::unique_ptr<Panel>> panels = make_panels();
  const std::size_t initial = panel_index(panels, options.view);
  open_store(app);
  GLFWwindow* window = create_window(app);
  init_imgui(window, app);
  if (app.headless) panels[initial]->prepare(app);
  const int status = frame_loop(app, panels, initial, window);
  close_window(window);
  return status;
}

}  // namespace tfw::gui
