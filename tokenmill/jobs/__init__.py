"""Training jobs: what the API does with one (submission: submit, read, list, cancel), the job
on a worker (pipeline: claim, train, export, evaluate, register; extension: new merges after a
base's), and the periodic upkeep of all queued work (upkeep: the process that runs the sweeper
and the reconciliation; sweeper: re-send, take over; reconcile: the store holds only what rows
account for)."""
