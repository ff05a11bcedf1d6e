"""Evaluation: measuring tokenizers on corpora (measuring, metrics, in several processes with
shards), the encoders measured (encoders, references, and the compiled word_cache, unigram
and spelling, whose kernels share utf8's table), runs on request (submission: API side; pipeline:
worker side), and reading results back (reports, token_counts). This package's own import is
light: numba and the compiled kernels load only with the modules that use them."""
