#!/usr/bin/env python3
"""Fails when docs/design/ARCHITECTURE.md quotes code that the code no longer holds: each
```cpp block there that follows a line ending in "The loop:" must appear, line for line, in
engine/train/trainer.cpp. A quoted loop that drifted from the trainer's is a page that lies."""
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
page = (root / "docs/design/ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()
code = [line.rstrip() for line in (root / "engine/train/trainer.cpp").read_text(encoding="utf-8").splitlines()]
quotes = []
for i, line in enumerate(page):
    if line.rstrip().endswith("The loop:") and i + 2 < len(page) and page[i + 2].strip() == "```cpp":
        end = page.index("```", i + 3)
        quotes.append((i + 3, [q.rstrip() for q in page[i + 3:end]]))
if not quotes:
    print("design quotes: ARCHITECTURE.md quotes no trainer loop (a line ending in 'The loop:' and a ```cpp block)")
    sys.exit(1)
status = 0
for start, quote in quotes:
    found = any(code[k:k + len(quote)] == quote for k in range(len(code) - len(quote) + 1))
    if not found:
        print(f"design quotes: docs/design/ARCHITECTURE.md:{start + 1}: the quoted loop is not in engine/train/trainer.cpp;"
              " copy it again from the code")
        status = 1
if status == 0:
    print(f"design quotes: ok ({len(quotes)} quoted loop, {sum(len(q) for _, q in quotes)} lines)")
sys.exit(status)
