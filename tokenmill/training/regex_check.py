"""A custom pre-tokenization regex, checked at submission, each step in a sandbox process.

Compiling a submitted regex is itself work on request data: `(?:a{1000}){1000}` is seventeen
characters that the `regex` module expands into a program of 250 MB, in two seconds that hold
the GIL, and it keeps the program in its cache. So nothing here runs in the API process:
`tokenmill.training.spec` calls each function below through `tokenmill.sandboxed.sandbox`
(`Sandbox.call`), whose time and memory limits end a process that takes too long or grows
too large, on the submitting team's share of the pool.

The steps, each its own sandbox call so that a timeout names the engine that took it:
`compile_refusal` compiles the pattern with every engine that will run it; then Oniguruma
(tokenizers' engine, which trains and encodes) splits texts made to make it backtrack
(`Sandbox.split`); then `regex_probe_refusal` runs the same texts through the `regex` module
(tiktoken's engine, and `library: tokenmill`'s), under its own timeout.
"""

import resource

import regex

# A split regex compiles to kilobytes; one that takes more than this is a repetition bomb, refused
# (the sandbox's 1 GiB stops the larger ones). Measured as the growth of the process's peak.
MAX_PROGRAM_BYTES = 64 * 2**20


def compile_refusal(pattern: str, library: str) -> str | None:
    """Why the pattern cannot be used (it does not compile with an engine the spec's library runs,
    or matches the empty string); None when it can. Runs in a sandbox process."""
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            compiled = regex.compile(pattern)
        except regex.error as exc:
            return f"does not compile: {exc}"
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024  # ru_maxrss is in KiB
        if grown > MAX_PROGRAM_BYTES:
            return (f"compiles into a program of more than {MAX_PROGRAM_BYTES // 2**20} MiB (a large counted "
                    "repetition such as (?:a{1000}){1000}?): every job and encode would pay for it")
        from tokenizers import Regex

        try:
            Regex(pattern)
        except Exception as exc:  # the Rust binding raises a plain Exception
            return f"the tokenizers regex engine (Oniguruma) refuses it: {exc}"
        if compiled.fullmatch(""):
            return "matches the empty string, which would split nothing"
        if library == "rustbpe":
            from tokenmill.training.with_rustbpe import check_pattern

            try:
                check_pattern(pattern)
            except ValueError as exc:
                return f"rustbpe's regex engine (fancy_regex) refuses it: {exc}"
        return None
    finally:
        regex.purge()  # the module keeps compiled programs: this process must not keep a hostile one


def regex_probe_refusal(pattern: str, probes: list[str], seconds: float) -> bool:
    """Whether the `regex` module took more than `seconds` over the probes (True: refuse it)."""
    import time

    deadline = time.monotonic() + seconds
    try:
        for probe in probes:
            regex.findall(pattern, probe, timeout=max(0.01, deadline - time.monotonic()))
    except TimeoutError:
        return True
    finally:
        regex.purge()
    return False
