"""Counting the pieces of texts: in parts on many workers, within a job's memory.

- `spills`: pieces split and counted from documents, and counts spilled as sorted, compressed
  (piece, count) records that any number of merge in one streaming pass.
- `parts`: a corpus cut into byte ranges, the documents each range owns, and the spec's split.
- `merge`: the merged counts kept as arrays within a memory budget, the count threshold
  raised as far as it must be, and what that left out (`Pruned`).
- `distributed`: `counting: distributed` training: the coordinator plans the parts, helpers
  on any worker claim and count them, the coordinator merges their spills and learns.

Training reads it (version_files, with_tokenmill; splitting.counting counts as `spills.count`
does), and so does the superword extension (tokenmill.jobs.extension).
"""
