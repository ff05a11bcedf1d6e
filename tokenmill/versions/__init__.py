"""Tokenizer versions: the numbered, immutable rows, registered with all their files, and
their reads (registry), and the vocabulary diff of two versions (diff)."""
