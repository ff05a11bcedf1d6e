"""The attacks of issue 20, item 8, each a harness.Attack built from the prepared neighbours.

Bounds: a flood lasts ATTACK_SECONDS or its `count`, whichever ends first. The two regex
compiles are bounded by the memory they cost this shared machine too: each distinct
`(?:a{1000}){N}` holds ~150-250 MB in the process that compiles it (and Python's `regex` keeps
it cached), the nested one ~3 GB, so the first is sent 8 times (8 variants) and the second once.
"""

import random
import string
import time
from functools import cache

import httpx
import zstandard

from tests import load
from tests.api.dashboard import sign_in
from tests.neighbours.harness import Attack, Attacker
from tests.neighbours.stack import ATTACKER_REGEX, Neighbours
from tests.waiting import UNFINISHED, until

ATTACK_SECONDS = 12.0
MIB = 2**20
FLAT_REGEX = "(?:a{{1000}}){{{}}}"  # .format(repeats): 1000 → a million a's
NESTED_REGEX = "(?:(?:a{1000}){1000}){10}"
QUEUED_JOBS = 20  # the default queued_jobs quota
STUCK_JOBS = 2  # the worker's concurrency: both slots
FLOOD_CONNECTIONS = 150  # past the API process's 40 threads and 40 database connections
UPLOAD_TIMEOUT = 30.0  # the attacker stops waiting for an upload's answer (the stack is settled after)


def job_body(tokenizer: str, corpus_id: str, spec: dict) -> dict:
    return {"tokenizer": tokenizer, "spec": spec, "train_corpora": [corpus_id], "eval_corpora": [corpus_id]}


def regex_spec(pattern: str) -> dict:
    return {"vocab_size": 300, "pre_tokenizer": "none", "pre_tokenizer_regex": pattern}


def compiled_regex(neighbours: Neighbours) -> Attack:
    """Jobs whose regex takes a quarter of a GB and a fraction of a second to compile, each a new one."""
    def send(http: httpx.Client, n: int) -> httpx.Response:
        spec = regex_spec(FLAT_REGEX.format(1000 - n))
        return http.post("/v1/jobs", json=job_body(f"regex-{n}", neighbours.attacker.corpus_id, spec))

    return Attack("POST /v1/jobs, regex `(?:a{1000}){1000}` (8 variants, 4 clients)", send, concurrency=4, count=8,
                  seconds=ATTACK_SECONDS)


def compiled_nested_regex(neighbours: Neighbours) -> Attack:
    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/jobs", json=job_body("nested", neighbours.attacker.corpus_id, regex_spec(NESTED_REGEX)))

    return Attack("POST /v1/jobs, regex `(?:(?:a{1000}){1000}){10}` (once)", send, concurrency=1, count=1,
                  seconds=ATTACK_SECONDS, job_after=1.0)


def version_replay(neighbours: Neighbours) -> Attack:
    """The attacker's own version (split by ATTACKER_REGEX) replayed on its slow corpus's first line:
    ~1.5 s of backtracking, under the sandbox's limit, then again in the API process."""
    body = {"tokenizer": neighbours.attacker.tokenizer, "version": 1, "corpus_id": neighbours.slow_corpus_id,
            "steps": 500, "lines": 1}

    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/bpe/steps", json=body)

    return Attack("POST /v1/bpe/steps replaying the attacker's custom-regex version (4 clients)", send,
                  concurrency=4, seconds=ATTACK_SECONDS)


def random_corpus(characters: int = 10_000, seed: int = 0) -> str:
    """Words of random letters: many distinct pairs, each state of the walk-through large."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_lowercase + "     ") for _ in range(characters))


def bpe_corpus(neighbours: Neighbours) -> Attack:
    body = {"corpus": random_corpus(), "steps": 500}

    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/bpe/steps", json=body)

    return Attack("POST /v1/bpe/steps, 10,000 random characters, 500 steps (4 clients)", send, concurrency=4,
                  seconds=ATTACK_SECONDS)


@cache
def zstd_of_lines(mib: int) -> bytes:
    """A zstd frame of `mib` MiB of "a\\n" (64 MiB: 5.6 KB; 512 MiB: 45 KB), compressed a MiB at a time."""
    compressor = zstandard.ZstdCompressor(level=19).compressobj(size=mib * MIB)
    chunk = b"a\n" * (MIB // 2)
    return b"".join(compressor.compress(chunk) for _ in range(mib)) + compressor.flush()


def upload_fields(n: int) -> dict[str, str]:
    return {"name": f"bomb-{n}-{time.monotonic_ns()}", "domain": "test", "language": "eng_Latn"}


def dashboard_uploads(neighbours: Neighbours) -> Attack:
    """40 dashboard uploads at once (a signed-in session, its CSRF token) of a 5.6 KB zstd of 64 MiB."""
    bomb = zstd_of_lines(64)

    def script(attacker: Attacker) -> None:
        with attacker.client() as http:
            token = sign_in(http, attacker.key)
            cookies = dict(http.cookies)

        def client() -> httpx.Client:
            return httpx.Client(base_url=attacker.stack.base, cookies=cookies, timeout=attacker.timeout,
                                headers={"Accept": "application/json"})

        def send(http: httpx.Client, n: int) -> httpx.Response:
            return http.post("/corpora", data={**upload_fields(n), "csrf_token": token},
                             files={"file": ("bomb.txt.zst", bomb)})

        attacker.cue_after(2.0)
        attacker.flood(send, 40, ATTACK_SECONDS, count=40, client=client)

    return Attack("40 dashboard uploads (POST /corpora) of a 5.6 KB zstd of 64 MiB", script=script,
                  request_timeout=UPLOAD_TIMEOUT)


def api_uploads(neighbours: Neighbours) -> Attack:
    bomb = zstd_of_lines(64)

    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/corpora", data=upload_fields(n), files={"file": ("bomb.txt.zst", bomb)})

    return Attack("8 POST /v1/corpora uploads of a 5.6 KB zstd of 64 MiB", send, concurrency=8, count=8,
                  seconds=ATTACK_SECONDS, request_timeout=UPLOAD_TIMEOUT)


def cost_report(neighbours: Neighbours) -> Attack:
    path = f"/v1/tokenizers/{neighbours.attacker.tokenizer}/versions/1/report"

    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.get(path)

    return Attack("GET …/versions/1/report, the cost report (4 clients)", send, concurrency=4, seconds=ATTACK_SECONDS)


def duplicates(neighbours: Neighbours) -> Attack:
    """The team's exact duplicates across its corpora, merged from their stored hashes, in a loop."""
    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.get("/v1/corpora/duplicates")

    return Attack("GET /v1/corpora/duplicates, the team's duplicates (4 clients)", send, concurrency=4,
                  seconds=ATTACK_SECONDS)


def metadata_flood(neighbours: Neighbours) -> Attack:
    """GET /v1/corpora from more connections than the API process has threads and database connections."""
    def script(attacker: Attacker) -> None:
        attacker.cue_after(2.0)
        outcome = load.run(f"{attacker.stack.base}/v1/corpora", {"Authorization": f"Bearer {attacker.key}"},
                           FLOOD_CONNECTIONS, ATTACK_SECONDS)
        for status, count in outcome.statuses.items():
            for _ in range(count):
                attacker.count(str(status))
        for _ in range(outcome.errors):
            attacker.count("error")

    return Attack(f"GET /v1/corpora from {FLOOD_CONNECTIONS} connections at once", script=script)


def small_job(neighbours: Neighbours, n: int) -> dict:
    return job_body(f"queued-{n}", neighbours.attacker.corpus_id, {"vocab_size": 2000})


def queued_jobs(neighbours: Neighbours) -> Attack:
    """The attacker's 20 jobs queued (4 clients), then the victim's one."""
    def script(attacker: Attacker) -> None:
        attacker.flood(lambda http, n: http.post("/v1/jobs", json=small_job(neighbours, n)), 4, ATTACK_SECONDS,
                       count=QUEUED_JOBS)
        attacker.cue.set()
        attacker.hold_while_victim_waits()

    return Attack(f"{QUEUED_JOBS} jobs queued, then the victim's (worker concurrency 2)", script=script)


def storage_bomb(neighbours: Neighbours) -> Attack:
    """A 45 KB zstd of 512 MiB of "a\\n", by a team whose storage quota is 256 MiB (stack.prepare)."""
    bomb = zstd_of_lines(512)

    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/corpora", data=upload_fields(n), files={"file": ("bomb.txt.zst", bomb)})

    return Attack("POST /v1/corpora, a 45 KB zstd of 512 MiB (storage quota 256 MiB)", send, concurrency=1, count=1,
                  seconds=ATTACK_SECONDS, job_after=1.0, request_timeout=2 * UPLOAD_TIMEOUT)


def quotas(neighbours: Neighbours) -> Attack:
    """Jobs submitted as fast as 4 clients can for 10 s: past the burst the rate answers (429), past
    20 queued the queued_jobs quota does (409)."""
    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/jobs", json=small_job(neighbours, n))

    return Attack("POST /v1/jobs as fast as 4 clients can: the rate limit and the queued_jobs quota", send,
                  concurrency=4, seconds=10.0, count=5000)


def cancelled_backtracking(neighbours: Neighbours) -> Attack:
    """Two jobs that backtrack on their training text (both worker slots), cancelled once the victim's is queued."""
    def script(attacker: Attacker) -> None:
        with attacker.client() as http:
            jobs = []
            for n in range(STUCK_JOBS):
                answer = attacker.call(lambda: http.post("/v1/jobs", json=job_body(
                    f"stuck-{n}", neighbours.slow_corpus_id, {**regex_spec(ATTACKER_REGEX), "vocab_size": 500})))
                assert answer is not None and answer.status_code == 202, answer and answer.text
                jobs.append(answer.json()["id"])
            for job_id in jobs:
                until(lambda: http.get(f"/v1/jobs/{job_id}").json(),
                      lambda job: job["status"] not in UNFINISHED or job["stage"] == "training", 60, every=0.2)
            attacker.cue.set()
            until(lambda: attacker.victim_job, bool, 30, every=0.1)
            for job_id in jobs:
                attacker.call(lambda: http.post(f"/v1/jobs/{job_id}/cancel"))

    return Attack("a regex that backtracks on the training text (both slots), cancelled", script=script,
                  job_patience=30.0)


def whole_evaluations(neighbours: Neighbours) -> Attack:
    """Evaluation runs of a corpus measured whole, each spread over the worker's slots in parts
    (TOKENMILL_EVALUATION_PART_BYTES is 16 KiB on this stack: 6 parts, 5 helper tasks a run), as
    fast as 4 clients can: the rate limit and the queued quota answer the flood."""
    body = {"reference": "cl100k_base", "corpora": [neighbours.attacker.corpus_id], "whole": True}

    def send(http: httpx.Client, n: int) -> httpx.Response:
        return http.post("/v1/evaluations", json=body)

    return Attack('POST /v1/evaluations, "whole": true, each spread over the worker in parts (4 clients)', send,
                  concurrency=4, seconds=ATTACK_SECONDS)


ATTACKS = (compiled_regex, compiled_nested_regex, version_replay, bpe_corpus, dashboard_uploads, api_uploads,
           cost_report, duplicates, metadata_flood, queued_jobs, storage_bomb, quotas, cancelled_backtracking,
           whole_evaluations)
