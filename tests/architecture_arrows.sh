#!/usr/bin/env bash
# Fails when a folder includes what docs/design/ARCHITECTURE.md forbids it: storage/ never sees torch,
# only workbench/gui includes ImGui/GLFW, plugins reach nothing past the engine API, and the
# CLI plumbing stays torch-free (torch lives in engine/ and plugins/), and only
# runner/process.cpp starts processes.
set -u
root=${1:-.}
cd "$root" || exit 2
status=0
check() {  # check DESCRIPTION PATTERN FOLDER... (files that match are violations)
  local what=$1 pattern=$2; shift 2
  local hits
  hits=$(grep -rlE "$pattern" "$@" --include='*.cpp' --include='*.h' --include='*.hpp' 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "architecture violation: $what:"; echo "$hits" | sed 's/^/  /'; status=1
  fi
}
# The engine headers that bring torch in, directly or through each other (to a fixpoint).
torch_headers='torch/|ATen/|c10/'
while :; do
  found=$(grep -rlE "#include *[<\"]($torch_headers)" engine --include='*.h' | sort | tr '\n' '|' | sed 's/|$//; s/\./\\./g')
  next="torch/|ATen/|c10/${found:+|$found}"
  [ "$next" = "$torch_headers" ] && break
  torch_headers=$next
done
torch="#include *[<\"]($torch_headers)"
check "storage/ includes torch" "$torch" storage
check "workbench/cli includes torch (keep torch in engine/ and plugins/)" "$torch" workbench/cli
check "workbench/gui includes torch (use the engine's torch-free headers)" "$torch" workbench/gui workbench/colormap.h
check "workbench/service or workbench/common includes torch" "$torch" workbench/service workbench/common
check "ImGui/GLFW in the service or workbench/common" '#include *[<"](imgui|GLFW/|backends/imgui)' workbench/service workbench/common
check "ImGui/GLFW outside workbench/gui" '#include *[<"](imgui|GLFW/|backends/imgui)' engine storage plugins workbench/cli
check "plugins reach past the engine API" '#include *[<"](sqlite3\.h|imgui|boost/asio|storage/|workbench/)' plugins
check "engine includes storage, runner or workbench" '#include *[<"](storage/|runner/|workbench/)' engine
check "storage includes the engine, runner or workbench" '#include *[<"](engine/|runner/|workbench/)' storage
check "runner includes workbench (the runner serves the clients, not the other way)" '#include *[<"]workbench/' runner
check "runner includes torch (use the engine's torch-free headers)" "$torch" runner
check "the headless results, the service or workbench/common include the GUI" '#include *[<"]workbench/gui/' workbench/results workbench/service workbench/common
check "a trainer helper includes the trainer (engine/train/ serves engine/trainer.cpp)" '#include *[<"]engine/trainer\.h' engine/train/*.h
check "bench includes tests" '#include *[<"](tests/|\.\./tests/)' bench
# Process supervision has one home (runner/process.cpp): nothing else forks, spawns or reaps.
spawners=$(grep -rlE '\b(fork|vfork|posix_spawnp?|waitpid|wait4|execve|execvp?)[[:space:]]*\(' engine storage runner workbench plugins bench \
             --include='*.cpp' --include='*.h' 2>/dev/null | grep -v '^runner/process\.cpp$')
if [ -n "$spawners" ]; then
  echo "architecture violation: a process is spawned or reaped outside runner/process.cpp (use runner::Process):"
  echo "$spawners" | sed 's/^/  /'; status=1
fi
[ $status = 0 ] && echo "architecture arrows: ok"
exit $status
