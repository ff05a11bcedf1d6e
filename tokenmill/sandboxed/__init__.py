"""Running a tokenizer's own regex where it cannot stop the service: bounded processes
(sandbox), the seeded subword samplers run there (subword_sampling), and the texts that make
a custom regex backtrack, tried at submission (regex_probe)."""
