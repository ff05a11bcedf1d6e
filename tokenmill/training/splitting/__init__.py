"""The presets' pre-tokenization (gpt2, cl100k, o200k) compiled: `regex.findall` with tiktoken's
patterns, and the counting of the pieces, in numba (`counting`, the entry points; `scanner`,
the compiled loops; `classes` and the generated `classes_data`, what `regex` says of each code
point)."""
