"""Run the benchmarks in bench/ that need no arguments, one after another; each prints its own tables.

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
    # bench_retrieval_quality.py takes a BEIR set as arguments (README); bench_converse_load.py uses the
    # database bench_converse.py leaves, so it runs after it.
    order = [
        "bench_middleware",
        "bench_documents",
        "bench_llms_full",
        "bench_converse",
        "bench_converse_load",
        "bench_nlweb",
        "bench_mcp_openapi",
        "bench_intentweb",
        "bench_identity",
        "bench_routing",
        "bench_insights",
        "bench_jobs",
        "bench_fuzz",
    ]
    for script in (HERE / f"{name}.py" for name in order):
        if wanted and not any(word in script.stem for word in wanted):
            continue
        print(f"\n=== {script.name} ===", flush=True)
        failed += subprocess.run([sys.executable, str(script)], cwd=HERE.parent).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
