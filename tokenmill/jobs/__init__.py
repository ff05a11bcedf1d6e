"""Training jobs: what the API does with one (submission: submit, read, list, cancel), the job
on a worker (pipeline: claim, train, export, evaluate, register), and the periodic upkeep of
all queued work (sweeper: re-send, take over; reconcile: the store holds only what rows
account for)."""
