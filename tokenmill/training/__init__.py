"""Training: the spec (spec, with the regex presets in patterns), one module per library that
trains from texts (with_tokenizers, with_sentencepiece, with_rustbpe, with_tokenmill, and
text_frames, how texts reach a training child), counting and learning from the counts
(counting/: spills, parts, merge and distributed, texts counted in parts on many workers within
the job's memory; splitting/, the presets' split and count in compiled code; merge_learner),
regex_limit (a custom regex's time per document, bounded in every library), buildable (whether
the libraries can build what a spec describes, tried at submission), a trained tokenizer's files
as bytes (export; the formats themselves are tokenmill.formats), and version_files, which goes
from a spec and stored corpora to every file of a version."""
