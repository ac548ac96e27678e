"""The NSGA-II search: settings, pure seeding and selection policy, rounds, the finish, the sweeper."""
