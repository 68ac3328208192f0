"""What the control plane launches and how: the run's pinned spec and its approval,
secrets masked wherever people read, and the job process itself."""
