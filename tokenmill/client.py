"""The user CLI: a client of the REST API (upload, train, job show, download) with progress bars.

It reads TOKENMILL_API_URL and TOKENMILL_API_KEY, or --url and --api-key.
"""

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import IO, Any, BinaryIO, Never, cast

import httpx
from tqdm import tqdm


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    def common(p: argparse.ArgumentParser, listing: bool = False) -> None:
        p.add_argument("--url", default=os.environ.get("TOKENMILL_API_URL", "http://127.0.0.1:8000"))
        p.add_argument("--api-key", default=os.environ.get("TOKENMILL_API_KEY"))
        if listing:
            p.add_argument("--json", action="store_true", help="print the API's JSON instead of a table")

    corpus = sub.add_parser("corpus", help="corpora").add_subparsers(dest="corpus_command", required=True)
    p = corpus.add_parser("upload", help="upload a corpus file (text or jsonl, optionally gzip/zstd)")
    p.add_argument("file", type=Path)
    p.add_argument("--domain", required=True)
    p.add_argument("--language", required=True)
    p.add_argument("--name")
    p.add_argument("--format", choices=("text", "jsonl"),
                   help="default: jsonl for a .jsonl or .ndjson file, otherwise text (the server decides)")
    p.add_argument("--text-field")
    p.add_argument("--parallel-group")
    common(p)

    p = corpus.add_parser("list", help="the team's corpora")
    p.add_argument("--domain")
    p.add_argument("--language")
    common(p, listing=True)
    p = corpus.add_parser("show", help="one corpus, with its statistics")
    p.add_argument("id")
    common(p, listing=True)
    p = corpus.add_parser("duplicates", help="the share of exact-duplicate documents across the team's corpora")
    common(p, listing=True)

    p = sub.add_parser("jobs", help="recent training jobs, newest first, with their status")
    p.add_argument("--status", choices=("queued", "running", "succeeded", "failed", "cancelled"))
    common(p, listing=True)
    p = sub.add_parser("tokenizers", help="the team's tokenizer names")
    common(p, listing=True)
    p = sub.add_parser("versions", help="the versions of a tokenizer")
    p.add_argument("name")
    common(p, listing=True)
    p = sub.add_parser("encode", help="how NAME[@VERSION] (or a reference: gpt2, cl100k_base, o200k_base) "
                                      "tokenizes TEXT")
    p.add_argument("ref")
    p.add_argument("text")
    common(p, listing=True)
    p = sub.add_parser("report", help="the cost report of NAME[@VERSION], as tables")
    p.add_argument("ref")
    common(p, listing=True)

    p = sub.add_parser("train", help="submit a training job")
    p.add_argument("name", help="tokenizer name")
    p.add_argument("--corpus", action="append", required=True, help="training corpus id (repeatable)")
    p.add_argument("--eval-corpus", action="append", help="evaluation corpus id (default: all)")
    p.add_argument("--spec", default="{}", help="spec as JSON, or @file.json")
    p.add_argument("--algorithm")
    p.add_argument("--library")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--wait", action="store_true", help="follow the job to its end")
    common(p)

    job = sub.add_parser("job", help="training jobs").add_subparsers(dest="job_command", required=True)
    p = job.add_parser("show", help="print a job (a warning on stderr if its vocabulary fell short)")
    p.add_argument("id", help="job id")
    common(p)

    p = sub.add_parser("import", help="import a tokenizer file (tokenizer.json, tokenizer.model or a tiktoken "
                                      "rank file) as the next version of NAME")
    p.add_argument("name", help="tokenizer name")
    p.add_argument("file", type=Path)
    p.add_argument("--pat-str", help="a tiktoken rank file's split regex")
    p.add_argument("--special-tokens", help='a tiktoken rank file\'s special tokens as JSON, e.g. {"<|endoftext|>": 100257}')
    common(p)

    p = sub.add_parser("download", help="download a version's files: NAME[@VERSION] DIR")
    p.add_argument("ref")
    p.add_argument("dir", type=Path)
    common(p)


class _Progress:
    """A file wrapper that advances a progress bar as httpx reads it."""

    def __init__(self, handle: BinaryIO, bar: "tqdm[Never]") -> None:
        self.handle, self.bar = handle, bar

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.bar.update(len(data))
        return data


def _client(args: argparse.Namespace) -> httpx.Client:
    if not args.api_key:
        sys.exit("no API key: pass --api-key or set TOKENMILL_API_KEY")
    return httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {args.api_key}"}, timeout=600)


def _check(response: httpx.Response) -> dict[str, Any]:
    if response.is_error:
        try:
            body = response.json()
            message = body.get("detail") or body
        except ValueError:
            message = response.text
        sys.exit(f"error {response.status_code}: {message}")
    answer: dict[str, Any] = response.json()  # the API answers a JSON object
    return answer


def upload(args: argparse.Namespace) -> int:
    size = args.file.stat().st_size
    data = {"name": args.name or corpus_name(args.file), "domain": args.domain, "language": args.language}
    data.update({k: v for k, v in (("format", args.format), ("text_field", args.text_field),
                                   ("parallel_group", args.parallel_group)) if v})
    with _client(args) as http, args.file.open("rb") as handle, tqdm(total=size, unit="B", unit_scale=True, desc="upload") as bar:
        # httpx needs only read() of an upload's file (it probes for fileno and seek, which the wrapper lacks).
        progress = cast(IO[bytes], _Progress(handle, bar))
        corpus = _check(http.post("/v1/corpora", data=data, files={"file": (args.file.name, progress)}))
    print(json.dumps(corpus, indent=2))
    return 0


def train(args: argparse.Namespace) -> int:
    spec = json.loads(Path(args.spec[1:]).read_text() if args.spec.startswith("@") else args.spec)
    for key in ("algorithm", "library", "vocab_size"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    body = {"tokenizer": args.name, "spec": spec, "train_corpora": args.corpus, "eval_corpora": args.eval_corpus}
    with _client(args) as http:
        job = _check(http.post("/v1/jobs", json=body))
        print(f"job {job['id']} {job['status']}")
        if not args.wait:
            return 0
        with tqdm(total=100, desc="training", unit="%") as bar:
            while job["status"] in ("queued", "running"):
                time.sleep(1)
                job = _check(http.get(f"/v1/jobs/{job['id']}"))
                bar.set_description(job["stage"])
                bar.update(round(job["progress"] * 100) - bar.n)
    if job["status"] != "succeeded":
        print(f"job {job['status']}: {job.get('error') or ''}", file=sys.stderr)
        return 1
    _warn(job)
    print(f"{args.name} version {job['version']} ({job['reached_vocab_size']} tokens)")
    return 0


def show_job(args: argparse.Namespace) -> int:
    with _client(args) as http:
        job = _check(http.get(f"/v1/jobs/{args.id}"))
    print(json.dumps(job, indent=2))
    _warn(job)
    return 0


def _warn(job: dict[str, Any]) -> None:
    # The job's notes (a vocabulary smaller than asked for, and why), one line each on stderr.
    for note in job.get("notes", []):
        print(f"warning: {note}", file=sys.stderr)


def download(args: argparse.Namespace) -> int:
    name, _, version = args.ref.partition("@")
    version = version or "latest"
    args.dir.mkdir(parents=True, exist_ok=True)
    with _client(args) as http:
        meta = _check(http.get(f"/v1/tokenizers/{name}/versions/{version}"))
        for entry in tqdm(meta["files"], desc=f"{name} v{meta['version']}", unit="file"):
            with http.stream("GET", f"/v1/tokenizers/{name}/versions/{meta['version']}/files/{entry['name']}") as response:
                if response.is_error:
                    response.read()
                    _check(response)
                digest = hashlib.sha256()
                with (args.dir / entry["name"]).open("wb") as out:
                    for chunk in response.iter_bytes():
                        digest.update(chunk)
                        out.write(chunk)
            if digest.hexdigest() != entry["sha256"]:
                sys.exit(f"{entry['name']}: sha256 mismatch; the download is corrupt, try again")
    print(f"downloaded {len(meta['files'])} files of {name} v{meta['version']} to {args.dir}")
    return 0


def import_tokenizer(args: argparse.Namespace) -> int:
    data = {k: v for k, v in (("pat_str", args.pat_str), ("special_tokens", args.special_tokens)) if v}
    with _client(args) as http, args.file.open("rb") as handle:
        version = _check(http.post(f"/v1/tokenizers/{args.name}/versions", data=data,
                                   files={"file": (args.file.name, handle)}))
    print(json.dumps(version, indent=2))
    return 0


SUFFIXES = (".gz", ".zst", ".txt", ".text", ".jsonl", ".ndjson", ".json")
REFERENCES = ("gpt2", "cl100k_base", "o200k_base")
SPACE = "\u2423"  # ␣, as the playground draws a space


def corpus_name(path: Path) -> str:
    """A corpus's default name: its file's, without the compression and format suffixes (corpus.txt.zst: corpus)."""
    name = path.name
    while (suffix := next((s for s in SUFFIXES if name.lower().endswith(s) and len(name) > len(s)), None)):
        name = name[: -len(suffix)]
    return name


def _ref(text: str) -> tuple[str, str]:
    name, _, version = text.partition("@")
    return name, version or "latest"


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Rows as aligned columns under a header (what scripts read is --json)."""
    cells = [[str(row.get(column, "")) for column in columns] for row in rows]
    widths = [max([len(column), *(len(line[i]) for line in cells)]) for i, column in enumerate(columns)]
    print("  ".join(column.upper().ljust(width) for column, width in zip(columns, widths)).rstrip())
    for line in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())


def _show(args: argparse.Namespace, answer: dict[str, Any], rows: list[dict[str, Any]], columns: list[str]) -> int:
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        _table(rows, columns)
    return 0


def list_corpora(args: argparse.Namespace) -> int:
    if args.corpus_command == "duplicates":
        with _client(args) as http:
            answer = _check(http.get("/v1/corpora/duplicates"))
        return _show(args, answer, [{"field": key, "value": value} for key, value in answer.items()], ["field", "value"])
    if args.corpus_command == "show":
        with _client(args) as http:
            corpus = _check(http.get(f"/v1/corpora/{args.id}"))
        facts = [{"field": key, "value": value} for key, value in corpus.items() if key != "statistics"]
        facts += [{"field": f"statistics.{key}", "value": value} for key, value in (corpus.get("statistics") or {}).items()
                  if not isinstance(value, (list, dict))]
        return _show(args, corpus, facts, ["field", "value"])
    params = {k: v for k, v in (("domain", args.domain), ("language", args.language)) if v}
    with _client(args) as http:
        answer = _check(http.get("/v1/corpora", params={**params, "limit": 200}))
    return _show(args, answer, answer["items"], ["id", "name", "domain", "language", "lines", "bytes"])


def list_jobs(args: argparse.Namespace) -> int:
    with _client(args) as http:
        answer = _check(http.get("/v1/jobs", params={"limit": 20, **({"status": args.status} if args.status else {})}))
    rows = [{**job, "progress": f"{round(job['progress'] * 100)}%", "version": job.get("version") or ""}
            for job in answer["items"]]
    return _show(args, answer, rows, ["id", "tokenizer", "status", "stage", "progress", "version", "created_at"])


def list_tokenizers(args: argparse.Namespace) -> int:
    with _client(args) as http:
        answer = _check(http.get("/v1/tokenizers", params={"limit": 200}))
    return _show(args, answer, answer["items"], ["name", "latest", "versions", "updated_at"])


def list_versions(args: argparse.Namespace) -> int:
    with _client(args) as http:
        answer = _check(http.get(f"/v1/tokenizers/{args.name}/versions", params={"limit": 200}))
    rows = [{**v, "algorithm": v["spec"].get("algorithm"), "library": v["spec"].get("library"),
             "source": "imported" if v["lineage"].get("imported") else "trained"} for v in answer["items"]]
    return _show(args, answer, rows, ["version", "vocab_size", "algorithm", "library", "source", "created_at"])


def encode(args: argparse.Namespace) -> int:
    name, version = _ref(args.ref)
    path = (f"/v1/references/{name}/encode" if name in REFERENCES and "@" not in args.ref
            else f"/v1/tokenizers/{name}/versions/{version}/encode")
    with _client(args) as http:
        answer = _check(http.post(path, json={"text": args.text}))
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0
    print(" | ".join(piece.replace(" ", SPACE).replace("\n", "\\n") for piece in answer["pieces"]))
    print(f"{answer['count']} tokens, {answer['chars_per_token']:.2f} characters per token; ids: {answer['ids']}")
    return 0


def report(args: argparse.Namespace) -> int:
    name, version = _ref(args.ref)
    with _client(args) as http:
        answer = _check(http.get(f"/v1/tokenizers/{name}/versions/{version}/report"))
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0
    subjects = [s["key"] for s in answer["subjects"]]
    labels = {s["key"]: s["label"] for s in answer["subjects"]}
    print(f"Cost report of {answer['name']} v{answer['version']}\n\nCharacters per token, by language")
    tax = answer["language_tax"]
    _table([{"language": r["language"], **{labels[k]: _number(r["values"].get(k)) for k in subjects}}
            for r in tax["chars_per_token"]], ["language", *(labels[k] for k in subjects)])
    for group in tax["groups"]:
        print(f"\nPremium against {group['pivot']} (parallel group {group['group']}; 1.00 = as cheap as the pivot)")
        _table([{"language": r["language"], **{labels[k]: _number((r.get("premium") or {}).get(k)) for k in subjects}}
                for r in group["languages"]], ["language", *(labels[k] for k in subjects)])
    return 0


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def run(args: argparse.Namespace) -> int:
    """Run a client command; a file or server that is not there is one line on stderr, exit 1."""
    commands = {"train": train, "job": show_job, "import": import_tokenizer, "jobs": list_jobs,
                "tokenizers": list_tokenizers, "versions": list_versions, "encode": encode, "report": report}
    command = commands.get(args.command, download)
    if args.command == "corpus":
        command = upload if args.corpus_command == "upload" else list_corpora
    try:
        return command(args)
    except httpx.TransportError as exc:
        sys.exit(f"tokenmill: cannot reach the API at {args.url} ({type(exc).__name__}: {exc}); "
                 "is it running? (make up, or set TOKENMILL_API_URL)")
    except OSError as exc:
        sys.exit(f"tokenmill: {exc.filename or ''}: {exc.strerror or exc}")
    except json.JSONDecodeError as exc:
        sys.exit(f"tokenmill: --spec is not valid JSON: {exc}")
