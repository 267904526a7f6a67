"""Runs several reference scripts in one Python process, one after another, each as its own
__main__ with its own sys.argv, so that PyTorch's import (about 2 s) is paid once and not once
per script. Each script seeds what it draws from its own generator or arguments, so running
it here writes the same bytes as running it alone.
usage: run_many.py SCRIPT [ARG...] [:: SCRIPT [ARG...]]...
Exit status: 0 when every script ran to its end; else that of the first that did not, named
on stderr (the scripts after it do not run)."""
import runpy
import sys

jobs = [[]]
for arg in sys.argv[1:]:
    if arg == "::":
        jobs.append([])
    else:
        jobs[-1].append(arg)
jobs = [job for job in jobs if job]
if not jobs:
    sys.exit(__doc__)
for job in jobs:
    sys.argv = list(job)
    try:
        runpy.run_path(job[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            print(f"run_many.py: {' '.join(job)} exited with {stop.code}", file=sys.stderr)
            sys.exit(stop.code if isinstance(stop.code, int) else 1)
