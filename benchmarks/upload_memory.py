"""Resident memory of the API process while it takes one large corpus upload (issue 2).

The same run as benchmarks/upload_throughput.py, at one size given in GiB:

    .venv/bin/python -m benchmarks.upload_memory --gib 1
"""

import argparse

from benchmarks import upload_throughput


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    upload_throughput.main(["--mb", str(args.gib * 1024)])


if __name__ == "__main__":
    main()
