"""Noisy neighbours (issue 20, item 8): one team attacks at full concurrency while another team
reads, encodes and trains, on a production-like stack of its own (stack.py); harness.py measures
the victim, attacks.py holds the attacks, benchmarks/noisy_neighbours.py prints the README's table."""
