"""A benchmark's measured steps, each in a fresh process of its own module (`--child ...`), its
last line of output the JSON it measured: so every peak RSS is the step's own."""

import json
import subprocess
import sys


def start(module: str, *args: str) -> subprocess.Popen:
    """`python -m module --child args…`, its output captured."""
    return subprocess.Popen([sys.executable, "-m", module, "--child", *args], stdout=subprocess.PIPE, text=True)


def result(process: subprocess.Popen) -> dict:
    """What the step printed last, as JSON, once it ended (a failed step ends the benchmark)."""
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"a benchmark process failed ({process.returncode})")
    return json.loads(out.strip().splitlines()[-1])
