"""What the suite's search runs share."""

# A test whose subject is not the launcher runs its jobs one at a time in the search's own process:
# the default launcher's worker processes cost about 7 CPU-s more per search (measured: 25.9 vs
# 19.1 CPU-s user for one tiny search, though 18.7 vs 22.4 s of wall time on idle cores), which the
# suite's two pytest workers pay in wall time. The default launcher runs in the e2e, interrupt,
# kill-and-resume, PostgreSQL and launcher tests.
ONE_AT_A_TIME = "hydra/launcher=basic"
