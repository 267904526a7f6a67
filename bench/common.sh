# Shared by the benchmark scripts (source it): reading tfw's --json output and medians.

# The value of KEY in the JSON object on stdin.
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

# The median of the numbers given as arguments (the upper middle one of an even count).
median() { printf "%s\n" "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
