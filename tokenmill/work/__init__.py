"""The life of queued work, whatever the work is (a training job, an evaluation run, a
corpus's statistics, a part counted for a job): claim, heartbeat, memory guard, fenced
writes and failure (lifecycle), and a job's stage and progress (progress)."""
