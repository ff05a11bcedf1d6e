"""Tokenizer versions: the numbered, immutable rows, registered with all their files, and
their reads (registry), the vocabulary diff of two versions (diff), and versions imported
from a tokenizer a team uploads (import_formats: the files derived from it, in a sandbox
process; imports: the request's flow, from the upload to the registered row)."""
