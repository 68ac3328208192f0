"""Who may call (the tokens ``onceover token`` makes) and what each call did (the
audit log)."""
