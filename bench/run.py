"""Run every benchmark in bench/, one after another; each prints its own tables.

python bench/run.py            # all
python bench/run.py middleware # only those whose file name contains "middleware"
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    wanted = sys.argv[1:]
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        if wanted and not any(word in script.stem for word in wanted):
            continue
        print(f"\n=== {script.name} ===", flush=True)
        failed += subprocess.run([sys.executable, str(script)], cwd=HERE.parent).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
