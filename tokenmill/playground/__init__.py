"""Views for people: one text encoded (encode), what a version costs next to the references
(cost_report, with its fixed probe texts in cost_probes), and BPE one merge at a time
(bpe_steps, bpe_runs, bpe_replay). Every encode of a version's own regex runs in
tokenmill.sandboxed.sandbox."""
