"""File formats of tokenizers, read and written without a library's help: tiktoken's rank file
(tiktoken_format: ranks from a byte-level BPE, its byte alphabet, a rank file parsed) and
sentencepiece's `tokenizer.model` (sentencepiece_model: typed as far as Tokenmill reads it).
Training writes them, evaluation, the playground and imports read them; they import nothing
of the rest of the core."""
