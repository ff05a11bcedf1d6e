"""Corpora: uploads streamed into the store (ingest), the files read back as documents
(reading), their rows (rows), and what is counted of them (text_counts, words, statistics,
and statistics_runs, the worker's pass that adds word statistics after an upload); exact
duplicates: a document's hash (hashes) and the team's share across its corpora (duplicates)."""
