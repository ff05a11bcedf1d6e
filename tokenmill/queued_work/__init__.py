"""The life of queued work, whatever the work is (a training job, an evaluation run, a corpus's
statistics, a part counted for a job): where each kind keeps its claim and the one claim over them
(claims), the heartbeat that keeps a claim and guards memory (heartbeat), a job's or a run's claim
to its end (lifecycle), the rows of a distributed count (count_parts), which queued row a free
slot starts, team by team (scheduling), and a job's stage and progress (progress)."""
