# Shared by the benchmark scripts (source it): reading tfw's --json output and medians.

# The value of KEY in the JSON object on stdin.
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

# The median of the numbers given as arguments (the upper middle one of an even count).
median() { printf "%s\n" "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# The knobs every training benchmark shares, as globals: tfw (TFW, default build/tfw), rounds
# (ROUNDS), steps (STEPS), home (a temporary TFW_HOME, removed on exit unless the script sets
# its own EXIT trap after this) and configs (the arguments, or the two quickstart configs).
# Needs $root.
#   bench_setup DEFAULT_ROUNDS DEFAULT_STEPS "$@"
bench_setup() {
  tfw=${TFW:-$root/build/tfw}
  rounds=${ROUNDS:-$1}
  steps=${STEPS:-$2}
  shift 2
  home=$(mktemp -d)
  trap 'rm -rf "$home"' EXIT
  configs=("$@")
  [ ${#configs[@]} -gt 0 ] ||
    configs=("$root/experiments/mini/quickstart-tokenformer.toml" "$root/experiments/mini/quickstart-transformer.toml")
}
