// How tfw's files are linked against PyTorch's wheel. The wheel's libtorch_cpu exports its own,
// unversioned copies of libstdc++ functions that its toolchain linked in statically
// (std::filesystem among them; pytorch/pytorch#133437). The dynamic loader binds a versioned
// reference (remove_all@GLIBCXX_3.4.26) to an unversioned definition too, so whichever library
// comes first in the lookup order serves the call, and the wheel's copies crash when called
// from code another g++ built (std::filesystem::remove_all jumps to address 0). Every tfw binary
// therefore names libstdc++ before anything else (CMakeLists.txt). These tests hold that for
// every symbol, in every file of ours that the loader binds, and show the hazard is real.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/cli/run_command.h"

namespace {

namespace fs = std::filesystem;

// One line of LD_DEBUG=bindings: "binding file A [0] to B [0]: normal symbol `S' [VERSION]".
struct Binding {
  std::string from, to, symbol;
};

// Runs `command` with every symbol bound at start (LD_BIND_NOW) and the loader's bindings
// written to a file; returns them. Plugins bind as they are opened. A command that may crash
// (the hazard itself) passes `must_succeed = false`.
std::vector<Binding> bindings_of(const std::string& command, bool must_succeed = true) {
  const std::string log = "/tmp/tfw-test-bindings-" + std::to_string(getpid());
  for (const auto& entry : fs::directory_iterator("/tmp")) {
    if (entry.path().string().rfind(log + ".", 0) == 0) fs::remove(entry.path());
  }
  const tfw::test::Result run =
      tfw::test::capture("LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT=" + log + " " + command);
  if (must_succeed) {
    EXPECT_EQ(run.code, 0) << run.output;
  }
  static const std::regex line(R"(binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)')");
  std::vector<Binding> found;
  for (const auto& entry : fs::directory_iterator("/tmp")) {
    if (entry.path().string().rfind(log + ".", 0) != 0) continue;  // LD_DEBUG_OUTPUT.PID, one per process
    std::ifstream in(entry.path());
    for (std::string text; std::getline(in, text);) {
      std::smatch m;
      if (std::regex_search(text, m, line)) found.push_back({m[1], m[2], m[3]});
    }
    fs::remove(entry.path());
  }
  return found;
}

// The symbols the system's libstdc++ defines (nm -D), and its path.
std::pair<std::string, std::set<std::string>> libstdcxx_symbols(const std::vector<Binding>& bindings) {
  std::string path;
  for (const Binding& b : bindings) {
    if (b.to.find("libstdc++.so") != std::string::npos) path = b.to;
  }
  std::set<std::string> symbols;
  if (path.empty()) return {path, symbols};
  std::istringstream names(tfw::test::capture("nm -D --defined-only " + path + " | awk '{print $3}'").out);
  for (std::string name; std::getline(names, name);) symbols.insert(name.substr(0, name.find('@')));
  return {path, symbols};
}

// tfw, the engine library and every plugin (`tfw plugins` opens them all): each symbol that
// libstdc++ defines, wherever one of our files imports it, comes from libstdc++ or from our
// own files, never from LibTorch's libraries.
TEST(Build, EveryStandardLibrarySymbolOfOursComesFromLibstdcxx) {
  // Paths compared with their links resolved: the loader names a plugin by the path tfw opened
  // it from (its own folder, resolved), the executable by the path it was started as (CI
  // builds through a link to the clone, .ci/run).
  std::map<std::string, std::string> resolved;
  auto real = [&resolved](const std::string& path) -> const std::string& {
    auto [it, fresh] = resolved.try_emplace(path);
    if (fresh) {
      std::error_code ec;
      it->second = fs::weakly_canonical(path, ec).string();
      if (ec) it->second = path;
    }
    return it->second;
  };
  const std::string build = real(fs::path(TFW_BINARY).parent_path().string());
  const std::string binary = real(TFW_BINARY);
  std::vector<Binding> bindings = bindings_of(TFW_BINARY " plugins");
  for (Binding& b : bindings) {
    b.from = real(b.from);
    b.to = real(b.to);
  }
  const auto [libstdcxx, provided] = libstdcxx_symbols(bindings);
  ASSERT_FALSE(libstdcxx.empty()) << "no binding reached libstdc++";
  ASSERT_GT(provided.size(), 1000u) << libstdcxx;
  std::set<std::string> ours;
  std::size_t checked = 0;
  std::map<std::string, std::string> wrong;  // symbol -> "from -> to"
  for (const Binding& b : bindings) {
    if (b.from.rfind(build + "/", 0) != 0 && b.from != binary) continue;
    ours.insert(b.from);
    if (!provided.count(b.symbol)) continue;
    ++checked;
    // libstdc++ itself, or one of our own files (the executable holds copies of std::cerr and
    // typeinfo, and template instances our compiler made): never the wheel's copy.
    const bool ours_to = b.to.rfind(build + "/", 0) == 0 || b.to == binary;
    if (b.to != libstdcxx && !ours_to) wrong[b.symbol] = b.from + " -> " + b.to;
  }
  // The executable, the engine library and the model plugins were all bound.
  EXPECT_TRUE(ours.count(binary)) << "tfw itself";
  EXPECT_TRUE(
      std::any_of(ours.begin(), ours.end(), [](const std::string& f) { return f.find("libtfw_engine.so") != f.npos; }));
  EXPECT_TRUE(std::any_of(ours.begin(), ours.end(),
                          [](const std::string& f) { return f.find("tfw-tokenformer.so") != f.npos; }));
  EXPECT_GT(checked, 100u) << "too few of libstdc++'s symbols were seen to say anything";
  for (const auto& [symbol, where] : wrong) ADD_FAILURE() << symbol << ": " << where;
}

// The hazard is real with the compiler at hand: a program that calls std::filesystem::remove_all
// and links LibTorch without naming libstdc++ first gets the wheel's copy, the one that crashed.
// (The same program with the flag of CMakeLists.txt gets libstdc++'s.)
TEST(Build, WithoutLibstdcxxFirstTheWheelServesStdFilesystem) {
  // The LibTorch this build linked; TFW_TORCH_LIB_DIR names another where the build travelled
  // to a machine whose PyTorch lives elsewhere (scripts/gpu-check with GPU_CHECK_PREBUILT=1).
  const char* moved = std::getenv("TFW_TORCH_LIB_DIR");
  const std::string torch_lib = moved != nullptr && *moved != 0 ? moved : TFW_TORCH_LIB_DIR;
  const std::string dir = "/tmp/tfw-test-link-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/main.cpp") << "#include <filesystem>\nint main() { return std::filesystem::remove_all(\"" << dir
                                   << "/gone\") == 0 ? 0 : 1; }\n";
  const std::string compile = "g++ -std=c++17 -O1 -o " + dir + "/";
  const std::string common = dir + "/main.cpp -L" + torch_lib + " -Wl,-rpath," + torch_lib;
  // -ltorch_cpu before libstdc++, as a link line that only adds LibTorch has it.
  const tfw::test::Result plain = tfw::test::capture(compile + "plain " + common + " -Wl,--no-as-needed -ltorch_cpu");
  ASSERT_EQ(plain.code, 0) << plain.output;
  const tfw::test::Result fixed =
      tfw::test::capture(compile + "fixed -Wl,--push-state,--no-as-needed,-lstdc++,--pop-state " + common +
                         " -Wl,--no-as-needed -ltorch_cpu");
  ASSERT_EQ(fixed.code, 0) << fixed.output;
  auto provider = [&](const std::string& program) {
    for (const Binding& b : bindings_of(dir + "/" + program, program == "fixed")) {
      if (b.from == dir + "/" + program && b.symbol.find("remove_all") != std::string::npos) return b.to;
    }
    return std::string("(not bound)");
  };
  EXPECT_NE(provider("plain").find("libtorch_cpu.so"), std::string::npos) << "the wheel no longer exports remove_all?";
  EXPECT_NE(provider("fixed").find("libstdc++.so"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
