#!/usr/bin/env bash
# Fails when a folder includes what docs/design/ARCHITECTURE.md forbids it: storage/ never sees torch,
# only workbench/gui includes ImGui/GLFW, plugins reach nothing past the engine API, and the
# CLI plumbing stays torch-free (torch lives in engine/ and plugins/), and only
# engine/core/process.cpp starts processes.
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
check "storage includes runner or workbench" '#include *[<"](runner/|workbench/)' storage
# storage/ links libtfw_core for its errors (engine/core/) and includes nothing else of the engine.
beyond_core=$(grep -rnE '#include *[<"]engine/' storage --include='*.cpp' --include='*.h' | grep -vE '#include *[<"]engine/core/')
if [ -n "$beyond_core" ]; then
  echo "architecture violation: storage includes the engine beyond engine/core/:"; echo "$beyond_core" | sed 's/^/  /'; status=1
fi
check "runner includes workbench (the runner serves the clients, not the other way)" '#include *[<"]workbench/' runner
check "runner includes torch (use the engine's torch-free headers)" "$torch" runner
check "the headless results, the service or workbench/common include the GUI" '#include *[<"]workbench/gui/' workbench/results workbench/service workbench/common
helpers=$(ls engine/train/*.h | grep -vE '/(trainer|trainer_impl)\.h$')
# shellcheck disable=SC2086
check "a trainer helper includes the trainer (the rest of engine/train/ serves engine/train/trainer.cpp)" \
  '#include *[<"]engine/train/trainer(_impl)?\.h' $helpers
# The rooms of engine/, lowest first (docs/design/ARCHITECTURE.md): a room includes only rooms
# below it and itself, so no include runs back up. kernels/cpu and kernels/cuda are rooms of
# their own. No room holds more than 12 source files.
rooms="core plugin config data kernels/cpu kernels/cuda machine nn checkpoint dist train interop commands"
for room in $rooms; do
  [ -d "engine/$room" ] || { echo "architecture violation: engine/$room, a room in the order, does not exist"; status=1; continue; }
  above=$(echo "$rooms" | tr ' ' '\n' | sed -n "/^${room//\//\\/}\$/,\$p" | sed 1d | tr '\n' '|' | sed 's/|$//')
  if [ -n "$above" ]; then
    check "engine/$room includes a room above it (the order: $rooms)" "#include *\"engine/(${above})/" "engine/$room"
  fi
  sources=$(find "engine/$room" -maxdepth 1 \( -name '*.cpp' -o -name '*.cu' \) | wc -l)
  if [ "$sources" -gt 12 ]; then
    echo "architecture violation: engine/$room holds $sources source files (at most 12: split the room)"; status=1
  fi
done
for folder in $(find engine -mindepth 1 -type d | sed 's|^engine/||'); do
  case " $rooms kernels " in
    *" $folder "*) ;;
    *) echo "architecture violation: engine/$folder is not a room in the order (add it to \$rooms)"; status=1 ;;
  esac
done
loose=$(find engine -maxdepth 1 \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \))
if [ -n "$loose" ]; then
  echo "architecture violation: a source file outside the rooms of engine/:"; echo "$loose" | sed 's/^/  /'; status=1
fi
check "bench includes tests" '#include *[<"](tests/|\.\./tests/)' bench
# Process supervision has one home (engine/core/process.cpp): nothing else forks, spawns or reaps.
spawners=$(grep -rlE '\b(fork|vfork|posix_spawnp?|waitpid|wait4|execve|execvp?)[[:space:]]*\(' engine storage runner workbench plugins bench \
             --include='*.cpp' --include='*.h' 2>/dev/null | grep -v '^engine/core/process\.cpp$')
if [ -n "$spawners" ]; then
  echo "architecture violation: a process is spawned or reaped outside engine/core/process.cpp (use tfw::Process):"
  echo "$spawners" | sed 's/^/  /'; status=1
fi
[ $status = 0 ] && echo "architecture arrows: ok"
exit $status
